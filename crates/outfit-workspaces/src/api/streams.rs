//! The progress streams open on the API port, capped per user (`maxStreamsPerUser`), per client
//! source (`maxStreamsPerSource`) and over all users (`maxStreams`). A stream keeps its
//! connection busy, and a busy connection is never evicted as idle at the connection cap: without
//! the per-user cap one signed-in user could hold every connection the port allows, without the
//! total a few identities could (any token the cluster accepts is one), each within its own cap,
//! and without the per-source cap one machine with that many identities could hold the total
//! (issue 46). A user's or a source's count lives only while it holds a stream, so the maps are
//! bounded by the open connections.

use std::{
    borrow::Borrow,
    collections::HashMap,
    hash::Hash,
    sync::{Arc, Mutex},
};

use super::source::Source;

/// The open streams of every user, shared by every connection.
#[derive(Debug, Clone)]
pub struct StreamSlots {
    open: Arc<Mutex<Open>>,
    caps: StreamCaps,
}

/// How many streams may be open at once: per user, per client source, and in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    /// `maxStreamsPerUser`.
    pub per_user: usize,
    /// `maxStreamsPerSource`.
    pub per_source: usize,
    /// `maxStreams`.
    pub total: usize,
}

#[derive(Debug, Default)]
struct Open {
    by_user: HashMap<String, usize>,
    by_source: HashMap<Source, usize>,
    total: usize,
}

/// Why no stream slot was given: the cap that is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamsFull {
    /// The caller holds `maxStreamsPerUser` streams.
    User(usize),
    /// The caller's source (an address, an IPv6 /64) holds `maxStreamsPerSource` streams.
    Source(usize),
    /// The port holds `maxStreams` streams.
    Port(usize),
}

/// One open stream of `user` from `source`: given back when dropped (the stream ended or its
/// client went).
#[derive(Debug)]
pub(super) struct StreamSlot {
    slots: StreamSlots,
    user: String,
    source: Source,
}

impl StreamSlots {
    /// At most `caps.per_user` streams per user, `caps.per_source` per client source, and
    /// `caps.total` over all of them.
    pub fn new(caps: StreamCaps) -> Self {
        Self {
            open: Arc::default(),
            caps,
        }
    }

    /// A slot for one more stream of `user` from `source`, or the cap that is full. The narrowest
    /// cap is checked first: a user at their own is told so, whatever their source or the port
    /// holds, and a source at its share so, whatever the port holds.
    pub(super) fn take(&self, user: &str, source: Source) -> Result<StreamSlot, StreamsFull> {
        let caps = self.caps;
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if held(&open.by_user, user) >= caps.per_user {
            return Err(StreamsFull::User(caps.per_user));
        }
        if held(&open.by_source, &source) >= caps.per_source {
            return Err(StreamsFull::Source(caps.per_source));
        }
        if open.total >= caps.total {
            return Err(StreamsFull::Port(caps.total));
        }
        *open.by_user.entry(user.to_owned()).or_default() += 1;
        *open.by_source.entry(source).or_default() += 1;
        open.total += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            user: user.to_owned(),
            source,
        })
    }

    /// Users and sources holding a stream (tests).
    #[cfg(test)]
    fn holders(&self) -> (usize, usize) {
        let open = self.open.lock().unwrap();
        (open.by_user.len(), open.by_source.len())
    }
}

/// The streams `holder` has open.
fn held<K: Eq + Hash + ?Sized>(counts: &HashMap<impl Borrow<K> + Eq + Hash, usize>, holder: &K) -> usize {
    counts.get(holder).copied().unwrap_or(0)
}

/// One stream fewer for `holder`, whose count goes once it holds none.
fn give_back<K: Eq + Hash + ?Sized>(counts: &mut HashMap<impl Borrow<K> + Eq + Hash, usize>, holder: &K) {
    if let Some(count) = counts.get_mut(holder) {
        *count -= 1;
        if *count == 0 {
            counts.remove(holder);
        }
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        open.total -= 1;
        give_back(&mut open.by_user, self.user.as_str());
        give_back(&mut open.by_source, &self.source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(per_user: usize, per_source: usize, total: usize) -> StreamSlots {
        StreamSlots::new(StreamCaps {
            per_user,
            per_source,
            total,
        })
    }

    fn from(address: &str) -> Source {
        Source::of(address.parse().unwrap())
    }

    #[test]
    fn a_user_holds_at_most_the_cap_and_gets_slots_back_as_streams_end() {
        let slots = slots(2, 10, 10);
        let here = from("203.0.113.7");
        let first = slots.take("alice", here).unwrap();
        let second = slots.take("alice", here).unwrap();
        assert_eq!(
            slots.take("alice", here).unwrap_err(),
            StreamsFull::User(2),
            "past the cap"
        );
        // Nor from elsewhere: the user's cap is theirs wherever they are.
        assert_eq!(
            slots.take("alice", from("198.51.100.1")).unwrap_err(),
            StreamsFull::User(2)
        );
        // Another user is not held by alice's streams.
        let bob = slots.take("bob", here).unwrap();
        drop(first);
        let third = slots.take("alice", here).expect("a slot given back");
        drop((second, third, bob));
        // Nothing is kept for users without a stream: memory follows open streams.
        assert_eq!(slots.holders(), (0, 0));
    }

    /// The finding of issue 46: three users within their own caps held every connection.
    #[test]
    fn users_within_their_caps_together_hold_at_most_the_total() {
        let slots = slots(14, 20, 20);
        let mut held = Vec::new();
        for (user, address) in [
            ("mallory", "203.0.113.1"),
            ("trudy", "203.0.113.2"),
            ("eve", "203.0.113.3"),
        ] {
            held.extend((0..14).map_while(|_| slots.take(user, from(address)).ok()));
        }
        assert_eq!(held.len(), 20);
        let victim = from("198.51.100.1");
        assert_eq!(slots.take("victim", victim).unwrap_err(), StreamsFull::Port(20));
        held.pop();
        let victims = slots.take("victim", victim).expect("a slot given back to anyone");
        drop((held, victims));
        assert_eq!(slots.holders(), (0, 0));
    }

    /// Any token the cluster accepts is an identity: one machine with many of them, each within
    /// its own cap, holds at most its source's share, and leaves the rest to other sources and
    /// to the same users from elsewhere.
    #[test]
    fn a_source_at_its_share_is_refused_while_other_sources_are_not() {
        let slots = slots(2, 3, 10);
        let machine = from("203.0.113.7");
        let mut held: Vec<StreamSlot> = ["sa-0", "sa-1", "sa-2"]
            .iter()
            .map(|user| slots.take(user, machine).unwrap())
            .collect();
        assert_eq!(slots.take("sa-3", machine).unwrap_err(), StreamsFull::Source(3));
        // The user's own cap comes first: a user at it is told so, whatever the source holds.
        held.push(slots.take("sa-0", from("198.51.100.1")).unwrap());
        assert_eq!(slots.take("sa-0", machine).unwrap_err(), StreamsFull::User(2));
        // Another source, and the same user from elsewhere, still get streams.
        held.push(slots.take("sa-3", from("198.51.100.2")).unwrap());
        held.push(slots.take("sa-1", from("198.51.100.2")).unwrap());
        // A stream given back by the source lets it take one again.
        held.remove(0);
        held.push(slots.take("sa-3", machine).expect("the source's slot given back"));
        drop(held);
        assert_eq!(slots.holders(), (0, 0));
    }

    /// One host usually holds a whole IPv6 /64: its addresses are one source.
    #[test]
    fn ipv6_addresses_of_one_64_share_a_source() {
        let slots = slots(1, 2, 10);
        let held = [
            slots.take("a", from("2001:db8:1:2::1")).unwrap(),
            slots.take("b", from("2001:db8:1:2:ffff::9")).unwrap(),
        ];
        assert_eq!(
            slots.take("c", from("2001:db8:1:2:abcd::1")).unwrap_err(),
            StreamsFull::Source(2)
        );
        let next_network = slots.take("c", from("2001:db8:1:3::1")).unwrap();
        drop((held, next_network));
        assert_eq!(slots.holders(), (0, 0));
    }
}
