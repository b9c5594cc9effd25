//! Runs the first admission of `cargo bench -p outfit-core --bench gatekeeper` (N Assign mutators,
//! each adding one env var to each of 5 containers) in a loop, for a profiler:
//!
//!     CARGO_PROFILE_RELEASE_DEBUG=true cargo build --release -p outfit-core --example first-admission
//!     perf record -g target/release/examples/first-admission 100 2000
//!
//! Prints the mean time per admission.

use std::{hint::black_box, time::Instant};

use outfit_core::{Document, Operation, Origin, Outcome, PolicySet, Request};
use serde_json::{Value, json};

fn mutators(count: usize) -> PolicySet {
    let documents: Vec<Document> = (0..count)
        .map(|i| Document {
            origin: Origin::named("example"),
            value: json!({
                "apiVersion": "mutations.gatekeeper.sh/v1",
                "kind": "Assign",
                "metadata": {"name": format!("env-{i:04}")},
                "spec": {
                    "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                    "match": {"scope": "Namespaced", "excludedNamespaces": ["kube-*"]},
                    "location": format!("spec.containers[name: *].env[name: VAR_{i}].value"),
                    "parameters": {"assign": {"value": format!("value-{i}")}},
                },
            }),
        })
        .collect();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    builder.build().0
}

fn pod() -> Value {
    let containers: Vec<Value> = (0..5)
        .map(|i| {
            json!({
                "name": format!("c{i}"),
                "image": format!("registry.example.com/team/app-{i}:1.2.3"),
                "env": [{"name": "HOME", "value": "/home/coder"}, {"name": "LANG", "value": "C.UTF-8"}],
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
                "volumeMounts": [{"name": "home", "mountPath": "/home/coder"}],
            })
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "workspace", "namespace": "team-a", "labels": {"app": "workspace"}},
        "spec": {"containers": containers, "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "home"}}]},
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let set = mutators(count);
    let pod = pod();
    let request = Request {
        object: (&pod).into(),
        namespace: "default",
        operation: Operation::Create,
        user: None,
    };
    let start = Instant::now();
    for _ in 0..rounds {
        match black_box(&set).apply(black_box(&request)) {
            Outcome::Admitted(admission) => assert!(!admission.is_unchanged()),
            Outcome::Denied(denial) => panic!("{}", denial.message),
        }
    }
    let each = start.elapsed() / rounds as u32;
    println!("{count} mutators: {each:?} per first admission ({rounds} rounds)");
}
