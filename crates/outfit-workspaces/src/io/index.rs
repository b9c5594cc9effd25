//! Cached objects by a key they carry, kept by their watch, so that the reads made on every
//! request or change find an object's few among thousands without a scan of the cache (kube's
//! reflector store has no index):
//!
//! - Events by the uid of the pod they are about: every waiting progress stream and long poll
//!   reads a pod's Events on every change of the cache, and a scan of all the namespace's Events
//!   for each made that cost grow with launches in flight × changes × Events (at 10,000
//!   workspaces the backend could no longer keep up with 20 creates/s);
//! - pods by the user who owns them: a user's list scanned every pod, 1.6 ms p50 at 10,000
//!   (BENCHMARKS.md, "Workspace backend at scale").
//!
//! An index holds what its cache holds: relists replace it whole, as they replace the cache.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Resource,
    runtime::{reflector::ObjectRef, watcher},
};
use outfit_workspaces_core::model;

/// The key an object is found by, if it has one.
type KeyOf<K> = for<'a> fn(&'a K) -> Option<&'a str>;

/// The index (cheap to clone: clones share it).
pub struct Index<K: Resource<DynamicType = ()>> {
    inner: Arc<Mutex<Maps<K>>>,
    key_of: KeyOf<K>,
}

/// The cached Events by the uid of the pod they are about.
pub type EventIndex = Index<Event>;
/// The cached pods by the id of the user who owns them.
pub type OwnerIndex = Index<Pod>;

impl<K: Resource<DynamicType = ()>> Clone for Index<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            key_of: self.key_of,
        }
    }
}

struct Maps<K: Resource<DynamicType = ()>> {
    current: Keyed<K>,
    /// The index a relist is building, which replaces `current` when the relist is done.
    relisting: Option<Keyed<K>>,
}

struct Keyed<K: Resource<DynamicType = ()>> {
    by_key: HashMap<String, HashSet<ObjectRef<K>>>,
    /// Each object's key as last seen, so a change of key moves it and a delete finds it.
    keys: HashMap<ObjectRef<K>, String>,
}

impl<K: Resource<DynamicType = ()>> Default for Keyed<K> {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            keys: HashMap::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Keyed<K> {
    fn insert(&mut self, object: &K, key_of: KeyOf<K>) {
        let reference = ObjectRef::from_obj(object);
        self.remove(&reference);
        if let Some(key) = key_of(object) {
            self.by_key
                .entry(key.to_owned())
                .or_default()
                .insert(reference.clone());
            self.keys.insert(reference, key.to_owned());
        }
    }

    fn remove(&mut self, reference: &ObjectRef<K>) {
        let Some(key) = self.keys.remove(reference) else {
            return;
        };
        if let Some(refs) = self.by_key.get_mut(&key) {
            refs.remove(reference);
            if refs.is_empty() {
                self.by_key.remove(&key);
            }
        }
    }
}

impl EventIndex {
    /// Events by the uid of the object they are about.
    pub fn events() -> Self {
        Self::new(|event| event.involved_object.uid.as_deref())
    }
}

impl OwnerIndex {
    /// Pods by the id of the user who owns them.
    pub fn owners() -> Self {
        Self::new(model::user::owner_of::<Pod>)
    }
}

impl<K: Resource<DynamicType = ()>> Index<K> {
    fn new(key_of: KeyOf<K>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Maps {
                current: Keyed::default(),
                relisting: None,
            })),
            key_of,
        }
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps<K>> {
        // A panic while the lock was held leaves plain maps behind; they stay usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in what the watch saw (after the cache did).
    pub fn observe(&self, event: &watcher::Event<K>) {
        let key_of = self.key_of;
        let mut maps = self.maps();
        match event {
            watcher::Event::Apply(object) => maps.current.insert(object, key_of),
            watcher::Event::Delete(object) => maps.current.remove(&ObjectRef::from_obj(object)),
            watcher::Event::Init => maps.relisting = Some(Keyed::default()),
            watcher::Event::InitApply(object) => {
                if let Some(relisting) = maps.relisting.as_mut() {
                    relisting.insert(object, key_of);
                }
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = maps.relisting.take() {
                    maps.current = relisted;
                }
            }
        }
    }

    /// The objects with `key`, as references into the cache.
    pub fn refs_of(&self, key: &str) -> Vec<ObjectRef<K>> {
        self.maps()
            .current
            .by_key
            .get(key)
            .map(|refs| refs.iter().cloned().collect())
            .unwrap_or_default()
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

    fn pod(name: &str, owner: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns",
                         "annotations": {model::keys::ANNOTATION_USER_ID: owner}},
        }))
        .unwrap()
    }

    fn names<K: Resource<DynamicType = ()>>(index: &Index<K>, key: &str) -> Vec<String> {
        let mut names: Vec<String> = index.refs_of(key).into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn events_are_found_by_the_uid_they_are_about_as_the_watch_changes_them() {
        let index = EventIndex::events();
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
            !index.maps().current.by_key.contains_key("u2"),
            "emptied keys are dropped"
        );
    }

    #[test]
    fn a_pod_whose_owner_changes_is_found_under_the_new_one_only() {
        let index = OwnerIndex::owners();
        index.observe(&watcher::Event::Apply(pod("a", "ann@x")));
        index.observe(&watcher::Event::Apply(pod("b", "ann@x")));
        index.observe(&watcher::Event::Apply(pod("a", "bob@x")));
        assert_eq!(names(&index, "ann@x"), ["b"]);
        assert_eq!(names(&index, "bob@x"), ["a"]);
        index.observe(&watcher::Event::Delete(pod("a", "bob@x")));
        assert!(index.refs_of("bob@x").is_empty());
        let mut unowned = pod("b", "");
        unowned.metadata.annotations = None;
        index.observe(&watcher::Event::Apply(unowned));
        assert!(
            index.refs_of("ann@x").is_empty(),
            "an owner taken off is forgotten"
        );
        assert!(index.maps().current.keys.is_empty());
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_is_done() {
        let index = EventIndex::events();
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
