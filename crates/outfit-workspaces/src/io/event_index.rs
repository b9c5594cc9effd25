//! The cached Events of each pod, by the pod's uid. A progress report reads a pod's Events, and
//! every waiting stream and long poll makes one on every change of the cache; a scan of all the
//! namespace's Events for each made that cost grow with launches in flight × changes × Events,
//! and at 10,000 workspaces the backend could no longer keep up with 20 creates/s (BENCHMARKS.md,
//! "Workspace backend at scale"). The index follows the Event watch, so it holds what the Event
//! cache holds: relists replace it whole, as they replace the cache.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
};

use k8s_openapi::api::core::v1::Event;
use kube::runtime::{reflector::ObjectRef, watcher};

type ByUid = HashMap<String, HashSet<ObjectRef<Event>>>;

/// The index (cheap to clone: clones share it).
#[derive(Clone, Default)]
pub struct EventIndex {
    inner: Arc<Mutex<Index>>,
}

#[derive(Default)]
struct Index {
    by_uid: ByUid,
    /// The index a relist is building, which replaces `by_uid` when the relist is done.
    relisting: Option<ByUid>,
}

impl EventIndex {
    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        // A panic while the lock was held leaves plain maps behind; they stay usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in what the Event watch saw (after the cache did).
    pub fn observe(&self, event: &watcher::Event<Event>) {
        let mut index = self.index();
        match event {
            watcher::Event::Apply(event) => insert(&mut index.by_uid, event),
            watcher::Event::Delete(event) => remove(&mut index.by_uid, event),
            watcher::Event::Init => index.relisting = Some(ByUid::new()),
            watcher::Event::InitApply(event) => {
                if let Some(relisting) = index.relisting.as_mut() {
                    insert(relisting, event);
                }
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = index.relisting.take() {
                    index.by_uid = relisted;
                }
            }
        }
    }

    /// The Events about the object with `uid`, as references into the Event cache.
    pub fn refs_of(&self, uid: &str) -> Vec<ObjectRef<Event>> {
        self.index()
            .by_uid
            .get(uid)
            .map(|refs| refs.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn insert(by_uid: &mut ByUid, event: &Event) {
    if let Some(uid) = event.involved_object.uid.as_deref() {
        by_uid
            .entry(uid.to_owned())
            .or_default()
            .insert(ObjectRef::from_obj(event));
    }
}

fn remove(by_uid: &mut ByUid, event: &Event) {
    let Some(uid) = event.involved_object.uid.as_deref() else {
        return;
    };
    if let Some(refs) = by_uid.get_mut(uid) {
        refs.remove(&ObjectRef::from_obj(event));
        if refs.is_empty() {
            by_uid.remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(name: &str, about: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "p", "uid": about},
        }))
        .unwrap()
    }

    fn names(index: &EventIndex, uid: &str) -> Vec<String> {
        let mut names: Vec<String> = index.refs_of(uid).into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn events_are_found_by_the_uid_they_are_about_as_the_watch_changes_them() {
        let index = EventIndex::default();
        index.observe(&watcher::Event::Apply(event("e1", "u1")));
        index.observe(&watcher::Event::Apply(event("e2", "u1")));
        index.observe(&watcher::Event::Apply(event("e1", "u1")));
        index.observe(&watcher::Event::Apply(event("e3", "u2")));
        assert_eq!(names(&index, "u1"), ["e1", "e2"]);
        index.observe(&watcher::Event::Delete(event("e1", "u1")));
        assert_eq!(names(&index, "u1"), ["e2"]);
        index.observe(&watcher::Event::Delete(event("e3", "u2")));
        assert!(index.refs_of("u2").is_empty());
        assert!(
            !index.index().by_uid.contains_key("u2"),
            "emptied uids are dropped"
        );
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_is_done() {
        let index = EventIndex::default();
        index.observe(&watcher::Event::Apply(event("old", "u1")));
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(event("new", "u1")));
        assert_eq!(
            names(&index, "u1"),
            ["old"],
            "the old view until the relist is done"
        );
        index.observe(&watcher::Event::InitDone);
        assert_eq!(names(&index, "u1"), ["new"]);
    }
}
