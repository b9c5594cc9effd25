//! The workspaces of one cluster, [`ClusterWorkspaces`]: the configuration its workspaces are
//! made with (its namespace), its API server's calls and its watch cache, and what is done on
//! that one cluster: a create's making (`create.rs`: the user's storage in `storage.rs`, the pod,
//! its NetworkPolicy), a delete (`delete.rs`), a workspace described and its progress read from
//! this cluster's cache (here). It knows nothing of other clusters: the set
//! ([`Backend`](super::all_clusters::Backend)) chooses the cluster and passes in what it needs of
//! the others (the names they hold, whether this one counts as reachable).
//!
//! It runs over any [`ClusterCalls`]: the API server's [`Cluster`], or the unit tests' fake.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{config::Config, keys},
    workspace::{
        info::{self, ClusterState, WorkspaceInfo},
        progress::{self, Report, storage_claim_of},
    },
};
use tokio::time::Instant;

use crate::{
    backend::request::RequestError,
    io::{
        cache::{Cache, OWN_WRITE_VISIBLE},
        calls::ClusterCalls,
        cluster::Cluster,
        node_images::NodeImages,
    },
};

pub(crate) mod create;
pub(super) mod delete;
mod removals;
pub(crate) mod snapshots;
mod storage;

/// One cluster the backend serves workspaces on, over its calls `C` (the API server's, or the
/// unit tests' fake): its name, the configuration its workspaces are made with (its namespace),
/// its calls and its cache.
#[derive(Clone)]
pub struct ClusterWorkspaces<C = Cluster> {
    /// `defaultCluster`, or the name of one of `clusters`.
    pub name: String,
    /// The configuration, with this cluster's namespace.
    pub config: Arc<Config>,
    /// Its API server.
    pub cluster: C,
    /// Its watches.
    pub cache: Cache,
    /// The images its nodes hold, for placement by image (empty: not watched).
    pub node_images: NodeImages,
    /// The removals' snapshots under way in this process, one per claim, which removals of that
    /// claim asked meanwhile share (`snapshots.rs`).
    removals: removals::Removals,
}

impl<C> std::fmt::Debug for ClusterWorkspaces<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterWorkspaces")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<C: ClusterCalls> ClusterWorkspaces<C> {
    /// The cluster `name`, made with `config`, over `cluster`, answering from `cache`.
    pub fn new(name: String, config: Arc<Config>, cluster: C, cache: Cache) -> Self {
        Self {
            name,
            config,
            cluster,
            cache,
            node_images: NodeImages::default(),
            removals: removals::Removals::default(),
        }
    }

    /// The same, placing launches by the images `node_images` says its nodes hold
    /// (`imagePlacement`).
    pub fn with_node_images(self, node_images: NodeImages) -> Self {
        Self { node_images, ..self }
    }

    /// The progress of the pod `name` with `uid`, as this cluster's cache shows it now.
    pub(crate) fn report(&self, name: &str, uid: &str) -> Report {
        let pod = self.cache.pod(name).filter(|p| p.uid().as_deref() == Some(uid));
        self.report_on(name, pod.as_deref(), uid)
    }

    /// The progress report of `pod` (`None`: gone) called `name` with `uid`: its claim and
    /// Events as this cluster's cache shows them.
    fn report_on(&self, name: &str, pod: Option<&Pod>, uid: &str) -> Report {
        let claim = pod
            .and_then(storage_claim_of)
            .and_then(|claim| self.cache.claim(claim));
        let events = self.cache.events_of(uid);
        progress::report(name, pod, claim.as_deref(), &events)
    }

    /// `pod`, on this cluster (as `state` shows it), as the native API shows it.
    pub(crate) fn describe(&self, pod: &Pod, state: ClusterState, now: Timestamp) -> WorkspaceInfo {
        // From `pod` itself: one a moment old may not be in the cache yet (`unseen_pod`).
        let report = self.report_on(&pod.name_any(), Some(pod), &pod.uid().unwrap_or_default());
        info::workspace(pod, &report, &self.config, state, now)
    }

    /// The outfit pod `name` as the API server has it, if `visible` to the asker, for a name the
    /// cache does not show yet (made a moment ago through another replica, whose creates this
    /// one's watch shows moments later); once found, the cache is given a moment to show it,
    /// since the reports read the cache. One GET, made only for a name the cache does not hold.
    pub(crate) async fn unseen_pod(
        &self,
        name: &str,
        visible: impl Fn(&Pod) -> bool,
    ) -> Result<Option<Arc<Pod>>, RequestError> {
        let Some(pod) = self.cluster.get_pod(name).await? else {
            return Ok(None);
        };
        let outfits = pod.labels().get(keys::LABEL_MANAGED_BY).map(String::as_str) == Some(keys::MANAGED_BY);
        if !outfits || !visible(&pod) {
            return Ok(None);
        }
        let uid = pod.uid();
        self.cache
            .wait_for(Instant::now() + OWN_WRITE_VISIBLE, |cache| {
                cache
                    .pod(name)
                    .is_some_and(|shown| shown.uid() == uid)
                    .then_some(())
            })
            .await;
        Ok(Some(Arc::new(pod)))
    }
}
