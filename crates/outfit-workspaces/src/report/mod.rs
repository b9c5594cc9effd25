//! A workspace's progress as the progress stream sends it: each step of a start (storage bound,
//! scheduled, image pulled, containers started, ready, services made) or of a delete, with its
//! state, when it finished and what the cluster said, read from the pod, its storage claim and the
//! Events about it. Pure: the stream and the long polls read the cache and ask here.

mod steps;

use self::steps::{create_steps, delete_steps};

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use serde::Serialize;

use crate::{info, keys::REPORTER, progress::failure};

/// Where a workspace stands as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Its start has not finished.
    Creating,
    /// It is ready with its Services and tokens.
    Ready,
    /// Its start failed (it is being removed).
    Failed,
    /// It is being deleted.
    Deleting,
    /// It is gone.
    Deleted,
}

impl Status {
    /// Whether nothing more will happen: the stream ends here.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Ready | Self::Failed | Self::Deleted)
    }

    /// The name used in answers and as the final event's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Creating => "creating",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Deleting => "deleting",
            Self::Deleted => "deleted",
        }
    }
}

/// Where one step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepState {
    /// Not started: an earlier step is not done.
    Pending,
    /// Under way.
    Active,
    /// Finished.
    Done,
    /// The start failed here.
    Failed,
    /// Not needed for this workspace (no storage, say).
    Skipped,
}

/// One step of a start or a delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The step's name.
    pub name: &'static str,
    /// Where it stands.
    pub state: StepState,
    /// What the cluster says about it; "" when nothing.
    pub message: String,
    /// When it finished, when the cluster says.
    pub at: Option<Timestamp>,
}

/// A workspace's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The workspace (pod) name.
    pub workspace: String,
    /// Where it stands as a whole.
    pub status: Status,
    /// How far, 0 to 100.
    pub percent: u8,
    /// The first step not finished; `None` once everything is.
    pub phase: Option<&'static str>,
    /// What is happening now, or why it failed.
    pub message: String,
    /// Every step, in order.
    pub steps: Vec<Step>,
    /// The last Warning Event about the pod from the cluster (not from the backend).
    pub warning: Option<String>,
}

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

/// The latest Event among `events` with one of `reasons`.
fn latest<'a>(events: &'a [Arc<Event>], reasons: &[&str]) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref().is_some_and(|r| reasons.contains(&r)))
        .max_by_key(|e| event_time(e))
        .map(AsRef::as_ref)
}

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
        let status = if info::progress(pod) == info::Progress::Settled {
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
