//! What a stolen backend token can create (issue 33): the ValidatingAdmissionPolicy that
//! `outfit manifests --workspaces` prints, on a real API server, for requests by the backend's
//! ServiceAccount (the admin impersonating it, with every right RBAC could give, so that only the
//! policy stands in the way). A privileged pod, the host's namespaces and ports, an added
//! capability or host path the install does not list, a hostPath PersistentVolume or an NFS one
//! outside the storage root are refused; the listed host path and capability, a plain pod and
//! the backend's own NFS volume pass; anyone else is not held to it. That a workspace launches
//! under it is the full session's test (`session.rs`, whose backend runs with the install's
//! objects, this policy among them).

use kube::Client;
use serde_json::{Value, json};

use crate::{
    control_plane::{ControlPlane, create, pod_namespace, resource},
    requester::client_as,
};

const SYSTEM: &str = "ws-guard-system";
const PODS: &str = "ws-guard-pods";

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn volume(name: &str, source: Value) -> Value {
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"]});
    for (key, value) in source.as_object().unwrap() {
        spec[key] = value.clone();
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec})
}

/// Creates `object` (a pod in PODS, or a PersistentVolume) as `client`; the refusal's message.
async fn try_create(client: &Client, object: Value) -> Result<(), String> {
    let (namespace, resource) = match object["kind"].as_str() {
        Some("Pod") => (Some(PODS), resource("", "v1", "Pod", "pods")),
        _ => (None, resource("", "v1", "PersistentVolume", "persistentvolumes")),
    };
    match create(client, namespace, &resource, object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(format!("{} {}", status.code, status.message)),
        Err(error) => panic!("the API server did not answer: {error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_backend_token_cannot_create_what_owns_a_node() {
    let plane = ControlPlane::get();
    let admin = plane.admin_client().await;
    pod_namespace(&admin, PODS, json!({})).await;
    let printed = crate::support::manifests(&[
        "--workspaces",
        "--namespace",
        SYSTEM,
        "--workspaces-namespace",
        PODS,
        "--allowed-host-path",
        "/dev/dri",
        "--allowed-capability",
        "SYS_PTRACE",
        "--nfs-storage-root",
        "/tank/storage",
    ]);
    for (kind, plural) in [
        ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
        (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    ] {
        let object = printed
            .iter()
            .find(|d| d.kind() == kind)
            .expect(kind)
            .value
            .clone();
        create(
            &admin,
            None,
            &resource("admissionregistration.k8s.io", "v1", kind, plural),
            object,
        )
        .await
        .unwrap_or_else(|error| panic!("{kind}: {error}"));
    }
    let backend = client_as(
        plane,
        &format!("system:serviceaccount:{SYSTEM}:outfit-workspaces"),
        &["system:serviceaccounts", "system:masters"],
    )
    .await;

    // The API server reads policies through an informer: wait until this one is in force (each
    // probe has a name of its own, since those made before it are admitted).
    let privileged = |name: &str| {
        pod(
            name,
            json!({"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]}),
        )
    };
    outfit_test_support::wait::eventually(
        "the policy in force",
        std::time::Duration::from_secs(60),
        || async {
            let mut probe = privileged("");
            probe["metadata"] = json!({"generateName": "probe-"});
            try_create(&backend, probe)
                .await
                .err()
                .filter(|error| error.contains("may not create privileged containers"))
        },
    )
    .await;

    let refused = [
        (privileged("privileged"), "may not create privileged containers"),
        (
            pod("host-network", json!({"hostNetwork": true})),
            "host's network, PID or IPC",
        ),
        (
            pod("host-pid", json!({"hostPID": true})),
            "host's network, PID or IPC",
        ),
        (
            pod(
                "host-port",
                json!({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 22, "hostPort": 2222}]}]}),
            ),
            "host ports",
        ),
        (
            pod(
                "init-privileged",
                json!({"initContainers": [{"name": "i", "image": "i", "securityContext": {"privileged": true}}]}),
            ),
            "privileged containers",
        ),
        (
            pod(
                "net-admin",
                json!({"containers": [{"name": "c", "image": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}),
            ),
            "the capabilities the install allows: SYS_PTRACE",
        ),
        (
            pod(
                "root",
                json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
            ),
            "may not mount the host path / (the host paths the install allows: /dev/dri)",
        ),
        (
            pod(
                "escape",
                json!({"volumes": [{"name": "up", "hostPath": {"path": "/dev/dri/../../etc"}}]}),
            ),
            // The API server's own validation refuses '..' in a pod's host path before the
            // policy looks (the policy refuses it too, for any way in without that check).
            "must not contain '..'",
        ),
        (
            pod(
                "beside",
                json!({"volumes": [{"name": "b", "hostPath": {"path": "/dev/dri-other"}}]}),
            ),
            "the host paths the install allows",
        ),
        (
            volume("host-volume", json!({"hostPath": {"path": "/"}})),
            "only NFS PersistentVolumes under /tank/storage",
        ),
        (
            volume(
                "other-nfs",
                json!({"nfs": {"server": "10.0.0.1", "path": "/etc"}}),
            ),
            "only NFS PersistentVolumes under /tank/storage",
        ),
        (
            volume(
                "nfs-escape",
                json!({"nfs": {"server": "10.0.0.1", "path": "/tank/storage/../../etc"}}),
            ),
            "only NFS PersistentVolumes under /tank/storage",
        ),
    ];
    for (object, why) in refused {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let error = try_create(&backend, object).await.expect_err(&name);
        assert!(error.contains(why), "{name}: {error}");
    }

    let allowed = [
        pod("plain", json!({})),
        pod(
            "gpu",
            json!({"volumes": [{"name": "dri", "hostPath": {"path": "/dev/dri/card0"}}]}),
        ),
        pod(
            "ptrace",
            json!({"containers": [{"name": "c", "image": "i", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"], "drop": ["ALL"]}}}]}),
        ),
        volume(
            "ws-guard-storage-alice",
            json!({"nfs": {"server": "10.0.0.1", "path": "/tank/storage/alice"}}),
        ),
    ];
    for object in allowed {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        try_create(&backend, object)
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}"));
    }
    // Anyone else is not held to it.
    try_create(
        &admin,
        pod(
            "admins-privileged",
            json!({"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]}),
        ),
    )
    .await
    .expect("the policy is for the backend's identity alone");
}
