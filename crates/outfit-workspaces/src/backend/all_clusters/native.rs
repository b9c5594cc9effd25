//! The operations behind the native API, on every cluster: each takes the authenticated caller,
//! who acts on their own workspaces only (admins, on anyone's), finds the cluster that holds the
//! workspace and answers from its watch cache. The launch is with deic-dk's create in `create.rs`.

use std::{collections::BTreeMap, sync::Arc};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{keys, names, user::belongs_to},
    policy::culling,
    workspace::info::WorkspaceInfo,
};

use super::Backend;
use crate::{
    backend::{
        cluster_workspaces::{ClusterWorkspaces, Seeker, delete::Deletion},
        request::RequestError,
    },
    io::{auth::Identity, calls::ClusterCalls, catalogue::Item, cluster::ClusterError},
};

/// Activity is recorded at most this often per workspace (or a third of its idle timeout, when
/// shorter): a page that pings on every keystroke costs one write a minute.
const ACTIVITY_WRITE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl<C: ClusterCalls> Backend<C> {
    /// The workspaces of `identity`, or everyone's when an admin asks for `all`.
    pub fn workspaces(&self, identity: &Identity, all: bool) -> Result<Vec<WorkspaceInfo>, RequestError> {
        if all && !identity.admin {
            return Err(RequestError::Forbidden(
                "only members of adminGroups may list every user's workspaces".to_owned(),
            ));
        }
        let now = Timestamp::now();
        let mut workspaces: Vec<WorkspaceInfo> = Vec::new();
        for member in self.members.iter() {
            let pods = if all {
                member.cache.pods()
            } else {
                member.cache.pods_of(&identity.user)
            };
            let state = self.state_of(member);
            for pod in pods {
                let mut view = member.describe(&pod, state.clone(), now);
                self.stopping(member, &pod, &mut view, now);
                workspaces.push(view);
            }
            // Stopped ones have a record and no pod.
            let records = if all {
                member.cache.workspaces()
            } else {
                member.cache.workspaces_of(&identity.user)
            };
            for record in records {
                if member.cache.pod(&record.name_any()).is_none() {
                    workspaces.push(self.record_view(member, &record, now));
                }
            }
        }
        workspaces.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(workspaces)
    }

    /// The workspace `name` of `identity` (any user's, for an admin).
    pub async fn workspace(&self, identity: &Identity, name: &str) -> Result<WorkspaceInfo, RequestError> {
        names::check_pod_name(name)?;
        let now = Timestamp::now();
        let (member, pod) = match self.find_workspace(identity, name).await {
            Ok(found) => found,
            // No pod: stopped, if it has a record.
            Err(not_found) => {
                let (member, record) = self.visible_record(identity, name).ok_or(not_found)?;
                return Ok(self.record_view(member, &record, now));
            }
        };
        let mut view = member.describe(&pod, self.state_of(member), now);
        self.stopping(member, &pod, &mut view, now);
        Ok(view)
    }

    /// Deletes the workspace `name` of `identity` (any user's, for an admin), its record first
    /// (or the controller would make its pod again); returns the uid of the pod being deleted
    /// (or of the record, for a stopped one), for following the delete.
    pub async fn remove(&self, identity: &Identity, name: &str) -> Result<String, RequestError> {
        names::check_pod_name(name)?;
        let mut record_uid = None;
        if let Some((member, record)) = self.visible_record(identity, name) {
            // Its own home goes with it: saved first, else the Workspace is kept; saved, the
            // finalizer that would save it again is taken off.
            member.save_before_delete(&record).await?;
            member.release_home(&record).await?;
            member
                .cluster
                .delete_workspace(name, record.uid().as_deref())
                .await?;
            tracing::info!(workspace = name, user = %identity.user, by = identity.username, "workspace record deleted");
            member.await_record_deleting(&record).await;
            record_uid = record.uid();
        }
        let seeker = Seeker::from(identity);
        // The cluster whose cache shows the name; else each asks its API server (a cache can
        // be behind), those that answer first, so that one away fails the delete only when
        // the others have no such workspace.
        let candidates: Vec<_> = match self.holder_of(name) {
            Some((member, _)) => vec![member],
            None => {
                let mut all: Vec<_> = self.members.iter().collect();
                all.sort_by_key(|m| self.unreachable(m).is_some());
                all
            }
        };
        let mut going = None;
        for member in candidates {
            match member.delete(name, seeker).await? {
                Deletion::None => continue,
                Deletion::Already(pod) => going = Some((member, pod)),
                Deletion::Requested(pod) => {
                    tracing::info!(pod = name, user = %identity.user, by = identity.username, cluster = member.name, "workspace deletion requested");
                    going = Some((member, pod));
                }
            }
            break;
        }
        // Its pod can be gone at the API server already (the garbage collector follows the
        // record's delete at once) while the cache still shows it: that pod is the answer.
        let going = going.or_else(|| self.holder_of(name).filter(|(_, pod)| seeker.sees(pod)));
        if let Some((member, pod)) = going {
            // Answered once the cache shows it going, whichever copy was judged: the delete's
            // stream, opened next, reads the cache, and ended on a pod it still showed ready (a
            // CI run here); a GET right after found it.
            member.await_deleting(&pod).await;
            return Ok(pod.uid().unwrap_or_default());
        }
        record_uid.ok_or_else(|| not_found(identity, name))
    }

    /// Records that `identity` is active in workspace `name`.
    pub async fn activity(&self, identity: &Identity, name: &str) -> Result<(), RequestError> {
        names::check_pod_name(name)?;
        let (member, pod) = self.owned_pod(identity, name)?;
        let now = Timestamp::now();
        let every = culling::lifetimes(&pod, &member.config)
            .ok()
            .and_then(|l| l.idle_timeout)
            .map_or(ACTIVITY_WRITE_EVERY, |idle| (idle / 3).min(ACTIVITY_WRITE_EVERY));
        let recent = pod
            .annotations()
            .get(keys::ANNOTATION_LAST_ACTIVITY)
            .and_then(|t| t.parse::<Timestamp>().ok())
            .is_some_and(|t| now.duration_since(t).as_secs_f64() < every.as_secs_f64());
        if !recent {
            let mark = BTreeMap::from([(keys::ANNOTATION_LAST_ACTIVITY, Some(now.to_string()))]);
            member
                .cluster
                .annotate_pod(&pod, mark)
                .await
                .map_err(|error| gone_or(error, identity, name))?;
        }
        Ok(())
    }

    /// The catalogue entries `identity` may launch.
    pub async fn catalogue(&self, identity: &Identity) -> Vec<Item> {
        self.catalogue.items(identity).await
    }

    /// The uid of workspace `name` that `identity` may follow.
    pub async fn follow(&self, identity: &Identity, name: &str) -> Result<String, RequestError> {
        names::check_pod_name(name)?;
        let (_, pod) = self.find_workspace(identity, name).await?;
        Ok(pod.uid().unwrap_or_default())
    }

    /// `identity`'s workspace `name` (anyone's, for an admin) as a cache shows it, else as an API
    /// server has it.
    async fn find_workspace(
        &self,
        identity: &Identity,
        name: &str,
    ) -> Result<(&ClusterWorkspaces<C>, Arc<Pod>), RequestError> {
        match self.visible_pod(identity, name) {
            Ok(found) => Ok(found),
            Err(not_found) => self.unseen_workspace(identity, name).await?.ok_or(not_found),
        }
    }

    /// `identity`'s workspace `name` (anyone's, for an admin) as the API servers of the reachable
    /// clusters have it, for a name no cache shows: a workspace launched a moment ago through
    /// another replica is not "not found" (the two-replica soak's users, whose requests go to
    /// the replicas in turn, were told so). As a delete does.
    async fn unseen_workspace(
        &self,
        identity: &Identity,
        name: &str,
    ) -> Result<Option<(&ClusterWorkspaces<C>, Arc<Pod>)>, RequestError> {
        for member in self.members.iter() {
            if self.unreachable(member).is_some() {
                continue;
            }
            if let Some(pod) = member.unseen_pod(name, identity.into()).await? {
                return Ok(Some((member, pod)));
            }
        }
        Ok(None)
    }

    /// `identity`'s pod `name`, on whichever cluster holds it; for an admin, anyone's.
    fn visible_pod(
        &self,
        identity: &Identity,
        name: &str,
    ) -> Result<(&ClusterWorkspaces<C>, Arc<Pod>), RequestError> {
        if identity.admin {
            return self.holder_of(name).ok_or_else(|| not_found(identity, name));
        }
        self.owned_pod(identity, name)
    }

    fn owned_pod(
        &self,
        identity: &Identity,
        name: &str,
    ) -> Result<(&ClusterWorkspaces<C>, Arc<Pod>), RequestError> {
        // Someone else's pod is "not found", as if it did not exist: names tell nothing.
        self.holder_of(name)
            .filter(|(_, pod)| belongs_to(pod.as_ref(), &identity.user))
            .ok_or_else(|| not_found(identity, name))
    }
}

fn not_found(identity: &Identity, name: &str) -> RequestError {
    RequestError::NoSuchPod {
        user: identity.user.to_string(),
        pod: name.to_owned(),
    }
}

/// An object gone meanwhile (404, or another of the name: 422 on its uid) is not found.
pub(super) fn gone_or(error: ClusterError, identity: &Identity, name: &str) -> RequestError {
    if error.is_gone() {
        not_found(identity, name)
    } else {
        error.into()
    }
}
