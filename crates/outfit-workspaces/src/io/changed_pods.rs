//! The names of the pods the pod watch showed changed since the lifecycle last looked, so that a
//! change makes it look at that pod only, not at every pod (at 10,000 workspaces and 20 launches
//! a second, a pass over all pods on every change took half a core: BENCHMARKS.md). What time
//! alone makes due (a deadline, a cull) the lifecycle finds in its pass over all pods each second.
//!
//! Bounded: past [`KEPT`] names the set is dropped and says "all changed", which costs one pass
//! over every pod instead of memory that grows while no lifecycle takes the names.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

/// The most names kept before the set gives up on naming them.
const KEPT: usize = 16_384;

/// What changed since the last [`ChangedPods::take`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// Too many to name: look at every pod.
    pub all: bool,
    /// The pods that changed (made, changed or gone).
    pub names: HashSet<String>,
}

/// The set (cheap to clone: clones share it).
#[derive(Clone, Default)]
pub struct ChangedPods {
    inner: Arc<Mutex<Changed>>,
}

impl ChangedPods {
    /// The pod called `name` changed.
    pub fn mark(&self, name: &str) {
        let mut changed = self.inner.lock().expect("changed pods");
        if changed.all || changed.names.contains(name) {
            return;
        }
        if changed.names.len() < KEPT {
            changed.names.insert(name.to_owned());
            return;
        }
        drop(changed);
        self.mark_all();
    }

    /// Every pod may have changed (the watch listed them anew).
    pub fn mark_all(&self) {
        let mut changed = self.inner.lock().expect("changed pods");
        changed.names = HashSet::new();
        changed.all = true;
    }

    /// What changed since the last call, leaving the set empty.
    pub fn take(&self) -> Changed {
        std::mem::take(&mut *self.inner.lock().expect("changed pods"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_answers_each_changed_name_once_then_nothing() {
        let changed = ChangedPods::default();
        changed.mark("a");
        changed.mark("b");
        changed.mark("a");
        let taken = changed.take();
        assert!(!taken.all);
        assert_eq!(taken.names, HashSet::from(["a".to_owned(), "b".to_owned()]));
        assert_eq!(changed.take(), Changed::default());
    }

    #[test]
    fn past_the_bound_it_says_all_and_holds_no_names() {
        let changed = ChangedPods::default();
        for i in 0..=KEPT {
            changed.mark(&format!("pod-{i}"));
        }
        changed.mark("one-more");
        let taken = changed.take();
        assert!(taken.all);
        assert!(taken.names.is_empty());
        // Taken: it names pods again.
        changed.mark("a");
        assert_eq!(changed.take().names, HashSet::from(["a".to_owned()]));
    }
}
