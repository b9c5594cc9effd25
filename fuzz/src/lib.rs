//! What the fuzz targets share: the fixed policy sets and objects, compiled into the binaries (so a
//! reproducer behaves the same from any directory), and the engine's decision as the admission
//! target and the policies target both check it.

use std::sync::LazyLock;

use outfit_core::{Document, Object, Operation, Outcome, PolicySet, Request, UserInfo, document};
use serde_json::Value;

/// Kubeflow PodDefaults (`tests/fixtures/admission/policies`, what the server tests serve) and the
/// CLI fixtures' PodDefaults: selectors of every form, a conflicting pair in team-b, a PodDefault
/// for every pod in `default`.
const POD_DEFAULTS: &[(&str, &str)] = &[
    (
        "admission/namespace.yaml",
        include_str!("../../tests/fixtures/admission/policies/namespace.yaml"),
    ),
    (
        "admission/poddefaults.yaml",
        include_str!("../../tests/fixtures/admission/policies/poddefaults.yaml"),
    ),
    (
        "admission/conflict.yaml",
        include_str!("../../tests/fixtures/admission/policies/conflict.yaml"),
    ),
    (
        "poddefault-conflict/policies.yaml",
        include_str!("../../tests/fixtures/poddefault-conflict/policies.yaml"),
    ),
    (
        "poddefault-list-namespace-flag/policies.yaml",
        include_str!("../../tests/fixtures/poddefault-list-namespace-flag/policies.yaml"),
    ),
];

/// Gatekeeper mutators of every kind from the CLI fixtures that load together (the schema-conflict
/// and type-mismatch fixtures disagree with the others on the shape of `spec.containers`, which
/// would disable them all).
const GATEKEEPER: &[(&str, &str)] = &[
    (
        "gatekeeper-nfs/policies.yaml",
        include_str!("../../tests/fixtures/gatekeeper-nfs/policies.yaml"),
    ),
    (
        "gatekeeper-image-set-labels/policies.yaml",
        include_str!("../../tests/fixtures/gatekeeper-image-set-labels/policies.yaml"),
    ),
    (
        "gatekeeper-keyed-ports/policies.yaml",
        include_str!("../../tests/fixtures/gatekeeper-keyed-ports/policies.yaml"),
    ),
];

/// outfit's own kinds: the seed 000 PodPolicy and Audience (GPUs for `gpu-users`), and the filer
/// injector's inputs with a namespace's two shares.
const OUTFIT_KINDS: &[(&str, &str)] = &[
    (
        "examples/gpu-users/policies.yaml",
        include_str!("../../examples/gpu-users/policies.yaml"),
    ),
    (
        "examples/filer/policies/injector.yaml",
        include_str!("../../examples/filer/policies/injector.yaml"),
    ),
    (
        "examples/filer/policies/alice-research.yaml",
        include_str!("../../examples/filer/policies/alice-research.yaml"),
    ),
];

/// Objects the policies target admits with whatever policies it loaded: the pods of the examples
/// and of the CLI fixtures.
const OBJECTS: &[&str] = &[
    include_str!("../../examples/workspace/pod.yaml"),
    include_str!("../../examples/gatekeeper-nfs/pod.yaml"),
    include_str!("../../examples/gpu-users/pod.yaml"),
    include_str!("../../examples/filer/pod.yaml"),
    include_str!("../../tests/fixtures/gatekeeper-image-set-labels/input.yaml"),
    include_str!("../../tests/fixtures/gatekeeper-keyed-ports/input.yaml"),
    include_str!("../../tests/fixtures/poddefault-conflict/input.yaml"),
    include_str!("../../tests/fixtures/poddefault-list-namespace-flag/input.yaml"),
];

/// A fixed policy set the admission target decides reviews with.
pub struct FixedSet {
    /// What it holds, for messages.
    pub name: &'static str,
    /// The compiled set.
    pub set: PolicySet,
    /// Whether admitting an admitted object again must change nothing. True for every set since
    /// PodDefaults the pod records as applied are not applied again (RELIABILITY.md, Fuzzing,
    /// finding 2: with both kinds, a sidecar a mutator changed was a conflict on the next pass).
    pub idempotent: bool,
}

fn load(files: &[&[(&str, &str)]]) -> PolicySet {
    load_with(files, PolicySet::builder())
}

fn load_with(files: &[&[(&str, &str)]], mut builder: outfit_core::PolicySetBuilder) -> PolicySet {
    for (name, text) in files.iter().copied().flatten() {
        let documents = document::parse_stream(text, name).expect("fixture parses");
        builder.add_all(&documents);
    }
    let (set, _) = builder.build();
    assert!(!set.is_empty(), "the fixtures load policies");
    set
}

/// PodDefaults only, Gatekeeper mutators only, both, and every kind with outfit's annotation.
pub static FIXED_SETS: LazyLock<Vec<FixedSet>> = LazyLock::new(|| {
    vec![
        FixedSet {
            name: "PodDefaults",
            set: load(&[POD_DEFAULTS]),
            idempotent: true,
        },
        FixedSet {
            name: "Gatekeeper",
            set: load(&[GATEKEEPER]),
            idempotent: true,
        },
        FixedSet {
            name: "PodDefaults and Gatekeeper",
            set: load(&[POD_DEFAULTS, GATEKEEPER]),
            idempotent: true,
        },
        // As `outfit serve` runs by default: every family, and outfit's annotation.
        FixedSet {
            name: "every kind, annotated",
            set: load_with(
                &[POD_DEFAULTS, OUTFIT_KINDS, GATEKEEPER],
                PolicySet::builder().annotate(true),
            ),
            idempotent: true,
        },
    ]
});

/// The objects of [`OBJECTS`], parsed.
pub static FIXED_OBJECTS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    OBJECTS
        .iter()
        .flat_map(|text| document::parse_stream(text, "object").expect("fixture parses"))
        .map(|d: Document| d.value)
        .collect()
});

/// What the engine decided for an object given as a parsed `Value` (the CLI's way in).
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// Admitted as it came.
    Unchanged,
    /// Admitted, mutated into this object.
    Mutated(Value),
    /// Denied with this message.
    Denied(String),
}

/// Decides `object` with `set` and checks the engine's own invariants on the way: no internal
/// error, and the patch it reports gives exactly the object it reports.
pub fn decide(
    set: &PolicySet,
    object: &Value,
    namespace: &str,
    operation: Operation,
    user: Option<&UserInfo<'_>>,
) -> Decision {
    let request = Request {
        object: Object::Value(object),
        namespace,
        operation,
        user,
    };
    match set.apply(&request) {
        Outcome::Denied(denial) => {
            assert_ne!(
                denial.reason,
                outfit_core::DenialReason::Internal,
                "internal error: {}",
                denial.message
            );
            Decision::Denied(denial.message)
        }
        Outcome::Admitted(admission) if admission.is_unchanged() => Decision::Unchanged,
        Outcome::Admitted(admission) => {
            let mutated = admission
                .object(object)
                .unwrap_or_else(|e| panic!("the engine's patch does not apply to its own input: {e}"))
                .into_owned();
            // The engine may keep the object it built rather than apply its patch: both must agree.
            let mut patched = object.clone();
            json_patch::patch(&mut patched, &admission.patch()).expect("the engine's patch applies");
            assert_eq!(patched, mutated, "the engine's patch and its object differ");
            // The patch as the webhook sends it is the same patch.
            let sent: json_patch::Patch =
                serde_json::from_slice(&admission.patch_json()).expect("patch_json is a JSON patch");
            assert_eq!(sent, admission.patch(), "patch_json and patch differ");
            Decision::Mutated(mutated)
        }
    }
}
