//! The mutators and objects both engines get: the same YAML text and the same JSON objects.

use serde_json::{Value, json};

/// Which mutators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    /// The criterion bench's (`crates/outfit-core/benches/gatekeeper.rs`): N `Assign`s on
    /// `spec.containers[name: *].env[name: VAR_i].value` over a 5-container pod.
    Env,
    /// Every kind in turn (Assign with objects, keyed-list terminals, pathTests, fromMetadata;
    /// AssignMetadata; ModifySet merge and prune; AssignImage) under three kinds of `match`.
    Mixed,
}

impl Workload {
    pub(crate) const ALL: [Workload; 2] = [Workload::Env, Workload::Mixed];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Env => "env",
            Workload::Mixed => "mixed",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    /// The mutator documents (and the Namespace documents they match on) as one YAML stream.
    pub(crate) fn yaml(self, count: usize) -> String {
        let documents: Vec<Value> = match self {
            Workload::Env => (0..count).map(env_assign).collect(),
            Workload::Mixed => std::iter::once(namespace("team-a", json!({"tier": "gold"})))
                .chain((0..count).map(mixed_mutator))
                .collect(),
        };
        let mut yaml = String::new();
        for document in &documents {
            yaml.push_str("---\n");
            yaml.push_str(&serde_saphyr::to_string(document).expect("a JSON value serializes as YAML"));
        }
        yaml
    }

    /// The object every mutator matches and changes (first admission).
    pub(crate) fn fresh(self) -> Value {
        match self {
            Workload::Env => env_pod("team-a"),
            Workload::Mixed => mixed_pod(),
        }
    }

    /// The object no mutator matches, and why.
    pub(crate) fn unmatched(self) -> (Value, &'static str) {
        match self {
            Workload::Env => (env_pod("kube-system"), "pod in an excluded namespace"),
            Workload::Mixed => (service(), "a Service (other kind) in the same namespace"),
        }
    }
}

/// The three inputs per workload and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mix {
    /// Every mutator matches and changes the object.
    First,
    /// The object as first admission left it: every mutator matches, nothing changes.
    Mutated,
    /// No mutator matches.
    None,
}

impl Mix {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mix::First => "first-admission",
            Mix::Mutated => "already-mutated",
            Mix::None => "not-matching",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name {
            "a" | "first" | "first-admission" => Some(Mix::First),
            "b" | "mutated" | "already-mutated" => Some(Mix::Mutated),
            "c" | "none" | "not-matching" => Some(Mix::None),
            _ => None,
        }
    }
}

/// The request namespace of an object: its own (every object here names one).
pub(crate) fn namespace_of(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
}

fn pod_applies() -> Value {
    json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}])
}

fn env_assign(i: usize) -> Value {
    json!({
        "apiVersion": "mutations.gatekeeper.sh/v1",
        "kind": "Assign",
        "metadata": {"name": format!("env-{i:05}")},
        "spec": {
            "applyTo": pod_applies(),
            "match": {"scope": "Namespaced", "excludedNamespaces": ["kube-*"]},
            "location": format!("spec.containers[name: *].env[name: VAR_{i}].value"),
            "parameters": {"assign": {"value": format!("value-{i}")}},
        },
    })
}

/// The criterion bench's 5-container pod, in `namespace`.
fn env_pod(namespace: &str) -> Value {
    let mut pod: Value = serde_json::from_str(include_str!(
        "../../../../outfit-core/benches/data/gatekeeper-pod.json"
    ))
    .expect("a JSON pod");
    pod["metadata"]["namespace"] = json!(namespace);
    pod
}

fn namespace(name: &str, labels: Value) -> Value {
    let mut labels = labels;
    labels["kubernetes.io/metadata.name"] = json!(name);
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// Mutator `i` of the mixed workload: the kind and location from `i % 8`, the `match` from
/// `(i / 8) % 3` (a namespace glob, a namespaceSelector, or a labelSelector with an exclusion),
/// every one limited to pods.
fn mixed_mutator(i: usize) -> Value {
    let kinds = json!([{"apiGroups": [""], "kinds": ["Pod"]}]);
    let matching = match (i / 8) % 3 {
        0 => json!({"scope": "Namespaced", "kinds": kinds, "namespaces": ["team-*"]}),
        1 => {
            json!({"scope": "Namespaced", "kinds": kinds, "namespaceSelector": {"matchLabels": {"tier": "gold"}}})
        }
        _ => json!({
            "scope": "Namespaced",
            "kinds": kinds,
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["workspace"]}]},
            "excludedNamespaces": ["kube-*"],
        }),
    };
    let name = format!("mix-{i:05}");
    let (kind, spec) = match i % 8 {
        0 => (
            "Assign",
            json!({
                "location": format!("spec.containers[name: *].env[name: MIX_{i}].valueFrom.fieldRef.fieldPath"),
                "parameters": {"assign": {"value": "metadata.name"}},
            }),
        ),
        1 => {
            let location = if (i / 8).is_multiple_of(2) {
                format!("metadata.labels.mix-{i}")
            } else {
                format!("metadata.annotations.\"mix.example.com/a-{i}\"")
            };
            (
                "AssignMetadata",
                json!({"location": location, "parameters": {"assign": {"value": format!("v{i}")}}}),
            )
        }
        2 => (
            "ModifySet",
            json!({
                "location": "spec.containers[name: *].args",
                "parameters": {"operation": "merge", "values": {"fromList": [format!("--flag-{i}"), "--common"]}},
            }),
        ),
        3 => {
            let location = format!("spec.nodeSelector.\"mix.example.com/n-{i}\"");
            (
                "Assign",
                json!({
                    "location": location,
                    "parameters": {
                        "assign": {"value": format!("yes-{i}")},
                        "pathTests": [{"subPath": location, "condition": "MustNotExist"}],
                    },
                }),
            )
        }
        4 => (
            "Assign",
            json!({
                "location": format!("spec.tolerations[key: mix-{i}]"),
                "parameters": {"assign": {"value": {"key": format!("mix-{i}"), "operator": "Exists", "effect": "NoSchedule"}}},
            }),
        ),
        5 => (
            "Assign",
            json!({
                "location": format!("spec.containers[name: c0].env[name: FROM_META_{i}].value"),
                "parameters": {"assign": {"fromMetadata": {"field": "namespace"}}},
            }),
        ),
        6 => (
            "ModifySet",
            json!({
                "location": "spec.containers[name: *].args",
                "parameters": {"operation": "prune", "values": {"fromList": ["--remove-me"]}},
            }),
        ),
        _ => {
            let parameters = if (i / 8).is_multiple_of(2) {
                json!({"assignDomain": "mirror.example.com"})
            } else {
                json!({"assignTag": ":stable"})
            };
            (
                "AssignImage",
                json!({"location": "spec.containers[name: *].image", "parameters": parameters}),
            )
        }
    };
    let mut spec = spec;
    spec["match"] = matching;
    if kind != "AssignMetadata" {
        spec["applyTo"] = pod_applies();
    }
    let api_version = if kind == "AssignImage" {
        "mutations.gatekeeper.sh/v1alpha1"
    } else {
        "mutations.gatekeeper.sh/v1"
    };
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec})
}

fn mixed_pod() -> Value {
    let containers: Vec<Value> = (0..5)
        .map(|i| {
            json!({
                "name": format!("c{i}"),
                "image": format!("registry.example.com/team/app-{i}:1.2.3"),
                "args": ["--keep", "--remove-me"],
                "env": [{"name": "HOME", "value": "/home/coder"}],
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "workspace", "namespace": "team-a", "labels": {"app": "workspace"}},
        "spec": {
            "containers": containers,
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "existing", "operator": "Exists"}],
        },
    })
}

fn service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "workspace", "namespace": "team-a", "labels": {"app": "workspace"}},
        "spec": {"selector": {"app": "workspace"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    })
}
