//! Where a workspace's start or delete stands, read from its pod, its storage claim and the Events
//! about it. Pure: the lifecycle, the stream and the long polls read the cache and ask here.
//!
//! [`phase`] reads the pod's status once for everyone: its stage (creating, deleting, settled),
//! readiness, the phase a stuck start is in, its deadline and failure. The rest is the progress
//! report the stream sends: each step of a start (storage bound, scheduled, image pulled,
//! containers started, ready, services made) or of a delete, with its state, when it finished and
//! what the cluster said (`steps`, `events`, `types`), put together here.

mod events;
pub mod phase;
mod steps;
pub(crate) mod types;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};

use self::steps::{create_steps, delete_steps};
pub use self::{
    events::{event_time, last_warning, permanent_failure},
    phase::{
        IMAGE_REASONS, Phase, Stage, deadline, failure, has_ended, is_ready, stage, storage_claim_of, stuck,
    },
    types::{Report, Status, Step, StepState},
};

/// The progress of `pod` (called `name`), with its storage `claim` (when it mounts one) and the
/// Events about it. `None` for `pod` means it is gone: `deleted`.
pub fn report(
    name: &str,
    pod: Option<&Pod>,
    claim: Option<&PersistentVolumeClaim>,
    events: &[Arc<Event>],
) -> Report {
    let warning = last_warning(events);
    let Some(pod) = pod else {
        return finish(name, Status::Deleted, delete_steps(None), warning);
    };
    if pod.metadata.deletion_timestamp.is_some() && failure(pod).is_none() {
        return finish(name, Status::Deleting, delete_steps(Some(pod)), warning);
    }
    let mut steps = create_steps(pod, claim, events);
    let Some(reason) = failure(pod) else {
        let status = if stage(pod) == Stage::Settled {
            Status::Ready
        } else {
            Status::Creating
        };
        return finish(name, status, steps, warning);
    };
    let named = reason.split(':').next().unwrap_or_default();
    let unfinished = |s: &Step| !matches!(s.state, StepState::Done | StepState::Skipped);
    // The step the failure names ("readiness" covers the containers starting too); for a failure
    // before the pod existed (fetch, admission) or a name unknown here, the first unfinished one.
    let index = steps
        .iter()
        .position(|s| unfinished(s) && (s.name == named || (named == "readiness" && s.name == "containers")))
        .or_else(|| steps.iter().position(unfinished))
        .unwrap_or(steps.len() - 1);
    steps[index].state = StepState::Failed;
    steps[index].message = reason.to_owned();
    for step in &mut steps[index + 1..] {
        step.state = StepState::Pending;
    }
    let phase = steps[index].name;
    let mut report = finish(name, Status::Failed, steps, warning);
    report.phase = Some(phase);
    report.message = reason.to_owned();
    report
}

fn finish(name: &str, status: Status, steps: Vec<Step>, warning: Option<String>) -> Report {
    let finished = steps
        .iter()
        .filter(|s| matches!(s.state, StepState::Done | StepState::Skipped))
        .count();
    let active = steps.iter().any(|s| s.state == StepState::Active);
    let percent = match status {
        Status::Ready | Status::Deleted => 100,
        _ => ((finished * 2 + usize::from(active)) * 100 / (steps.len() * 2)).min(99) as u8,
    };
    let current = steps
        .iter()
        .find(|s| !matches!(s.state, StepState::Done | StepState::Skipped));
    let message = match status {
        Status::Ready => "ready".to_owned(),
        Status::Deleted => "deleted".to_owned(),
        _ => current.map(|s| s.message.clone()).unwrap_or_default(),
    };
    Report {
        workspace: name.to_owned(),
        status,
        percent,
        phase: current.map(|s| s.name),
        message,
        steps,
        warning,
    }
}

#[cfg(test)]
mod tests;
