//! The backend's vocabulary: the [`Backend`] itself, the requests and answers of its operations,
//! and why one fails. At the bottom of [`backend`](super): deic-dk's operations (in the parent),
//! the native API's ([`native`](super::native)) and the user's storage
//! ([`storage`](super::storage)) each add methods to the `Backend` and import what they share from
//! here, not from one another.

use std::sync::Arc;

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::ResourceExt;
use serde::Deserialize;

use crate::{
    io::{
        cache::Cache,
        catalogue::Catalogue,
        cluster::{Cluster, ClusterError},
        fetch::{FetchError, Fetcher},
    },
    model::{
        config::Config,
        user::{InvalidUserId, UserId},
    },
    policy::limits,
    workspace::{
        manifest::{ManifestError, Settings},
        progress::Phase,
    },
};

/// Why a request could not be done. Each says what was wrong; the API answers it with the
/// endpoint's compatible field and an `error` message.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The user id breaks deic-dk's rule.
    #[error(transparent)]
    User(#[from] InvalidUserId),
    /// The manifest could not be fetched.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The manifest can't be launched.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Every name the create may use is taken.
    #[error(
        "every name a pod of this manifest may have ({first} to {last}, and the user's own when others hold those) is taken: {own} by the user's pods, {others} by other users' pods or pods being replaced"
    )]
    NamesTaken {
        /// The first name tried.
        first: String,
        /// The last of deic-dk's names.
        last: String,
        /// How many of the names tried the user's own pods hold.
        own: usize,
        /// How many other users' pods (or pods not yet seen) hold.
        others: usize,
    },
    /// A pod name from the request can't be a workspace's.
    #[error(transparent)]
    Name(#[from] crate::model::names::InvalidName),
    /// The user has no pod of that name.
    #[error("user {user} has no pod named {pod:?}")]
    NoSuchPod {
        /// The user.
        user: String,
        /// The name asked for.
        pod: String,
    },
    /// The pod is already being deleted.
    #[error("pod {0:?} is already being deleted")]
    AlreadyDeleting(String),
    /// The user's storage can't be made ready.
    #[error("storage: {0}")]
    Storage(String),
    /// The API server refused or failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// `get_podip_owner` was asked about something that is not a pod address.
    #[error("{0}")]
    BadAddress(String),
    /// A manifest annotation of outfit's has a value it can't use.
    #[error("{0}")]
    Annotation(String),
    /// The catalogue has no such entry.
    #[error("the catalogue has no manifest {0:?}")]
    UnknownManifest(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Another create of the user's held their turn (the per-user Lease) too long.
    #[error("{0}")]
    Busy(String),
    /// As many creates as `maxCreatesInFlight` allows are under way already.
    #[error(
        "{0} creates are under way, as many as this backend takes at once (maxCreatesInFlight); try again in a moment"
    )]
    TooManyCreates(usize),
    /// The create would pass one of the user's limits.
    #[error(transparent)]
    Limit(#[from] limits::LimitExceeded),
    /// A launch named a cluster that is not configured, or one its manifest does not run on.
    #[error("{0}")]
    WrongCluster(String),
    /// A launch's cluster can't be reached now.
    #[error("cluster {cluster} can't be reached now: {why}")]
    Unreachable {
        /// The cluster.
        cluster: String,
        /// Why.
        why: String,
    },
}

impl RequestError {
    /// What the caller is told: the error, with the API server's verdict in place of kube-rs's
    /// dump when the cluster failed it. The dump goes to the log.
    pub fn public_message(&self) -> String {
        match self {
            Self::Cluster(error) => {
                tracing::warn!(%error, "API server call failed");
                error.public_message()
            }
            other => other.to_string(),
        }
    }

    /// The phase a failed create stopped in; `None` when the request itself was wrong.
    pub fn phase(&self) -> Option<Phase> {
        match self {
            Self::User(_)
            | Self::Name(_)
            | Self::BadAddress(_)
            | Self::NoSuchPod { .. }
            | Self::AlreadyDeleting(_)
            | Self::UnknownManifest(_)
            | Self::Forbidden(_)
            | Self::Limit(_)
            | Self::WrongCluster(_)
            | Self::Unreachable { .. } => None,
            Self::Fetch(_) | Self::Manifest(_) | Self::Annotation(_) => Some(Phase::Fetch),
            Self::Storage(_) => Some(Phase::Storage),
            Self::NamesTaken { .. } | Self::Busy(_) | Self::TooManyCreates(_) | Self::Cluster(_) => {
                Some(Phase::Admission)
            }
        }
    }
}

/// Who holds the names a create found taken.
#[derive(Debug, Default)]
pub(super) struct Holders {
    /// Held by the user's own pods.
    pub(super) own: usize,
    /// Held by anyone else's, or taken before the cache saw it.
    pub(super) others: usize,
}

impl Holders {
    pub(super) fn count(&mut self, own: bool) {
        if own {
            self.own += 1;
        } else {
            self.others += 1;
        }
    }
}

/// `create_pod`'s request.
#[derive(Debug, Clone, Deserialize)]
pub struct CreateRequest {
    /// The manifest's URL.
    pub yaml_url: String,
    /// The user.
    pub user_id: String,
    /// Container name → env var → value.
    #[serde(default)]
    pub settings: Option<Settings>,
}

/// What a create answers.
#[derive(Debug, Clone)]
pub struct Created {
    /// The pod's name.
    pub pod_name: String,
    /// Settings that were not applied, and the like.
    pub warnings: Vec<String>,
    /// The pod as the API server stored it (the cache may not show it yet).
    pub pod: Pod,
}

/// `watch_create_pod`'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOutcome {
    /// Whether the pod is ready with its Services and tokens.
    pub ready: bool,
    /// Why not, when the create failed or timed out (never about another user's pod).
    pub reason: Option<String>,
}

/// One cluster the backend serves workspaces on: its name, the configuration its workspaces are
/// made with (its namespace), its calls and its cache.
#[derive(Clone)]
pub struct Member<C = Cluster> {
    /// `defaultCluster`, or the name of one of `clusters`.
    pub name: String,
    /// The configuration, with this cluster's namespace.
    pub config: Arc<Config>,
    /// Its API server.
    pub cluster: C,
    /// Its watches.
    pub cache: Cache,
}

/// The backend, over the cluster `C` (the API server's, or the unit tests' fake). `cluster` and
/// `cache` are the cluster it works on (the default one, unless [`Backend::on`] chose another);
/// `members` are every cluster, the default one first.
#[derive(Clone)]
pub struct Backend<C = Cluster> {
    pub(super) config: Arc<Config>,
    pub(super) cluster: C,
    pub(super) cache: Cache,
    pub(super) members: Arc<[Member<C>]>,
    pub(super) fetcher: Fetcher,
    pub(super) catalogue: Catalogue,
    pub(super) turns: Turns,
    pub(super) released: Released,
    pub(super) creates: CreateSlots,
}

impl<C> std::fmt::Debug for Backend<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").finish_non_exhaustive()
    }
}

/// One lock per user: a user's creates take turns.
#[derive(Clone, Default)]
pub(super) struct Turns(
    Arc<std::sync::Mutex<std::collections::HashMap<UserId, Arc<tokio::sync::Mutex<()>>>>>,
);

impl Turns {
    pub(super) async fn take(&self, user: &UserId) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut turns = self.0.lock().expect("turns");
            // Forget users no create holds, so the map does not grow with every user ever seen.
            turns.retain(|_, lock| Arc::strong_count(lock) > 1);
            turns.entry(user.clone()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

/// The creates that may be under way at once (`maxCreatesInFlight`): each holds memory (its
/// manifest, its pod, its requests) until the API server answers, so when the API server falls
/// behind, creates past the bound are refused instead of piling up.
#[derive(Clone)]
pub(super) struct CreateSlots {
    slots: Arc<tokio::sync::Semaphore>,
    limit: usize,
}

impl CreateSlots {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(limit)),
            limit,
        }
    }

    /// A slot for one create, held until dropped; refused when every slot is taken.
    pub(super) fn take(&self) -> Result<tokio::sync::OwnedSemaphorePermit, RequestError> {
        self.slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| RequestError::TooManyCreates(self.limit))
    }
}

/// The per-user Leases as this process last released them, by name, so that the user's next
/// create takes its Lease with one write at that version instead of reading it first.
/// Bounded: past [`RELEASED_KEPT`] Leases it starts over (a Lease not kept costs a read).
#[derive(Clone, Default)]
pub(super) struct Released(Arc<std::sync::Mutex<std::collections::HashMap<String, Lease>>>);

/// How many released Leases [`Released`] keeps (each under a KiB).
const RELEASED_KEPT: usize = 4096;

impl Released {
    fn leases(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Lease>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Lease `name` as this process released it last, forgotten here (a turn uses it once).
    pub(super) fn take(&self, name: &str) -> Option<Lease> {
        self.leases().remove(name)
    }

    /// `lease`, as the API server stored this process's release of it.
    pub(super) fn keep(&self, lease: Lease) {
        let mut leases = self.leases();
        if leases.len() >= RELEASED_KEPT {
            leases.clear();
        }
        leases.insert(lease.name_any(), lease);
    }
}

/// What a delete found.
pub(super) enum Deletion {
    /// No pod of the name that the caller may delete.
    None,
    /// The pod was already being deleted.
    Already(Arc<Pod>),
    /// Its delete was asked for.
    Requested(Arc<Pod>),
}
