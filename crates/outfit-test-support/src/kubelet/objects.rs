//! The objects the image kubelet writes, as a kubelet writes them: its Nodes and their status,
//! their Leases, and the status of the pods on them.

use std::{
    collections::BTreeMap,
    hash::{DefaultHasher, Hash, Hasher},
};

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{Container, Pod},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
};
use outfit_workspaces_core::workspace::placement::normalize;
use serde_json::{Value, json};

use super::config::{ModelConfig, NODE_TYPE};

/// How long a node's Lease lasts (the kubelet's default), renewed every quarter of it.
pub(super) const LEASE_SECONDS: u64 = 40;

/// A time as the API writes it (seconds).
fn time(at: Timestamp) -> Value {
    serde_json::to_value(Time(at)).expect("a time serializes")
}

/// A new node named `name` with the pod range `cidr`: labelled and tainted for the pool, with no
/// kwok annotation (no one else's).
pub(super) fn node(name: &str, cidr: &str, config: &ModelConfig) -> Value {
    let key = &config.pool_key;
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "type": NODE_TYPE, key: "yes"}},
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr],
                 "taints": [{"key": key, "value": "yes", "effect": "NoSchedule"}]}
    })
}

/// A node's status: capacity, Ready with a fresh heartbeat, its address, and the images it holds
/// as the kubelet lists them (largest first).
pub(super) fn node_status(
    ip: &str,
    config: &ModelConfig,
    images: &BTreeMap<String, u64>,
    since: Timestamp,
) -> Value {
    let now = time(Timestamp::now());
    let since = time(since);
    let condition = |kind: &str, status: &str, reason: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": reason,
               "lastHeartbeatTime": now, "lastTransitionTime": since})
    };
    let mut listed: Vec<(&String, &u64)> = images.iter().collect();
    listed.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let capacity = json!({"cpu": config.cpu, "memory": config.memory, "pods": config.pods.to_string()});
    json!({"status": {
        "capacity": capacity, "allocatable": capacity,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            condition("Ready", "True", "KubeletReady"),
        ],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": ip}],
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "osImage": "outfit image kubelet",
                     "kernelVersion": "", "kubeletVersion": "v1.33.0", "kubeProxyVersion": "",
                     "containerRuntimeVersion": "outfit-image-kubelet://0", "machineID": "", "systemUUID": "",
                     "bootID": ""},
        "images": listed.iter().map(|(name, size)| json!({"names": [name], "sizeBytes": size})).collect::<Vec<_>>()
    }})
}

/// The node's Lease in `kube-node-lease`, owned by the node (so it goes with it).
pub(super) fn lease(name: &str, node_uid: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renewed()}
    })
}

/// A Lease's renewal time: now.
pub(super) fn renewed() -> Value {
    serde_json::to_value(MicroTime(Timestamp::now())).expect("a time serializes")
}

/// Where a pod stands, as its status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Shown {
    /// An init container's image is being pulled.
    Initializing,
    /// A container's image is being pulled.
    Creating,
    /// `container`'s image cannot be pulled: `ErrImagePull`, then `ImagePullBackOff`.
    Failing {
        container: String,
        image: String,
        init: bool,
        backing_off: bool,
    },
    /// Every container runs and is ready.
    Running,
    /// Every container ran and exited 0.
    Succeeded,
}

/// Where the pod is: its node's address, its own (once it runs), and when it started.
pub(super) struct Placed<'a> {
    pub(super) host_ip: &'a str,
    pub(super) pod_ip: Option<&'a str>,
    pub(super) start: Timestamp,
}

/// The status of `pod` standing at `shown` (a strategic-merge patch: `PodScheduled` is kept).
pub(super) fn pod_status(pod: &Pod, shown: &Shown, placed: &Placed<'_>) -> Value {
    let now = time(Timestamp::now());
    let spec = pod.spec.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let initializing = matches!(shown, Shown::Initializing | Shown::Failing { init: true, .. });
    let state = |which: &str, value: Value| {
        let mut state = json!({"waiting": null, "running": null, "terminated": null});
        state[which] = value;
        state
    };
    let container_status = |c: &Container, init: bool| {
        let image = c.image.clone().unwrap_or_default();
        let waiting = |reason: &str, message: Option<String>| {
            json!({"name": c.name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                   "started": false, "state": state("waiting", json!({"reason": reason, "message": message}))})
        };
        let done = json!({"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now,
                          "containerID": container_id(&uid, &c.name)});
        match shown {
            Shown::Failing {
                container,
                image: missing,
                init: failing_init,
                backing_off,
            } if *container == c.name && *failing_init == init => {
                let (reason, message) = if *backing_off {
                    (
                        "ImagePullBackOff",
                        format!("Back-off pulling image \"{missing}\""),
                    )
                } else {
                    (
                        "ErrImagePull",
                        format!("failed to pull image \"{missing}\": not found"),
                    )
                };
                waiting(reason, Some(message))
            }
            _ if init && !initializing => json!({
                "name": c.name, "image": image, "imageID": image_id(&image), "ready": true,
                "restartCount": 0, "started": false, "containerID": container_id(&uid, &c.name),
                "state": state("terminated", done)}),
            _ if initializing => waiting("PodInitializing", None),
            Shown::Running => json!({
                "name": c.name, "image": image, "imageID": image_id(&image), "ready": true,
                "restartCount": 0, "started": true, "containerID": container_id(&uid, &c.name),
                "state": state("running", json!({"startedAt": now}))}),
            Shown::Succeeded => json!({
                "name": c.name, "image": image, "imageID": image_id(&image), "ready": false,
                "restartCount": 0, "started": false, "containerID": container_id(&uid, &c.name),
                "state": state("terminated", done)}),
            _ => waiting("ContainerCreating", None),
        }
    };
    let (phase, ready, reason) = match shown {
        Shown::Running => ("Running", "True", None),
        Shown::Succeeded => ("Succeeded", "False", Some("PodCompleted")),
        _ => ("Pending", "False", Some("ContainersNotReady")),
    };
    let condition = |kind: &str, status: &str, reason: Option<&str>| {
        json!({"type": kind, "status": status, "reason": reason, "lastProbeTime": null,
               "lastTransitionTime": now})
    };
    let initialized = if initializing { "False" } else { "True" };
    let mut status = json!({
        "phase": phase,
        "hostIP": placed.host_ip, "hostIPs": [{"ip": placed.host_ip}],
        "startTime": time(placed.start),
        "conditions": [
            condition("PodReadyToStartContainers", "True", None),
            condition("Initialized", initialized, initializing.then_some("ContainersNotInitialized")),
            condition("ContainersReady", ready, reason),
            condition("Ready", ready, reason),
        ],
        "containerStatuses": spec.containers.iter().map(|c| container_status(c, false)).collect::<Vec<_>>(),
    });
    if let Some(init) = spec.init_containers.as_ref().filter(|i| !i.is_empty()) {
        status["initContainerStatuses"] = init.iter().map(|c| container_status(c, true)).collect();
    }
    if let Some(ip) = placed.pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    json!({"status": status})
}

/// 64 hex digits derived from `parts` (a stand-in for a digest).
fn digest(parts: &[&str]) -> String {
    (0..4u8)
        .map(|round| {
            let mut hasher = DefaultHasher::new();
            (round, parts).hash(&mut hasher);
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

/// The image's ID as a runtime reports it: its repository at a digest.
fn image_id(image: &str) -> String {
    let image = normalize(image);
    if image.contains('@') {
        return image;
    }
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    let repository = image[slash..]
        .rfind(':')
        .map_or(image.as_str(), |colon| &image[..slash + colon]);
    format!("{repository}@sha256:{}", digest(&[&image]))
}

/// A container's ID as containerd reports it.
fn container_id(pod_uid: &str, name: &str) -> String {
    format!("containerd://{}", digest(&[pod_uid, name]))
}
