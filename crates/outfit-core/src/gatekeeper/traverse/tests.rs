//! Traversal vectors. `A*` rows restate Gatekeeper's `assign_mutator_test.go` (`TestPathTests`,
//! `TestAssign`), `C*` rows `core/mutation_function_test.go` (reference §4.2–4.3); the others pin
//! edge cases of `core.Mutate` read from its source.

use serde_json::{Value, json};

use crate::gatekeeper::test_support::{assign, foo, mutate_once};

fn tests(entries: &[(&str, &str)]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|(sub_path, condition)| json!({"subPath": sub_path, "condition": condition}))
            .collect(),
    )
}

const GREET: &str = "spec.please.greet.me";

#[test]
fn path_tests_gate_assign_like_gatekeeper() {
    let c1c2 = json!({"containers": [{"name": "c1", "securityPolicy": "so-secure"}, {"name": "c2"}]});
    let pod = |extra: Value| {
        let mut containers = vec![json!({"name": "c1"}), json!({"name": "c2"})];
        if !extra.is_null() {
            containers.push(extra);
        }
        json!({"containers": containers})
    };
    let sidecar = "spec.containers[name: sidecar]";
    let c2_policy = "spec.containers[name: c2].securityPolicy";
    let secure = |names: &[&str]| json!({"containers": names.iter().map(|n| json!({"name": n, "securityPolicy": "so-secure"})).collect::<Vec<_>>()});
    // (row, input spec, location, value, pathTests, expected spec)
    let cases: Vec<(&str, Value, &str, Value, Value, Value)> = vec![
        (
            "A1 creates every missing parent",
            json!({}),
            GREET,
            json!("hello"),
            tests(&[]),
            json!({"please": {"greet": {"me": "hello"}}}),
        ),
        (
            "A2 MustExist on a missing leaf",
            json!({}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustExist")]),
            json!({}),
        ),
        (
            "A3 MustExist, parent present, leaf missing",
            json!({"please": {"greet": {}}}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustExist")]),
            json!({"please": {"greet": {}}}),
        ),
        (
            "A4 MustExist on a present leaf",
            json!({"please": {"greet": {"me": "never"}}}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustExist")]),
            json!({"please": {"greet": {"me": "hello"}}}),
        ),
        (
            "A5 MustNotExist on a missing leaf (no parents)",
            json!({}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustNotExist")]),
            json!({"please": {"greet": {"me": "hello"}}}),
        ),
        (
            "A5 MustNotExist on a missing leaf (parents)",
            json!({"please": {"greet": {}}}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustNotExist")]),
            json!({"please": {"greet": {"me": "hello"}}}),
        ),
        (
            "A6 MustNotExist on a present leaf",
            json!({"please": {"greet": {"me": "never"}}}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustNotExist")]),
            json!({"please": {"greet": {"me": "never"}}}),
        ),
        (
            "A7 {} counts as existing",
            json!({"please": {"greet": {"me": {}}}}),
            GREET,
            json!("hello"),
            tests(&[(GREET, "MustNotExist")]),
            json!({"please": {"greet": {"me": {}}}}),
        ),
        (
            "A8 MustNotExist through a glob is per element",
            c1c2.clone(),
            "spec.containers[name:*].securityPolicy",
            json!("made-by-mutation"),
            tests(&[("spec.containers[name:*].securityPolicy", "MustNotExist")]),
            json!({"containers": [{"name": "c1", "securityPolicy": "so-secure"}, {"name": "c2", "securityPolicy": "made-by-mutation"}]}),
        ),
        (
            "A9 MustExist through a glob is per element",
            c1c2,
            "spec.containers[name:*].securityPolicy",
            json!("made-by-mutation"),
            tests(&[("spec.containers[name:*].securityPolicy", "MustExist")]),
            json!({"containers": [{"name": "c1", "securityPolicy": "made-by-mutation"}, {"name": "c2"}]}),
        ),
        (
            "A10 MustNotExist on a missing keyed element appends",
            pod(Value::Null),
            sidecar,
            json!({"name": "sidecar"}),
            tests(&[(sidecar, "MustNotExist")]),
            pod(json!({"name": "sidecar"})),
        ),
        (
            "A11 MustNotExist does not clobber an existing element",
            pod(json!({"name": "sidecar", "not": "clobbered"})),
            sidecar,
            json!({"name": "sidecar"}),
            tests(&[(sidecar, "MustNotExist")]),
            pod(json!({"name": "sidecar", "not": "clobbered"})),
        ),
        (
            "A12 MustExist replaces the element wholesale",
            pod(json!({"name": "sidecar", "clobbered": "no"})),
            sidecar,
            json!({"name": "sidecar", "clobbered": "yes"}),
            tests(&[(sidecar, "MustExist")]),
            pod(json!({"name": "sidecar", "clobbered": "yes"})),
        ),
        (
            "A13 MustExist on a missing element",
            pod(Value::Null),
            sidecar,
            json!({"name": "sidecar", "clobbered": "yes"}),
            tests(&[(sidecar, "MustExist")]),
            pod(Value::Null),
        ),
        (
            "A14 MustNotExist on an existing list element",
            secure(&["c1", "c2"]),
            c2_policy,
            json!("made-by-mutation"),
            tests(&[("spec.containers[name: c2]", "MustNotExist")]),
            secure(&["c1", "c2"]),
        ),
        (
            "A15 MustNotExist on a missing element appends {key: value} with the field",
            secure(&["c1"]),
            c2_policy,
            json!("made-by-mutation"),
            tests(&[("spec.containers[name: c2]", "MustNotExist")]),
            json!({"containers": [{"name": "c1", "securityPolicy": "so-secure"}, {"name": "c2", "securityPolicy": "made-by-mutation"}]}),
        ),
        (
            "A16 MustExist on a missing element",
            secure(&["c1"]),
            c2_policy,
            json!("made-by-mutation"),
            tests(&[("spec.containers[name: c2]", "MustExist")]),
            secure(&["c1"]),
        ),
        (
            "A17 no partial mutation when a deeper test fails",
            json!({"please": {}}),
            GREET,
            json!("hello"),
            tests(&[("spec.please.greet", "MustExist"), (GREET, "MustNotExist")]),
            json!({"please": {}}),
        ),
        (
            "A18 both tests hold",
            json!({"please": {"greet": {}}}),
            GREET,
            json!("hello"),
            tests(&[("spec.please.greet", "MustExist"), (GREET, "MustNotExist")]),
            json!({"please": {"greet": {"me": "hello"}}}),
        ),
        (
            "glob with MustNotExist at the glob never mutates",
            json!({"containers": [{"name": "a"}]}),
            "spec.containers[name: *].x",
            json!(1),
            tests(&[("spec.containers[name: *]", "MustNotExist")]),
            json!({"containers": [{"name": "a"}]}),
        ),
    ];
    for (row, spec, location, value, path_tests, expected) in cases {
        let mutator = assign(location, value, path_tests);
        let out = mutate_once(&mutator, &foo(spec)).unwrap_or_else(|e| panic!("{row}: {e:?}"));
        assert_eq!(out["spec"], expected, "{row}");
    }
}

fn opa_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "opa"}, "spec": {"containers": [{
        "name": "opa",
        "ports": [{"containerPort": 8080, "name": "out-of-scope"}, {"containerPort": 8888, "name": "unchanged"}]
    }]}})
}

fn core_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "testname1", "image": "image1", "ports": [{"name": "portName1"}]},
        {"name": "testname2", "image": "image2", "ports": [{"name": "portName2A"}, {"name": "portName2B"}]},
        {"name": "testname3", "image": "image3"}
    ]}})
}

#[test]
fn keyed_lists_match_with_strict_key_types() {
    // (row, location, value, pointer to check, expected there, port count after)
    let cases = [
        (
            "A20 integer key matches the int field",
            "spec.containers[name: opa].ports[containerPort: 8888].name",
            "modified",
            "/spec/containers/0/ports/1",
            json!({"containerPort": 8888, "name": "modified"}),
            2,
        ),
        (
            "A21 missing integer key appends {containerPort: 2001}",
            "spec.containers[name: opa].ports[containerPort: 2001].name",
            "added",
            "/spec/containers/0/ports/2",
            json!({"containerPort": 2001, "name": "added"}),
            3,
        ),
        (
            "A22 string \"8888\" never matches 8888: appends",
            "spec.containers[name: opa].ports[containerPort: \"8888\"].name",
            "modified",
            "/spec/containers/0/ports/2",
            json!({"containerPort": "8888", "name": "modified"}),
            3,
        ),
    ];
    for (row, location, value, pointer, expected, count) in cases {
        let out = mutate_once(&assign(location, json!(value), json!([])), &opa_pod()).unwrap();
        assert_eq!(out.pointer(pointer), Some(&expected), "{row}");
        assert_eq!(
            out["spec"]["containers"][0]["ports"].as_array().unwrap().len(),
            count,
            "{row}"
        );
        if row.starts_with("A22") {
            assert_eq!(
                out["spec"]["containers"][0]["ports"][1]["name"], "unchanged",
                "{row}"
            );
        }
    }
}

#[test]
fn core_traversal_matches_gatekeeper() {
    let c1 = mutate_once(
        &assign(
            r#"spec.containers["name": "testname2"].ports["name": "portName2B"].hostIP"#,
            json!("testValue"),
            json!([]),
        ),
        &core_pod(),
    )
    .unwrap();
    let host_ips: Vec<&Value> = c1["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .map(|p| &p["hostIP"])
        .collect();
    assert_eq!(
        host_ips,
        [&Value::Null, &Value::Null, &json!("testValue")],
        "C1 only that port"
    );

    let c2 = mutate_once(
        &assign(
            r#"spec.containers["name": *].ports["name": *].protocol"#,
            json!("testValue"),
            json!([]),
        ),
        &core_pod(),
    )
    .unwrap();
    let protocols = c2["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .filter(|p| p["protocol"] == "testValue")
        .count();
    assert_eq!(protocols, 3, "C2 every port of every container");
    assert!(
        c2["spec"]["containers"][2].get("ports").is_none(),
        "C2 a glob over a missing list creates nothing"
    );

    let c3 = mutate_once(
        &assign(
            r#"spec.element["name": "value"].element2.added"#,
            json!("testValue"),
            json!([]),
        ),
        &core_pod(),
    )
    .unwrap();
    assert_eq!(
        c3["spec"]["element"],
        json!([{"name": "value", "element2": {"added": "testValue"}}]),
        "C3 missing list and element created"
    );

    let c4 = mutate_once(
        &assign(
            r#"spec.containers["name": "notExists"]"#,
            json!({"name": "notExists", "foo": "foovalue"}),
            json!([]),
        ),
        &core_pod(),
    )
    .unwrap();
    assert_eq!(
        c4["spec"]["containers"][3],
        json!({"name": "notExists", "foo": "foovalue"}),
        "C4 appended"
    );

    let c5 = mutate_once(
        &assign(
            r#"spec.containers["name": "testname1"]"#,
            json!({"name": "testname1", "foo": "bar"}),
            json!([]),
        ),
        &core_pod(),
    )
    .unwrap();
    assert_eq!(
        c5["spec"]["containers"][0],
        json!({"name": "testname1", "foo": "bar"}),
        "C5 replaced wholesale"
    );
    assert_eq!(
        c5["spec"]["containers"].as_array().unwrap().len(),
        3,
        "C5 nothing appended"
    );

    let c8 = mutate_once(
        &assign("spec.containers.ports.protocol", json!("x"), json!([])),
        &core_pod(),
    )
    .unwrap_err();
    assert!(
        c8.0.contains("mismatch between path entry (type: object) and received object (type: list)"),
        "C8 {c8:?}"
    );
}

#[test]
fn traversal_edge_cases() {
    // A glob over an empty or missing list: nothing created, nothing changed.
    let glob = assign(
        "spec.containers[name: *].volumeMounts[name: v]",
        json!({"name": "v"}),
        json!([]),
    );
    for spec in [json!({}), json!({"containers": []})] {
        assert_eq!(mutate_once(&glob, &foo(spec.clone())).unwrap()["spec"], spec);
    }
    // A glob over a non-object element whose path continues: type mismatch.
    let error = mutate_once(&glob, &foo(json!({"containers": ["oops"]}))).unwrap_err();
    assert!(error.0.contains("type: string"), "{error:?}");
    // Elements that are not objects are skipped by a keyed (non-glob) selector.
    let keyed = assign("spec.l[name: a].x", json!(1), json!([]));
    let out = mutate_once(&keyed, &foo(json!({"l": ["s", {"name": "a"}]}))).unwrap();
    assert_eq!(out["spec"]["l"], json!(["s", {"name": "a", "x": 1}]));
    // Every element with the key is mutated, not only the first.
    let out = mutate_once(&keyed, &foo(json!({"l": [{"name": "a"}, {"name": "a"}]}))).unwrap();
    assert_eq!(
        out["spec"]["l"],
        json!([{"name": "a", "x": 1}, {"name": "a", "x": 1}])
    );
    // A terminal keyed list replaces only the first match.
    let upsert = assign("spec.l[name: a]", json!({"name": "a", "v": 2}), json!([]));
    let out = mutate_once(&upsert, &foo(json!({"l": [{"name": "a"}, {"name": "a"}]}))).unwrap();
    assert_eq!(out["spec"]["l"], json!([{"name": "a", "v": 2}, {"name": "a"}]));
    // A terminal keyed list holding a non-object is an error (Gatekeeper's nestedFieldNoCopy).
    assert!(mutate_once(&upsert, &foo(json!({"l": [7]}))).is_err());
    // An existing `null` on the way is a type mismatch, not a missing field.
    assert!(mutate_once(&assign("spec.a.b", json!(1), json!([])), &foo(json!({"a": null}))).is_err());
    // Assigning the value already there changes nothing; `false` and `[]` are values too.
    for value in [json!(false), json!([]), json!({"deep": [1, {"x": null}]})] {
        let m = assign("spec.v", value.clone(), json!([]));
        let once = mutate_once(&m, &foo(json!({}))).unwrap();
        assert_eq!(once["spec"]["v"], value);
        assert_eq!(mutate_once(&m, &once).unwrap(), once);
    }
    // An integer key creates an integer field, not a string.
    let out = mutate_once(
        &assign("spec.ports[port: 80].name", json!("http"), json!([])),
        &foo(json!({})),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&out["spec"]["ports"]).unwrap(),
        r#"[{"port":80,"name":"http"}]"#
    );
}
