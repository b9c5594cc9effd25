//! Gatekeeper mutators through the public engine (`PolicySet::apply`): ModifySet, AssignMetadata,
//! AssignImage, ordering, convergence, schema conflicts and the PodDefault-then-Gatekeeper order.
//! Rows name the vector of `shared/reference/gatekeeper.md` §4 they restate (`S*`, `Y*`, `K*`, ...).

use outfit_core::{Operation, Outcome, PolicySet, Request, document::parse_stream, error::Problem};
use serde_json::{Value, json};

use crate::support::{admission, load, load_ok};

fn admit(set: &PolicySet, object: &Value, operation: Operation) -> (Value, Vec<String>) {
    admission(set, object, operation).unwrap_or_else(|message| panic!("denied: {message}"))
}

fn mutate(set: &PolicySet, object: &Value) -> Value {
    admit(set, object, Operation::Create).0
}

fn denial(set: &PolicySet, object: &Value) -> String {
    match admission(set, object, Operation::Create) {
        Err(message) => message,
        Ok((admitted, _)) => panic!("admitted as {admitted}"),
    }
}

fn foo(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "my-foo", "namespace": "ns1"}, "spec": spec})
}

const APPLY_TO_FOO: &str = r#"applyTo: [{groups: [""], versions: ["v1"], kinds: ["Foo", "Pod"]}]"#;

fn assign(name: &str, location: &str, value: &str) -> String {
    format!(
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {{name: {name}}}\nspec:\n  {APPLY_TO_FOO}\n  location: '{location}'\n  parameters: {{assign: {{value: {value}}}}}\n---\n"
    )
}

fn modify_set(operation: &str, from_list: &str) -> String {
    format!(
        "apiVersion: mutations.gatekeeper.sh/v1beta1\nkind: ModifySet\nmetadata: {{name: set}}\nspec:\n  {APPLY_TO_FOO}\n  location: spec.list\n  parameters: {{operation: {operation}, values: {{fromList: {from_list}}}}}\n"
    )
}

fn label(name: &str, key: &str, value: &str, extra: &str) -> String {
    format!(
        "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: AssignMetadata\nmetadata: {{name: {name}}}\nspec:\n  {extra}\n  location: metadata.labels.{key}\n  parameters: {{assign: {{value: {value}}}}}\n---\n"
    )
}

#[test]
fn modify_set_merge_and_prune() {
    // (row, operation, list before (None = absent), fromList, list after (None = absent))
    let cases = [
        (
            "S2 merge empty fromList",
            "merge",
            Some(json!(["a", "b", "c"])),
            "[]",
            Some(json!(["a", "b", "c"])),
        ),
        (
            "S3 merge appends missing values in order",
            "merge",
            Some(json!(["a", "b", "c"])),
            "[a, b, d]",
            Some(json!(["a", "b", "c", "d"])),
        ),
        (
            "S4 merge on absent field copies fromList",
            "merge",
            None,
            "[a, b, d]",
            Some(json!(["a", "b", "d"])),
        ),
        (
            "S4 merge on empty list",
            "merge",
            Some(json!([])),
            "[a, b, d]",
            Some(json!(["a", "b", "d"])),
        ),
        (
            "S4 merge keeps duplicates of fromList on an absent field",
            "merge",
            None,
            "[a, a]",
            Some(json!(["a", "a"])),
        ),
        (
            "merge keeps duplicates already in the list",
            "merge",
            Some(json!(["a", "a"])),
            "[a]",
            Some(json!(["a", "a"])),
        ),
        (
            "S5 merge compares deeply",
            "merge",
            Some(json!([["a", "b", "d"], ["r", "r", "r"]])),
            "[[a, b, d], [z, 'y', q]]",
            Some(json!([["a", "b", "d"], ["r", "r", "r"], ["z", "y", "q"]])),
        ),
        (
            "merge whole objects only",
            "merge",
            Some(json!([{"a": 1}])),
            "[{a: 1}, {a: 1, b: 2}]",
            Some(json!([{"a": 1}, {"a": 1, "b": 2}])),
        ),
        (
            "outfit number rule: 80 equals 80.0",
            "merge",
            Some(json!([80.0])),
            "[80]",
            Some(json!([80.0])),
        ),
        (
            "S6 prune",
            "prune",
            Some(json!(["a", "b", "c"])),
            "[a, b, d]",
            Some(json!(["c"])),
        ),
        (
            "S7 prune removes every copy",
            "prune",
            Some(json!(["a", "b", "a"])),
            "[a]",
            Some(json!(["b"])),
        ),
        ("S8 prune on absent field", "prune", None, "[a, b, d]", None),
        (
            "S8 prune on empty list",
            "prune",
            Some(json!([])),
            "[a, b, d]",
            Some(json!([])),
        ),
        (
            "prune to nothing leaves []",
            "prune",
            Some(json!(["a"])),
            "[a]",
            Some(json!([])),
        ),
    ];
    for (row, operation, before, from_list, after) in cases {
        let set = load_ok(&modify_set(operation, from_list));
        let spec = before.map_or(json!({}), |list| json!({"list": list}));
        let out = mutate(&set, &foo(spec));
        assert_eq!(out["spec"].get("list"), after.as_ref(), "{row}");
    }
    // S1: a non-list is an error, and an error denies the object.
    let set = load_ok(&modify_set("merge", "[a]"));
    let message = denial(&set, &foo(json!({"list": 7})));
    assert!(
        message.contains("is not a list of values, cannot treat it as a set"),
        "{message}"
    );
    assert!(message.contains("ModifySet set"), "{message}");
}

#[test]
fn outfit_prune_creates_no_empty_parents() {
    // Gatekeeper (inference, reference §1.4) leaves `spec.foo: {}`; outfit changes nothing.
    let yaml = modify_set("prune", "[a]").replace("spec.list", "spec.foo.bar");
    let set = load_ok(&yaml);
    let object = foo(json!({}));
    assert_eq!(mutate(&set, &object), object);
}

#[test]
fn assign_metadata_only_adds() {
    let set = load_ok(&label("add-a", "a", "testValue", ""));
    // C9: an existing label is never changed.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}});
    assert_eq!(mutate(&set, &pod), pod);
    // A missing labels map is created.
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(
        mutate(&set, &bare)["metadata"]["labels"],
        json!({"a": "testValue"})
    );
    // AssignMetadata has no applyTo: it applies to every kind.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
    assert_eq!(mutate(&set, &role)["metadata"]["labels"]["a"], "testValue");
    // Quoted annotation keys.
    let yaml = "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: vault}\nspec:\n  location: 'metadata.annotations.\"vault.hashicorp.com/auth-path\"'\n  parameters: {assign: {value: auth/k8s}}\n";
    let out = mutate(&load_ok(yaml), &bare);
    assert_eq!(
        out["metadata"]["annotations"]["vault.hashicorp.com/auth-path"],
        "auth/k8s"
    );
}

#[test]
fn y1_two_stable_label_mutators_both_apply() {
    let set = load_ok(&(label("ka", "ka", "va", "") + &label("kb", "kb", "vb", "")));
    let (out, applied) = admit(&set, &foo(json!({})), Operation::Create);
    assert_eq!(out["metadata"]["labels"], json!({"ka": "va", "kb": "vb"}));
    assert_eq!(applied, ["AssignMetadata ka", "AssignMetadata kb"]);
}

#[test]
fn from_metadata_reads_name_and_namespace() {
    // A19, plus `namespace`, which the webhook reads from the request when the object has none.
    let yaml = format!(
        "{}{}",
        assign("by-name", "spec.value", "null").replace("value: null", "fromMetadata: {field: name}"),
        assign("by-namespace", "spec.ns", "null").replace("value: null", "fromMetadata: {field: namespace}")
    );
    let set = load_ok(&yaml);
    let object = json!({"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "my-foo"}, "spec": {}});
    let out = mutate(&set, &object);
    assert_eq!(out["spec"], json!({"value": "my-foo", "ns": "default"}));
}

#[test]
fn mutators_run_by_kind_then_name() {
    // Two Assigns on one path: the one sorting last ("b") wins, and the loop converges.
    let set = load_ok(&(assign("b-first-in-file", "spec.x", "1") + &assign("a-second", "spec.x", "2")));
    assert_eq!(mutate(&set, &foo(json!({})))["spec"]["x"], 1);
    // Assign < AssignImage < AssignMetadata < ModifySet whatever the names: ModifySet sees the
    // Assign's list, so the result is [a, b], not [a].
    let yaml = assign("zzz", "spec.list", "[a]") + &modify_set("merge", "[b]");
    assert_eq!(
        mutate(&load_ok(&yaml), &foo(json!({})))["spec"]["list"],
        json!(["a", "b"])
    );
    // Names compare byte-wise: "B" < "a".
    let set = load_ok(&(assign("a", "spec.x", "lower") + &assign("B", "spec.x", "upper")));
    assert_eq!(mutate(&set, &foo(json!({})))["spec"]["x"], "lower");
}

#[test]
fn y4_an_iteration_that_restores_the_input_is_no_mutation() {
    let set = load_ok(&(assign("m1", "spec.foo", "qux") + &assign("m2", "spec.foo", "bar")));
    let object = foo(json!({"foo": "bar"}));
    let (out, applied) = admit(&set, &object, Operation::Create);
    assert_eq!(out, object);
    assert!(applied.is_empty(), "{applied:?}");
}

#[test]
fn y2_a_set_that_keeps_changing_is_denied_after_n_plus_one_iterations() {
    // A three-kind cycle (each Assign rewrites `kind`): every iteration ends on a new kind, so the
    // loop never settles; with 3 mutators Gatekeeper allows 4 iterations.
    let cycle = |name: &str, from: &str, to: &str| {
        format!(
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {{name: {name}}}\nspec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [{from}]}}]\n  location: kind\n  parameters: {{assign: {{value: {to}}}}}\n---\n"
        )
    };
    let set = load_ok(&(cycle("a", "C", "A") + &cycle("b", "B", "C") + &cycle("c", "A", "B")));
    let object = json!({"apiVersion": "v1", "kind": "A", "metadata": {"name": "x"}});
    let message = denial(&set, &object);
    assert!(message.contains("not converging"), "{message}");
    assert!(message.contains("after 4 iterations"), "{message}");
}

#[test]
fn y3_a_chain_converges_within_the_bound() {
    // Iteration 1 adds the label, iteration 2 lets the selector-gated Assign apply, iteration 3
    // sees no change: 3 iterations, within 2 + 1.
    let gated = assign("gated", "spec.x", "1").replace(
        "  location:",
        "  match: {labelSelector: {matchLabels: {ready: 'yes'}}}\n  location:",
    );
    let set = load_ok(&(gated + &label("ready", "ready", "'yes'", "")));
    let (out, applied) = admit(&set, &foo(json!({})), Operation::Create);
    assert_eq!(out["spec"]["x"], 1);
    assert_eq!(out["metadata"]["labels"]["ready"], "yes");
    assert_eq!(applied, ["AssignMetadata ready", "Assign gated"]);
}

#[test]
fn schema_conflicts_disable_both_mutators() {
    let k = |name: &str, kind: &str, location: &str, params: &str, apply_to: &str| {
        format!(
            "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n  applyTo: {apply_to}\n  location: '{location}'\n  parameters: {params}\n---\n"
        )
    };
    let pod = r#"[{groups: [""], versions: [v1], kinds: [Pod]}]"#;
    let pod_v2 = r#"[{groups: [""], versions: [v2], kinds: [Pod]}]"#;
    let pod_update = r#"[{groups: [""], versions: [v1], kinds: [Pod], operations: [UPDATE]}]"#;
    let pod_create = r#"[{groups: [""], versions: [v1], kinds: [Pod], operations: [CREATE]}]"#;
    let value = |v: &str| format!("{{assign: {{value: {v}}}}}");
    let foo_value = value("{name: foo}");
    let set_params = "{values: {fromList: [x]}}";
    let image = "{assignTag: ':v1'}";
    // (row, first, second, conflict?)
    let cases = [
        (
            "K1/Y5 object vs keyed list",
            k(
                "foo-conflict",
                "Assign",
                "spec.containers.image",
                &value("x"),
                pod,
            ),
            k(
                "foo",
                "Assign",
                "spec.containers[name: foo].image",
                &value("x"),
                pod,
            ),
            true,
        ),
        (
            "K2 different version",
            k("a", "Assign", "spec.containers.image", &value("x"), pod),
            k(
                "b",
                "Assign",
                "spec.containers[name: foo].image",
                &value("x"),
                pod_v2,
            ),
            false,
        ),
        (
            "K2 disjoint operations",
            k("a", "Assign", "spec.containers.image", &value("x"), pod_create),
            k(
                "b",
                "Assign",
                "spec.containers[name: foo].image",
                &value("x"),
                pod_update,
            ),
            false,
        ),
        (
            "K3 key and glob on the same key field",
            k(
                "a",
                "Assign",
                "spec.containers[name: foo].image",
                &value("x"),
                pod,
            ),
            k("b", "Assign", "spec.containers[name: *].image", &value("x"), pod),
            false,
        ),
        (
            "K4 one list keyed two ways",
            k("a", "Assign", "spec[image: bar]", &value("{image: bar}"), pod),
            k("b", "Assign", "spec[name: foo]", &foo_value, pod),
            true,
        ),
        (
            "K5 Assign's Unknown terminal never conflicts",
            k("a", "Assign", "spec.containers", &value("[]"), pod),
            k(
                "b",
                "Assign",
                "spec.containers[name: foo].image",
                &value("x"),
                pod,
            ),
            false,
        ),
        (
            "K5 Unknown vs object",
            k("a", "Assign", "spec.containers", &value("[]"), pod),
            k("b", "Assign", "spec.containers.image", &value("x"), pod),
            false,
        ),
        (
            "K6 keyed list vs set",
            k("a", "Assign", "spec.containers[name: foo]", &foo_value, pod),
            k("b", "ModifySet", "spec.containers", set_params, pod),
            true,
        ),
        (
            "K7 set vs image string",
            k(
                "a",
                "ModifySet",
                "spec.containers[name: foo].images",
                set_params,
                pod,
            ),
            k(
                "b",
                "AssignImage",
                "spec.containers[name: foo].images",
                image,
                pod,
            ),
            true,
        ),
        (
            "K8 path below an image field",
            k("a", "AssignImage", "spec.containers[name: foo].image", image, pod),
            k(
                "b",
                "Assign",
                "spec.containers[name: *].image.test",
                &value("x"),
                pod,
            ),
            true,
        ),
        (
            "K8 two images on one leaf",
            k("a", "AssignImage", "spec.containers[name: foo].image", image, pod),
            k("b", "AssignImage", "spec.containers[name: *].image", image, pod),
            false,
        ),
    ];
    for (row, first, second, conflict) in cases {
        let (set, report) = load(&(first + &second));
        if !conflict {
            assert!(report.errors.is_empty(), "{row}: {:?}", report.errors);
            assert_eq!(set.len(), 2, "{row}");
            continue;
        }
        assert_eq!(report.errors.len(), 2, "{row}: {:?}", report.errors);
        assert_eq!(set.len(), 0, "{row}: both are left out");
        let names: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
        for (error, text) in report.errors.iter().zip(&names) {
            let Problem::SchemaConflict { other, .. } = &error.problem else {
                panic!("{row}: {text}");
            };
            assert_ne!(other, &error.policy, "{row}: names the other side");
            assert!(text.contains("both mutators are disabled"), "{row}: {text}");
        }
    }
    // Y5: the non-conflicting third mutator still runs.
    let (set, _) = load(
        &(k("first", "Assign", "spec.containers.image", &value("x"), pod)
            + &k(
                "second",
                "Assign",
                "spec.containers[name: foo].image",
                &value("x"),
                pod,
            )
            + &assign("third", "spec.z", "1")),
    );
    assert_eq!(set.count(outfit_core::gatekeeper::ASSIGN), 1);
}

#[test]
fn assign_image_through_the_engine() {
    // Y8 (bats): no normalisation of `nginx`.
    let yaml = "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: AssignImage\nmetadata: {name: img}\nspec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n  location: 'spec.containers[name:*].image'\n  parameters: {assignDomain: foocorp.org, assignTag: '@sha256:abcde67890123456789abc345678901a'}\n";
    let set = load_ok(yaml);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "nginx:latest"}, {"name": "b"}]}});
    let out = mutate(&set, &pod);
    assert_eq!(
        out["spec"]["containers"][0]["image"],
        "foocorp.org/nginx@sha256:abcde67890123456789abc345678901a"
    );
    // I2: a missing image is treated as "".
    assert_eq!(
        out["spec"]["containers"][1]["image"],
        "foocorp.org/@sha256:abcde67890123456789abc345678901a"
    );
    let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": 7}]}});
    assert!(denial(&set, &bad).contains("not a string"));
}

#[test]
fn webhook_vectors() {
    // Y6: Assign spec.value on a Pod with no spec.
    let yaml = assign("v", "spec.value", "foo");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "acbd", "namespace": "ns1"}});
    let request = Request::create(&pod, "ns1");
    let set = load_ok(&yaml);
    let Outcome::Admitted(admission) = set.apply(&request) else {
        panic!()
    };
    assert_eq!(
        serde_json::to_value(admission.patch()).unwrap(),
        json!([{"op": "add", "path": "/spec", "value": {"value": "foo"}}])
    );
    // Y7: assigning [] empties a list.
    let yaml = "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: k8sexternalip}\nspec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Service]}]\n  location: spec.externalIPs\n  parameters: {assign: {value: []}}\n";
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"externalIPs": ["1.1.1.1"]}});
    assert_eq!(mutate(&load_ok(yaml), &service)["spec"]["externalIPs"], json!([]));
}

#[test]
fn operations_follow_the_webhook_and_apply_to() {
    let set = load_ok(&assign("v", "spec.x", "1"));
    let object = foo(json!({}));
    assert_eq!(
        admit(&set, &object, Operation::Update).0["spec"]["x"],
        1,
        "UPDATE is mutated"
    );
    assert_eq!(
        admit(&set, &object, Operation::Delete).0,
        object,
        "DELETE never is"
    );
    let create_only = assign("v", "spec.x", "1").replace(
        "kinds: [\"Foo\", \"Pod\"]",
        "kinds: [\"Foo\"], operations: [CREATE]",
    );
    let set = load_ok(&create_only);
    assert_eq!(
        admit(&set, &object, Operation::Update).0,
        object,
        "issue #4121: CREATE-only skips UPDATE"
    );
    // Gatekeeper never mutates its own resources.
    let own = json!({"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Foo", "metadata": {"name": "x"}});
    assert_eq!(
        mutate(
            &load_ok(
                &assign("v", "spec.x", "1")
                    .replace("groups: [\"\"]", "groups: [\"mutations.gatekeeper.sh\"]")
            ),
            &own
        ),
        own
    );
}

#[test]
fn pod_defaults_run_before_gatekeeper_mutators() {
    // The PodDefault adds env FOO; the Assign, which runs after it, overwrites that env var's value.
    let yaml = r#"
apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata: {name: add-foo, namespace: default}
spec:
  selector: {matchLabels: {add-foo: "true"}}
  env: [{name: FOO, value: from-poddefault}]
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: set-foo}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: 'spec.containers[name: *].env[name: FOO].value'
  parameters: {assign: {value: from-gatekeeper}}
"#;
    let set = load_ok(yaml);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "labels": {"add-foo": "true"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let (out, applied) = admit(&set, &pod, Operation::Create);
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "FOO", "value": "from-gatekeeper"}])
    );
    assert_eq!(applied, ["PodDefault default/add-foo", "Assign set-foo"]);
}

#[test]
fn nfs_example_mounts_once_per_container() {
    let policies = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gatekeeper-nfs/policies.yaml"
    ))
    .unwrap();
    let pod_yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gatekeeper-nfs/pod.yaml"
    ))
    .unwrap();
    let set = load_ok(&policies);
    let pod = parse_stream(&pod_yaml, "pod.yaml").unwrap().remove(0).value;
    let out = mutate(&set, &pod);
    for container in out["spec"]["containers"].as_array().unwrap() {
        let mounts = container["volumeMounts"].as_array().unwrap();
        assert_eq!(
            mounts.iter().filter(|m| m["name"] == "nfs-volume").count(),
            1,
            "{container}"
        );
    }
    let volumes = out["spec"]["volumes"].as_array().unwrap();
    assert_eq!(volumes.iter().filter(|v| v["name"] == "nfs-volume").count(), 1);
    // And applying again changes nothing.
    assert_eq!(mutate(&set, &out), out);
    // Other namespaces are left alone.
    let mut elsewhere = pod.clone();
    elsewhere["metadata"]["namespace"] = json!("other");
    assert_eq!(mutate(&set, &elsewhere), elsewhere);
}
