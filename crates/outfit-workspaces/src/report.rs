//! A workspace's progress as the progress stream sends it: each step of a start (storage bound,
//! scheduled, image pulled, containers started, ready, services made) or of a delete, with its
//! state, when it finished and what the cluster said, read from the pod, its storage claim and the
//! Events about it. Pure: the stream and the long polls read the cache and ask here.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, PersistentVolumeClaim, Pod};
use serde::Serialize;

use crate::{
    info, keys,
    keys::REPORTER,
    progress::{self, failure, storage_claim_of},
};

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

/// The steps of a start, in order.
pub const CREATE_STEPS: [&str; 6] = [
    "storage",
    "scheduling",
    "image pull",
    "containers",
    "readiness",
    "services",
];

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

fn step(name: &'static str, state: StepState, message: impl Into<String>, at: Option<Timestamp>) -> Step {
    Step {
        name,
        state,
        message: message.into(),
        at,
    }
}

/// The create steps of a pod that is not being deleted. Each step is done from what the cluster
/// shows, so a step the cluster skipped past (an Event expired, an image already on the node)
/// is done too.
fn create_steps(pod: &Pod, claim: Option<&PersistentVolumeClaim>, events: &[Arc<Event>]) -> Vec<Step> {
    use StepState::{Active, Done, Pending, Skipped};
    let status = pod.status.as_ref();
    let condition = |kind: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == kind))
    };
    let containers: &[ContainerStatus] = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let expected = pod.spec.as_ref().map_or(0, |s| s.containers.len());

    let storage = match (storage_claim_of(pod), claim) {
        (None, _) => step("storage", Skipped, "", None),
        (Some(name), Some(claim))
            if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") =>
        {
            step("storage", Done, format!("claim {name} bound"), None)
        }
        (Some(name), claim) => {
            let phase = claim
                .and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Pending");
            step("storage", Active, format!("claim {name} is {phase}"), None)
        }
    };

    let scheduled = condition("PodScheduled");
    let scheduling = if scheduled.is_some_and(|c| c.status == "True") {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("a node");
        step(
            "scheduling",
            Done,
            format!("on {node}"),
            scheduled
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
        )
    } else {
        let message = scheduled
            .and_then(|c| c.message.clone())
            .unwrap_or_else(|| "waiting for a node".to_owned());
        step("scheduling", Active, message, None)
    };

    let image_failure = containers.iter().find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        progress::IMAGE_REASONS.contains(&reason).then(|| {
            format!(
                "container {}: {reason}: {}",
                c.name,
                waiting.message.as_deref().unwrap_or_default()
            )
        })
    });
    let started = |c: &ContainerStatus| {
        c.state
            .as_ref()
            .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    };
    let pulled_all = !containers.is_empty()
        && containers.iter().all(|c| started(c) || !c.image_id.is_empty())
        && image_failure.is_none();
    let pulled_event = latest(events, &["Pulled"]);
    let image_pull = if scheduling.state != Done {
        step("image pull", Pending, "", None)
    } else if pulled_all {
        let message = pulled_event
            .and_then(|e| e.message.clone())
            .unwrap_or_else(|| "images ready".to_owned());
        step("image pull", Done, message, pulled_event.and_then(event_time))
    } else if let Some(failure) = image_failure {
        step("image pull", Active, failure, None)
    } else {
        let message = latest(events, &["Pulling"])
            .and_then(|e| e.message.clone())
            .unwrap_or_else(|| "pulling images".to_owned());
        step("image pull", Active, message, None)
    };

    let running = containers.iter().filter(|c| started(c)).count();
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
    let containers_step = if image_pull.state != Done {
        step("containers", Pending, "", None)
    } else if running >= expected.max(1) {
        step(
            "containers",
            Done,
            format!("{running} of {expected} started"),
            last_start,
        )
    } else {
        let waiting = containers.iter().find_map(|c| {
            let w = c.state.as_ref()?.waiting.as_ref()?;
            Some(format!(
                "container {}: {}",
                c.name,
                w.reason.as_deref().unwrap_or("waiting")
            ))
        });
        step(
            "containers",
            Active,
            waiting.unwrap_or_else(|| format!("{running} of {expected} started")),
            None,
        )
    };

    let ready = condition("Ready");
    let readiness = if containers_step.state != Done {
        step("readiness", Pending, "", None)
    } else if progress::is_ready(pod) {
        step(
            "readiness",
            Done,
            "ready",
            ready.and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0),
        )
    } else {
        step("readiness", Active, "waiting for the readiness checks", None)
    };

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
    let mut steps = vec![
        storage,
        scheduling,
        image_pull,
        containers_step,
        readiness,
        services,
    ];
    // A pod the backend saw through to the end is done whatever its status says now.
    if started_at.is_some() {
        for step in &mut steps {
            if step.state != Skipped {
                step.state = Done;
            }
        }
    }
    steps
}

/// The steps of a delete: the containers stop, then the pod is gone.
fn delete_steps(pod: Option<&Pod>) -> Vec<Step> {
    use StepState::{Active, Done, Pending};
    let Some(pod) = pod else {
        return vec![
            step("stopping", Done, "stopped", None),
            step("gone", Done, "the pod and what it owns are gone", None),
        ];
    };
    let containers = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let still_running = containers
        .iter()
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .count();
    let requested = pod.metadata.deletion_timestamp.as_ref().map(|t| t.0);
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
                requested,
            ),
            step("gone", Pending, "", None),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotations: serde_json::Value, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "ws", "uid": "u1", "annotations": annotations},
            "spec": {"containers": [{"name": "main", "image": "x"}], "nodeName": "node-1",
                     "volumes": [{"name": "sciencedata", "persistentVolumeClaim": {"claimName": "c"}}]},
            "status": status,
        }))
        .unwrap()
    }

    fn claim(phase: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "status": {"phase": phase}})).unwrap()
    }

    fn event(reason: &str, kind: &str, message: &str, at: &str) -> Arc<Event> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("e-{reason}")}, "involvedObject": {"uid": "u1"},
                "reason": reason, "type": kind, "message": message, "lastTimestamp": at,
            }))
            .unwrap(),
        )
    }

    const CREATING: &str = "2026-01-01T00:01:30Z";

    fn states(report: &Report) -> Vec<(&str, StepState)> {
        report.steps.iter().map(|s| (s.name, s.state)).collect()
    }

    #[test]
    fn a_new_pod_waits_for_its_storage_and_a_node() {
        let pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: CREATING}), json!({}));
        let report = report("ws", Some(&pod), Some(&claim("Pending")), &[]);
        assert_eq!(report.status, Status::Creating);
        assert_eq!(report.phase, Some("storage"));
        assert_eq!(report.message, "claim c is Pending");
        assert_eq!(report.steps[1].state, StepState::Active);
        assert_eq!(report.steps[2].state, StepState::Pending);
        assert!(report.percent > 0 && report.percent < 20, "{}", report.percent);
    }

    #[test]
    fn pulling_comes_from_the_kubelets_events() {
        let status = json!({
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}],
            "containerStatuses": [{"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                                   "state": {"waiting": {"reason": "ContainerCreating"}}}]});
        let pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: CREATING}), status);
        let events = [
            event(
                "Scheduled",
                "Normal",
                "assigned to node-1",
                "2026-01-01T00:00:02Z",
            ),
            event("Pulling", "Normal", "Pulling image \"x\"", "2026-01-01T00:00:03Z"),
        ];
        let report = report("ws", Some(&pod), Some(&claim("Bound")), &events);
        assert_eq!(report.phase, Some("image pull"));
        assert_eq!(report.message, "Pulling image \"x\"");
        assert_eq!(report.steps[1].message, "on node-1");
        assert_eq!(report.steps[1].at, Some("2026-01-01T00:00:02Z".parse().unwrap()));
    }

    #[test]
    fn a_ready_pod_is_making_its_services_until_it_is_started() {
        let status = json!({
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "image": "x", "imageID": "sha", "ready": true, "restartCount": 0,
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:05Z"}}}]});
        let creating = pod(
            json!({keys::ANNOTATION_CREATE_DEADLINE: CREATING}),
            status.clone(),
        );
        let report = report("ws", Some(&creating), Some(&claim("Bound")), &[]);
        assert_eq!(report.phase, Some("services"));
        assert_eq!(report.status, Status::Creating);
        let started = pod(
            json!({keys::ANNOTATION_CREATE_DEADLINE: CREATING, keys::ANNOTATION_STARTED: "2026-01-01T00:00:06Z"}),
            status,
        );
        let report = super::report("ws", Some(&started), Some(&claim("Bound")), &[]);
        assert_eq!(report.status, Status::Ready);
        assert!(report.status.is_final());
        assert_eq!(report.percent, 100);
        assert_eq!(report.phase, None);
        assert!(report.steps.iter().all(|s| s.state == StepState::Done));
    }

    #[test]
    fn a_failed_create_names_its_step_and_the_last_warning() {
        let status = json!({"conditions": [{"type": "PodScheduled", "status": "False", "message": "0/2 nodes are available"}]});
        let failed = pod(
            json!({keys::ANNOTATION_CREATE_DEADLINE: CREATING,
                   keys::ANNOTATION_FAILED: "scheduling: 0/2 nodes are available (not ready by the create deadline)"}),
            status,
        );
        let events = [
            event(
                "FailedScheduling",
                "Warning",
                "0/2 nodes are available",
                "2026-01-01T00:00:02Z",
            ),
            event(
                "CreateFailed",
                "Warning",
                "from the backend",
                "2026-01-01T00:01:30Z",
            ),
        ];
        let mut events = events.to_vec();
        Arc::make_mut(&mut events[1]).reporting_component = Some(REPORTER.to_owned());
        let report = report("ws", Some(&failed), Some(&claim("Bound")), &events);
        assert_eq!(report.status, Status::Failed);
        assert_eq!(report.phase, Some("scheduling"));
        assert!(
            report.message.starts_with("scheduling: 0/2"),
            "{}",
            report.message
        );
        assert_eq!(
            report.warning.as_deref(),
            Some("FailedScheduling: 0/2 nodes are available")
        );
        assert_eq!(
            states(&report)[..3],
            [
                ("storage", StepState::Done),
                ("scheduling", StepState::Failed),
                ("image pull", StepState::Pending)
            ]
        );
    }

    #[test]
    fn a_delete_goes_from_stopping_to_gone() {
        let running = json!({"containerStatuses": [{"name": "main", "image": "x", "imageID": "sha", "ready": true,
            "restartCount": 0, "state": {"running": {}}}]});
        let mut deleting = pod(json!({keys::ANNOTATION_STARTED: "x"}), running);
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
        let report = report("ws", Some(&deleting), None, &[]);
        assert_eq!(report.status, Status::Deleting);
        assert_eq!(
            states(&report),
            [("stopping", StepState::Active), ("gone", StepState::Pending)]
        );
        let gone = super::report("ws", None, None, &[]);
        assert_eq!(gone.status, Status::Deleted);
        assert_eq!(gone.percent, 100);
    }

    #[test]
    fn a_pod_without_storage_skips_that_step() {
        let mut pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: CREATING}), json!({}));
        pod.spec.as_mut().unwrap().volumes = None;
        let report = report("ws", Some(&pod), None, &[]);
        assert_eq!(report.steps[0].state, StepState::Skipped);
        assert_eq!(report.phase, Some("scheduling"));
    }
}
