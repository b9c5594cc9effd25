//! Culling: a started workspace past its lifetime or idle too long is stopped or deleted, saying
//! why. Decided on the cache's copy, confirmed on the API server's.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{config::CullAction, keys, user::owner_of},
    policy::{
        culling::{self, Cull},
        limits,
    },
    resource::reconcile::{self, record_of},
};

use super::Lifecycle;
use crate::io::calls::ClusterCalls;

impl<C: ClusterCalls> Lifecycle<C> {
    /// Culls `seen` (the cache's copy) if the API server's copy is still due: an Event and a mark
    /// say why, then its pod is deleted; its Workspace, if it has one, is stopped
    /// (`cullAction: stop`, saying why) or deleted.
    pub(super) async fn cull(&self, seen: &Pod) {
        let Some((pod, cull)) = self.still_due(seen).await else {
            return;
        };
        let name = pod.name_any();
        let why = cull.to_string();
        // A user at maxStoppedWorkspacesPerUser (counted on this cluster) loses the culled one.
        let stopped = owner_of(&pod).map_or(0, |owner| self.cache.stopped_of(owner));
        let at_stopped_limit = limits::check_stopped(&self.config.limits, stopped).is_err();
        let delete = match culling::action(&pod, &self.config) {
            Ok(CullAction::Delete) => true,
            Ok(CullAction::Stop) => at_stopped_limit,
            // Refused at create: never met here; stopping loses nothing.
            Err(_) => false,
        };
        tracing::info!(
            pod = name,
            user = owner_of(&pod),
            reason = cull.reason(),
            why,
            "culling"
        );
        // The mark first, as in `fail`: once it is made, a survivor only finishes the stop or the
        // delete (`Next::Remove`), so the Event and the count are made once.
        let mark = BTreeMap::from([(keys::ANNOTATION_CULLED, Some(why.clone()))]);
        if let Err(error) = self.cluster.annotate_pod(&pod, mark).await
            && !error.is_gone()
        {
            tracing::warn!(%error, "could not mark the culled pod");
        }
        // Said and counted before the stop: the controller may delete the pod the moment its
        // Workspace is stopped, and whoever sees it gone must find why.
        self.cluster.event(&pod, false, "Culled", why).await;
        self.metrics.culled(cull.reason());
        // Stopped, its pod is the controller's to delete; deleted, the record takes nothing.
        let stopped = if delete {
            self.delete_record(&pod).await;
            false
        } else {
            self.stop_record(&pod, reconcile::cull_reason(&cull)).await
        };
        if !stopped {
            self.remove(&pod).await;
        }
    }

    /// The API server's copy of `seen` and its cull, if it is still due one. A cull is not
    /// undone, and the cache can be behind the activity recorded since (its watch slowed by a
    /// loaded API server): the one read per cull is cheap beside stopping an active workspace.
    /// A pod gone or made anew is left alone; a failed read waits for the next pass.
    async fn still_due(&self, seen: &Pod) -> Option<(Pod, Cull)> {
        let name = seen.name_any();
        let fresh = match self.cluster.get_pod(&name).await {
            Ok(Some(fresh)) if fresh.uid() == seen.uid() => fresh,
            Ok(_) => return None,
            Err(error) => {
                tracing::warn!(pod = name, %error, "could not read the pod to cull; retrying on the next pass");
                return None;
            }
        };
        let Some(cull) = culling::due(&fresh, &self.config, Timestamp::now()) else {
            tracing::debug!(pod = name, "not culled: active since the cache's copy");
            return None;
        };
        Some((fresh, cull))
    }

    /// Deletes the Workspace `pod` belongs to, if any (`cullAction: delete`).
    async fn delete_record(&self, pod: &Pod) {
        let Some(owner) = record_of(pod) else { return };
        if let Err(error) = self.cluster.delete_workspace(&owner.name, Some(&owner.uid)).await
            && !error.is_conflict()
        {
            tracing::warn!(workspace = owner.name, %error, "could not delete the culled workspace's record");
        }
    }
}
