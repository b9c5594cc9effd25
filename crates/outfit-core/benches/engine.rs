//! Engine benchmarks: one typical workspace pod, as JSON text the way the webhook receives it,
//! admitted against 10 to 10,000 PodDefaults spread over 100 namespaces, as the webhook does for
//! every pod creation, plus the cost of compiling a policy set (paid on each policy change, off the
//! request path).
//!
//! Run: `cargo bench -p outfit-core --bench engine`

mod common;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use outfit_core::{Document, Origin, Outcome, PolicySet, Request};
use serde_json::{Value, json, value::RawValue};

const NAMESPACES: usize = 100;

/// PodDefault `i` lives in namespace `ns-{i % 100}` and selects pods labelled `config-{i}: "true"`,
/// the way Kubeflow's UI offers one label per configuration. Every fifth one uses
/// `matchExpressions` instead of `matchLabels`.
fn pod_default(i: usize) -> Value {
    let selector = if i.is_multiple_of(5) {
        json!({"matchExpressions": [{"key": format!("config-{i}"), "operator": "In", "values": ["true"]}]})
    } else {
        json!({"matchLabels": {format!("config-{i}"): "true"}})
    };
    json!({
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "PodDefault",
        "metadata": {"name": format!("config-{i}"), "namespace": format!("ns-{}", i % NAMESPACES), "resourceVersion": "1"},
        "spec": {
            "selector": selector,
            "desc": "a typical configuration",
            "env": [{"name": format!("CONFIG_{i}_ENDPOINT"), "value": "https://service.example:8443"}],
            "volumes": [{"name": format!("config-{i}"), "secret": {"secretName": format!("config-{i}")}}],
            "volumeMounts": [{"name": format!("config-{i}"), "mountPath": format!("/etc/config-{i}"), "readOnly": true}],
            "tolerations": [{"key": format!("dedicated-{i}"), "operator": "Exists", "effect": "NoSchedule"}],
        }
    })
}

fn policy_documents(count: usize) -> Vec<Document> {
    (0..count)
        .map(|i| Document {
            origin: Origin::named("bench"),
            value: pod_default(i),
        })
        .collect()
}

/// A notebook pod as the API server sends it (defaults filled in), in `ns-0`, opting in to the first
/// three configurations of its namespace (0, 100, 200: those that exist).
fn workspace_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "alice-notebook-0", "generateName": "alice-notebook-", "namespace": "ns-0",
            "uid": "5c7a4f57-0c6a-4bd8-9d1e-1d8c5e0a9a11", "creationTimestamp": null,
            "labels": {"app": "alice-notebook", "notebook-name": "alice-notebook", "statefulset": "alice-notebook",
                       "controller-revision-hash": "alice-notebook-7d9f8", "config-0": "true", "config-100": "true", "config-200": "true"},
            "annotations": {"notebooks.kubeflow.org/server-type": "jupyter", "kubectl.kubernetes.io/default-container": "alice-notebook"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "alice-notebook",
                                 "uid": "0b9f0b8e-2a4c-4e0f-8d1a-7e4a9f3c2b10", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{
                "name": "alice-notebook", "image": "kubeflownotebookswg/jupyter-scipy:v1.9.0",
                "env": [{"name": "NB_PREFIX", "value": "/notebook/ns-0/alice-notebook"}],
                "ports": [{"name": "notebook-port", "containerPort": 8888, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "2", "memory": "8Gi"}, "requests": {"cpu": "500m", "memory": "2Gi"}},
                "volumeMounts": [{"name": "workspace", "mountPath": "/home/jovyan"}, {"name": "dshm", "mountPath": "/dev/shm"},
                                 {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
            }],
            "volumes": [
                {"name": "workspace", "persistentVolumeClaim": {"claimName": "alice-workspace"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
            ],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default-editor", "serviceAccount": "default-editor", "securityContext": {"fsGroup": 100},
            "schedulerName": "default-scheduler", "enableServiceLinks": false, "priority": 0,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {}
    })
}

/// The pod as the webhook has it: JSON text, from which the engine reads what it needs.
fn text(pod: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(pod).expect("JSON")
}

fn admit(set: &PolicySet, pod: &RawValue) -> usize {
    let request = Request::create(pod, "ns-0");
    match set.apply(&request) {
        Outcome::Admitted(admission) => admission.patch_json().len(),
        Outcome::Denied(denial) => panic!("benchmark pod denied: {}", denial.message),
    }
}

fn bench_apply(c: &mut Criterion) {
    let mut unmatched = workspace_pod();
    unmatched["metadata"]["labels"] = json!({"app": "batch-job"});
    let (pod, unmatched) = (text(&workspace_pod()), text(&unmatched));
    let mut group = c.benchmark_group("poddefault_apply");
    group.throughput(Throughput::Elements(1));
    for &count in common::policy_counts() {
        let mut builder = PolicySet::builder();
        builder.add_all(&policy_documents(count));
        let (set, report) = builder.build();
        assert!(report.errors.is_empty());
        assert!(admit(&set, &pod) > 0, "the pod must be mutated");
        group.bench_with_input(BenchmarkId::new("matching_pod", count), &count, |b, _| {
            b.iter(|| admit(&set, black_box(&*pod)))
        });
        group.bench_with_input(BenchmarkId::new("unmatched_pod", count), &count, |b, _| {
            b.iter(|| admit(&set, black_box(&*unmatched)))
        });
    }
    group.finish();
}

fn bench_compile(c: &mut Criterion) {
    let documents = policy_documents(1_000);
    c.bench_function("policy_set_compile/1000", |b| {
        b.iter(|| {
            let mut builder = PolicySet::builder();
            builder.add_all(black_box(&documents));
            builder.build().0.len()
        })
    });
}

criterion_group!(benches, bench_apply, bench_compile);
criterion_main!(benches);
