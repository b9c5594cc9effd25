//! The steps of a start and of a delete, each read from what the cluster shows: the pod's
//! conditions and container statuses, its storage claim, and the kubelet's and scheduler's Events.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, PersistentVolumeClaim, Pod};

use super::{
    events::{event_time, latest},
    phase::{self, condition, storage_claim_of},
    types::{Step, StepState},
};
use crate::model::keys;
use StepState::{Active, Done, Pending, Skipped};

fn step(name: &'static str, state: StepState, message: impl Into<String>, at: Option<Timestamp>) -> Step {
    Step {
        name,
        state,
        message: message.into(),
        at,
    }
}

/// The step `name` after `previous`: pending until `previous` is done, then what `next` says.
fn after(previous: &Step, name: &'static str, next: impl FnOnce() -> Step) -> Step {
    if previous.state == Done {
        next()
    } else {
        step(name, Pending, "", None)
    }
}

fn container_statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

fn started(container: &ContainerStatus) -> bool {
    container
        .state
        .as_ref()
        .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
}

/// The create steps of a pod that is not being deleted. Each step is done from what the cluster
/// shows, so a step the cluster skipped past (an Event expired, an image already on the node)
/// is done too.
pub(super) fn create_steps(
    pod: &Pod,
    claim: Option<&PersistentVolumeClaim>,
    events: &[Arc<Event>],
) -> Vec<Step> {
    let storage = storage(pod, claim);
    let scheduling = scheduling(pod);
    let image_pull = after(&scheduling, "image pull", || image_pull(pod, events));
    let containers = after(&image_pull, "containers", || containers(pod));
    let readiness = after(&containers, "readiness", || readiness(pod));
    let started_at = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ANNOTATION_STARTED))
        .and_then(|t| t.parse::<Timestamp>().ok());
    let services = match (readiness.state, started_at) {
        (_, Some(at)) => step("services", Done, "Services, Ingress and tokens made", Some(at)),
        (Done, None) => step("services", Active, "making Services, Ingress and tokens", None),
        _ => step("services", Pending, "", None),
    };
    let mut steps = vec![storage, scheduling, image_pull, containers, readiness, services];
    // A pod the backend saw through to the end is done whatever its status says now.
    if started_at.is_some() {
        for step in steps.iter_mut().filter(|s| s.state != Skipped) {
            step.state = Done;
        }
    }
    steps
}

fn storage(pod: &Pod, claim: Option<&PersistentVolumeClaim>) -> Step {
    let Some(name) = storage_claim_of(pod) else {
        return step("storage", Skipped, "", None);
    };
    let phase = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    if phase == "Bound" {
        step("storage", Done, format!("claim {name} bound"), None)
    } else {
        step("storage", Active, format!("claim {name} is {phase}"), None)
    }
}

fn scheduling(pod: &Pod) -> Step {
    let scheduled = condition(pod, "PodScheduled");
    if scheduled.is_some_and(|c| c.status == "True") {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("a node");
        let at = scheduled
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        step("scheduling", Done, format!("on {node}"), at)
    } else {
        let message = scheduled
            .and_then(|c| c.message.clone())
            .unwrap_or_else(|| "waiting for a node".to_owned());
        step("scheduling", Active, message, None)
    }
}

fn image_pull(pod: &Pod, events: &[Arc<Event>]) -> Step {
    let containers = container_statuses(pod);
    let failure = containers.iter().find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        phase::IMAGE_REASONS.contains(&reason).then(|| {
            let message = waiting.message.as_deref().unwrap_or_default();
            format!("container {}: {reason}: {message}", c.name)
        })
    });
    if let Some(failure) = failure {
        return step("image pull", Active, failure, None);
    }
    let pulled_all =
        !containers.is_empty() && containers.iter().all(|c| started(c) || !c.image_id.is_empty());
    if pulled_all {
        let pulled = latest(events, &["Pulled"]);
        let message = pulled
            .and_then(|e| e.message.clone())
            .unwrap_or_else(|| "images ready".to_owned());
        return step("image pull", Done, message, pulled.and_then(event_time));
    }
    let message = latest(events, &["Pulling"])
        .and_then(|e| e.message.clone())
        .unwrap_or_else(|| "pulling images".to_owned());
    step("image pull", Active, message, None)
}

fn containers(pod: &Pod) -> Step {
    let containers = container_statuses(pod);
    let expected = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let running = containers.iter().filter(|c| started(c)).count();
    if running >= expected.max(1) {
        let last_start = containers
            .iter()
            .filter_map(|c| {
                c.state
                    .as_ref()?
                    .running
                    .as_ref()?
                    .started_at
                    .as_ref()
                    .map(|t| t.0)
            })
            .max();
        return step(
            "containers",
            Done,
            format!("{running} of {expected} started"),
            last_start,
        );
    }
    let waiting = containers.iter().find_map(|c| {
        let reason = c.state.as_ref()?.waiting.as_ref()?.reason.as_deref();
        Some(format!("container {}: {}", c.name, reason.unwrap_or("waiting")))
    });
    let message = waiting.unwrap_or_else(|| format!("{running} of {expected} started"));
    step("containers", Active, message, None)
}

fn readiness(pod: &Pod) -> Step {
    if phase::is_ready(pod) {
        let at = condition(pod, "Ready")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        step("readiness", Done, "ready", at)
    } else {
        step("readiness", Active, "waiting for the readiness checks", None)
    }
}

/// The steps of a delete: the containers stop, then the pod is gone.
pub(super) fn delete_steps(pod: Option<&Pod>) -> Vec<Step> {
    let Some(pod) = pod else {
        return vec![
            step("stopping", Done, "stopped", None),
            step("gone", Done, "the pod and what it owns are gone", None),
        ];
    };
    let still_running = container_statuses(pod)
        .iter()
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .count();
    if still_running == 0 {
        vec![
            step("stopping", Done, "stopped", None),
            step("gone", Active, "waiting for the pod to be removed", None),
        ]
    } else {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
        vec![
            step(
                "stopping",
                Active,
                format!("{still_running} container(s) stopping (grace period {grace}s)"),
                None,
            ),
            step("gone", Pending, "", None),
        ]
    }
}
