//! The native API's operations on a workspace's record, its `Workspace` resource: stop (the pod
//! goes, the record stays), start (a pod again, under the same name, from the same entry, values
//! and cluster), and how a workspace with its record reads (a stopped one has no pod). A stop and
//! a start only write the record; the controller (`controller.rs`) deletes and makes the pod, for
//! them as for edits made with kubectl, and a start waits for its answer.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, keys, names},
    resource::{
        self, Phase,
        reconcile::{self, owns},
    },
    workspace::{
        info::{self, Stop, WorkspaceInfo},
        manifest::Requester,
        progress::Status,
    },
};

use super::{Backend, native::gone_or};
use crate::{
    backend::{
        cluster_workspaces::{ClusterWorkspaces, Seeker},
        request::RequestError,
    },
    io::{auth::Identity, calls::ClusterCalls, catalogue},
};

/// How long a stop request waits for the leader's controller to decide on it (it takes
/// milliseconds; longer only while no replica leads).
const STOP_DECIDED: std::time::Duration = std::time::Duration::from_secs(10);

impl<C: ClusterCalls> Backend<C> {
    /// The Workspace `name` that `identity` may act on (their own; anyone's for an admin), with
    /// the cluster that holds it.
    pub(super) fn visible_record(
        &self,
        identity: &Identity,
        name: &str,
    ) -> Option<(&ClusterWorkspaces<C>, Arc<resource::Workspace>)> {
        self.members.iter().find_map(|member| {
            member
                .cache
                .workspace(name)
                .filter(|ws| Seeker::from(identity).sees_record(ws))
                .map(|ws| (member, ws))
        })
    }

    /// As [`Backend::visible_record`], else as the reachable clusters' API servers have it: a
    /// workspace launched a moment ago through another replica is not "not found" (as
    /// `unseen_workspace` does for pods). One GET per cluster, for a name no cache holds a
    /// record of.
    pub(super) async fn find_record(
        &self,
        identity: &Identity,
        name: &str,
    ) -> Result<Option<(&ClusterWorkspaces<C>, Arc<resource::Workspace>)>, RequestError> {
        if let Some(found) = self.visible_record(identity, name) {
            return Ok(Some(found));
        }
        for member in self.members.iter() {
            if self.unreachable(member).is_some() {
                continue;
            }
            if let Some(record) = member.unseen_record(name, identity.into()).await? {
                return Ok(Some((member, Arc::new(record))));
            }
        }
        Ok(None)
    }

    /// Stops `identity`'s workspace `name` (reason `user`): its record says so (`spec.started:
    /// false`, why and when), and the leader's controller deletes its pod. Answers the uid of the
    /// pod going, if it had one, for following the stop.
    pub async fn stop(&self, identity: &Identity, name: &str) -> Result<Option<String>, RequestError> {
        names::check_pod_name(name)?;
        let Some((member, workspace)) = self.find_record(identity, name).await? else {
            return Err(self.no_record(identity, name));
        };
        // deic-dk's workspaces have no stopped state: deleted, not stopped.
        if workspace.spec.is_compat() {
            return Err(RequestError::NotStoppable(name.to_owned()));
        }
        if workspace.spec.started {
            self.request_stop(member, &workspace, identity).await?;
        }
        let Some(pod) = member.cache.pod(name).filter(|pod| owns(&workspace, pod)) else {
            return Ok(None);
        };
        // The controller deletes it (the one writer of a Workspace's pod); the answer waits,
        // briefly, until the cache shows it going, so that a request right after sees it.
        if pod.metadata.deletion_timestamp.is_none() {
            member.await_deleting(&pod).await;
        }
        Ok(pod.uid())
    }

    /// Asks the leader's controller to stop the started `workspace` (its `outfit.dev/stop-requested`)
    /// and waits for the decision: stopped, or refused past `maxStoppedWorkspacesPerUser`, which
    /// the controller counts in one process for every replica, so two stops at once can't both
    /// pass it (issue 46: both did). Without a decision within [`STOP_DECIDED`] (no leader), the
    /// request stands and is answered as taken.
    async fn request_stop(
        &self,
        member: &ClusterWorkspaces<C>,
        workspace: &resource::Workspace,
        identity: &Identity,
    ) -> Result<(), RequestError> {
        let (name, uid) = (workspace.name_any(), workspace.uid());
        let at = Timestamp::now();
        // The request only: a stop written here could pass the limit, and `spec.started` written
        // here could undo a cull's stop made meanwhile.
        member
            .cluster
            .annotate_workspace(
                &name,
                uid.as_deref().unwrap_or_default(),
                reconcile::stop_request_marks(at),
            )
            .await
            .map_err(|error| gone_or(error, identity, &name))?;
        let deadline = tokio::time::Instant::now() + STOP_DECIDED;
        let decided = member
            .cache
            .wait_for(deadline, |cache| {
                let record = cache.workspace(&name).filter(|record| record.uid() == uid)?;
                if !record.spec.started {
                    return Some(Ok(()));
                }
                reconcile::stop_refusal(&record, at)
                    .map(|why| Err(RequestError::refused("LimitExceeded", why)))
            })
            .await;
        match &decided {
            Some(Ok(())) => {
                tracing::info!(workspace = name, user = %identity.user, by = identity.username, "workspace stopped")
            }
            Some(Err(error)) => {
                tracing::info!(workspace = name, user = %identity.user, %error, "stop refused")
            }
            None => {
                tracing::info!(workspace = name, user = %identity.user, "stop requested; no controller has decided yet")
            }
        }
        decided.unwrap_or(Ok(()))
    }

    /// Starts `identity`'s stopped workspace `name`: `spec.started: true`, and the leader's
    /// controller makes a pod under its name again, from its entry, values and cluster (refused
    /// as a launch is: the entry's groups here, the limits there); a refused start leaves it
    /// stopped; with `restore`, its home is made from that snapshot of the owner's. Answers the
    /// uid of the new pod, for following it.
    pub async fn start(
        &self,
        identity: &Identity,
        name: &str,
        restore: Option<&str>,
    ) -> Result<Option<String>, RequestError> {
        names::check_pod_name(name)?;
        let Some((member, workspace)) = self.find_record(identity, name).await? else {
            return Err(self.no_record(identity, name));
        };
        if workspace.spec.started {
            // Started already (or starting): its pod, if it has one yet.
            return Ok(member
                .cache
                .pod(name)
                .filter(|pod| owns(&workspace, pod))
                .and_then(|pod| pod.uid()));
        }
        let entry = self
            .catalogue
            .entry(&workspace.spec.entry)
            .ok_or_else(|| RequestError::UnknownManifest(workspace.spec.entry.clone()))?;
        if !catalogue::may_launch(entry, identity) {
            return Err(RequestError::Forbidden(format!(
                "manifest {:?} is for members of {} only",
                entry.name,
                entry.groups.join(", ")
            )));
        }
        // A start right after its stop waits (briefly) for the stop's pod to go: the controller
        // deletes it, and a kubelet ends it within its grace period.
        let deadline = tokio::time::Instant::now() + crate::io::cache::OWN_WRITE_VISIBLE;
        let gone = member
            .cache
            .wait_for(deadline, |cache| cache.pod(name).is_none().then_some(()))
            .await;
        if gone.is_none()
            && let Some(pod) = member.cache.pod(name)
        {
            return Err(RequestError::Busy(format!(
                "workspace {name:?} is still stopping (its pod {} is going); start it once it is stopped",
                pod.name_any()
            )));
        }
        // A snapshot that can't be used refuses the start before anything changes.
        if let Some(named) = restore {
            member
                .named_snapshot(&model::user::UserId::parse(&workspace.spec.owner)?, named)
                .await?;
        }
        let uid = workspace.uid().unwrap_or_default();
        let mut marks = reconcile::start_marks(restore);
        // The owner's groups as they are now; an admin's start keeps the owner's last.
        if identity.user.as_str() == workspace.spec.owner {
            let groups = model::user::recorded_groups(&identity.groups);
            marks.insert(
                keys::ANNOTATION_USER_GROUPS,
                Some(groups).filter(|g| !g.is_empty()),
            );
        }
        let started = member
            .cluster
            .set_started(name, &uid, true, marks)
            .await
            .map_err(|error| gone_or(error, identity, name))?;
        tracing::info!(workspace = name, user = %identity.user, by = identity.username, "workspace start requested");
        let made = self.await_made(member, &started).await;
        if let Err(error) = &made {
            // Refused: it stays stopped, as it was: why and when, from the stop's own marks (the
            // status keeps whole seconds only, and a stop at another time would be another stop,
            // whose home the controller would snapshot again).
            let stop = reconcile::stop_request(&workspace, Timestamp::now());
            let undone = member
                .cluster
                .set_started(name, &uid, false, reconcile::stop_marks(stop.reason, stop.at.0))
                .await;
            if let Err(undo) = undone {
                tracing::warn!(workspace = name, %undo, "a refused start could not be undone");
            }
            tracing::info!(workspace = name, user = %identity.user, %error, "start refused");
        }
        made
    }

    /// Waits for the leader's controller to make the pod of `started` (a Workspace a launch or a
    /// start just wrote): the new pod's uid, or the controller's refusal as the API's error. The
    /// controller is the one writer of the pod; the request only watches. Past `timeoutCreate` (a
    /// leader away, or a passing failure it retries) it is under way without a pod yet: `None`.
    pub(super) async fn await_made(
        &self,
        member: &ClusterWorkspaces<C>,
        started: &resource::Workspace,
    ) -> Result<Option<String>, RequestError> {
        let name = started.name_any();
        let generation = started.metadata.generation.unwrap_or(0);
        let deadline = tokio::time::Instant::now() + member.config.timeout_create;
        let outcome = member
            .cache
            .wait_for(deadline, |cache| {
                // The cache's own pod, not this process's write of it: the answer must find
                // what a progress stream opened next will follow.
                if let Some(pod) = cache.pod(&name).filter(|pod| owns(started, pod)) {
                    return Some(Ok(pod.uid()));
                }
                // (Not in the cache yet is not gone: the cache may be behind the API server.)
                let record = cache.workspace(&name)?;
                if record.metadata.uid != started.metadata.uid {
                    return Some(Err(RequestError::NoSuchPod {
                        user: started.spec.owner.clone(),
                        pod: name.clone(),
                    }));
                }
                reconcile::refusal_at(&record, generation)
                    .map(|(reason, message)| Err(RequestError::refused(reason, message)))
            })
            .await;
        outcome.unwrap_or(Ok(None))
    }

    /// Makes the pod of the started `workspace` on `member` (its cluster), as its owner's
    /// launch would: the entry's manifest fetched, read with the record's values, the owner's
    /// limits checked, the pod under the record's name, owned by it; its home made from the
    /// snapshot `restore` when one is named.
    pub(super) async fn start_pod(
        &self,
        member: &ClusterWorkspaces<C>,
        workspace: &resource::Workspace,
        restore: Option<&str>,
    ) -> Result<Pod, RequestError> {
        if let Some(cluster) = &workspace.spec.cluster
            && *cluster != member.name
        {
            return Err(RequestError::WrongCluster(format!(
                "the Workspace is on cluster {}, its spec says {cluster}",
                member.name
            )));
        }
        // deic-dk's create_pod names its manifest; a launch, its catalogue entry.
        let url = match &workspace.spec.manifest_url {
            Some(url) => url.clone(),
            None => self
                .catalogue
                .entry(&workspace.spec.entry)
                .ok_or_else(|| RequestError::UnknownManifest(workspace.spec.entry.clone()))?
                .url
                .clone(),
        };
        let user = model::user::UserId::parse(&workspace.spec.owner)?;
        let silo_ip = workspace
            .spec
            .silo_ip
            .clone()
            .unwrap_or_else(|| member.config.testing_host.to_string());
        let requester = Requester {
            user: &user,
            groups: workspace
                .annotations()
                .get(keys::ANNOTATION_USER_GROUPS)
                .map(String::as_str),
            silo_ip: &silo_ip,
            restore,
        };
        let values = &workspace.spec.values;
        let created = self.create(member, requester, &url, values, workspace).await?;
        Ok(created.pod)
    }

    /// Why there is no record `name` for `identity`: a pod of theirs without one can't stop;
    /// anything else is not found, as someone else's is.
    fn no_record(&self, identity: &Identity, name: &str) -> RequestError {
        let own_pod = self
            .holder_of(name)
            .is_some_and(|(_, pod)| Seeker::from(identity).sees(&pod));
        if own_pod {
            RequestError::NotStoppable(name.to_owned())
        } else {
            RequestError::NoSuchPod {
                user: identity.user.to_string(),
                pod: name.to_owned(),
            }
        }
    }

    /// The workspace `record` on `member`, which has no pod, as the native API shows it.
    pub(super) fn record_view(
        &self,
        member: &ClusterWorkspaces<C>,
        record: &resource::Workspace,
        now: Timestamp,
    ) -> WorkspaceInfo {
        let status = record.status.as_ref();
        let stopped = status
            .and_then(|s| s.stopped.clone())
            .unwrap_or_else(|| reconcile::stop_request(record, now));
        let mut view = info::stopped_workspace(
            &record.name_any(),
            &record.spec.owner,
            &record.spec.entry,
            record.creation_timestamp().map(|t| t.0),
            self.state_of(member),
            Stop {
                at: stopped.at.0,
                reason: stopped.reason.as_str(),
            },
            now,
        );
        if record.spec.started {
            view.stopped = None;
            let condition = status.and_then(|s| s.conditions.first());
            if status.and_then(|s| s.phase) == Some(Phase::Failed) {
                view.status = Status::Failed;
                view.message = condition.map(|c| c.message.clone()).unwrap_or_default();
            } else {
                view.status = Status::Creating;
                view.message = "starting: its pod is to be made".to_owned();
            }
        }
        view
    }

    /// `view` of a pod whose record is not started: stopping, since when and why.
    pub(super) fn stopping(
        &self,
        member: &ClusterWorkspaces<C>,
        pod: &Pod,
        view: &mut WorkspaceInfo,
        now: Timestamp,
    ) {
        let Some(record) = reconcile::record_of(pod).and_then(|owner| member.cache.workspace(&owner.name))
        else {
            return;
        };
        if record.spec.started || !owns(&record, pod) {
            return;
        }
        let stopped = reconcile::stop_request(&record, now);
        view.status = Status::Stopping;
        view.message = "stopping: its pod is going".to_owned();
        view.stopped = Some(Stop {
            at: stopped.at.0,
            reason: stopped.reason.as_str(),
        });
    }
}
