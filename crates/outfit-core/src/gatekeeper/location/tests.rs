//! Parser vectors: rows `P*` restate Gatekeeper's `parser_test.go` / `scanner_test.go` (see
//! `shared/reference/gatekeeper.md` §4.1); the others pin outfit's error positions and printer.

use super::*;

fn obj(name: &str) -> Node {
    Node::Object(name.into())
}

fn list(key: &str, value: KeyValue) -> Node {
    Node::List {
        key: key.into(),
        value,
    }
}

fn s(value: &str) -> KeyValue {
    KeyValue::Str(value.into())
}

#[test]
fn valid_locations_parse_like_gatekeeper() {
    let cases: Vec<(&str, &str, Vec<Node>)> = vec![
        ("P1 empty string is the empty path", "", vec![]),
        (
            "P3 glob selector",
            "spec.containers[name: *].securityContext",
            vec![
                obj("spec"),
                obj("containers"),
                list("name", KeyValue::Glob),
                obj("securityContext"),
            ],
        ),
        (
            "P4 quoted * is a literal string, not a glob",
            r#"spec.containers[name: "*"]"#,
            vec![obj("spec"), obj("containers"), list("name", s("*"))],
        ),
        (
            "P5 quoted key and value may hold spaces",
            r#"spec.containers["my key": "foo bar"]"#,
            vec![obj("spec"), obj("containers"), list("my key", s("foo bar"))],
        ),
        (
            "P6 empty quoted value",
            r#"spec.containers[name: ""]"#,
            vec![obj("spec"), obj("containers"), list("name", s(""))],
        ),
        (
            "P6 empty quoted key",
            r#"spec.containers["": v]"#,
            vec![obj("spec"), obj("containers"), list("", s("v"))],
        ),
        (
            "P9 integer key values stay integers",
            "spec.containers[name: opa].ports[containerPort: 8888].name",
            vec![
                obj("spec"),
                obj("containers"),
                list("name", s("opa")),
                obj("ports"),
                list("containerPort", KeyValue::Int(8888)),
                obj("name"),
            ],
        ),
        (
            "P10 int64 max",
            "spec[bignum: 9223372036854775807]",
            vec![obj("spec"), list("bignum", KeyValue::Int(i64::MAX))],
        ),
        (
            "P11 quoted digits are a string",
            r#"spec[quoted: "123"]"#,
            vec![obj("spec"), list("quoted", s("123"))],
        ),
        (
            "P11 leading zero is decimal, not octal",
            "spec[not_octal: 0123]",
            vec![obj("spec"), list("not_octal", KeyValue::Int(123))],
        ),
        ("P12 quoted digits as a field", r#""012345""#, vec![obj("012345")]),
        (
            "P12 quoted digits mid-path",
            r#"spec."123""#,
            vec![obj("spec"), obj("123")],
        ),
        (
            "P12 leading dash and underscores",
            "-123-_456_",
            vec![obj("-123-_456_")],
        ),
        (
            "P12 digits after the first character",
            "area51",
            vec![obj("area51")],
        ),
        (
            "P13 whitespace between tokens is ignored",
            r#"    spec   .    "containers"    "#,
            vec![obj("spec"), obj("containers")],
        ),
        (
            "P14 quoted brackets are text",
            "'foo[bar:*]'",
            vec![obj("foo[bar:*]")],
        ),
        ("P14 quoted dots are text", "'dot..dot'", vec![obj("dot..dot")]),
        (
            "P14 escaped backslash at the end",
            r#""token-with-trailing-backslash\\""#,
            vec![obj(r"token-with-trailing-backslash\")],
        ),
        (
            "backslash takes any character literally (\\n is n)",
            r#""a\nb""#,
            vec![obj("anb")],
        ),
        (
            "parser_test.go: every kind of quoting in one path",
            r#"spec."this object"."is very"["much full": 'of everyone\'s'].'favorite thing'"#,
            vec![
                obj("spec"),
                obj("this object"),
                obj("is very"),
                list("much full", s("of everyone's")),
                obj("favorite thing"),
            ],
        ),
        (
            "empty quoted segment mid-path",
            r#"foo."".bar"#,
            vec![obj("foo"), obj(""), obj("bar")],
        ),
        (
            "a name that starts with a letter may hold digits",
            "spec.x1A",
            vec![obj("spec"), obj("x1A")],
        ),
    ];
    for (case, input, nodes) in cases {
        let parsed = Location::parse(input).unwrap_or_else(|e| panic!("{case}: {input:?}: {e}"));
        assert_eq!(parsed.nodes(), &nodes[..], "{case}");
    }
}

#[test]
fn invalid_locations_report_column_and_expectation() {
    // (case, input, column, text the `expected` part must contain)
    let cases = [
        ("P2 leading separator", ".spec", 1, "a field name"),
        ("P2 trailing separator", "spec.", 6, "no trailing"),
        ("P2 empty segment", "foo..bar", 5, "a field name"),
        (
            "P5 unquoted space in key",
            "spec.containers[my key: x]",
            20,
            "`:`",
        ),
        (
            "P5 unquoted space in value",
            "spec.containers[key: foo bar]",
            26,
            "`]`",
        ),
        ("P7 missing value", "spec.containers[name: ]", 23, "a key value"),
        ("P7 empty brackets", "spec.containers[]", 17, "a key field name"),
        ("P7 colon only", "spec.containers[:]", 17, "a key field name"),
        ("P7 missing key", "spec.containers[:foo]", 17, "a key field name"),
        ("P7 no colon", "spec.containers[foo]", 20, "`:`"),
        (
            "P7 bare glob (no positional or glob-only selectors)",
            "spec.containers[*]",
            17,
            "a key field name",
        ),
        (
            "P7 positional index is not a key",
            "spec.containers[0]",
            17,
            "a key field name",
        ),
        ("P8 selector at the start", "[foo: bar]", 1, "a field name"),
        (
            "P8 two selectors in one segment",
            "spec.containers[a: b][c: *]",
            22,
            "one [key: value]",
        ),
        ("P8 selector after a separator", "spec.[a: b]", 6, "a field name"),
        (
            "P10 int64 overflow",
            "spec[bignum: 9223372036854775808]",
            14,
            "64 bits",
        ),
        ("P11 hex is INT 0 then IDENT", "spec[foo: 0x123]", 12, "`]`"),
        ("P12 field may not be an INT", "012345", 1, "a field name"),
        ("P12 mid-path INT field", "spec.123.bar", 6, "a field name"),
        ("P15 + is not a token", "+1024", 1, "quote other characters"),
        (
            "E9 [*] selector",
            "spec.containers[*].image",
            17,
            "a key field name",
        ),
        (
            "E9 [] selector",
            "spec.containers[].image",
            17,
            "a key field name",
        ),
        (
            "I13 slash outside quotes",
            "/x/y/zx[)",
            1,
            "quote other characters",
        ),
        (
            "unterminated string points at its opening quote",
            "spec.\"abc",
            6,
            "closing",
        ),
        (
            "[key] on a list key that is an INT",
            "spec[123: x]",
            6,
            "a key field name",
        ),
        ("selector must close", "spec[a: b", 10, "`]`"),
        (
            "two names without a separator",
            "spec containers",
            6,
            "`.`, `[` or the end",
        ),
    ];
    for (case, input, column, expected) in cases {
        let error = Location::parse(input).expect_err(case);
        assert_eq!(error.column, column, "{case}: {input:?}: {error}");
        assert!(error.expected.contains(expected), "{case}: {input:?}: {error}");
    }
}

#[test]
fn columns_count_characters_not_bytes() {
    let error = Location::parse("\"é\".[").unwrap_err();
    assert_eq!(error.column, 5, "{error}");
}

#[test]
fn printer_round_trips_every_valid_location() {
    let inputs = [
        "spec.containers[name: *].securityContext",
        r#"spec.containers[name: "*"]"#,
        r#"metadata.annotations."vault.hashicorp.com/auth-path""#,
        r#"spec.volumes[name: "a/b"].x"#,
        "spec[bignum: 9223372036854775807]",
        r#"spec."123".'quote"in'."back\\slash""#,
        r#"foo."".bar"#,
    ];
    for input in inputs {
        let parsed = Location::parse(input).unwrap();
        let printed = parsed.to_string();
        assert_eq!(
            Location::parse(&printed).unwrap(),
            parsed,
            "{input} printed as {printed}"
        );
    }
    assert_eq!(
        Location::parse("spec . containers [ name : * ] . image")
            .unwrap()
            .to_string(),
        "spec.containers[name: *].image"
    );
    // Gatekeeper's printer leaves `/` bare, which does not parse back (reference §2.3).
    assert_eq!(quote("a/b"), "\"a/b\"");
    assert_eq!(quote(""), "\"\"");
    assert_eq!(quote("9lives"), "\"9lives\"");
}

#[test]
fn prefixes_compare_parsed_nodes() {
    let location = Location::parse("a[name: b].c").unwrap();
    assert!(location.starts_with(&Location::parse(r#"a[name: "b"]"#).unwrap()));
    assert!(!location.starts_with(&Location::parse("a[name: *]").unwrap()));
    assert!(!location.starts_with(&Location::parse("a[name: c]").unwrap()));
}

#[test]
fn key_values_match_with_strict_types() {
    // A22 / issue #1355: a string key never matches an integer field, nor an integer a float.
    assert!(KeyValue::Int(8888).matches(&serde_json::json!(8888)));
    assert!(!KeyValue::Str("8888".into()).matches(&serde_json::json!(8888)));
    assert!(!KeyValue::Int(8888).matches(&serde_json::json!("8888")));
    assert!(!KeyValue::Int(8888).matches(&serde_json::json!(8888.0)));
    assert!(!KeyValue::Glob.matches(&serde_json::json!("x")));
}
