//! Any text as a policy file, as `outfit mutate --policies` and `outfit serve` load one:
//! `outfit_core::document::parse_stream` (YAML or JSON, multi-document, `kind: List`), then every
//! document through `PolicySetBuilder` (PodDefault, Assign, AssignImage, AssignMetadata, ModifySet,
//! Namespace), then the set applied to the fixture pods and to the file's own pods.
//!
//! Invariants:
//! - no panic, and every error and warning names its origin: the file, and the document for
//!   anything past the syntax;
//! - the same documents written as JSON (one object per line) load into the same policies with the
//!   same errors: YAML and JSON are two spellings of one policy;
//! - on every object the set admits, the patch applies and gives the object the engine reports; no
//!   denial is an internal error; with Gatekeeper mutators only, admitting the result again changes
//!   nothing (Gatekeeper's loop runs to a fixed point).
//!
//! Run: `hack/fuzz.sh run policies 60`

#![no_main]

use libfuzzer_sys::fuzz_target;
use outfit_core::{
    Document, DocumentError, Operation, PolicyError, PolicySet, Problem, document, poddefault,
    policy_set::LoadReport,
};
use outfit_fuzz::{Decision, FIXED_OBJECTS, decide};

const YAML: &str = "fuzz.yaml";
const JSON: &str = "fuzz.json";

fuzz_target!(|text: &str| {
    let documents = match document::parse_stream(text, YAML) {
        Ok(documents) => documents,
        Err(error) => {
            let message = error.to_string();
            assert!(message.starts_with(YAML), "error without its file: {message}");
            if let DocumentError::NotAnObject { origin, .. } = &error {
                assert_eq!(&*origin.source, YAML);
            }
            return;
        }
    };
    let (set, report) = load(&documents);
    check_origins(&report, YAML);

    // JSON: the same objects, one per line. (An item of a `kind: List` that is itself a list
    // would be flattened when read at the top level: such files are left out.)
    let nested_list = documents
        .iter()
        .any(|d| d.kind().ends_with("List") && d.value["items"].is_array());
    if !nested_list {
        let json: String = documents
            .iter()
            .map(|d| serde_json::to_string(&d.value).expect("a Value serializes") + "\n")
            .collect();
        let again = document::parse_stream(&json, JSON).expect("outfit's own JSON parses");
        assert_eq!(again.len(), documents.len(), "{json}");
        let (json_set, json_report) = load(&again);
        check_origins(&json_report, JSON);
        assert_eq!(problems(&report.errors), problems(&json_report.errors), "{json}");
        for &kind in set.kinds() {
            assert_eq!(set.count(kind), json_set.count(kind), "{kind}: {json}");
        }
    }

    if set.is_empty() {
        return;
    }
    let gatekeeper_only = set.count(poddefault::POLICY_KIND) == 0;
    let own_pods = documents.iter().filter(|d| d.kind() == "Pod").map(|d| &d.value);
    for object in FIXED_OBJECTS.iter().chain(own_pods).take(12) {
        for operation in [Operation::Create, Operation::Update] {
            let Decision::Mutated(mutated) = decide(&set, object, "default", operation, None) else {
                continue;
            };
            if gatekeeper_only {
                let again = decide(&set, &mutated, "default", operation, None);
                assert_eq!(
                    again,
                    Decision::Unchanged,
                    "not idempotent on {object}, mutated into {mutated}"
                );
            }
        }
    }
});

fn load(documents: &[Document]) -> (PolicySet, LoadReport) {
    // As `outfit serve` runs: with its annotation, which must keep a second admission a no-op.
    let mut builder = PolicySet::builder().annotate(true);
    builder.add_all(documents);
    builder.build()
}

fn check_origins(report: &LoadReport, file: &str) {
    for error in &report.errors {
        assert_eq!(&*error.origin.source, file);
        let message = error.to_string();
        assert!(message.starts_with(&error.origin.to_string()), "{message}");
    }
    for warning in &report.warnings {
        assert_eq!(&*warning.origin.source, file);
        assert!(warning.to_string().starts_with(&warning.origin.to_string()));
    }
    for (origin, _) in &report.skipped {
        assert_eq!(&*origin.source, file);
    }
}

/// The errors without the origins they name (document indices differ once a list is flattened).
fn problems(errors: &[PolicyError]) -> Vec<String> {
    let mut problems: Vec<String> = errors
        .iter()
        .map(|e| {
            let problem = match &e.problem {
                Problem::DuplicatePolicy { .. } => "defined again".to_owned(),
                Problem::SchemaConflict { other, detail, .. } => format!("conflict with {other}: {detail}"),
                problem => problem.to_string(),
            };
            format!("{}: {}: {problem}", e.policy, e.field)
        })
        .collect();
    problems.sort();
    problems
}
