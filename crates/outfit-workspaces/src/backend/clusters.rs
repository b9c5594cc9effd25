//! The backend over several clusters: which cluster an operation works on, and what every
//! cluster's caches say together. deic-dk's operations work on the default cluster only; the
//! native API's on all of them ([`native`](super::native)); a create checks names and limits
//! against every cluster.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::types::{Backend, Member, RequestError};
use crate::{io::calls::ClusterCalls, model::user::UserId, workspace::info::ClusterState};

impl<C: ClusterCalls> Backend<C> {
    /// The backend with `member` as one more cluster (its name checked unique by the config).
    #[must_use]
    pub fn with_member(mut self, member: Member<C>) -> Self {
        let mut members = self.members.to_vec();
        members.push(member);
        self.members = Arc::from(members);
        self
    }

    /// Every cluster, the default one first.
    pub fn members(&self) -> &[Member<C>] {
        &self.members
    }

    /// Every cluster as the catalogue's answer shows it (where a launch may go), the default
    /// one first.
    pub fn clusters(&self) -> Vec<ClusterState> {
        self.members.iter().map(|m| self.state_of(m)).collect()
    }

    /// The backend working on `member`: its calls, cache and namespace.
    pub(super) fn on(&self, member: &Member<C>) -> Self {
        Self {
            config: member.config.clone(),
            cluster: member.cluster.clone(),
            cache: member.cache.clone(),
            ..self.clone()
        }
    }

    /// The cluster a launch goes to: the catalogue entry's, else the user's `choice`, else the
    /// default one. Refused when the name is not a cluster's, when it differs from the entry's,
    /// or when the cluster can't be reached now.
    pub(super) fn choose_member(
        &self,
        entry_cluster: Option<&str>,
        choice: Option<&str>,
        manifest: &str,
    ) -> Result<&Member<C>, RequestError> {
        let name = match (entry_cluster, choice) {
            (Some(fixed), Some(chosen)) if fixed != chosen => {
                return Err(RequestError::WrongCluster(format!(
                    "manifest {manifest:?} runs on cluster {fixed} only, not {chosen}"
                )));
            }
            (Some(name), _) | (None, Some(name)) => name,
            (None, None) => &self.members[0].name,
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
    pub(super) fn holder_of(&self, name: &str) -> Option<(&Member<C>, Arc<Pod>)> {
        self.members
            .iter()
            .find_map(|member| member.cache.pod(name).map(|pod| (member, pod)))
    }

    /// The pod that holds the name `name` on any cluster: as its cache shows it, else as a create
    /// of this process made it (the cache may not show it yet).
    pub(super) fn name_holder(&self, name: &str) -> Option<Arc<Pod>> {
        self.members
            .iter()
            .find_map(|member| member.cache.pod_or_made(name))
    }

    /// Every pod of `user`, on every cluster.
    pub(super) fn pods_everywhere(&self, user: &UserId) -> Vec<Arc<Pod>> {
        self.members
            .iter()
            .flat_map(|member| member.cache.pods_of(user))
            .collect()
    }

    /// Why `member` can't be reached, when the backend serves several clusters. With one, the
    /// backend behaves as it always has while its API server is away (docs/workspaces.md): reads
    /// answer from the cache as they stand, and writes are tried and answer the API server's
    /// error.
    pub(super) fn unreachable(&self, member: &Member<C>) -> Option<String> {
        if self.members.len() < 2 {
            return None;
        }
        member.cache.unreachable()
    }

    /// `member` as a workspace's answer shows it.
    pub(super) fn state_of(&self, member: &Member<C>) -> ClusterState {
        ClusterState::new(&member.name, self.unreachable(member))
    }
}
