//! Mutator validation. `E*` rows restate Gatekeeper's `mutator_validation_test.go` and applyTo tests
//! (reference §4.6), `I13` the AssignImage location checks; rows marked "outfit" are load-time
//! checks Gatekeeper does not make (silent no-ops there).

use serde_json::{Value, json};

use crate::{document::Document, error::Problem, gatekeeper::test_support::mutator, vocab::Origin};

fn apply_to() -> Value {
    json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}])
}

fn assign_spec(location: &str, assign: Value) -> Value {
    json!({"applyTo": apply_to(), "location": location, "parameters": {"assign": assign}})
}

#[test]
fn valid_mutators_load() {
    let cases = [
        (
            "E1 AssignMetadata label",
            "AssignMetadata",
            json!({"location": "metadata.labels.foo", "parameters": {"assign": {"value": "bar"}}}),
        ),
        (
            "AssignMetadata quoted annotation key",
            "AssignMetadata",
            json!({"location": r#"metadata.annotations."vault.hashicorp.com/auth-path""#, "parameters": {"assign": {"value": "x"}}}),
        ),
        (
            "AssignMetadata fromMetadata",
            "AssignMetadata",
            json!({"location": "metadata.labels.ns", "parameters": {"assign": {"fromMetadata": {"field": "namespace"}}}}),
        ),
        (
            "Assign below a nested metadata",
            "Assign",
            assign_spec("spec.template.metadata.labels.x", json!({"value": "y"})),
        ),
        (
            "Assign upsert with integer key",
            "Assign",
            assign_spec("spec.ports[port: 80]", json!({"value": {"port": 80}})),
        ),
        (
            "applyTo operations *",
            "Assign",
            json!({"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"], "operations": ["*"]}], "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
        ),
        (
            "ModifySet default merge",
            "ModifySet",
            json!({"applyTo": apply_to(), "location": "spec.containers[name: *].args", "parameters": {"values": {"fromList": ["-v"]}}}),
        ),
        (
            "AssignImage tag",
            "AssignImage",
            json!({"applyTo": apply_to(), "location": "spec.containers[name: *].image", "parameters": {"assignTag": ":v1"}}),
        ),
        (
            "pathTests prefix by parsed nodes",
            "Assign",
            json!({"applyTo": apply_to(), "location": "a[name: b].c", "parameters": {"assign": {"value": 1}, "pathTests": [{"subPath": "a[name: \"b\"]", "condition": "MustExist"}]}}),
        ),
    ];
    for (row, kind, spec) in cases {
        if let Err(error) = mutator(kind, "m", spec) {
            panic!("{row}: {error}");
        }
    }
}

#[test]
fn invalid_mutators_are_rejected_with_field_and_reason() {
    let glob_ops = |ops: Value| json!({"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"], "operations": ops}], "location": "spec.x", "parameters": {"assign": {"value": 1}}});
    // (row, kind, spec, field at fault, text in the message)
    let cases = [
        (
            "E2 AssignMetadata outside labels/annotations",
            "AssignMetadata",
            json!({"location": "metadata.foo.bar", "parameters": {"assign": {"value": "x"}}}),
            "spec.location",
            "invalid location for assignmetadata",
        ),
        (
            "E3 AssignMetadata object value",
            "AssignMetadata",
            json!({"location": "metadata.labels.foo", "parameters": {"assign": {"value": {"a": 1}}}}),
            "spec.parameters.assign.value",
            "must be a string",
        ),
        (
            "E4 Assign under metadata",
            "Assign",
            assign_spec("metadata.foo.bar", json!({"value": "x"})),
            "spec.location",
            "can't change metadata",
        ),
        (
            "E5 Assign changes the key",
            "Assign",
            assign_spec("spec.containers[name:foo].name", json!({"value": "bar"})),
            "spec.location",
            "changing the item key",
        ),
        (
            "E6 scalar into a keyed list",
            "Assign",
            assign_spec("spec.containers[name:foo]", json!({"value": "xxx"})),
            "spec.parameters.assign.value",
            "only objects",
        ),
        (
            "E7 object without the key",
            "Assign",
            assign_spec("spec.containers[name:foo]", json!({"value": {}})),
            "spec.parameters.assign.value",
            "different key",
        ),
        (
            "E7 object with another key",
            "Assign",
            assign_spec("spec.containers[name:foo]", json!({"value": {"name": "bar"}})),
            "spec.parameters.assign.value",
            "different key",
        ),
        (
            "E8 append to a glob",
            "Assign",
            assign_spec("spec.containers[name:*]", json!({"value": {"name": "bar"}})),
            "spec.location",
            "globbed list",
        ),
        (
            "E9 [*] selector",
            "Assign",
            assign_spec("spec.containers[*].image", json!({"value": "x"})),
            "spec.location",
            "column 17",
        ),
        (
            "E9 [] selector",
            "Assign",
            assign_spec("spec.containers[].image", json!({"value": "x"})),
            "spec.location",
            "column 17",
        ),
        (
            "E10 no assign block",
            "Assign",
            json!({"applyTo": apply_to(), "location": "spec.x"}),
            "spec.parameters.assign",
            "must set one of",
        ),
        (
            "E10 empty assign block",
            "Assign",
            assign_spec("spec.x", json!({})),
            "spec.parameters.assign",
            "must set one of",
        ),
        (
            "E10 value: null is unset",
            "Assign",
            assign_spec("spec.x", json!({"value": null})),
            "spec.parameters.assign",
            "must set one of",
        ),
        (
            "two sources",
            "Assign",
            assign_spec("spec.x", json!({"value": 1, "fromMetadata": {"field": "name"}})),
            "spec.parameters.assign",
            "only set one",
        ),
        (
            "E11 DELETE",
            "Assign",
            glob_ops(json!(["DELETE"])),
            "spec.applyTo[0].operations[0]",
            "DELETE",
        ),
        (
            "E11 CONNECT",
            "Assign",
            glob_ops(json!(["CREATE", "CONNECT"])),
            "spec.applyTo[0].operations[1]",
            "CONNECT",
        ),
        (
            "E11 * with another",
            "Assign",
            glob_ops(json!(["*", "CREATE"])),
            "spec.applyTo[0].operations[0]",
            "combined",
        ),
        (
            "E11 duplicate",
            "Assign",
            glob_ops(json!(["CREATE", "CREATE"])),
            "spec.applyTo[0].operations[1]",
            "duplicate",
        ),
        (
            "E12/issue: externalData is not supported",
            "Assign",
            assign_spec("spec.x", json!({"externalData": {"provider": "p"}})),
            "spec.parameters.assign.externalData",
            "not supported",
        ),
        (
            "fromMetadata on a keyed list",
            "Assign",
            assign_spec("spec.l[name: a]", json!({"fromMetadata": {"field": "name"}})),
            "spec.parameters.assign.fromMetadata",
            "metadata field to a list",
        ),
        (
            "empty Assign location",
            "Assign",
            assign_spec("", json!({"value": 1})),
            "spec.location",
            "empty path",
        ),
        (
            "applyTo required",
            "Assign",
            json!({"location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "spec.applyTo",
            "applyTo required",
        ),
        (
            "applyTo needs group, version and kind",
            "Assign",
            json!({"applyTo": [{"groups": [""], "kinds": ["Pod"]}], "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "spec.applyTo[0]",
            "all of group, version and kind",
        ),
        (
            "ModifySet ends in a keyed list",
            "ModifySet",
            json!({"applyTo": apply_to(), "location": "spec.containers[name: a]", "parameters": {"values": {"fromList": [1]}}}),
            "spec.location",
            "cannot be a keyed list",
        ),
        (
            "ModifySet unknown operation",
            "ModifySet",
            json!({"applyTo": apply_to(), "location": "spec.a", "parameters": {"operation": "replace"}}),
            "spec.parameters.operation",
            "merge or prune",
        ),
        (
            "outfit: ModifySet empty location (Gatekeeper fails at mutation)",
            "ModifySet",
            json!({"applyTo": apply_to(), "location": "", "parameters": {}}),
            "spec.location",
            "empty path",
        ),
        (
            "I13 AssignImage under metadata",
            "AssignImage",
            json!({"applyTo": apply_to(), "location": "metadata.labels.image", "parameters": {"assignTag": ":v"}}),
            "spec.location",
            "can't change metadata",
        ),
        (
            "I13 AssignImage on a list",
            "AssignImage",
            json!({"applyTo": apply_to(), "location": "spec.containers[name:foo]", "parameters": {"assignTag": ":v"}}),
            "spec.location",
            "list-type",
        ),
        (
            "I13 AssignImage bad location",
            "AssignImage",
            json!({"applyTo": apply_to(), "location": "/x/y/zx[)", "parameters": {"assignTag": ":v"}}),
            "spec.location",
            "column 1",
        ),
        (
            "I12 AssignImage nothing set",
            "AssignImage",
            json!({"applyTo": apply_to(), "location": "spec.image", "parameters": {}}),
            "spec.parameters",
            "at least one",
        ),
        (
            "pathTest not a prefix",
            "Assign",
            json!({"applyTo": apply_to(), "location": "spec.a.b", "parameters": {"assign": {"value": 1}, "pathTests": [{"subPath": "spec.c", "condition": "MustExist"}]}}),
            "spec.parameters.pathTests[0].subPath",
            "prefix",
        ),
        (
            "pathTests same depth both ways",
            "Assign",
            json!({"applyTo": apply_to(), "location": "spec.a.b", "parameters": {"assign": {"value": 1}, "pathTests": [{"subPath": "spec.a", "condition": "MustExist"}, {"subPath": "spec.a", "condition": "MustNotExist"}]}}),
            "spec.parameters.pathTests[1].condition",
            "conflicting",
        ),
        (
            "pathTests MustExist after a parent MustNotExist",
            "Assign",
            json!({"applyTo": apply_to(), "location": "spec.a.b", "parameters": {"assign": {"value": 1}, "pathTests": [{"subPath": "spec.a", "condition": "MustNotExist"}, {"subPath": "spec.a.b", "condition": "MustExist"}]}}),
            "spec.parameters.pathTests[1].condition",
            "conflicting",
        ),
        (
            "outfit: child MustExist listed before a parent MustNotExist (never holds)",
            "Assign",
            json!({"applyTo": apply_to(), "location": "spec.a.b", "parameters": {"assign": {"value": 1}, "pathTests": [{"subPath": "spec.a.b", "condition": "MustExist"}, {"subPath": "spec.a", "condition": "MustNotExist"}]}}),
            "spec.parameters.pathTests[1].condition",
            "conflicting",
        ),
        (
            "pathTests bad condition",
            "Assign",
            json!({"applyTo": apply_to(), "location": "spec.a", "parameters": {"assign": {"value": 1}, "pathTests": [{"subPath": "spec.a", "condition": "Exists"}]}}),
            "spec.parameters.pathTests[0].condition",
            "MustExist or MustNotExist",
        ),
        (
            "outfit: scope typo (Gatekeeper matches everything)",
            "Assign",
            json!({"applyTo": apply_to(), "match": {"scope": "Namespace"}, "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "spec.match.scope",
            "unknown scope",
        ),
        (
            "namespaces pattern (CRD)",
            "Assign",
            json!({"applyTo": apply_to(), "match": {"namespaces": ["Team-A"]}, "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "spec.match.namespaces[0]",
            "invalid pattern",
        ),
        (
            "outfit: pathTests on AssignMetadata (issue #1354)",
            "AssignMetadata",
            json!({"location": "metadata.labels.a", "parameters": {"assign": {"value": "b"}, "pathTests": []}}),
            "spec.parameters.pathTests",
            "not supported",
        ),
        (
            "label selector",
            "Assign",
            json!({"applyTo": apply_to(), "match": {"labelSelector": {"matchLabels": {"a": 1}}}, "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "spec.match.labelSelector",
            "must be a string",
        ),
    ];
    for (row, kind, spec, field, text) in cases {
        let error = mutator(kind, "m", spec).expect_err(row);
        assert_eq!(error.field.as_str(), field, "{row}: {error}");
        assert!(error.to_string().contains(text), "{row}: {error}");
    }
}

#[test]
fn names_and_versions_are_checked() {
    let spec = assign_spec("spec.x", json!({"value": 1}));
    let error = mutator("Assign", &"a".repeat(64), spec.clone()).unwrap_err();
    assert!(error.to_string().contains("maximum name length is 63"), "{error}");
    assert!(mutator("Assign", &"a".repeat(63), spec.clone()).is_ok());
    for (version, kind, ok) in [
        ("v1", "Assign", true),
        ("v1beta1", "ModifySet", true),
        ("v1alpha1", "AssignMetadata", true),
        ("v2", "Assign", false),
        ("v1", "AssignImage", false),
    ] {
        let document = Document {
            origin: Origin::named("t"),
            value: json!({"apiVersion": format!("mutations.gatekeeper.sh/{version}"), "kind": kind, "metadata": {"name": "m"}, "spec": {}}),
        };
        let result = super::parse(&document, &mut Vec::new());
        let unsupported = matches!(&result, Err(e) if matches!(e.problem, Problem::Unsupported(_)));
        assert_eq!(!unsupported, ok, "{kind} {version}: {result:?}");
    }
}

#[test]
fn silent_no_ops_are_warned_at_load() {
    // (row, spec, text in a warning)
    let cases = [
        (
            "gatekeeper-library#401: version with a group",
            json!({"applyTo": [{"groups": [""], "versions": ["apps/v1"], "kinds": ["Deployment"]}], "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "never matches",
        ),
        (
            "applyTo takes no globs",
            json!({"applyTo": [{"groups": ["*"], "versions": ["v1"], "kinds": ["Pod"]}], "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "no globs",
        ),
        (
            "applyTo takes kinds, not resources",
            json!({"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["pods"]}], "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "not resources",
        ),
        (
            "match.kinds disjoint from applyTo",
            json!({"applyTo": apply_to(), "match": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]}, "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "never applies",
        ),
        (
            "source Generated",
            json!({"applyTo": apply_to(), "match": {"source": "Generated"}, "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
            "never applies",
        ),
        (
            "removed assignIf (issue #1544)",
            json!({"applyTo": apply_to(), "location": "spec.x", "parameters": {"assign": {"value": 1}, "assignIf": {"in": [1]}}}),
            "assignIf",
        ),
    ];
    for (row, spec, text) in cases {
        let document = Document {
            origin: Origin::named("t"),
            value: json!({"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign", "metadata": {"name": "m"}, "spec": spec}),
        };
        let mut warnings = Vec::new();
        super::parse(&document, &mut warnings).unwrap_or_else(|e| panic!("{row}: {e}"));
        assert!(
            warnings.iter().any(|w| w.message.contains(text)),
            "{row}: {warnings:?}"
        );
    }
}
