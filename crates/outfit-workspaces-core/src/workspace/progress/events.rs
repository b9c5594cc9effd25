//! Reading the Events about a pod: when one happened, the latest of some reasons, and the last
//! warning from the cluster. At the bottom of [`report`](super), so the steps and the report both
//! read Events from here.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;

use crate::model::keys::REPORTER;

/// When an Event last happened.
pub fn event_time(event: &Event) -> Option<Timestamp> {
    event
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The last Warning Event from the cluster among `events`, as "Reason: message".
pub fn last_warning(events: &[Arc<Event>]) -> Option<String> {
    events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.reporting_component.as_deref() != Some(REPORTER))
        .max_by_key(|e| event_time(e))
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default()
            )
        })
}

/// What the kubelet said among `events` that no retry of its will change, as "Reason: message":
/// a sandbox the node's runtime can never make. The kubelet retries it for ever, so the pod would
/// sit in ContainerCreating until the create deadline, saying nothing of why. Only a user
/// namespace asked of a runtime without them is known to be such: the kubelet says "runtime does
/// not support user namespaces" of a node's runtime (containerd before 2.0) and "RuntimeClass
/// handler \"…\" does not support user namespaces" of a pod's RuntimeClass whose handler has none
/// (runc before 1.2, a sandboxed runtime). Other sandbox failures (the network not ready yet, say)
/// pass.
pub fn permanent_failure(events: &[Arc<Event>]) -> Option<String> {
    const NO_USER_NAMESPACES: &str = "does not support user namespaces";
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedCreatePodSandBox"))
        .find(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.contains(NO_USER_NAMESPACES))
        })
        .map(|e| {
            format!(
                "the node's container runtime cannot run it: it asks for a user namespace of its own \
                 (hostUsers: false), which the runtime does not support (FailedCreatePodSandBox: {})",
                e.message.as_deref().unwrap_or_default()
            )
        })
}

/// The latest Event among `events` with one of `reasons`.
pub(super) fn latest<'a>(events: &'a [Arc<Event>], reasons: &[&str]) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref().is_some_and(|r| reasons.contains(&r)))
        .max_by_key(|e| event_time(e))
        .map(AsRef::as_ref)
}
