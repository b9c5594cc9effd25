//! Gatekeeper workload: 10 to 10,000 Assign mutators with globbed locations
//! (`spec.containers[name: *].env[name: VAR_i].value`) over a 5-container pod.
//!
//!     cargo bench -p outfit-core --bench gatekeeper
//!
//! Three cases per size: `first-admission` (every mutator adds one env var to every container,
//! the loop then confirms convergence), `already-mutated` (the same pod after mutation: every
//! mutator matches and nothing changes, so no copy is made), and `not-matching` (a pod in a
//! namespace the mutators exclude: matching only). At 10,000 mutators the first admission adds
//! 50,000 env vars, so that size takes fewer samples.

mod common;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use outfit_core::{Document, Origin, Outcome, PolicySet, Request};
use serde_json::{Value, json};

fn mutators(count: usize) -> PolicySet {
    let documents: Vec<Document> = (0..count)
        .map(|i| Document {
            origin: Origin::named("bench"),
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
    let (set, report) = builder.build();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    set
}

/// The 5-container pod of `data/gatekeeper-pod.json` (gatekeeper-compare's `env` workload reads
/// the same file), in `namespace`.
fn pod(namespace: &str) -> Value {
    let mut pod: Value = serde_json::from_str(include_str!("data/gatekeeper-pod.json")).expect("a JSON pod");
    pod["metadata"]["namespace"] = json!(namespace);
    pod
}

fn admit(set: &PolicySet, object: &Value) -> Option<Value> {
    let request = Request::create(object, "default");
    match set.apply(&request) {
        Outcome::Admitted(admission) => {
            (!admission.is_unchanged()).then(|| admission.object(object).expect("patch applies").into_owned())
        }
        Outcome::Denied(denial) => panic!("{}", denial.message),
    }
}

fn gatekeeper(c: &mut Criterion) {
    let mut group = c.benchmark_group("gatekeeper");
    for &count in common::policy_counts() {
        let (samples, seconds) = if count >= 10_000 { (10, 8) } else { (20, 4) };
        group.sample_size(samples);
        group.measurement_time(std::time::Duration::from_secs(seconds));
        group.warm_up_time(std::time::Duration::from_secs(2));
        let set = mutators(count);
        let fresh = pod("team-a");
        let mutated = admit(&set, &fresh).expect("mutators apply");
        assert!(admit(&set, &mutated).is_none(), "idempotent");
        let excluded = pod("kube-system");
        group.bench_with_input(BenchmarkId::new("first-admission", count), &fresh, |b, pod| {
            b.iter(|| admit(&set, black_box(pod)))
        });
        group.bench_with_input(BenchmarkId::new("already-mutated", count), &mutated, |b, pod| {
            b.iter(|| admit(&set, black_box(pod)))
        });
        group.bench_with_input(BenchmarkId::new("not-matching", count), &excluded, |b, pod| {
            b.iter(|| admit(&set, black_box(pod)))
        });
    }
    group.finish();
}

criterion_group!(benches, gatekeeper);
criterion_main!(benches);
