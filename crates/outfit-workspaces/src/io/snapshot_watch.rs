//! The VolumeSnapshots outfit took in the namespace, kept current by a reflector on a cluster that
//! takes them (`snapshotClassName`), so that `GET /api/v1/storage` lists a user's from memory
//! (issue 46: 2,157 such requests made 2,157 LISTs, in the backend's one flow of the API server
//! with everyone's TokenReviews and creates). Until the watch has listed them, and from a failed
//! watch until it has listed them again, it can't answer, and they are asked of the API server
//! as before; a decision (which snapshot a removal keeps) always asks the API server.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use futures::{StreamExt, TryStreamExt};
use kube::{
    Api, Client,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use outfit_workspaces_core::{
    model::{
        keys,
        user::{UserId, belongs_to},
    },
    workspace::snapshot::VolumeSnapshot,
};
use tokio::sync::watch;

/// The namespace's snapshots taken by outfit, as the watch last saw them.
#[derive(Clone)]
pub struct SnapshotWatch {
    store: Store<VolumeSnapshot>,
    namespace: Arc<str>,
    /// Whether the store is what the API server last said: listed, and no error since.
    current: Arc<AtomicBool>,
}

impl std::fmt::Debug for SnapshotWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWatch")
            .field("namespace", &self.namespace)
            .field("current", &self.current.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SnapshotWatch {
    /// The watch of `namespace`'s snapshots, and the task that keeps it (run it until shutdown);
    /// each change moves `changes`.
    pub fn new(
        client: &Client,
        namespace: &str,
        backoff: watcher::ExponentialBackoff,
        changes: Arc<watch::Sender<u64>>,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (store, writer) = reflector::store();
        let current = Arc::new(AtomicBool::new(false));
        let selector = format!("{}={}", keys::LABEL_MANAGED_BY, keys::MANAGED_BY);
        let stream = reflector::reflector(
            writer,
            watcher(
                Api::<VolumeSnapshot>::namespaced(client.clone(), namespace),
                watcher::Config::default().labels(&selector),
            )
            .backoff(backoff)
            .modify(|snapshot: &mut VolumeSnapshot| snapshot.metadata.managed_fields = None),
        )
        .inspect_ok({
            let current = current.clone();
            move |event| match event {
                // A (re)list is in the store only once it is done.
                watcher::Event::Init | watcher::Event::InitApply(_) => {}
                watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_) => {
                    current.store(true, Ordering::Release);
                }
            }
        });
        let task = {
            let current = current.clone();
            async move {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    if let Err(error) = event {
                        // Not the cluster's health (its other watches and probe say that): a
                        // missing snapshot API leaves the lists to the API server, which says why.
                        if current.swap(false, Ordering::AcqRel) {
                            tracing::warn!(%error, "the snapshots' watch failed; lists ask the API server until it lists again");
                        }
                    }
                    changes.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
        };
        let watch = Self {
            store,
            namespace: namespace.into(),
            current,
        };
        (watch, task)
    }

    /// `user`'s snapshots (by the exact id), or `None` while the watch can't say.
    pub fn of(&self, user: &UserId) -> Option<Vec<Arc<VolumeSnapshot>>> {
        if !self.current.load(Ordering::Acquire) {
            return None;
        }
        let state = self.store.state();
        Some(
            state
                .into_iter()
                .filter(|s| belongs_to(s.as_ref(), user))
                .collect(),
        )
    }

    /// The snapshot `name` as the watch last saw it.
    pub fn get(&self, name: &str) -> Option<Arc<VolumeSnapshot>> {
        self.store.get(&ObjectRef::new(name).within(&self.namespace))
    }
}

#[cfg(test)]
impl SnapshotWatch {
    /// A watch fed by hand (the unit tests' fake cluster), listed and current.
    pub(crate) fn fed(namespace: &str) -> (Self, reflector::store::Writer<VolumeSnapshot>) {
        let mut writer = reflector::store::Writer::default();
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let watch = Self {
            store: writer.as_reader(),
            namespace: namespace.into(),
            current: Arc::new(AtomicBool::new(true)),
        };
        (watch, writer)
    }

    /// As a failed watch leaves it: unable to say until it lists again.
    pub(crate) fn failed(&self) {
        self.current.store(false, Ordering::Release);
    }
}
