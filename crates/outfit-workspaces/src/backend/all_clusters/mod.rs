//! The backend, [`Backend`]: the set of clusters it serves workspaces on (each a
//! [`ClusterWorkspaces`], the default one first) and what they share in this process (the manifest
//! fetcher, the catalogue, the creates under way, each user's turn). Both APIs call it; it chooses
//! the cluster an operation works on and reads what every cluster's cache says together (here),
//! then leaves the work to that cluster. Its operations: a create, deic-dk's or the native API's
//! launch, in `create.rs`; the rest of deic-dk's API, which works on the default cluster only, in
//! `compat.rs`; the rest of the native API's, on every cluster, in `native.rs`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{
        config::Config,
        user::{UserId, belongs_to},
    },
    workspace::{info::ClusterState, progress::Report},
};
use tokio::sync::watch;

use crate::{
    backend::{
        cluster_workspaces::{self, ClusterWorkspaces},
        request::RequestError,
    },
    io::{calls::ClusterCalls, catalogue::Catalogue, cluster::Cluster, fetch::Fetcher},
};

mod compat;
mod controller;
mod create;
mod finalizer;
mod home_snapshots;
mod homes;
mod native;
mod records;
mod sharing;

/// The backend over the clusters `members`, the default one first, each over its calls `C` (the
/// API server's, or the unit tests' fake).
#[derive(Clone)]
pub struct Backend<C = Cluster> {
    members: Arc<[ClusterWorkspaces<C>]>,
    fetcher: Fetcher,
    catalogue: Catalogue,
    turns: Turns,
    creates: CreateSlots,
}

impl<C> std::fmt::Debug for Backend<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").finish_non_exhaustive()
    }
}

/// One lock per user: a user's creates take turns in this process.
#[derive(Clone, Default)]
struct Turns(Arc<std::sync::Mutex<std::collections::HashMap<UserId, Arc<tokio::sync::Mutex<()>>>>>);

impl Turns {
    async fn take(&self, user: &UserId) -> tokio::sync::OwnedMutexGuard<()> {
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
struct CreateSlots {
    slots: Arc<tokio::sync::Semaphore>,
    limit: usize,
}

impl CreateSlots {
    fn new(limit: usize) -> Self {
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(limit)),
            limit,
        }
    }

    /// A slot for one create, held until dropped; refused when every slot is taken.
    fn take(&self) -> Result<tokio::sync::OwnedSemaphorePermit, RequestError> {
        self.slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| RequestError::TooManyCreates(self.limit))
    }
}

impl<C: ClusterCalls> Backend<C> {
    /// The backend over the default cluster `default` (configured by its config); further
    /// clusters join with [`Backend::with_member`].
    pub fn new(default: ClusterWorkspaces<C>) -> Self {
        let config = &default.config;
        let fetcher = Fetcher::new(
            config.whitelist_manifest_regex.clone(),
            config.manifest_fetch_timeout,
            config.manifest_max_bytes,
        );
        let catalogue = Catalogue::new(&config.catalogue, fetcher.clone());
        Self {
            creates: CreateSlots::new(config.max_creates_in_flight),
            members: Arc::from([default]),
            fetcher,
            catalogue,
            turns: Turns::default(),
        }
    }

    /// The backend with `member` as one more cluster (its name checked unique by the config).
    #[must_use]
    pub fn with_member(mut self, member: ClusterWorkspaces<C>) -> Self {
        let mut members = self.members.to_vec();
        members.push(member);
        self.members = Arc::from(members);
        self
    }

    /// Every cluster, the default one first.
    pub fn members(&self) -> &[ClusterWorkspaces<C>] {
        &self.members
    }

    /// The default cluster: the one deic-dk's API works on, and the one whose API server
    /// arbitrates every user's turn to create.
    pub fn default_cluster(&self) -> &ClusterWorkspaces<C> {
        &self.members[0]
    }

    /// The configuration (the default cluster's).
    pub fn config(&self) -> &Config {
        &self.default_cluster().config
    }

    /// Waits until the default cluster's cache has read the cluster once.
    pub async fn synced(&self) {
        self.default_cluster().cache.synced().await;
    }

    /// A receiver that sees every change of any cluster's cache (the others' wake the default
    /// cache's waiters).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.default_cluster().cache.changes()
    }

    /// Every cluster as the catalogue's answer shows it (where a launch may go), the default
    /// one first.
    pub fn clusters(&self) -> Vec<ClusterState> {
        self.members.iter().map(|m| self.state_of(m)).collect()
    }

    /// The cluster a launch goes to: the catalogue entry's, else the user's `choice`, else the
    /// default one. Refused when the name is not a cluster's, when it differs from the entry's,
    /// or when the cluster can't be reached now.
    fn choose(
        &self,
        entry_cluster: Option<&str>,
        choice: Option<&str>,
        manifest: &str,
    ) -> Result<&ClusterWorkspaces<C>, RequestError> {
        let name = match (entry_cluster, choice) {
            (Some(fixed), Some(chosen)) if fixed != chosen => {
                return Err(RequestError::WrongCluster(format!(
                    "manifest {manifest:?} runs on cluster {fixed} only, not {chosen}"
                )));
            }
            (Some(name), _) | (None, Some(name)) => name,
            (None, None) => &self.default_cluster().name,
        };
        let member = self.members.iter().find(|m| m.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
            RequestError::WrongCluster(format!(
                "there is no cluster {name:?}; the clusters are {}",
                known.join(", ")
            ))
        })?;
        match self.unreachable(member) {
            Some(why) => Err(RequestError::Unreachable {
                cluster: member.name.clone(),
                why,
            }),
            None => Ok(member),
        }
    }

    /// The cluster whose cache shows a pod `name`, with it.
    /// The pod of the workspace `name`, in whichever cluster holds it.
    pub fn pod(&self, name: &str) -> Option<Arc<Pod>> {
        self.holder_of(name).map(|(_, pod)| pod)
    }

    fn holder_of(&self, name: &str) -> Option<(&ClusterWorkspaces<C>, Arc<Pod>)> {
        self.members
            .iter()
            .find_map(|member| member.cache.pod(name).map(|pod| (member, pod)))
    }

    /// Whether the name `name` is held on any cluster, and whether by `user`: by a Workspace (a
    /// stopped workspace keeps its name; not when `starting` that Workspace) or a pod,
    /// as its cache shows them, else by a pod a create of this process made (the cache may not
    /// show it yet).
    fn name_holder(&self, name: &str, user: &UserId, starting: bool) -> cluster_workspaces::create::Holder {
        self.members.iter().find_map(|member| {
            if !starting && let Some(workspace) = member.cache.workspace(name) {
                return Some(workspace.spec.owner == user.as_str());
            }
            member
                .cache
                .pod_or_made(name)
                .map(|pod| belongs_to(pod.as_ref(), user))
        })
    }

    /// Every pod of `user`, on every cluster.
    fn pods_everywhere(&self, user: &UserId) -> Vec<Arc<Pod>> {
        self.members
            .iter()
            .flat_map(|member| member.cache.pods_of(user))
            .collect()
    }

    /// Why `member` can't be reached, when the backend serves several clusters. With one, the
    /// backend behaves as it always has while its API server is away (docs/workspaces/native-api.md): reads
    /// answer from the cache as they stand, and writes are tried and answer the API server's
    /// error.
    fn unreachable(&self, member: &ClusterWorkspaces<C>) -> Option<String> {
        if self.members.len() < 2 {
            return None;
        }
        member.cache.unreachable()
    }

    /// `member` as a workspace's answer shows it.
    fn state_of(&self, member: &ClusterWorkspaces<C>) -> ClusterState {
        ClusterState::new(&member.name, self.unreachable(member))
    }

    /// The progress of the pod `name` with `uid`, as the cache of the cluster that shows it
    /// (or its Events, once it is gone) shows it now; the default cluster's when none does.
    pub fn report(&self, name: &str, uid: &str) -> Report {
        let holder = self
            .holder_of(name)
            .filter(|(_, pod)| pod.uid().as_deref() == Some(uid))
            .map(|(member, _)| member)
            .or_else(|| self.members.iter().find(|m| !m.cache.events_of(uid).is_empty()));
        holder.unwrap_or(self.default_cluster()).report(name, uid)
    }
}
