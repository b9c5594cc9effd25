//! The `outfit mutate` contract other tools script against.

use crate::support::{json_lines, outfit};

const POLICY: &str = "tests/fixtures/poddefault-conflict/policies.yaml";

#[test]
fn reads_stdin_when_no_file_or_dash_is_given() {
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a","labels":{"proxy":"true"}},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    for args in [
        &["mutate", "--policies", POLICY, "-o", "json"][..],
        &["mutate", "--policies", POLICY, "-f", "-", "-o", "json"],
    ] {
        let out = outfit(args, pod);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let objects = json_lines(&String::from_utf8(out.stdout).unwrap());
        assert_eq!(
            objects[0]["spec"]["containers"][0]["env"][0]["name"],
            "HTTPS_PROXY"
        );
    }
}

#[test]
fn patch_output_is_one_array_per_object_and_empty_when_unchanged() {
    let unchanged = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\nspec: {containers: []}\n";
    let out = outfit(&["mutate", "--policies", POLICY, "-o", "patch"], unchanged);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "[]\n[]\n");
}

#[test]
fn unreadable_files_and_garbage_exit_2_without_panicking() {
    let missing = outfit(&["mutate", "--policies", "does/not/exist", "-f", "-"], "");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does/not/exist: cannot read"));
    for garbage in ["\u{0}\u{1}binary", "[1, 2", "- just\n- a list\n", "kind: [", "42"] {
        let out = outfit(&["mutate", "--policies", POLICY], garbage);
        assert_eq!(out.status.code(), Some(2), "input {garbage:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: <stdin>"),
            "input {garbage:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"));
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn bad_flags_exit_2() {
    assert_eq!(
        outfit(&["mutate", "--policies", POLICY, "-o", "xml"], "")
            .status
            .code(),
        Some(2)
    );
    assert_eq!(outfit(&["mutate"], "").status.code(), Some(2));
}

#[test]
fn yaml_output_keeps_strings_that_look_like_other_types() {
    // kubectl reads YAML 1.1, where `yes`, `on`, `080`, `~` are not strings: they must be quoted.
    let tricky = [
        "true",
        "080",
        "1e3",
        "null",
        "~",
        "yes",
        "no",
        "on",
        "off",
        "Y",
        "",
        " lead",
        "a: b",
        "#x",
        "- x",
        "line1\nline2\n",
        "0x1F",
        "1_000",
        ".inf",
        "2001-12-14",
        "*x",
        "&x",
        "!x",
        "|",
        "{x}",
        "<<",
        "0o17",
    ];
    let data: serde_json::Map<String, serde_json::Value> = tricky
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("k{i}"), serde_json::json!(s)))
        .collect();
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                    "data": data, "numbers": [1, -2, 3.5, null, true]});
    let out = outfit(&["mutate", "--policies", POLICY], &object.to_string());
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    for quoted in ["\"yes\"", "\"on\"", "\"080\"", "\"~\"", "\"Y\"", "\"null\""] {
        assert!(yaml.contains(quoted), "{quoted} not quoted in:\n{yaml}");
    }
    let back = outfit_core::document::parse_stream(&yaml, "out").unwrap();
    assert_eq!(back[0].value, object);
}

#[test]
fn mutate_explain_writes_the_explanation_to_stderr_and_leaves_stdout_as_it_was() {
    let dir = "tests/fixtures/explain-clauses";
    let policies = format!("{dir}/policies.yaml");
    let input = format!("{dir}/input.yaml");
    let plain = outfit(&["mutate", "--policies", &policies, "-f", &input], "");
    let explained = outfit(
        &["mutate", "--policies", &policies, "-f", &input, "--explain"],
        "",
    );
    assert!(explained.status.success());
    assert_eq!(explained.stdout, plain.stdout);
    let expected =
        std::fs::read_to_string(crate::support::repo_root().join(dir).join("expected-explain.txt")).unwrap();
    assert_eq!(String::from_utf8(explained.stderr).unwrap(), expected);
    // Without --explain, the same warning stands alone.
    assert_eq!(
        String::from_utf8(plain.stderr).unwrap(),
        "warning: Pod team-a/gpu-notebook: Assign workspace-priority matched and changed nothing: \
         its spec.parameters.pathTests stopped it\n"
    );

    let json = outfit(
        &[
            "mutate",
            "--policies",
            &policies,
            "-f",
            &input,
            "--explain=json",
            "-o",
            "patch",
        ],
        "",
    );
    assert!(json.status.success());
    let explanations: serde_json::Value =
        serde_json::from_slice(&json.stderr).expect("--explain=json writes JSON");
    assert_eq!(explanations[1]["object"], "Pod team-a/cpu-notebook");
    assert_eq!(explanations[1]["outcome"], "mutated");
    let gpu = &explanations[1]["policies"][0];
    assert_eq!(gpu["policy"]["kind"], "PodDefault");
    assert_eq!(gpu["result"], "notMatched");
    assert_eq!(gpu["clause"]["field"], "spec.selector");
    let priority = &explanations[1]["policies"][1];
    assert_eq!(priority["result"], "changed");
    assert_eq!(priority["changes"][0]["path"], "/spec/priorityClassName");
    assert_eq!(priority["changes"][0]["after"], "workspace");
    assert!(priority["changes"][0].get("before").is_none());
}

#[test]
fn explain_an_update_rules_out_poddefaults_by_operation() {
    let dir = "tests/fixtures/explain-clauses";
    let out = outfit(
        &[
            "explain",
            "--policies",
            &format!("{dir}/policies.yaml"),
            "-f",
            &format!("{dir}/input.yaml"),
            "--operation",
            "update",
        ],
        "",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "  PodDefault team-a/gpu-env: not matched: operation: UPDATE; PodDefaults apply on CREATE, as Kubeflow registers its webhook\n"
        ),
        "{text}"
    );
    // Gatekeeper mutators apply on UPDATE too: the CPU pod still gets its priority class.
    assert!(
        text.contains("Pod team-a/cpu-notebook: mutated\n")
            && text.contains("      /spec/priorityClassName: (absent) -> \"workspace\"\n"),
        "{text}"
    );
}

/// `--user` and `--group` stand for `request.userInfo`: the seed 000 example gives a GPU to the
/// gpu-users group only, and says which requester clause decided.
#[test]
fn user_and_group_simulate_the_requester() {
    const GPU_POLICIES: &str = "examples/gpu-users/policies.yaml";
    const GPU_POD: &str = "examples/gpu-users/pod.yaml";
    let patch = |who: &[&str]| {
        let out = outfit(
            &[
                &["mutate", "--policies", GPU_POLICIES, "-f", GPU_POD, "-o", "patch"],
                who,
            ]
            .concat(),
            "",
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let authorised = patch(&["--user", "alice", "--group", "team-a", "--group", "gpu-users"]);
    assert!(
        authorised.contains(r#""path":"/spec/containers/0/resources/limits/nvidia.com~1gpu","value":"1""#),
        "{authorised}"
    );
    assert_eq!(
        patch(&["--user", "bob", "--group", "team-b"]),
        "[]\n",
        "not authorised"
    );
    assert_eq!(
        patch(&["--user", "intern-dan", "--group", "gpu-users"]),
        "[]\n",
        "excluded"
    );
    assert_eq!(patch(&[]), "[]\n", "no user: nobody to authorise");

    let clause = |who: &[&str]| {
        let out = outfit(
            &[
                &["explain", "--policies", GPU_POLICIES, "-f", GPU_POD, "-o", "json"],
                who,
            ]
            .concat(),
            "",
        );
        let explanation: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        explanation[0]["policies"][0]["clause"]["field"].clone()
    };
    assert_eq!(clause(&["--user", "bob"]), "spec.match.requesters");
    assert_eq!(
        clause(&["--user", "intern-dan", "--group", "gpu-users"]),
        "spec.match.requesters.exclude"
    );

    // A group belongs to a user.
    let orphan = outfit(
        &[
            "mutate",
            "--policies",
            GPU_POLICIES,
            "-f",
            GPU_POD,
            "--group",
            "gpu-users",
        ],
        "",
    );
    assert_eq!(orphan.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&orphan.stderr).contains("--user"));
}

/// The daemons and `outfit manifests` refuse bad flags with exit status 2 and a message naming
/// the flag (or the policy) at fault, before binding anything.
#[test]
fn bad_flags_of_serve_and_manifests_exit_2_naming_the_flag() {
    let certs = std::env::temp_dir().join(format!("outfit-flags-{}", std::process::id()));
    let certs = certs.to_str().unwrap();
    let serve = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--policies",
            "examples/workspace/policies",
            "--self-signed",
            certs,
        ];
        args.extend_from_slice(extra);
        outfit(&args, "")
    };
    let cases = [
        (
            serve(&["--poll-interval", "0"]),
            "--poll-interval must be a positive number of seconds",
        ),
        (serve(&["--log", "bad[["]), "--log \"bad[[\": "),
        (
            outfit(
                &[
                    "manifests",
                    "--policies",
                    "tests/fixtures/poddefault-invalid-policy/policies.yaml",
                ],
                "",
            ),
            "PodDefault team-a/broken: spec.selector: invalid label selector",
        ),
        // Issue 23: a group outfit installs no CRD of was ignored, and the CRDs meant to be left
        // out were installed.
        (
            outfit(&["manifests", "--without-crds", "kubeflow.com"], ""),
            "--without-crds \"kubeflow.com\": outfit installs no CRD of that API group (its groups: kubeflow.org,",
        ),
        (
            outfit(&["manifests", "--filers-list", "examples/workspace/policies"], ""),
            "--filers-list examples/workspace/policies: no ConfigMap named filers-list",
        ),
        (
            outfit(&["manifests", "--filer-svm", "Bad Name"], ""),
            "--filer-svm \"Bad Name\": its Secret's name would not be a valid object name",
        ),
        // Issue 33: installs that put the cluster at risk, refused naming the risk.
        (
            outfit(&["manifests", "--replicas", "1"], ""),
            "--replicas 1 with --failure-policy fail: while that replica is down",
        ),
        (
            outfit(
                &[
                    "manifests",
                    "--workspaces",
                    "--workspaces-namespace",
                    "outfit-system",
                ],
                "",
            ),
            "--workspaces-namespace outfit-system: the webhook never mutates pods in outfit's own namespace",
        ),
        (
            outfit(
                &[
                    "manifests",
                    "--workspaces",
                    "--workspaces-namespace",
                    "kube-system",
                ],
                "",
            ),
            "or accept the risk with --accept-risk workspaces-in-system-namespace",
        ),
        (
            outfit(
                &[
                    "manifests",
                    "--workspaces",
                    "--allowed-host-path",
                    "/dev/dri",
                    "--workspaces-pod-security",
                    "baseline",
                ],
                "",
            ),
            "--workspaces-pod-security: Pod Security's baseline level refuses every pod using /dev/dri",
        ),
        (
            outfit(
                &["manifests", "--workspaces", "--frontend-cidr", "10.0.0.0/40"],
                "",
            ),
            "invalid value '10.0.0.0/40' for '--frontend-cidr <CIDR>': \"10.0.0.0/40\": the prefix length must be 0 to 32",
        ),
        (
            outfit(&["manifests", "--workspaces", "--allowed-host-path", "/"], ""),
            "invalid value '/' for '--allowed-host-path <PATH>': an absolute path below /",
        ),
        (
            outfit(&["manifests", "--accept-risk", "everything"], ""),
            "no such risk; the risks are single-replica, workspaces-in-system-namespace, no-memory-limit, compat-api-without-token",
        ),
        (
            outfit(&["manifests", "--exclude-namespace", "legacy,Team_A"], ""),
            "invalid value 'Team_A' for '--exclude-namespace <NAMESPACE>': a namespace's name is 1 to 63",
        ),
    ];
    for (out, expected) in cases {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
    std::fs::remove_dir_all(certs).ok();
}

/// Issue 23: `outfit manifests --filers-list` grants get, list and watch on the Secrets of the
/// SVMs that `filers-list` lists, by name, and `--filer-svm` adds more; without either, no Secret
/// at all (an empty `resourceNames` would grant every one).
#[test]
fn manifests_grant_the_filer_secrets_by_name_only() {
    let secret_rules = |args: &[&str]| -> Vec<serde_json::Value> {
        crate::support::manifests(args)
            .into_iter()
            .filter(|d| d.value["kind"] == "ClusterRole")
            .flat_map(|d| d.value["rules"].as_array().cloned().unwrap_or_default())
            .filter(|rule| rule["resources"] == serde_json::json!(["secrets"]))
            .collect()
    };
    assert_eq!(secret_rules(&[]), Vec::<serde_json::Value>::new());
    let rules = secret_rules(&[
        "--filers-list",
        "examples/filer/policies/injector.yaml",
        "--filer-svm",
        "fld3_svm",
    ]);
    assert_eq!(
        rules,
        [
            serde_json::json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"],
                            "resourceNames": ["fld3-svm-conn-secret", "fld5filersvm-conn-secret", "fld9svm-conn-secret"]})
        ]
    );
}

/// Issue 47: a reader that closes standard output early (`outfit manifests | head`, a pager quit, a
/// failing `kubectl apply -f -`) ends every command that prints quietly with 141, the status a
/// shell shows for `cat` or `kubectl` ended by SIGPIPE: no panic, no error message. The read end is
/// closed before outfit writes, so every write fails, whatever the output's size.
#[test]
fn a_closed_stdout_ends_every_printing_command_quietly_with_141() {
    let gpu = [
        "--policies",
        "examples/gpu-users/policies.yaml",
        "-f",
        "examples/gpu-users/pod.yaml",
    ];
    let commands: [&[&str]; 7] = [
        &["manifests"],
        &["manifests", "--workspaces"],
        &[&["mutate"][..], &gpu].concat(),
        &[&["mutate"][..], &gpu, &["-o", "patch"]].concat(),
        &[&["explain"][..], &gpu].concat(),
        &[&["explain"][..], &gpu, &["-o", "json"]].concat(),
        &["--help"],
    ];
    for args in commands {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_outfit"))
            .args(args)
            .current_dir(crate::support::repo_root())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start outfit");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("outfit runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "outfit {args:?}: {stderr}");
        if args == ["--help"] {
            // clap prints help and exits 0 whether or not the write went through.
            assert_eq!(out.status.code(), Some(0), "outfit {args:?}: {stderr}");
        } else {
            assert_eq!(out.status.code(), Some(141), "outfit {args:?}: {stderr}");
            assert_eq!(stderr, "", "outfit {args:?}");
        }
    }
}
