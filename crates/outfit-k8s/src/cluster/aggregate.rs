//! The watches' updates merged into [`Snapshot`]s, and the watches of listed names (the filer
//! injector's Secrets, by the SVMs `filers-list` lists) started and stopped as those lists change.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use outfit_core::{Document, Origin};
use serde_json::Value;
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

use super::watches::{ListedKind, Update, WatchOptions, Watched, plan_watches};

/// Every watched object at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The objects, as raw documents, in a stable order (kind, namespace, name).
    pub documents: Vec<Document>,
    /// Whether every kind has been listed at least once (a kind whose CRD is not installed counts
    /// as listed, and empty).
    pub synced: bool,
    /// The kinds whose CRD the API server does not serve (yet), or that outfit may not read.
    pub absent: Vec<String>,
    /// The objects, by kind and name, whose watch RBAC refused (a Secret `outfit manifests` was
    /// not given the name of), or past [`MAX_LISTED`]: whether they exist is not known.
    pub unreadable: Vec<(String, String)>,
    /// Increases with every change.
    pub revision: u64,
}

/// Starts the watch of a slot, its index given.
pub(super) type Spawn = Box<dyn FnMut(usize, Watched) -> JoinHandle<()> + Send>;

/// The most objects of a [`outfit_core::vocab::Names::Listed`] kind watched at once (a watch each): the names past it
/// are reported unreadable, as for a refused watch. StatCan runs a handful of SVMs.
const MAX_LISTED: usize = 256;

/// One watch, as the aggregator holds it.
pub(super) struct Slot {
    pub(super) watched: Watched,
    objects: BTreeMap<(String, String), Value>,
    listed: bool,
    absent: bool,
    /// The [`ListedKind`] whose names it watches one of; `None` for a watch from the start.
    listed_kind: Option<usize>,
    /// Stopped: its objects are gone, and updates still queued from it are dropped.
    pub(super) stopped: bool,
    /// Its task, aborted when the slot is stopped or dropped.
    task: Option<JoinHandle<()>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Merges the watches' updates into snapshots, and starts and stops the watches of listed names
/// as the objects listing them change: before a snapshot is published, so that one is never
/// called synced while a listed watch has not listed yet.
pub(super) struct Aggregator {
    pub(super) slots: Vec<Slot>,
    listed_kinds: Vec<ListedKind>,
    filer_namespace: String,
    spawn: Spawn,
}

impl Aggregator {
    pub(super) fn new(options: &WatchOptions, spawn: Spawn) -> Self {
        let (watched, listed_kinds) = plan_watches(options);
        let mut aggregator = Self {
            slots: Vec::new(),
            listed_kinds,
            filer_namespace: options.filer_namespace.clone(),
            spawn,
        };
        for watched in watched {
            aggregator.start(watched, None);
        }
        aggregator
    }

    fn start(&mut self, watched: Watched, listed_kind: Option<usize>) {
        let index = self.slots.len();
        let task = (self.spawn)(index, watched.clone());
        self.slots.push(Slot {
            watched,
            objects: BTreeMap::new(),
            listed: false,
            absent: false,
            listed_kind,
            stopped: false,
            task: Some(task),
        });
    }

    pub(super) fn apply(&mut self, update: Update) {
        let index = match &update {
            Update::Listed(index, _)
            | Update::Applied(index, ..)
            | Update::Deleted(index, _)
            | Update::Absent(index) => *index,
        };
        let Some(slot) = self.slots.get_mut(index).filter(|slot| !slot.stopped) else {
            return;
        };
        match update {
            Update::Listed(_, all) => {
                slot.objects = all;
                slot.listed = true;
                slot.absent = false;
            }
            Update::Applied(_, key, value) => {
                slot.objects.insert(key, value);
            }
            Update::Deleted(_, key) => {
                slot.objects.remove(&key);
            }
            Update::Absent(_) => {
                slot.objects.clear();
                slot.listed = true;
                slot.absent = true;
            }
        }
    }

    /// Starts a watch for each name the objects list now and stops those of the names they no
    /// longer list; returns the names past [`MAX_LISTED`], by kind.
    pub(super) fn follow_listed_names(&mut self) -> Vec<(String, String)> {
        let mut over = Vec::new();
        for kind in 0..self.listed_kinds.len() {
            let ListedKind { watch, names } = self.listed_kinds[kind].clone();
            let listing = self
                .slots
                .iter()
                .filter(|slot| slot.watched.built_in && slot.listed_kind.is_none() && !slot.stopped);
            let mut wanted: BTreeSet<String> = listing
                .flat_map(|slot| slot.objects.values())
                .flat_map(|object| names(object, &self.filer_namespace))
                .collect();
            if wanted.len() > MAX_LISTED {
                let past: Vec<String> = wanted.iter().skip(MAX_LISTED).cloned().collect();
                tracing::warn!(kind = %watch.resource.kind, count = wanted.len(), max = MAX_LISTED, "too many objects listed; those past the limit are not watched");
                for name in past {
                    wanted.remove(&name);
                    over.push((watch.resource.kind.clone(), name));
                }
            }
            for slot in &mut self.slots {
                let unwanted = slot
                    .watched
                    .name
                    .as_ref()
                    .is_none_or(|name| !wanted.contains(name));
                if slot.listed_kind == Some(kind) && !slot.stopped && unwanted {
                    slot.stopped = true;
                    slot.objects.clear();
                    if let Some(task) = slot.task.take() {
                        task.abort();
                    }
                }
            }
            for name in wanted {
                let watched_already = self.slots.iter().any(|slot| {
                    slot.listed_kind == Some(kind)
                        && !slot.stopped
                        && slot.watched.name.as_ref() == Some(&name)
                });
                if !watched_already {
                    let watched = Watched {
                        name: Some(name),
                        ..watch.clone()
                    };
                    self.start(watched, Some(kind));
                }
            }
        }
        over
    }

    pub(super) fn snapshot(&self, revision: u64, over: Vec<(String, String)>) -> Snapshot {
        let origin = Origin::named(CLUSTER_ORIGIN);
        let running = || self.slots.iter().filter(|slot| !slot.stopped);
        let documents = running()
            .flat_map(|slot| {
                slot.objects.values().map(|value| Document {
                    origin: origin.clone(),
                    value: value.clone(),
                })
            })
            .collect();
        let mut absent: Vec<String> = running()
            .filter(|slot| slot.absent)
            .map(|slot| slot.watched.resource.kind.clone())
            .collect();
        absent.sort_unstable();
        absent.dedup();
        let mut unreadable = over;
        unreadable.extend(
            running()
                .filter(|slot| slot.absent && slot.listed_kind.is_some())
                .filter_map(|slot| Some((slot.watched.resource.kind.clone(), slot.watched.name.clone()?))),
        );
        Snapshot {
            documents,
            synced: running().all(|slot| slot.listed),
            absent,
            unreadable,
            revision,
        }
    }
}

pub(super) async fn aggregate(
    mut aggregator: Aggregator,
    mut updates: mpsc::UnboundedReceiver<Update>,
    snapshots: watch::Sender<Arc<Snapshot>>,
) {
    let mut revision = 0;
    while let Some(update) = updates.recv().await {
        // Take every update already queued before publishing once: a relist of many objects
        // becomes one snapshot, and one compilation.
        let mut next = Some(update);
        while let Some(update) = next {
            aggregator.apply(update);
            next = updates.try_recv().ok();
        }
        let over = aggregator.follow_listed_names();
        revision += 1;
        if snapshots
            .send(Arc::new(aggregator.snapshot(revision, over)))
            .is_err()
        {
            return;
        }
    }
}

/// The origin of every watched object. A message about one names the object itself (kind,
/// namespace and name, from the policy) after it, as in `cluster: PodDefault team-a/bad:
/// spec.selector: ...`; a file's document index has no counterpart here.
pub const CLUSTER_ORIGIN: &str = "cluster";
