//! What the controller does with a Workspace, decided from the Workspace, its pod (the one of its
//! name, if any) and the time, with no I/O: whether its pod is to be made or removed, and the
//! status that says where it stands. The backend's leader applies it (`backend/clusters/controller.rs`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::Pod,
    apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time},
};
use kube_core::Resource;

use super::{API_VERSION, KIND, Phase, StopReason, Stopped, Workspace, WorkspaceStatus};
use crate::{
    model::{config::Config, keys},
    policy::culling::Cull,
    workspace::{objects, pod_needs, progress},
};

/// What a Workspace needs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing: it is as its spec says, or something under way will make it so.
    Wait,
    /// Started without a pod: make it.
    MakePod,
    /// Not started, and its pod (of this uid) is there: delete it.
    RemovePod(String),
}

/// The owner reference a Workspace's pod carries: the garbage collector deletes the pod with its
/// Workspace, and the controller knows the pod is this Workspace's and no other's of its name.
pub fn owner_reference(workspace: &Workspace) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        name: workspace.metadata.name.clone()?,
        uid: workspace.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// The reference to the Workspace `pod` belongs to, if any.
pub fn record_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.meta()
        .owner_references
        .as_deref()?
        .iter()
        .find(|r| r.kind == KIND && r.api_version == API_VERSION)
}

/// Whether `pod` is `workspace`'s own (its controller reference names this Workspace's uid).
pub fn owns(workspace: &Workspace, pod: &Pod) -> bool {
    let uid = workspace.metadata.uid.as_deref();
    uid.is_some()
        && pod
            .meta()
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|r| r.kind == KIND && Some(r.uid.as_str()) == uid)
}

/// The `metadata.generation` a status is written for (`0` on objects read without one).
fn generation(workspace: &Workspace) -> i64 {
    workspace.metadata.generation.unwrap_or(0)
}

/// Whether the last try to make its pod was refused at this generation: it is not tried again
/// until its spec changes (a stop and a start, or an admin's edit), as a controller does.
fn refused_at_this_generation(workspace: &Workspace) -> bool {
    workspace.status.as_ref().is_some_and(|status| {
        status.phase == Some(Phase::Failed) && status.observed_generation == Some(generation(workspace))
    })
}

/// What `workspace` needs at `now`, its pod being `pod` (the pod of its name, anyone's).
pub fn next(workspace: &Workspace, pod: Option<&Pod>, now: Timestamp) -> Next {
    if workspace.metadata.deletion_timestamp.is_some() {
        return Next::Wait;
    }
    if workspace.spec.started {
        // A pod of the name (even one going) holds it: the next pass makes it once that is gone.
        if pod.is_some() || refused_at_this_generation(workspace) {
            return Next::Wait;
        }
        let launching = annotation(workspace, keys::ANNOTATION_LAUNCHING_UNTIL)
            .and_then(|mark| mark.split_once('/'))
            .and_then(|(until, at)| Some((until.parse::<Timestamp>().ok()?, at.parse::<i64>().ok()?)))
            .is_some_and(|(until, at)| now < until && at == generation(workspace));
        return if launching { Next::Wait } else { Next::MakePod };
    }
    // A stop asked for a moment ago (its `outfit.dev/stop-at`) is deleting the pod itself: the
    // API's, a cull's, a failed start's. Deleting it again would cost a GET and a DELETE per stop
    // (the 5,000 benchmark counted them); past the moment, the request is taken to have died.
    let stopping_now =
        stop_marked_at(workspace).is_some_and(|at| now.duration_since(at) < STOP_DELETES_ITS_POD);
    match pod {
        Some(pod) if owns(workspace, pod) && pod.metadata.deletion_timestamp.is_none() && !stopping_now => {
            Next::RemovePod(pod.metadata.uid.clone().unwrap_or_default())
        }
        _ => Next::Wait,
    }
}

/// How long a stop request is left to delete its pod before the controller does.
const STOP_DELETES_ITS_POD: jiff::SignedDuration = jiff::SignedDuration::from_secs(10);

/// The annotations a stop for `reason` at `now` sets with `spec.started: false`.
pub fn stop_marks(reason: StopReason, now: Timestamp) -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([
        (keys::ANNOTATION_STOP_REASON, Some(reason.as_str().to_owned())),
        (keys::ANNOTATION_STOP_AT, Some(now.to_string())),
        (keys::ANNOTATION_LAUNCHING_UNTIL, None),
    ])
}

/// The annotations a start of `workspace` by a request sets with `spec.started: true`: the
/// stop's go, and the controller leaves the pod to the request until `until`, at the generation
/// the start gives it (one more: the spec changes).
pub fn start_marks(workspace: &Workspace, until: Timestamp) -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([
        (keys::ANNOTATION_STOP_REASON, None),
        (keys::ANNOTATION_STOP_AT, None),
        (
            keys::ANNOTATION_LAUNCHING_UNTIL,
            Some(launching_mark(until, generation(workspace) + 1)),
        ),
    ])
}

/// The value of [`keys::ANNOTATION_LAUNCHING_UNTIL`]: a request makes the pod until `until`, at
/// `generation` (a new Workspace's is 1).
pub fn launching_mark(until: Timestamp, generation: i64) -> String {
    format!("{until}/{generation}")
}

/// Whether `workspace` has been stopped longer than `retention` (`stoppedRetention`) at `now`:
/// its record is to be deleted. Only a stop the status has recorded counts (`Stopped`, since
/// `stopped.at`), so a Workspace is never deleted on a stop the controller has not seen through.
pub fn expired(workspace: &Workspace, retention: Option<std::time::Duration>, now: Timestamp) -> bool {
    let Some(retention) = retention else {
        return false;
    };
    let Some(status) = workspace.status.as_ref() else {
        return false;
    };
    if workspace.spec.started
        || workspace.metadata.deletion_timestamp.is_some()
        || status.phase != Some(Phase::Stopped)
    {
        return false;
    }
    let Ok(retention) = jiff::SignedDuration::try_from(retention) else {
        return false;
    };
    // The stop's own mark where it has one: the status's time went through the API server,
    // which keeps whole seconds only (a retention of 3 s would end up to a second early).
    stop_marked_at(workspace)
        .or_else(|| status.stopped.as_ref().map(|stopped| stopped.at.0))
        .is_some_and(|at| now.duration_since(at) >= retention)
}

/// Why a Workspace stops when `cull` culls it.
pub fn cull_reason(cull: &Cull) -> StopReason {
    match cull {
        Cull::Lifetime { .. } => StopReason::Lifetime,
        Cull::Idle { .. } => StopReason::Idle,
    }
}

/// Why and when `workspace`'s last stop was asked for, from the annotations its stop set
/// (`None`: an edit without them, such as `kubectl patch`: its owner's, now).
pub fn stop_request(workspace: &Workspace, now: Timestamp) -> Stopped {
    let reason = match annotation(workspace, keys::ANNOTATION_STOP_REASON) {
        Some("idle") => StopReason::Idle,
        Some("lifetime") => StopReason::Lifetime,
        Some("failed") => StopReason::Failed,
        _ => StopReason::User,
    };
    Stopped {
        at: Time(stop_marked_at(workspace).unwrap_or(now)),
        reason,
    }
}

/// The annotation `key` of `workspace`.
fn annotation<'a>(workspace: &'a Workspace, key: &str) -> Option<&'a str> {
    workspace
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// When `workspace`'s last stop was asked for, by its stop's mark (`outfit.dev/stop-at`).
fn stop_marked_at(workspace: &Workspace) -> Option<Timestamp> {
    annotation(workspace, keys::ANNOTATION_STOP_AT)?.parse().ok()
}

/// The status `workspace` has at `now` with its pod `pod` (only its own counts), keeping what
/// the current status says of the last stop and the last refusal.
pub fn status(workspace: &Workspace, pod: Option<&Pod>, config: &Config, now: Timestamp) -> WorkspaceStatus {
    let current = workspace.status.clone().unwrap_or_default();
    let pod = pod.filter(|pod| owns(workspace, pod));
    let (phase, reason, message) = match (workspace.spec.started, pod) {
        (false, Some(_)) => (Phase::Stopping, "Stopping", "its pod is being deleted".to_owned()),
        (false, None) => (
            Phase::Stopped,
            "Stopped",
            "stopped; start it to have its pod again".to_owned(),
        ),
        (true, None) if refused_at_this_generation(workspace) => {
            return current;
        }
        (true, None) => (Phase::Pending, "Pending", "its pod is to be made".to_owned()),
        (true, Some(pod)) => match progress::stage(pod) {
            progress::Stage::Settled
                if pod
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(keys::ANNOTATION_STARTED)) =>
            {
                (Phase::Running, "Running", "ready".to_owned())
            }
            progress::Stage::Deleting => (
                Phase::Starting,
                "PodGoing",
                "its last pod is going; a new one follows".to_owned(),
            ),
            _ => match progress::failure(pod) {
                Some(why) => (Phase::Failed, "StartFailed", why.to_owned()),
                None => (Phase::Starting, "Starting", "its pod is starting".to_owned()),
            },
        },
    };
    let conditions = vec![ready(phase == Phase::Running, reason, message, &current, now)];
    let stopped = if workspace.spec.started {
        current.stopped
    } else {
        // The first sight of the stop fixes when it was; a later pass keeps that.
        match current.stopped {
            Some(stopped) if matches!(current.phase, Some(Phase::Stopping | Phase::Stopped)) => Some(stopped),
            _ => Some(stop_request(workspace, now)),
        }
    };
    let url = pod
        .filter(|pod| matches!(pod_needs::ingress_port(pod), Ok(Some(_))))
        .map(|pod| {
            format!(
                "https://{}",
                objects::ingress_host(&pod.metadata.name.clone().unwrap_or_default(), config)
            )
        });
    WorkspaceStatus {
        phase: Some(phase),
        observed_generation: Some(generation(workspace)),
        conditions,
        pod: pod.and_then(|p| p.metadata.name.clone()),
        url: url.or(current.url),
        last_activity: current.last_activity,
        stopped,
    }
}

/// The status of a Workspace whose pod could not be made: `Failed` at this generation, with why.
pub fn refused(workspace: &Workspace, reason: &str, message: String, now: Timestamp) -> WorkspaceStatus {
    let current = workspace.status.clone().unwrap_or_default();
    WorkspaceStatus {
        phase: Some(Phase::Failed),
        observed_generation: Some(generation(workspace)),
        conditions: vec![ready(false, reason, message, &current, now)],
        pod: None,
        ..current
    }
}

/// The `Ready` condition, its transition time kept while its status does not change.
fn ready(
    is_ready: bool,
    reason: &str,
    message: String,
    current: &WorkspaceStatus,
    now: Timestamp,
) -> Condition {
    let status = if is_ready { "True" } else { "False" };
    let since = current
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: since,
        observed_generation: None,
    }
}

/// Whether two statuses say the same (transition times aside): only a change is written.
pub fn same(a: &WorkspaceStatus, b: &WorkspaceStatus) -> bool {
    let strip = |s: &WorkspaceStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
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
    fn a_started_workspace_without_a_pod_gets_one_unless_a_launch_makes_it() {
        let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        let mut ws = workspace(true);
        assert_eq!(next(&ws, None, now), Next::MakePod);
        assert_eq!(next(&ws, Some(&pod_of("ws-uid")), now), Next::Wait);
        // A pod of the name being deleted (the last start's) holds the name until it is gone.
        assert_eq!(next(&ws, Some(&pod_of("other")), now), Next::Wait);
        ws.metadata.annotations = Some(
            [(
                keys::ANNOTATION_LAUNCHING_UNTIL.to_owned(),
                "2026-11-29T10:01:00Z/1".to_owned(),
            )]
            .into(),
        );
        assert_eq!(next(&ws, None, now), Next::Wait, "the launch under way makes it");
        let later: Timestamp = "2026-11-29T10:01:00Z".parse().unwrap();
        assert_eq!(
            next(&ws, None, later),
            Next::MakePod,
            "the launch died: the controller makes it"
        );
        // A later edit of the spec (stopped and started with kubectl) is not the launch's.
        ws.metadata.generation = Some(3);
        assert_eq!(next(&ws, None, now), Next::MakePod, "a stale mark holds nothing");
    }

    #[test]
    fn a_refused_start_is_not_retried_until_the_spec_changes() {
        let now = Timestamp::UNIX_EPOCH;
        let mut ws = workspace(true);
        ws.status = Some(refused(&ws, "UnknownEntry", "no entry".into(), now));
        assert_eq!(next(&ws, None, now), Next::Wait);
        ws.metadata.generation = Some(2);
        assert_eq!(next(&ws, None, now), Next::MakePod);
    }

    #[test]
    fn a_stopped_workspace_loses_its_own_pod_only() {
        let now = Timestamp::UNIX_EPOCH;
        let ws = workspace(false);
        assert_eq!(
            next(&ws, Some(&pod_of("ws-uid")), now),
            Next::RemovePod("pod-uid".into())
        );
        assert_eq!(next(&ws, Some(&pod_of("another-workspace")), now), Next::Wait);
        let mut going = pod_of("ws-uid");
        going.metadata.deletion_timestamp = Some(Time(now));
        assert_eq!(next(&ws, Some(&going), now), Next::Wait);
        assert_eq!(next(&ws, None, now), Next::Wait);
        // A stop asked for a moment ago deletes the pod itself; one whose request died, not.
        let mut stopped = workspace(false);
        stopped.metadata.annotations = Some(
            stop_marks(StopReason::User, now)
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_owned(), v?)))
                .collect(),
        );
        assert_eq!(next(&stopped, Some(&pod_of("ws-uid")), now), Next::Wait);
        let later = now + jiff::SignedDuration::from_secs(10);
        assert_eq!(
            next(&stopped, Some(&pod_of("ws-uid")), later),
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
        assert!(expired(&ws, Some(2 * day), now), "stopped 2 days and an hour ago");
        assert!(!expired(&ws, Some(3 * day), now));
        assert!(!expired(&ws, None, now), "0: forever");
        ws.spec.started = true;
        assert!(!expired(&ws, Some(day), now), "started again");
        let unseen = workspace(false);
        assert!(
            !expired(&unseen, Some(std::time::Duration::ZERO), now),
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
            !expired(&marked, Some(std::time::Duration::from_secs(3)), now),
            "2.4 s after the stop"
        );
        assert!(expired(&marked, Some(std::time::Duration::from_secs(2)), now));
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
}
