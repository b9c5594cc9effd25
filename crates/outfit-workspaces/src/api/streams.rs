//! The progress streams open on the API port, capped per user (`maxStreamsPerUser`) and over all
//! users (`maxStreams`). A stream keeps its connection busy, and a busy connection is never evicted
//! as idle at the connection cap: without the per-user cap one signed-in user could hold every
//! connection the port allows, and without the total a few identities could (any token the
//! cluster accepts is one), each within its own cap (issue 46). A user's count lives only while
//! they hold a stream, so the map is bounded by the open connections.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// The open streams of every user, shared by every connection.
#[derive(Debug, Clone)]
pub struct StreamSlots {
    open: Arc<Mutex<Open>>,
    per_user: usize,
    total: usize,
}

#[derive(Debug, Default)]
struct Open {
    by_user: HashMap<String, usize>,
    total: usize,
}

/// Why no stream slot was given: the cap that is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamsFull {
    /// The caller holds `maxStreamsPerUser` streams.
    User(usize),
    /// The port holds `maxStreams` streams.
    Port(usize),
}

/// One open stream of `user`: given back when dropped (the stream ended or its client went).
#[derive(Debug)]
pub(super) struct StreamSlot {
    slots: StreamSlots,
    user: String,
}

impl StreamSlots {
    /// At most `per_user` streams per user, and `total` over all of them.
    pub fn new(per_user: usize, total: usize) -> Self {
        Self {
            open: Arc::default(),
            per_user,
            total,
        }
    }

    /// A slot for one more stream of `user`, or the cap that is full. The user's own cap is
    /// checked first: a user at it is told so, whatever the port holds.
    pub(super) fn take(&self, user: &str) -> Result<StreamSlot, StreamsFull> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if open
            .by_user
            .get(user)
            .is_some_and(|count| *count >= self.per_user)
        {
            return Err(StreamsFull::User(self.per_user));
        }
        if open.total >= self.total {
            return Err(StreamsFull::Port(self.total));
        }
        *open.by_user.entry(user.to_owned()).or_default() += 1;
        open.total += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            user: user.to_owned(),
        })
    }

    /// Users holding a stream (tests).
    #[cfg(test)]
    fn users(&self) -> usize {
        self.open.lock().unwrap().by_user.len()
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
        if let Some(count) = open.by_user.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                open.by_user.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_holds_at_most_the_cap_and_gets_slots_back_as_streams_end() {
        let slots = StreamSlots::new(2, 10);
        let first = slots.take("alice").unwrap();
        let second = slots.take("alice").unwrap();
        assert_eq!(
            slots.take("alice").unwrap_err(),
            StreamsFull::User(2),
            "past the cap"
        );
        // Another user is not held by alice's streams.
        let bob = slots.take("bob").unwrap();
        drop(first);
        let third = slots.take("alice").expect("a slot given back");
        drop((second, third, bob));
        // Nothing is kept for users without a stream: memory follows open streams.
        assert_eq!(slots.users(), 0);
    }

    /// The finding of issue 46: three users within their own caps held every connection.
    #[test]
    fn users_within_their_caps_together_hold_at_most_the_total() {
        let slots = StreamSlots::new(14, 20);
        let mut held = Vec::new();
        for user in ["mallory", "trudy", "eve"] {
            held.extend((0..14).map_while(|_| slots.take(user).ok()));
        }
        assert_eq!(held.len(), 20);
        assert_eq!(slots.take("victim").unwrap_err(), StreamsFull::Port(20));
        held.pop();
        let victim = slots.take("victim").expect("a slot given back to anyone");
        drop((held, victim));
        assert_eq!(slots.users(), 0);
    }
}
