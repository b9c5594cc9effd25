//! The backend's Events: published about a pod or a Workspace (`kubectl describe` shows them), and
//! the last Warning others published about a pod, which a failed start's reason quotes.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::{
    Resource,
    api::ListParams,
    runtime::events::{Event, EventType},
};
use outfit_workspaces_core::resource;

use super::{Cluster, REPORTER, truncate};

impl Cluster {
    /// Publishes an Event about `pod` (`kubectl describe pod` shows it).
    pub async fn event(&self, pod: &Pod, warning: bool, reason: &str, note: String) {
        self.publish(pod.object_ref(&()), warning, reason, note).await;
    }

    /// Publishes an Event about `workspace` (`kubectl describe workspace` shows it).
    pub async fn workspace_event(&self, workspace: &resource::Workspace, reason: &str, note: String) {
        self.publish(workspace.object_ref(&()), false, reason, note).await;
    }

    async fn publish(&self, reference: ObjectReference, warning: bool, reason: &str, note: String) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(truncate(note, 1024)),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, object = reference.name, reason, "could not publish an Event");
        }
    }

    /// The newest Warning event about the pod with `uid`, as "Reason: message".
    pub async fn last_warning(&self, uid: &str) -> Option<String> {
        let params = ListParams::default().fields(&format!("involvedObject.uid={uid},type=Warning"));
        let events = self.events.list(&params).await.ok()?;
        events
            .items
            .into_iter()
            .filter(|e| e.reporting_component.as_deref() != Some(REPORTER))
            .max_by_key(|e| {
                e.last_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .or(e.event_time.as_ref().map(|t| t.0))
                    .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
            })
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default()
                )
            })
    }
}
