//! What the backend's operations answer, and why one fails (what the creates take is the core's,
//! `workspace::requests`): the vocabulary both types of
//! [`backend`](super) share (one cluster's [`ClusterWorkspaces`](super::cluster_workspaces::ClusterWorkspaces), the
//! set's [`Backend`](super::all_clusters::Backend)) and both APIs read. It imports nothing of theirs.

use crate::io::{cluster::ClusterError, fetch::FetchError};
use k8s_openapi::api::core::v1::Pod;
use outfit_workspaces_core::{
    model::{self, user::InvalidUserId},
    policy::limits,
    workspace::{manifest::ManifestError, progress::Phase},
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
    Name(#[from] model::names::InvalidName),
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
    /// The user's storage can't be made ready (for now: tried again, it may be).
    #[error("storage: {0}")]
    Storage(String),
    /// The user's storage can't be made what the workspace asks, as the API server says (a home
    /// whose class does not expand): tried again, it would be refused again.
    #[error("storage: {0}")]
    StorageRefused(String),
    /// The API server refused or failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// `get_podip_owner` was asked about something that is not a pod address.
    #[error("{0}")]
    BadAddress(String),
    /// A workspace's sharing can't be set as asked.
    #[error("sharing: {0}")]
    BadSharing(String),
    /// A manifest annotation of outfit's has a value it can't use.
    #[error("{0}")]
    Annotation(String),
    /// The catalogue has no such entry.
    #[error("the catalogue has no manifest {0:?}")]
    UnknownManifest(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The workspace has no Workspace resource to keep it while stopped.
    #[error(
        "workspace {0:?} has no record to keep it while stopped (launched through deic-dk's API, or before this version); delete it instead"
    )]
    NotStoppable(String),
    /// A user's storage is still used by their workspaces.
    #[error("{0}")]
    InUse(String),
    /// A launch or start named a snapshot that is not the user's, or that is gone.
    #[error("{0}")]
    UnknownSnapshot(String),
    /// A snapshot needed first (to restore from, or before a home is removed) is not ready.
    #[error("{0}")]
    SnapshotNotReady(String),
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
    /// The leader's controller refused to make a start's pod, for good at that generation:
    /// the reason of the Workspace's `Ready` condition ([`RequestError::condition_reason`] of
    /// the error it met) and its message.
    #[error("{message}")]
    Refused {
        /// The condition's reason.
        reason: String,
        /// What the controller met, as a caller is told it.
        message: String,
    },
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
    /// The controller's refusal read back from a Workspace's status.
    pub fn refused(reason: &str, message: &str) -> Self {
        Self::Refused {
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }

    /// The reason a Workspace's `Ready` condition gives when the controller refused its pod for
    /// this error; the API answers [`RequestError::Refused`] with the status this error has.
    pub fn condition_reason(&self) -> &str {
        match self {
            Self::UnknownManifest(_) => "UnknownEntry",
            Self::Limit(_) => "LimitExceeded",
            Self::WrongCluster(_) => "WrongCluster",
            Self::User(_) => "InvalidOwner",
            Self::Manifest(_) | Self::Annotation(_) => "BadManifest",
            Self::UnknownSnapshot(_) => "UnknownSnapshot",
            Self::SnapshotNotReady(_) => "SnapshotNotReady",
            Self::StorageRefused(_) => "StorageRefused",
            Self::Cluster(refused) if refused.is_forbidden() => "RefusedByCluster",
            Self::Cluster(refused) if refused.is_invalid() => "InvalidForCluster",
            Self::Refused { reason, .. } => reason,
            _ => "StartRefused",
        }
    }

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

    /// Whether the same create may succeed if tried again later unchanged: the API server or
    /// the manifest's server was away, or others held what it needed for now.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Cluster(error) => error.is_transient(),
            Self::Fetch(_)
            | Self::Busy(_)
            | Self::TooManyCreates(_)
            | Self::NamesTaken { .. }
            | Self::Unreachable { .. }
            | Self::Storage(_) => true,
            _ => false,
        }
    }

    /// The phase a failed create stopped in; `None` when the request itself was wrong.
    pub fn phase(&self) -> Option<Phase> {
        match self {
            Self::User(_)
            | Self::Name(_)
            | Self::BadAddress(_)
            | Self::BadSharing(_)
            | Self::NoSuchPod { .. }
            | Self::AlreadyDeleting(_)
            | Self::UnknownManifest(_)
            | Self::Forbidden(_)
            | Self::Limit(_)
            | Self::WrongCluster(_)
            | Self::NotStoppable(_)
            | Self::InUse(_)
            | Self::UnknownSnapshot(_)
            | Self::Unreachable { .. } => None,
            // The controller's refusal, in the phase the error it stands for has.
            Self::Refused { reason, .. } => match reason.as_str() {
                "BadManifest" => Some(Phase::Fetch),
                "StorageRefused" | "SnapshotNotReady" => Some(Phase::Storage),
                "RefusedByCluster" | "InvalidForCluster" => Some(Phase::Admission),
                _ => None,
            },
            Self::SnapshotNotReady(_) => Some(Phase::Storage),
            Self::Fetch(_) | Self::Manifest(_) | Self::Annotation(_) => Some(Phase::Fetch),
            Self::Storage(_) | Self::StorageRefused(_) => Some(Phase::Storage),
            Self::NamesTaken { .. } | Self::Busy(_) | Self::TooManyCreates(_) | Self::Cluster(_) => {
                Some(Phase::Admission)
            }
        }
    }
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
