//! The policies and the AdmissionReview mix the load generator sends: Kubeflow-style PodDefaults
//! spread over namespaces, and 200 review bodies of pod CREATEs, UPDATEs, DELETEs and other kinds.

use std::path::Path;

use anyhow::Result;
use bytes::Bytes;
use serde_json::{Value, json};

/// `count` PodDefaults spread over `namespaces` namespaces, each namespace in one JSON List file.
/// In each namespace, PodDefault `i` selects pods labelled `pd-<i>: "true"` and adds an env
/// variable, a volume and a mount, like the Kubeflow examples.
pub fn generate_policies(dir: &Path, count: usize, namespaces: usize) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let per_namespace = count.div_ceil(namespaces.max(1));
    let mut made = 0;
    for ns in 0..namespaces {
        let namespace = format!("team-{ns}");
        let mut items = vec![json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/part-of": "kubeflow-profile"}}
        })];
        for i in 0..per_namespace {
            if made == count {
                break;
            }
            made += 1;
            items.push(json!({
                "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
                "metadata": {"name": format!("pd-{i}"), "namespace": namespace},
                "spec": {
                    "desc": format!("configuration {i}"),
                    "selector": {"matchLabels": {format!("pd-{i}"): "true"}},
                    "env": [{"name": format!("PD_{i}_ENDPOINT"), "value": format!("https://svc-{i}.{namespace}.svc:8443")}],
                    "volumes": [{"name": format!("pd-{i}-secret"), "secret": {"secretName": format!("pd-{i}-credentials")}}],
                    "volumeMounts": [{"name": format!("pd-{i}-secret"), "mountPath": format!("/var/run/secrets/pd-{i}"), "readOnly": true}]
                }
            }));
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(dir.join(format!("{namespace}.json")), serde_json::to_vec(&list)?)?;
    }
    Ok(())
}

fn pod(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": namespace, "creationTimestamp": null, "labels": labels,
            "annotations": {"notebooks.kubeflow.org/server-type": "jupyter"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": "0b5e1f9a-3c2d-4e8f-9a7b-6c5d4e3f2a10", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "volumes": [{"name": "kube-api-access-7xk2p", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}, {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}], "defaultMode": 420}}],
            "containers": [{
                "name": "main", "image": "kubeflownotebookswg/jupyter-scipy:v1.9.0",
                "ports": [{"name": "notebook-port", "containerPort": 8888, "protocol": "TCP"}],
                "env": [{"name": "NB_PREFIX", "value": format!("/notebook/{namespace}/{name}")}],
                "resources": {"limits": {"memory": "8Gi"}, "requests": {"cpu": "500m", "memory": "2Gi"}},
                "volumeMounts": [{"name": "kube-api-access-7xk2p", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default-editor", "securityContext": {"fsGroup": 100}, "schedulerName": "default-scheduler"
        },
        "status": {}
    })
}

fn review(uid: usize, operation: &str, namespace: &str, name: &str, object: Value, old: Value) -> Bytes {
    let kind = object["kind"].as_str().unwrap_or("Pod").to_owned();
    let body = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{uid:012}"),
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name, "namespace": namespace, "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kubeflow:notebook-controller-service-account", "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false
        }
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// 200 bodies: 60% pod CREATEs opting in to 1–3 PodDefaults, 20% pod CREATEs matching none,
/// 10% pod UPDATEs, 5% DELETEs, 5% CREATEs of other kinds.
pub fn review_mix(namespaces: usize, per_namespace: usize) -> Vec<Bytes> {
    let per_namespace = per_namespace.max(1);
    (0..200)
        .map(|n| {
            let namespace = format!("team-{}", n % namespaces.max(1));
            let name = format!("nb-{n}");
            match n % 20 {
                0..12 => {
                    let mut labels = serde_json::Map::new();
                    labels.insert("app".into(), json!("notebook"));
                    for k in 0..=(n % 3) {
                        labels.insert(format!("pd-{}", (n + 7 * k) % per_namespace), json!("true"));
                    }
                    review(n, "CREATE", &namespace, &name, pod(&namespace, &name, Value::Object(labels)), Value::Null)
                }
                12..16 => review(
                    n,
                    "CREATE",
                    &namespace,
                    &name,
                    pod(&namespace, &name, json!({"app": "batch"})),
                    Value::Null,
                ),
                16 | 17 => {
                    let old = pod(&namespace, &name, json!({"app": "batch"}));
                    let new = pod(&namespace, &name, json!({"app": "batch", "pd-1": "true"}));
                    review(n, "UPDATE", &namespace, &name, new, old)
                }
                18 => review(
                    n,
                    "DELETE",
                    &namespace,
                    &name,
                    Value::Null,
                    pod(&namespace, &name, json!({"app": "batch"})),
                ),
                _ => review(
                    n,
                    "CREATE",
                    &namespace,
                    &name,
                    json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}}),
                    Value::Null,
                ),
            }
        })
        .collect()
}
