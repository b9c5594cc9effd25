//! The removals' snapshots under way on one cluster, one per claim, so that removals of a claim
//! asked meanwhile share one snapshot and its answer (`snapshots.rs`). Imports nothing of its
//! folder: [`ClusterWorkspaces`](super::ClusterWorkspaces) holds it, `snapshots.rs` uses it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::watch;

/// The removals' snapshots under way, by claim: each one's outcome once known. Removals of a
/// claim asked while its snapshot is under way wait for that one instead of taking their own
/// (issue 46: 20 parallel DELETEs of one home took 20 snapshots). An entry lives while its first
/// removal waits, so the map holds at most one per claim being removed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Removals(Arc<Mutex<HashMap<String, watch::Receiver<Option<Saved>>>>>);

impl Removals {
    /// A removal of `claim`: the first (its entry made, for as long as it holds [`Leading`]), or
    /// one that shares the one under way.
    pub(super) fn join<'a>(&'a self, claim: &'a str) -> Removal<'a> {
        let mut removals = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match removals.get(claim) {
            Some(outcome) => Removal::Sharing(outcome.clone()),
            None => {
                let (sender, receiver) = watch::channel(None);
                removals.insert(claim.to_owned(), receiver);
                Removal::First(
                    Leading {
                        removals: self,
                        claim,
                    },
                    sender,
                )
            }
        }
    }
}

/// A removal of a claim, as [`Removals::join`] finds it.
pub(super) enum Removal<'a> {
    /// The first: it takes the snapshot and sends how it ended.
    First(Leading<'a>, watch::Sender<Option<Saved>>),
    /// Another removal's snapshot is under way: how it ends, once it does.
    Sharing(watch::Receiver<Option<Saved>>),
}

/// A removal's snapshot as the removals that shared it read it.
#[derive(Debug, Clone)]
pub(super) enum Saved {
    /// Ready: its name.
    Ready(String),
    /// Not ready in time: why, as the first removal's refusal says it.
    NotReady(String),
    /// Failed otherwise (a call to the API server): each removal tries on its own.
    Failed,
}

/// The first removal of a claim: its entry goes when it ends, answered or not.
pub(super) struct Leading<'a> {
    removals: &'a Removals,
    claim: &'a str,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.removals
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(self.claim);
    }
}
