//! Runs every fixture case through `outfit mutate`.
//!
//! A case is a directory with `policies.yaml` (or a `policies/` directory), `input.yaml`, and
//! optionally `args` (extra arguments, one per line), `expected.yaml` (the `-o yaml` output,
//! compared as objects; absent means no output), `expected-exit` (default 0) and
//! `expected-stderr.txt` (lines that must each appear in stderr), and `expected-explain.txt` (the
//! exact text of `outfit explain` on the same input; its exit status in `expected-explain-exit`
//! when it differs from `outfit mutate`'s). `examples/*` directories with an
//! `expected.yaml` are cases too, with `pod.yaml` as input.

use std::{fs, path::Path};

use outfit_core::document::parse_stream;
use serde_json::Value;

use crate::support::{json_lines, outfit, repo_root};
use outfit_test_support::apply_patches_independently;

struct Case {
    name: String,
    policies: String,
    input: String,
    extra_args: Vec<String>,
}

fn cases() -> Vec<Case> {
    let root = repo_root();
    let mut cases = Vec::new();
    for (dir, input_name) in [("tests/fixtures", "input.yaml"), ("examples", "pod.yaml")] {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.map(|e| e.expect("directory entry")) {
            let path = entry.path();
            let input = path.join(input_name);
            if !input.is_file() || (dir == "examples" && !path.join("expected.yaml").is_file()) {
                continue;
            }
            let policies = if path.join("policies.yaml").is_file() {
                "policies.yaml"
            } else {
                "policies"
            };
            let relative = |p: &Path| {
                p.strip_prefix(&root)
                    .expect("inside the repo")
                    .display()
                    .to_string()
            };
            cases.push(Case {
                name: relative(&path),
                policies: relative(&path.join(policies)),
                input: relative(&input),
                extra_args: fs::read_to_string(path.join("args"))
                    .map(|a| a.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect())
                    .unwrap_or_default(),
            });
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

fn run(case: &Case, output: &str) -> std::process::Output {
    command(case, "mutate", output)
}

fn explain(case: &Case, output: &str) -> std::process::Output {
    command(case, "explain", output)
}

/// `outfit <subcommand>` on the case's policies and input.
fn command(case: &Case, subcommand: &str, output: &str) -> std::process::Output {
    let mut args = vec![
        subcommand,
        "--policies",
        &case.policies,
        "-f",
        &case.input,
        "-o",
        output,
    ];
    args.extend(case.extra_args.iter().map(String::as_str));
    outfit(&args, "")
}

fn read_optional(dir: &Path, file: &str) -> Option<String> {
    fs::read_to_string(dir.join(file)).ok()
}

#[test]
fn every_fixture_gives_its_expected_output() {
    let root = repo_root();
    let cases = cases();
    assert!(cases.len() >= 5, "fixtures not found under {}", root.display());
    for case in &cases {
        let dir = root.join(&case.name);
        let expected_exit: i32 =
            read_optional(&dir, "expected-exit").map_or(0, |s| s.trim().parse().expect("a number"));
        let yaml = run(case, "yaml");
        let stderr = String::from_utf8_lossy(&yaml.stderr);
        assert_eq!(
            yaml.status.code(),
            Some(expected_exit),
            "{}: exit status; stderr:\n{stderr}",
            case.name
        );
        for line in read_optional(&dir, "expected-stderr.txt")
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.is_empty())
        {
            assert!(
                stderr.contains(line),
                "{}: stderr lacks {line:?}; stderr was:\n{stderr}",
                case.name
            );
        }
        let actual: Vec<Value> = objects(&String::from_utf8(yaml.stdout).expect("utf-8"), &case.name);
        let expected = read_optional(&dir, "expected.yaml")
            .map(|t| objects(&t, &case.name))
            .unwrap_or_default();
        assert_eq!(
            actual, expected,
            "{}: -o yaml output differs from expected.yaml",
            case.name
        );

        let json = run(case, "json");
        assert_eq!(json.status.code(), Some(expected_exit));
        assert_eq!(
            json_lines(&String::from_utf8(json.stdout).expect("utf-8")),
            actual,
            "{}: -o json and -o yaml disagree",
            case.name
        );
    }
}

/// `outfit explain` prints exactly `expected-explain.txt`, exits as `outfit mutate` does, and its
/// JSON form says the same per policy as its text.
#[test]
fn explanations_are_the_expected_ones() {
    let root = repo_root();
    let mut explained = 0;
    for case in &cases() {
        let dir = root.join(&case.name);
        let Some(expected) = read_optional(&dir, "expected-explain.txt") else {
            continue;
        };
        explained += 1;
        // `outfit explain` explains invalid policies where `outfit mutate` stops (exit 2).
        let expected_exit: i32 = read_optional(&dir, "expected-explain-exit")
            .or_else(|| read_optional(&dir, "expected-exit"))
            .map_or(0, |s| s.trim().parse().expect("a number"));
        let text = explain(case, "text");
        assert_eq!(text.status.code(), Some(expected_exit), "{}", case.name);
        let text = String::from_utf8(text.stdout).expect("utf-8");
        assert_eq!(
            text, expected,
            "{}: explain differs from expected-explain.txt",
            case.name
        );

        let json = explain(case, "json");
        assert_eq!(json.status.code(), Some(expected_exit), "{}", case.name);
        let json: Value = serde_json::from_slice(&json.stdout).expect("explain -o json is JSON");
        for explanation in json.as_array().expect("an array") {
            for decision in explanation["policies"].as_array().expect("policies") {
                let policy = &decision["policy"];
                let name = match policy["namespace"].as_str() {
                    Some(namespace) => format!(
                        "{} {namespace}/{}",
                        policy["kind"].as_str().unwrap(),
                        policy["name"].as_str().unwrap()
                    ),
                    None => format!(
                        "{} {}",
                        policy["kind"].as_str().unwrap(),
                        policy["name"].as_str().unwrap()
                    ),
                };
                let result = decision["result"].as_str().expect("a result");
                let said = match result {
                    "notMatched" => "not matched",
                    "changed" => "changed",
                    "unchanged" => "matched, changed nothing",
                    "denied" => "matched, denied",
                    "disabled" => "disabled",
                    other => panic!("{}: unknown result {other}", case.name),
                };
                assert!(
                    text.contains(&format!("  {name}: {said}")),
                    "{}: the text does not say {name}: {said}",
                    case.name
                );
            }
        }
    }
    assert!(explained >= 5, "expected-explain.txt files not found");
}

/// The acceptance check for patches: `-o patch` applied to the input by the API server's own
/// JSON-patch library gives exactly `-o json`, for every case whose objects were all admitted.
#[test]
fn patches_applied_by_the_apiservers_library_give_the_json_output() {
    let root = repo_root();
    let mut pairs = Vec::new();
    let mut expected = Vec::new();
    for case in cases()
        .iter()
        .filter(|c| read_optional(&root.join(&c.name), "expected-exit").is_none())
    {
        let inputs: Vec<Value> = parse_stream(
            &fs::read_to_string(root.join(&case.input)).expect("input"),
            &case.input,
        )
        .expect("input parses")
        .into_iter()
        .map(|d| d.value)
        .collect();
        let patches = json_lines(&String::from_utf8(run(case, "patch").stdout).expect("utf-8"));
        let outputs = json_lines(&String::from_utf8(run(case, "json").stdout).expect("utf-8"));
        assert_eq!(
            patches.len(),
            inputs.len(),
            "{}: one patch per input object",
            case.name
        );
        pairs.extend(inputs.into_iter().zip(patches));
        expected.extend(outputs);
    }
    assert!(!pairs.is_empty());
    let patched = apply_patches_independently(env!("CARGO_TARGET_TMPDIR"), &pairs);
    assert_eq!(patched, expected);
    assert!(
        pairs
            .iter()
            .any(|(_, patch)| patch.as_array().is_some_and(|ops| !ops.is_empty())),
        "some case must change something"
    );
}

fn objects(text: &str, case: &str) -> Vec<Value> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    parse_stream(text, case)
        .expect("output parses")
        .into_iter()
        .map(|d| d.value)
        .collect()
}
