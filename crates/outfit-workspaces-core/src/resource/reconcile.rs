//! What the controller does with a Workspace, decided from the Workspace, its pod (the one of its
//! name, if any) and the time, with no I/O: whether its pod is to be made or removed, and the
//! status that says where it stands. The backend's leader applies it (`backend/all_clusters/controller.rs`).

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

/// What `workspace` needs, its pod being `pod` (the pod of its name, anyone's).
pub fn next(workspace: &Workspace, pod: Option<&Pod>) -> Next {
    if workspace.metadata.deletion_timestamp.is_some() {
        return Next::Wait;
    }
    if workspace.spec.started {
        // A pod of the name (even one going) holds it: the next pass makes it once that is gone.
        if pod.is_some() || refused_at_this_generation(workspace) {
            return Next::Wait;
        }
        return Next::MakePod;
    }
    // Stopped: its pod goes, and this is the one place that deletes it (a stop request, a cull
    // and a failed start only stop the Workspace).
    match pod {
        Some(pod) if owns(workspace, pod) && pod.metadata.deletion_timestamp.is_none() => {
            Next::RemovePod(pod.metadata.uid.clone().unwrap_or_default())
        }
        _ => Next::Wait,
    }
}

/// The annotations a stop for `reason` at `now` sets with `spec.started: false`.
pub fn stop_marks(reason: StopReason, now: Timestamp) -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([
        (keys::ANNOTATION_STOP_REASON, Some(reason.as_str().to_owned())),
        (keys::ANNOTATION_STOP_AT, Some(now.to_string())),
    ])
}

/// The annotations a user's stop request at `at` sets (the Workspace stays started until the
/// controller decides): the request, and no refusal of an earlier one.
pub fn stop_request_marks(at: Timestamp) -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([
        (keys::ANNOTATION_STOP_REQUESTED, Some(at.to_string())),
        (keys::ANNOTATION_STOP_REFUSED, None),
    ])
}

/// The stop request `workspace` carries, if it is started and has one: when it was asked for.
pub fn stop_requested(workspace: &Workspace) -> Option<Timestamp> {
    if !workspace.spec.started {
        return None;
    }
    let at = annotation(workspace, keys::ANNOTATION_STOP_REQUESTED)?;
    // One that can't be read is decided as asked now.
    Some(at.parse().unwrap_or_else(|_| Timestamp::now()))
}

/// The controller's decision on the stop requested at `at`: the annotations it writes with
/// `spec.started: false` (a stop for the user, at the request's time), or, refused with `why`,
/// with the Workspace left started.
pub fn stop_decision(at: Timestamp, refused: Option<&str>) -> (bool, BTreeMap<&'static str, Option<String>>) {
    match refused {
        None => {
            let mut marks = stop_marks(StopReason::User, at);
            marks.insert(keys::ANNOTATION_STOP_REQUESTED, None);
            (false, marks)
        }
        Some(why) => (
            true,
            BTreeMap::from([
                (keys::ANNOTATION_STOP_REQUESTED, None),
                (keys::ANNOTATION_STOP_REFUSED, Some(format!("{at} {why}"))),
            ]),
        ),
    }
}

/// Why the controller refused the stop requested at `at`, if it did.
pub fn stop_refusal(workspace: &Workspace, at: Timestamp) -> Option<&str> {
    let (refused_at, why) = annotation(workspace, keys::ANNOTATION_STOP_REFUSED)?.split_once(' ')?;
    (refused_at.parse::<Timestamp>().ok()? == at).then_some(why)
}

/// The annotations a start sets with `spec.started: true`: the stop's go, and the snapshot to make
/// the home from comes, if one is named.
pub fn start_marks(restore: Option<&str>) -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([
        (keys::ANNOTATION_STOP_REASON, None),
        (keys::ANNOTATION_STOP_AT, None),
        (keys::ANNOTATION_RESTORE_FROM, restore.map(str::to_owned)),
    ])
}

/// The snapshot `workspace`'s start makes its home from, if its start named one.
pub fn restore_from(workspace: &Workspace) -> Option<&str> {
    annotation(workspace, keys::ANNOTATION_RESTORE_FROM)
}

/// Why the controller refused to make `workspace`'s pod at `generation` (the reason and message of
/// its `Ready` condition), if it did.
pub fn refusal_at(workspace: &Workspace, generation: i64) -> Option<(&str, &str)> {
    let status = workspace.status.as_ref()?;
    if status.phase != Some(Phase::Failed) || status.observed_generation != Some(generation) {
        return None;
    }
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
    Some((ready.reason.as_str(), ready.message.as_str()))
}

/// When `workspace`, stopped, has been stopped for `retention` (`stoppedRetention`; for one of
/// deic-dk's `create_pod`, at once): its record is to be deleted then; `None` while it can't be
/// (or retention is forever). Only a stop the
/// status has recorded counts (`Stopped`, since `stopped.at`), so a Workspace is never deleted on
/// a stop the controller has not seen through; with snapshots configured (`snapshots`), nor before
/// its stop's snapshot is ready: its home goes with it, and is never removed unsaved (its
/// `HomeSnapshot` condition says why it stays). The controller looks again at this time.
pub fn expires_at(
    workspace: &Workspace,
    (retention, snapshots): (Option<std::time::Duration>, bool),
) -> Option<Timestamp> {
    // One of deic-dk's `create_pod` has no stopped state: it goes once its stop is seen through.
    let retention = match workspace.spec.is_compat() {
        true => std::time::Duration::ZERO,
        false => retention?,
    };
    let retention = jiff::SignedDuration::try_from(retention).ok()?;
    if snapshots && !stop_snapshot_ready(workspace) {
        return None;
    }
    let status = workspace.status.as_ref()?;
    if workspace.spec.started
        || workspace.metadata.deletion_timestamp.is_some()
        || status.phase != Some(Phase::Stopped)
    {
        return None;
    }
    // The stop's own mark where it has one: the status's time went through the API server,
    // which keeps whole seconds only (a retention of 3 s would end up to a second early).
    let at = stop_marked_at(workspace).or_else(|| status.stopped.as_ref().map(|stopped| stopped.at.0))?;
    at.checked_add(retention).ok()
}

/// Whether `workspace` has been stopped longer than `retention` at `now` ([`expires_at`]).
pub fn expired(
    workspace: &Workspace,
    retention: (Option<std::time::Duration>, bool),
    now: Timestamp,
) -> bool {
    expires_at(workspace, retention).is_some_and(|at| now >= at)
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
    let mut conditions = vec![ready(phase == Phase::Running, reason, message, &current, now)];
    conditions.extend(snapshot_condition(workspace, &current, now));
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
        .map(|pod| objects::app_url(pod, config));
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

/// The condition that says where the snapshot of the home taken at the last stop stands
/// (`HomeSnapshot`), from the marks the controller sets ([`snapshot_marks`]); none before the
/// first, or where there was no home to take.
fn snapshot_condition(workspace: &Workspace, current: &WorkspaceStatus, now: Timestamp) -> Option<Condition> {
    let name = annotation(workspace, keys::ANNOTATION_SNAPSHOT)?;
    let state = annotation(workspace, keys::ANNOTATION_SNAPSHOT_STATE)?;
    let (is_true, reason, message) = match state.split_once(": ") {
        None if state == SNAPSHOT_READY => (
            true,
            "SnapshotReady",
            format!("the home was saved as {name} when it stopped"),
        ),
        None if state == SNAPSHOT_PENDING => (
            false,
            "SnapshotPending",
            format!("{name} of the home is being taken"),
        ),
        Some(("Failed", why)) => (false, "SnapshotFailed", format!("{name}: {why}")),
        Some(("TimedOut", why)) => (false, "SnapshotTimedOut", format!("{name}: {why}")),
        _ => return None,
    };
    Some(condition(
        "HomeSnapshot",
        (is_true, reason, message),
        current,
        now,
    ))
}

/// [`keys::ANNOTATION_SNAPSHOT_STATE`] of a snapshot not ready yet.
pub const SNAPSHOT_PENDING: &str = "Pending";
/// ... of a ready one.
pub const SNAPSHOT_READY: &str = "Ready";
/// ... where there was no home to take (`nfs`, `ephemeral`).
pub const SNAPSHOT_NO_HOME: &str = "NoHome";

/// The stop a snapshot is taken for, once the status says `Stopped`: its request's mark
/// (`outfit.dev/stop-at`, each stop's own, so a start and a stop between two passes are a new
/// stop), else the status's `stopped.at` (a stop made with kubectl).
fn stop_seen(workspace: &Workspace) -> Option<String> {
    let status = workspace.status.as_ref()?;
    if status.phase != Some(Phase::Stopped) {
        return None;
    }
    annotation(workspace, keys::ANNOTATION_STOP_AT)
        .map(str::to_owned)
        .or_else(|| status.stopped.as_ref().map(|s| s.at.0.to_string()))
}

/// The stop (its mark, else `stopped.at`) a snapshot of `workspace`'s home is due for: it is stopped, its pod is
/// gone (no pod of its name: the home is let go), snapshots are configured, and none was taken
/// for this stop. Culls are stops like any other.
pub fn snapshot_due(workspace: &Workspace, pod: Option<&Pod>, config: &Config) -> Option<String> {
    if config.snapshot_class_name.is_none()
        || workspace.spec.started
        || workspace.metadata.deletion_timestamp.is_some()
        || pod.is_some()
    {
        return None;
    }
    let stop = stop_seen(workspace)?;
    (annotation(workspace, keys::ANNOTATION_SNAPSHOT_FOR) != Some(stop.as_str())).then_some(stop)
}

/// Whether the snapshot of `workspace`'s home taken at its last stop is ready (or there was no
/// home to take) and it has not run since: its home is saved as it was left.
pub fn stop_snapshot_ready(workspace: &Workspace) -> bool {
    let state = annotation(workspace, keys::ANNOTATION_SNAPSHOT_STATE);
    !workspace.spec.started
        && matches!(state, Some(SNAPSHOT_READY | SNAPSHOT_NO_HOME))
        && stop_seen(workspace).as_deref() == annotation(workspace, keys::ANNOTATION_SNAPSHOT_FOR)
}

/// The snapshot of `workspace`'s home still being waited for (a leader that died waiting leaves
/// it to the next), if any.
pub fn snapshot_pending(workspace: &Workspace) -> Option<&str> {
    (annotation(workspace, keys::ANNOTATION_SNAPSHOT_STATE) == Some(SNAPSHOT_PENDING))
        .then(|| annotation(workspace, keys::ANNOTATION_SNAPSHOT))
        .flatten()
}

/// The annotations that record the snapshot `name` (none: no home) taken for the stop `stop`,
/// standing at `state`.
pub fn snapshot_marks(name: Option<&str>, stop: &str, state: &str) -> BTreeMap<&'static str, Option<String>> {
    BTreeMap::from([
        (keys::ANNOTATION_SNAPSHOT, name.map(str::to_owned)),
        (keys::ANNOTATION_SNAPSHOT_FOR, Some(stop.to_owned())),
        (keys::ANNOTATION_SNAPSHOT_STATE, Some(state.to_owned())),
    ])
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
    condition("Ready", (is_ready, reason, message), current, now)
}

/// The condition `type_`, its transition time kept while its status does not change.
fn condition(
    type_: &str,
    (is_true, reason, message): (bool, &str, String),
    current: &WorkspaceStatus,
    now: Timestamp,
) -> Condition {
    let status = if is_true { "True" } else { "False" };
    let since = current
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
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
mod tests;
