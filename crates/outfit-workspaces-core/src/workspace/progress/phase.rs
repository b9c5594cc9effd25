//! Where a workspace's start stands, read from its pod and its storage claim: ready, or stuck in
//! which phase and why. Pure: the lifecycle and the API ask, the cluster answers through the cache.

use std::fmt;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodCondition};
use kube_core::ResourceExt;

use crate::model::keys;

/// The phases of a start, in order. A create that does not finish names the one it was stuck in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The manifest is fetched and turned into a pod.
    Fetch,
    /// The user's storage claim binds.
    Storage,
    /// The API server takes the pod (quota, admission webhooks, validation).
    Admission,
    /// The pod is placed on a node.
    Scheduling,
    /// The node pulls the images.
    ImagePull,
    /// The containers start and pass their readiness checks.
    Readiness,
    /// The Services, Ingress and tokens are made.
    Services,
}

impl Phase {
    /// The phase's name in answers and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fetch => "fetch",
            Self::Storage => "storage",
            Self::Admission => "admission",
            Self::Scheduling => "scheduling",
            Self::ImagePull => "image pull",
            Self::Readiness => "readiness",
            Self::Services => "services",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Container waiting reasons that mean the image can't be had.
pub const IMAGE_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
];

/// Whether the pod's `Ready` condition is true.
pub fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// Whether the pod ended (phase Succeeded or Failed): it will never turn ready.
pub fn has_ended(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pod's condition of type `kind`, if the pod has one.
pub(super) fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// The phase a pod that is not ready is in, with what the cluster says about it.
/// `claim` is the user's storage claim when the pod mounts it.
pub fn stuck(pod: &Pod, claim: Option<&PersistentVolumeClaim>) -> (Phase, String) {
    if let Some(claim) = claim {
        let phase = claim
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending");
        if claim.metadata.deletion_timestamp.is_some() {
            return (Phase::Storage, "the storage claim is being deleted".to_owned());
        }
        if phase != "Bound" {
            return (Phase::Storage, format!("storage claim is {phase}"));
        }
    }
    let scheduled = condition(pod, "PodScheduled");
    if scheduled.is_none_or(|c| c.status != "True") {
        let message = scheduled
            .and_then(|c| c.message.clone())
            .unwrap_or_else(|| "not scheduled yet".to_owned());
        return (Phase::Scheduling, message);
    }
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    let waiting = statuses
        .into_iter()
        .flatten()
        .filter_map(|s| Some((&s.name, s.state.as_ref()?.waiting.as_ref()?)));
    let mut first_waiting = None;
    for (name, waiting) in waiting {
        let reason = waiting.reason.as_deref().unwrap_or("");
        let what = match &waiting.message {
            Some(message) => format!("container {name}: {reason}: {message}"),
            None => format!("container {name}: {reason}"),
        };
        if IMAGE_REASONS.contains(&reason) {
            return (Phase::ImagePull, what);
        }
        first_waiting.get_or_insert(what);
    }
    if has_ended(pod) {
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default();
        return (
            Phase::Readiness,
            format!("the pod ended ({phase}) before it was ready"),
        );
    }
    let message = first_waiting.unwrap_or_else(|| "containers not ready".to_owned());
    (Phase::Readiness, message)
}

/// Where a pod's create or delete stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The create has not finished: no start jobs yet, deadline not passed.
    Creating,
    /// The pod is being deleted.
    Deleting,
    /// Neither.
    Settled,
}

/// Where `pod`'s create or delete stands.
pub fn stage(pod: &Pod) -> Stage {
    if pod.metadata.deletion_timestamp.is_some() {
        return Stage::Deleting;
    }
    let annotations = pod.metadata.annotations.as_ref();
    let has = |key| annotations.is_some_and(|a| a.contains_key(key));
    // A pod with no deadline was not made by a create (one made by hand with outfit's labels): it
    // is settled.
    if has(keys::ANNOTATION_CREATE_DEADLINE) && !has(keys::ANNOTATION_STARTED) {
        Stage::Creating
    } else {
        Stage::Settled
    }
}

/// The pod's create deadline.
pub fn deadline(pod: &Pod) -> Option<Timestamp> {
    pod.annotations()
        .get(keys::ANNOTATION_CREATE_DEADLINE)?
        .parse()
        .ok()
}

/// Why the pod's create failed, if it did.
pub fn failure(pod: &Pod) -> Option<&str> {
    pod.annotations().get(keys::ANNOTATION_FAILED).map(String::as_str)
}

/// The storage claim a pod mounts as `sciencedata`, if any.
pub fn storage_claim_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find(|v| v.name == "sciencedata")?
        .persistent_volume_claim
        .as_ref()
        .map(|c| c.claim_name.as_str())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    fn claim(phase: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "status": {"phase": phase}})).unwrap()
    }

    #[test]
    fn ready_is_the_ready_condition() {
        assert!(is_ready(&pod(
            json!({"conditions": [{"type": "Ready", "status": "True"}]})
        )));
        assert!(!is_ready(&pod(
            json!({"conditions": [{"type": "Ready", "status": "False"}]})
        )));
        assert!(!is_ready(&pod(json!({}))));
    }

    #[test]
    fn unbound_storage_comes_first() {
        let (phase, why) = stuck(&pod(json!({})), Some(&claim("Pending")));
        assert_eq!(phase, Phase::Storage);
        assert!(why.contains("Pending"), "{why}");
    }

    #[test]
    fn unscheduled_pods_say_why() {
        let status = json!({"conditions": [{"type": "PodScheduled", "status": "False",
            "message": "0/1 nodes are available: 1 Insufficient cpu."}]});
        let (phase, why) = stuck(&pod(status), Some(&claim("Bound")));
        assert_eq!(phase, Phase::Scheduling);
        assert!(why.contains("Insufficient cpu"), "{why}");
    }

    #[test]
    fn image_pull_failures_are_named() {
        let status = json!({
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {"name": "a", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ContainerCreating"}}},
            {"name": "b", "image": "y", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}
        ]});
        let (phase, why) = stuck(&pod(status), None);
        assert_eq!(phase, Phase::ImagePull);
        assert_eq!(why, "container b: ImagePullBackOff: no such image");
    }

    #[test]
    fn running_but_not_ready_is_readiness() {
        let status = json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]});
        assert_eq!(stuck(&pod(status), None).0, Phase::Readiness);
        let ended = json!({"phase": "Failed", "conditions": [{"type": "PodScheduled", "status": "True"}]});
        let (phase, why) = stuck(&pod(ended), None);
        assert_eq!(phase, Phase::Readiness);
        assert!(why.contains("Failed"), "{why}");
    }
}
