//! The progress streams each user holds open, capped per user (`maxStreamsPerUser`). A stream
//! keeps its connection busy, and a busy connection is never evicted as idle at the connection
//! cap: without this cap one signed-in user could hold every connection the port allows and
//! every other user's stream would be refused. A user's count lives only while they hold a
//! stream, so the map is bounded by the open connections.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// The open streams of every user, shared by every connection.
#[derive(Debug, Clone)]
pub struct StreamSlots {
    open: Arc<Mutex<HashMap<String, usize>>>,
    cap: usize,
}

/// One open stream of `user`: given back when dropped (the stream ended or its client went).
#[derive(Debug)]
pub(super) struct StreamSlot {
    slots: StreamSlots,
    user: String,
}

impl StreamSlots {
    /// At most `cap` streams per user.
    pub fn new(cap: usize) -> Self {
        Self {
            open: Arc::default(),
            cap,
        }
    }

    /// A slot for one more stream of `user`, or None when they hold `cap` already.
    pub(super) fn take(&self, user: &str) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(user.to_owned()).or_default();
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            slots: self.clone(),
            user: user.to_owned(),
        })
    }

    /// The cap per user.
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// Users holding a stream (tests).
    #[cfg(test)]
    fn users(&self) -> usize {
        self.open.lock().unwrap().len()
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_holds_at_most_the_cap_and_gets_slots_back_as_streams_end() {
        let slots = StreamSlots::new(2);
        let first = slots.take("alice").unwrap();
        let second = slots.take("alice").unwrap();
        assert!(slots.take("alice").is_none(), "past the cap");
        // Another user is not held by alice's streams.
        let bob = slots.take("bob").unwrap();
        drop(first);
        let third = slots.take("alice").expect("a slot given back");
        drop((second, third, bob));
        // Nothing is kept for users without a stream: memory follows open streams.
        assert_eq!(slots.users(), 0);
    }
}
