//! The controller's decisions, on plain Workspaces and pods.

use serde_json::json;

use super::*;
use crate::resource::WorkspaceSpec;

fn workspace(started: bool) -> Workspace {
    let mut ws = Workspace::new(
        "jupyter-ann",
        "ws",
        WorkspaceSpec {
            owner: "ann".into(),
            entry: "jupyter".into(),
            started,
            ..WorkspaceSpec::default()
        },
    );
    ws.metadata.uid = Some("ws-uid".into());
    ws.metadata.generation = Some(1);
    ws
}

fn pod_of(owner_uid: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "jupyter-ann", "uid": "pod-uid",
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": "jupyter-ann", "uid": owner_uid}]},
    }))
    .unwrap()
}

fn config() -> Config {
    Config::load(None, |_| None).unwrap().0
}

#[test]
fn a_started_workspace_without_a_pod_gets_one() {
    let ws = workspace(true);
    assert_eq!(next(&ws, None), Next::MakePod);
    assert_eq!(next(&ws, Some(&pod_of("ws-uid"))), Next::Wait);
    // A pod of the name being deleted (the last start's) holds the name until it is gone.
    assert_eq!(next(&ws, Some(&pod_of("other"))), Next::Wait);
}

#[test]
fn a_refused_start_is_not_retried_until_the_spec_changes() {
    let now = Timestamp::UNIX_EPOCH;
    let mut ws = workspace(true);
    ws.status = Some(refused(&ws, "UnknownEntry", "no entry".into(), now));
    assert_eq!(next(&ws, None), Next::Wait);
    ws.metadata.generation = Some(2);
    assert_eq!(next(&ws, None), Next::MakePod);
}

#[test]
fn a_stopped_workspace_loses_its_own_pod_only() {
    let now = Timestamp::UNIX_EPOCH;
    let ws = workspace(false);
    assert_eq!(
        next(&ws, Some(&pod_of("ws-uid"))),
        Next::RemovePod("pod-uid".into())
    );
    assert_eq!(next(&ws, Some(&pod_of("another-workspace"))), Next::Wait);
    let mut going = pod_of("ws-uid");
    going.metadata.deletion_timestamp = Some(Time(now));
    assert_eq!(next(&ws, Some(&going)), Next::Wait);
    assert_eq!(next(&ws, None), Next::Wait);
    // A stop just asked for: its pod goes at once (the request only stops the Workspace).
    let mut stopped = workspace(false);
    stopped.metadata.annotations = Some(
        stop_marks(StopReason::User, now)
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v?)))
            .collect(),
    );
    assert_eq!(
        next(&stopped, Some(&pod_of("ws-uid"))),
        Next::RemovePod("pod-uid".into())
    );
}

#[test]
fn the_status_says_stopping_then_stopped_with_the_reason_and_time_of_the_stop() {
    let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
    let mut ws = workspace(false);
    ws.metadata.annotations = Some(
        [
            (keys::ANNOTATION_STOP_REASON.to_owned(), "idle".to_owned()),
            (
                keys::ANNOTATION_STOP_AT.to_owned(),
                "2026-11-29T09:59:00Z".to_owned(),
            ),
        ]
        .into(),
    );
    let stopping = status(&ws, Some(&pod_of("ws-uid")), &config(), now);
    assert_eq!(stopping.phase, Some(Phase::Stopping));
    assert_eq!(
        stopping.stopped.as_ref().map(|s| s.reason),
        Some(StopReason::Idle)
    );
    ws.status = Some(stopping.clone());
    let stopped = status(&ws, None, &config(), now + jiff::SignedDuration::from_secs(5));
    assert_eq!(stopped.phase, Some(Phase::Stopped));
    assert_eq!(stopped.stopped, stopping.stopped, "when and why are kept");
    assert_eq!(stopped.stopped.unwrap().at.0.to_string(), "2026-11-29T09:59:00Z");
    // kubectl's patch sets neither annotation: its owner's stop, at the first sight of it.
    let plain = workspace(false);
    let seen = status(&plain, None, &config(), now).stopped.unwrap();
    assert_eq!((seen.reason, seen.at.0), (StopReason::User, now));
}

#[test]
fn a_workspace_stopped_longer_than_the_retention_expires() {
    let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
    let day = std::time::Duration::from_secs(86_400);
    let mut ws = workspace(false);
    ws.status = Some(status(
        &ws,
        None,
        &config(),
        "2026-11-27T09:00:00Z".parse().unwrap(),
    ));
    assert!(
        expired(&ws, (Some(2 * day), false), now),
        "stopped 2 days and an hour ago"
    );
    assert!(!expired(&ws, (Some(3 * day), false), now));
    assert!(!expired(&ws, (None, false), now), "0: forever");
    ws.spec.started = true;
    assert!(!expired(&ws, (Some(day), false), now), "started again");
    let unseen = workspace(false);
    assert!(
        !expired(&unseen, (Some(std::time::Duration::ZERO), false), now),
        "a stop not yet seen through"
    );
    // The stop's own mark wins over the status's whole seconds (the e2e caught a 3 s retention
    // ending 9 ms early through them).
    let mut marked = workspace(false);
    marked.status = Some(status(
        &marked,
        None,
        &config(),
        "2026-11-29T09:59:57Z".parse().unwrap(),
    ));
    let at: Timestamp = "2026-11-29T09:59:57.600Z".parse().unwrap();
    marked.metadata.annotations = Some([(keys::ANNOTATION_STOP_AT.to_owned(), at.to_string())].into());
    assert!(
        !expired(&marked, (Some(std::time::Duration::from_secs(3)), false), now),
        "2.4 s after the stop"
    );
    assert!(expired(
        &marked,
        (Some(std::time::Duration::from_secs(2)), false),
        now
    ));
    // With snapshots, not before the stop's snapshot is ready: the home goes with it.
    let two = std::time::Duration::from_secs(2);
    assert!(!expired(&marked, (Some(two), true), now), "no snapshot yet");
    // The snapshot is of the stop its request marked.
    let stop = marked.metadata.annotations.as_ref().unwrap()[keys::ANNOTATION_STOP_AT].clone();
    let annotations = marked.metadata.annotations.as_mut().unwrap();
    for (key, value) in snapshot_marks(Some("h-1"), &stop, "TimedOut: not ready after 2m") {
        annotations.insert(key.to_owned(), value.unwrap_or_default());
    }
    assert!(
        !expired(&marked, (Some(two), true), now),
        "its snapshot timed out"
    );
    marked.metadata.annotations.as_mut().unwrap().insert(
        keys::ANNOTATION_SNAPSHOT_STATE.to_owned(),
        SNAPSHOT_READY.to_owned(),
    );
    assert!(expired(&marked, (Some(two), true), now), "saved");
}

#[test]
fn statuses_differing_only_in_transition_times_are_the_same() {
    let ws = workspace(true);
    let a = status(&ws, None, &config(), Timestamp::UNIX_EPOCH);
    let b = status(&ws, None, &config(), "2026-11-29T10:00:00Z".parse().unwrap());
    assert!(same(&a, &b));
    let c = refused(&ws, "UnknownEntry", "gone".into(), Timestamp::UNIX_EPOCH);
    assert!(!same(&a, &c));
}

#[test]
fn a_stopped_workspace_without_its_pod_is_snapshotted_once_per_stop() {
    let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
    let mut config = config();
    let mut ws = workspace(false);
    ws.status = Some(status(&ws, None, &config, now));
    assert_eq!(
        snapshot_due(&ws, None, &config),
        None,
        "no snapshotClassName: none"
    );
    config.snapshot_class_name = Some("csi".into());
    let stop = snapshot_due(&ws, None, &config).expect("due once stopped");
    assert_eq!(stop, "2026-11-29T10:00:00Z");
    assert_eq!(
        snapshot_due(&ws, Some(&pod_of("ws-uid")), &config),
        None,
        "not while a pod of its name holds the home"
    );
    let mut stopping = workspace(false);
    stopping.status = Some(status(&stopping, Some(&pod_of("ws-uid")), &config, now));
    assert_eq!(
        snapshot_due(&stopping, None, &config),
        None,
        "not before the status says Stopped"
    );
    let mark = |ws: &mut Workspace, name: Option<&str>, state: &str| {
        let annotations = ws.metadata.annotations.get_or_insert_with(Default::default);
        for (key, value) in snapshot_marks(name, &stop, state) {
            match value {
                Some(value) => annotations.insert(key.to_owned(), value),
                None => annotations.remove(key),
            };
        }
    };
    mark(&mut ws, Some("h-1"), SNAPSHOT_PENDING);
    assert_eq!(snapshot_due(&ws, None, &config), None, "taken for this stop");
    assert_eq!(snapshot_pending(&ws), Some("h-1"));
    let pending = status(&ws, None, &config, now);
    let condition = pending
        .conditions
        .iter()
        .find(|c| c.type_ == "HomeSnapshot")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "SnapshotPending")
    );
    mark(&mut ws, Some("h-1"), "TimedOut: not ready after 2m");
    assert_eq!(snapshot_pending(&ws), None);
    let timed_out = status(&ws, None, &config, now);
    let condition = timed_out
        .conditions
        .iter()
        .find(|c| c.type_ == "HomeSnapshot")
        .unwrap();
    assert_eq!(condition.reason, "SnapshotTimedOut");
    assert!(
        condition.message.contains("h-1: not ready after 2m"),
        "{}",
        condition.message
    );
    assert_eq!(
        timed_out.phase,
        Some(Phase::Stopped),
        "a snapshot never holds the stop"
    );
    mark(&mut ws, None, SNAPSHOT_NO_HOME);
    assert!(
        status(&ws, None, &config, now)
            .conditions
            .iter()
            .all(|c| c.type_ != "HomeSnapshot"),
        "no home, no condition"
    );
    // The next stop is due again.
    ws.status.as_mut().unwrap().stopped.as_mut().unwrap().at = Time("2026-11-29T11:00:00Z".parse().unwrap());
    assert_eq!(
        snapshot_due(&ws, None, &config).as_deref(),
        Some("2026-11-29T11:00:00Z")
    );
}

#[test]
fn a_deic_dk_workspace_expires_as_soon_as_its_stop_is_seen_through() {
    let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
    let mut ws = workspace(false);
    ws.spec.entry = String::new();
    ws.spec.manifest_url = Some("http://manifests.test/jupyter.yaml".into());
    assert!(!expired(&ws, (None, false), now), "a stop not yet seen through");
    ws.status = Some(status(&ws, None, &config(), now));
    assert!(
        expired(&ws, (None, false), now),
        "no stopped state, whatever the retention"
    );
    assert_eq!(
        expires_at(&ws, (Some(std::time::Duration::from_secs(86_400)), false)),
        Some(now)
    );
    ws.spec.started = true;
    assert!(!expired(&ws, (None, false), now), "started");
}

#[test]
fn a_stop_request_is_decided_once_stopped_or_refused_for_that_request() {
    let at: Timestamp = "2026-11-29T10:00:00.250Z".parse().unwrap();
    let mut ws = workspace(true);
    assert_eq!(stop_requested(&ws), None);
    let annotate = |ws: &mut Workspace, marks: BTreeMap<&str, Option<String>>| {
        let annotations = ws.metadata.annotations.get_or_insert_default();
        for (key, value) in marks {
            match value {
                Some(value) => annotations.insert(key.to_owned(), value),
                None => annotations.remove(key),
            };
        }
    };
    annotate(&mut ws, stop_request_marks(at));
    assert_eq!(stop_requested(&ws), Some(at));

    // Refused: the request goes, the refusal names it; a later request is not answered by it.
    let (started, marks) = stop_decision(at, Some("maxStoppedWorkspacesPerUser is 1"));
    assert!(started);
    annotate(&mut ws, marks);
    assert_eq!(stop_requested(&ws), None);
    assert_eq!(stop_refusal(&ws, at), Some("maxStoppedWorkspacesPerUser is 1"));
    let later = at + jiff::SignedDuration::from_secs(1);
    assert_eq!(stop_refusal(&ws, later), None);
    annotate(&mut ws, stop_request_marks(later));
    assert_eq!(
        stop_refusal(&ws, later),
        None,
        "a new request clears the old refusal"
    );

    // Stopped: for the user, at the request's time.
    let (started, marks) = stop_decision(later, None);
    assert!(!started);
    ws.spec.started = false;
    annotate(&mut ws, marks);
    assert_eq!(stop_requested(&ws), None);
    let stopped = status(&ws, None, &config(), later + jiff::SignedDuration::from_secs(5));
    let stopped = stopped.stopped.unwrap();
    assert_eq!((stopped.reason, stopped.at.0), (StopReason::User, later));
}
