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
    model::{
        config::Config,
        keys, names,
        user::{UserId, belongs_to},
    },
    resource::Workspace,
    workspace::{
        info::{self, ClusterState, WorkspaceInfo},
        progress::{self, Report, storage_claim_of},
    },
};
use tokio::time::Instant;

use crate::{
    backend::request::RequestError,
    io::{
        auth::Identity,
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

/// Who looks a workspace up by name: `user`, whose workspaces they may see, or anyone's for an
/// admin. Every lookup of a name no cache shows goes through it, to the API server only for a
/// name they may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seeker<'a> {
    /// The owner whose workspaces they see.
    pub(crate) user: &'a UserId,
    /// Whether they see everyone's (`adminGroups`).
    pub(crate) admin: bool,
}

impl<'a> Seeker<'a> {
    /// `user`, not an admin (deic-dk's callers).
    pub(crate) fn user(user: &'a UserId) -> Self {
        Self { user, admin: false }
    }

    /// Whether they may see `pod`.
    pub(crate) fn sees(&self, pod: &Pod) -> bool {
        self.admin || belongs_to(pod, self.user)
    }

    /// Whether they may see the Workspace `record`.
    pub(crate) fn sees_record(&self, record: &Workspace) -> bool {
        self.admin || record.spec.owner == self.user.as_str()
    }

    /// Whether a workspace `name` no cache shows may be one they see, so that an API server is
    /// asked (a cache can be behind: a workspace launched through another replica a moment ago):
    /// a name some launch could have given them, any for an admin. Any other name is none of
    /// theirs whatever an API server holds, and is answered without one (issue 46: each was a
    /// GET). A Workspace made by hand under another name is found once the watch shows it.
    pub(crate) fn may_hold(&self, name: &str) -> bool {
        self.admin || names::may_be_named_for(name, self.user)
    }
}

impl<'a> From<&'a Identity> for Seeker<'a> {
    fn from(identity: &'a Identity) -> Self {
        Self {
            user: &identity.user,
            admin: identity.admin,
        }
    }
}

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

    /// The outfit pod `name` as the API server has it, if `seeker` sees it, for a name the
    /// cache does not show yet (made a moment ago through another replica, whose creates this
    /// one's watch shows moments later); once found, the cache is given a moment to show it,
    /// since the reports read the cache. One GET, made only for a name the cache does not hold
    /// and `seeker` may hold.
    pub(crate) async fn unseen_pod(
        &self,
        name: &str,
        seeker: Seeker<'_>,
    ) -> Result<Option<Arc<Pod>>, RequestError> {
        if !seeker.may_hold(name) {
            return Ok(None);
        }
        let Some(pod) = self.cluster.get_pod(name).await? else {
            return Ok(None);
        };
        let outfits = pod.labels().get(keys::LABEL_MANAGED_BY).map(String::as_str) == Some(keys::MANAGED_BY);
        if !outfits || !seeker.sees(&pod) {
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

    /// The Workspace `name` as the API server has it, if `seeker` sees it, for a name the cache
    /// does not show (as [`Self::unseen_pod`]).
    pub(crate) async fn unseen_record(
        &self,
        name: &str,
        seeker: Seeker<'_>,
    ) -> Result<Option<Workspace>, RequestError> {
        if !seeker.may_hold(name) {
            return Ok(None);
        }
        let found = self.cluster.get_workspace(name).await?;
        Ok(found.filter(|record| seeker.sees_record(record)))
    }
}
