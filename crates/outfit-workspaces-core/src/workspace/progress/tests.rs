//! Progress reports of pods in each state of a start and a delete.

use serde_json::json;

use super::*;
use crate::model::keys::{self, REPORTER};

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
