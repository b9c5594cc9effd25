//! Inputs missing, malformed or not the family's: skipped with a warning or a note, never an error.

use serde_json::json;

use super::{FILER_INPUTS, admit, build, load, names, notebook, one_share, set};
use crate::{
    document::parse_stream,
    filer::{CONFIG_MAP, SECRET, names::bucket},
    policy_set::{Added, LoadSettings, PolicySet},
    vocab::Operation,
};

/// `http://` URLs lose no character.
#[test]
fn an_http_url_is_the_bucket_host_whole() {
    let (pod, warnings) = admit(
        &set(&one_share("fld7svm")),
        &notebook("bob-lab"),
        Operation::Create,
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let sidecar = &pod["spec"]["initContainers"][0];
    assert_eq!(sidecar["name"], json!(format!("fld7s-{}", bucket("b"))));
    assert_eq!(sidecar["env"][3]["value"], "fld7.s3.example.ca:9000");
}

/// Fixed: a generated name that is not a valid name (an SVM with `_` in its first 5 characters
/// makes an invalid container name in StatCan) skips that share with a warning naming it.
#[test]
fn an_invalid_generated_name_skips_the_share() {
    let (pod, warnings) = admit(
        &set(&one_share("fld9_svm")),
        &notebook("bob-lab"),
        Operation::Create,
    );
    assert!(pod["spec"].get("initContainers").is_none());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "filer share fld9_svm/b not mounted: sidecar name \"fld9_-{}\"",
            bucket("b")
        )),
        "{warnings:?}"
    );
    assert_eq!(
        warnings[1],
        "filer SVM fld9_svm not mounted: none of its shares can be mounted"
    );
}

/// The Secrets of three SVMs in namespace `carol`, and its `existing-shares` with `listed`.
fn carol(listed: &str) -> String {
    let secret = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-conn-secret, namespace: carol}}\n\
             stringData: {{S3_ACCESS: a, S3_SECRET: s}}\n"
        )
    };
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: existing-shares, namespace: carol}}\ndata: {listed}\n{}{}{}",
        secret("fld5filersvm"),
        secret("unknown"),
        secret("fld7svm")
    )
}

/// Fixed: StatCan has no answer for a share list that is not JSON (it skips the SVM, but other
/// read errors would panic) and reads a vserver it does not know as an empty URL; each SVM is
/// skipped here with a warning naming it, and the others still mount.
#[test]
fn a_malformed_share_list_or_an_unknown_vserver_skips_that_svm() {
    let shares = carol("{fld5filersvm: 'not json', unknown: '[\"x\"]', fld7svm: '[\"y\"]'}");
    let (pod, warnings) = admit(&set(&shares), &notebook("carol"), Operation::Create);
    assert_eq!(
        pod["spec"]["initContainers"].as_array().unwrap().len(),
        1,
        "fld7svm still mounts"
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].starts_with(
        "filer SVM fld5filersvm not mounted: existing-shares data.fld5filersvm: not a JSON array of strings"
    ));
    assert_eq!(
        warnings[1],
        "filer SVM unknown not mounted: no vserver \"unknown\" in ConfigMap das/filers-list"
    );
}

/// Fixed: without `filers-list` StatCan's process dies (`klog.Fatalf`), and with failurePolicy
/// Fail every pod create in the selected namespaces fails; without its template it does not
/// start. Here the shares are skipped with a warning naming the ConfigMap, and the pod admitted.
#[test]
fn a_missing_filers_list_or_template_skips_the_shares() {
    let shares = carol("{fld7svm: '[\"y\"]'}");
    let (filers, template) = FILER_INPUTS.split_at(FILER_INPUTS.find("---").unwrap());
    let (set, _) = build(&format!("{template}\n---\n{shares}"));
    let (pod, warnings) = admit(&set, &notebook("carol"), Operation::Create);
    assert_eq!(pod, notebook("carol"));
    assert_eq!(
        warnings,
        ["filer SVM fld7svm not mounted: ConfigMap das/filers-list not found"]
    );
    let (set, _) = build(&format!("{filers}\n---\n{shares}"));
    let (pod, warnings) = admit(&set, &notebook("carol"), Operation::Create);
    assert_eq!(pod, notebook("carol"));
    assert_eq!(
        warnings,
        ["filer shares not mounted: ConfigMap das/filer-sidecar-injector-json not found"]
    );
}

/// Fixed: StatCan's `s3Url[8:]` panics on a URL shorter than `https://`; here that SVM is skipped.
#[test]
fn a_url_without_its_scheme_skips_the_svm() {
    let inputs = FILER_INPUTS.replace("http://fld7.s3.example.ca:9000", "https:/");
    let (set, _) = build(&format!("{inputs}\n---\n{}", carol("{fld7svm: '[\"y\"]'}")));
    let (pod, warnings) = admit(&set, &notebook("carol"), Operation::Create);
    assert_eq!(pod, notebook("carol"));
    assert_eq!(
        warnings,
        ["filer SVM fld7svm not mounted: ConfigMap das/filers-list: \
          URL \"https:/\" does not start with https:// or http://"]
    );
}

/// Fixed: a `filers-list` that is not JSON kills StatCan's webhook; here it is a load warning and
/// every share waits for a good one.
#[test]
fn an_invalid_filers_list_is_a_load_warning() {
    let (set, report) = build(&FILER_INPUTS.replace("filers: '[", "filers: '[oops"));
    let invalid = "ConfigMap das/filers-list: data.filers: invalid JSON";
    assert!(
        report.warnings.iter().any(|w| w.message.starts_with(invalid)),
        "{:?}",
        report.warnings
    );
    let (pod, warnings) = admit(&set, &notebook("alice-research"), Operation::Create);
    assert_eq!(pod, notebook("alice-research"));
    assert!(warnings[0].contains(invalid), "{warnings:?}");
}

/// Fixed: StatCan fills `env[0..3]`, `volumeMounts[0]` and `volumes[0..1]` by position; a template
/// with its env vars and volumes in another order gives the same sidecar here.
#[test]
fn template_fields_are_found_by_name() {
    let reordered = FILER_INPUTS
        .replace(
            r#"[{"name": "fuse-fd-passing-x", "emptyDir": {}},"#,
            r#"["#,
        )
        .replace(
            r#""fdPassingSocketName": "fuse-csi-ephemeral.sock"}}}]}"#,
            r#""fdPassingSocketName": "fuse-csi-ephemeral.sock"}}}, {"name": "fuse-fd-passing-x", "emptyDir": {}}]}"#,
        )
        .replace(
            r#"[{"name": "FUSERMOUNT3PROXY_FDPASSING_SOCKPATH", "value": "x"},"#,
            r#"[{"name": "EXTRA", "value": "kept"},"#,
        );
    assert_ne!(reordered, FILER_INPUTS);
    let documents = parse_stream(&reordered, "f.yaml").unwrap();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    let (set, report) = builder.build();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let (pod, _) = admit(&set, &notebook("alice-research"), Operation::Create);
    let sidecar = &pod["spec"]["initContainers"][0];
    assert_eq!(
        names(&sidecar["env"]),
        [
            "EXTRA",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "BUCKET_HOST",
            "FUSERMOUNT3PROXY_FDPASSING_SOCKPATH"
        ]
    );
    let volumes = &pod["spec"]["volumes"];
    assert!(
        volumes[0]["name"]
            .as_str()
            .unwrap()
            .starts_with("fuse-fd-passing-")
    );
    assert!(
        volumes[1]["name"]
            .as_str()
            .unwrap()
            .starts_with("fuse-csi-ephemeral-")
    );
}

/// ConfigMaps and Secrets of other names are not the family's: skipped with a note, not refused.
#[test]
fn other_config_maps_and_secrets_are_declined() {
    let extra = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: alice-research}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: filers-list, namespace: elsewhere}
---
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: alice-research}
"#;
    let documents = parse_stream(extra, "x.yaml").unwrap();
    let mut builder = PolicySet::builder();
    let added: Vec<Added> = documents
        .iter()
        .map(|d| builder.add(d).expect("never an error"))
        .collect();
    assert!(added.iter().all(|a| matches!(a, Added::Skipped(_))), "{added:?}");
    let (set, report) = builder.build();
    assert_eq!(report.skipped.len(), 3);
    assert!(
        report.skipped[1].1.contains("in namespace das"),
        "{:?}",
        report.skipped
    );
    assert!(set.is_empty());
    let (set, report) = load("", LoadSettings::default());
    assert_eq!(set.count(CONFIG_MAP), 3);
    // The conn Secret is read in both modes (with secretKeyRefs, whether its keys are set).
    assert_eq!(set.count(SECRET), 1);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let plain = LoadSettings {
        filer_plain_secrets: true,
        ..LoadSettings::default()
    };
    assert_eq!(load("", plain).0.count(SECRET), 1);
}

/// The injector's namespace is a setting (`das` by default, as StatCan deploys it).
#[test]
fn the_injector_namespace_is_configurable() {
    let moved = FILER_INPUTS.replace("namespace: das", "namespace: filers");
    let documents = parse_stream(&moved, "f.yaml").unwrap();
    let mut builder = PolicySet::builder().settings(LoadSettings {
        filer_namespace: "filers".to_owned(),
        ..LoadSettings::default()
    });
    builder.add_all(&documents);
    let (set, _) = builder.build();
    let (pod, _) = admit(&set, &notebook("alice-research"), Operation::Create);
    assert_eq!(pod["spec"]["initContainers"].as_array().unwrap().len(), 2);
}

/// Fixed: a share listed twice (or two SVMs alike in their first 5 characters with one share
/// path) makes StatCan add two containers of one name, and the API server refuses the pod; the
/// second is skipped here with a warning.
#[test]
fn a_share_listed_twice_is_mounted_once() {
    let twice = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: existing-shares, namespace: bob-lab}
data: {fld7svm: '["b", "b"]'}
---
apiVersion: v1
kind: Secret
metadata: {name: fld7svm-conn-secret, namespace: bob-lab}
stringData: {S3_ACCESS: a, S3_SECRET: s}
"#;
    let (pod, warnings) = admit(&set(twice), &notebook("bob-lab"), Operation::Create);
    assert_eq!(
        names(&pod["spec"]["initContainers"]),
        [format!("fld7s-{}", bucket("b"))]
    );
    assert_eq!(
        warnings,
        [format!(
            "filer share fld7svm/b not mounted: sidecar name \"fld7s-{}\" is taken by an earlier share",
            bucket("b")
        )]
    );
}

/// A pod that has the sidecars already (its inject annotation removed) is left as it is, with a
/// warning, rather than given containers of the same names, which the API server would refuse.
#[test]
fn a_pod_with_the_sidecars_already_is_left_alone() {
    let set = set("");
    let (injected, _) = admit(&set, &notebook("alice-research"), Operation::Create);
    let mut again = injected.clone();
    again["metadata"]["annotations"] = json!({});
    let (pod, warnings) = admit(&set, &again, Operation::Create);
    assert_eq!(pod, again);
    assert_eq!(
        warnings,
        [format!(
            "the pod already has a container named \"fld5f-{}\"; no sidecar added",
            bucket("projects/alpha")
        )]
    );
}

/// A template whose CSI volume is not an object (`"csi": "x"`) is refused when read, with a
/// warning naming it; filling it in panicked while the set was built (found in review).
#[test]
fn a_template_volume_that_is_not_an_object_is_refused_not_a_panic() {
    let start = FILER_INPUTS
        .find("\"csi\": {")
        .expect("the template's CSI volume");
    let end = start + FILER_INPUTS[start..].find("}}}]}").expect("its end");
    let inputs = format!(
        "{}\"csi\": \"x\"}}]}}{}",
        &FILER_INPUTS[..start],
        &FILER_INPUTS[end + 5..]
    );
    let (set, _) = build(&format!("{inputs}\n---\n{}", carol("{fld7svm: '[\"y\"]'}")));
    let (pod, warnings) = admit(&set, &notebook("carol"), Operation::Create);
    assert_eq!(pod, notebook("carol"));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("no csi volume (an object)"), "{warnings:?}");
}
