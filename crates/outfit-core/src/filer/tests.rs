//! The filer family on plain documents: each test names the StatCan behaviour it keeps
//! (`cmd/webhook.go` unless said otherwise) or the bug it fixes.

use serde_json::{Value, json};

use super::names::bucket;
use crate::{
    decision::{Outcome, Request},
    document::parse_stream,
    policy_set::{Added, LoadReport, LoadSettings, PolicySet},
    vocab::Operation,
};

const FILER_INPUTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: filers-list, namespace: das}
data:
  filers: '[{"vserver": "fld5filersvm", "name": "fld5", "uuid": "u1", "url": "https://fld5.s3.example.ca"},
            {"vserver": "fld9_svm", "name": "fld9", "uuid": "u2", "url": "https://fld9.s3.example.ca"},
            {"vserver": "fld7svm", "name": "fld7", "uuid": "u3", "url": "http://fld7.s3.example.ca:9000"}]'
---
apiVersion: v1
kind: ConfigMap
metadata: {name: filer-sidecar-injector-json, namespace: das}
data:
  sidecarconfig.json: |
    {"containers": [{"name": "filer-connection-x", "image": "goofys:5gb", "restartPolicy": "Always",
                     "command": ["/bin/bash"], "args": ["-c", "INSERT"],
                     "volumeMounts": [{"name": "fuse-fd-passing-x", "mountPath": "/fusermount3-proxy"}],
                     "env": [{"name": "FUSERMOUNT3PROXY_FDPASSING_SOCKPATH", "value": "x"},
                             {"name": "AWS_ACCESS_KEY_ID", "value": "INSERT-ACCESS"},
                             {"name": "AWS_SECRET_ACCESS_KEY", "value": "INSERT-SECRET"},
                             {"name": "BUCKET_HOST", "value": "INSERT-HOST"}]}],
     "volumes": [{"name": "fuse-fd-passing-x", "emptyDir": {}},
                 {"name": "fuse-csi-ephemeral-x",
                  "csi": {"driver": "meta-fuse-csi-plugin.csi.storage.pfn.io", "readOnly": false,
                          "volumeAttributes": {"fdPassingEmptyDirName": "fuse-fd-passing-x",
                                               "fdPassingSocketName": "fuse-csi-ephemeral.sock"}}}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: existing-shares, namespace: alice-research}
data:
  fld5filersvm: '["projects/alpha", "dir/share2"]'
---
apiVersion: v1
kind: Secret
metadata: {name: fld5filersvm-conn-secret, namespace: alice-research}
stringData: {S3_ACCESS: AKIA1, S3_SECRET: s3cr3t}
"#;

fn load(extra: &str, settings: LoadSettings) -> (PolicySet, LoadReport) {
    let text = format!("{FILER_INPUTS}\n---\n{extra}");
    let documents = parse_stream(&text, "filer.yaml").expect("YAML");
    let mut builder = PolicySet::builder().settings(settings);
    builder.add_all(&documents);
    builder.build()
}

fn set(extra: &str) -> PolicySet {
    let (set, report) = load(extra, LoadSettings::default());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    set
}

/// Namespace `bob-lab` with share `b` on `svm`, and the SVM's Secret as metadata alone.
fn one_share(svm: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: existing-shares, namespace: bob-lab}}\n\
         data: {{{svm}: '[\"b\"]'}}\n---\napiVersion: v1\nkind: Secret\n\
         metadata: {{name: {}-conn-secret, namespace: bob-lab}}\n",
        svm.replace('_', "-")
    )
}

fn notebook(namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "nb-0", "namespace": namespace, "labels": {"notebook-name": "nb"}},
           "spec": {"containers": [
               {"name": "istio-proxy", "image": "proxy"},
               {"name": "nb", "image": "jupyter", "env": [{"name": "NB_PREFIX", "value": "/notebook/x/nb"}]}]}})
}

/// The admitted pod and the warnings, checking that the patch turns the pod into it.
fn admit(set: &PolicySet, pod: &Value, operation: Operation) -> (Value, Vec<String>) {
    let request = Request {
        object: pod.into(),
        namespace: "default",
        operation,
        user: None,
    };
    let Outcome::Admitted(admission) = set.apply(&request) else {
        panic!("a filer input never denies a pod")
    };
    let admitted = admission.object(pod).expect("applies").into_owned();
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &admission.patch()).expect("the patch applies");
    assert_eq!(patched, admitted, "the patch gives the admitted object");
    (admitted, admission.warnings)
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|l| l.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default()
}

/// StatCan: the names (`filerBucket`, `shortNs`, volume names, the socket path, the mount path,
/// env var names and their sanitising) and values; the sidecar in `initContainers`.
#[test]
fn names_and_values_are_statcans() {
    let (pod, warnings) = admit(&set(""), &notebook("alice-research"), Operation::Create);
    assert!(warnings.is_empty(), "{warnings:?}");
    let hash = bucket("dir/share2");
    let sidecar = &pod["spec"]["initContainers"][1];
    let filer_bucket = format!("fld5f-{hash}");
    assert_eq!(sidecar["name"], json!(filer_bucket));
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert_eq!(
        sidecar["env"][0]["value"],
        json!(format!(
            "fusermount3-proxy-{filer_bucket}-reseaal/fuse-csi-ephemeral.sock"
        ))
    );
    assert_eq!(
        sidecar["env"][3],
        json!({"name": "BUCKET_HOST", "value": "fld5.s3.example.ca"})
    );
    assert_eq!(
        sidecar["volumeMounts"][0],
        json!({"name": format!("fuse-fd-passing-{filer_bucket}-reseaal"),
               "mountPath": format!("fusermount3-proxy-{filer_bucket}-reseaal")})
    );
    assert_eq!(
        sidecar["resources"],
        json!({"limits": {"cpu": "500m", "memory": "10Gi"}, "requests": {"cpu": "100m", "memory": "100Mi"}})
    );
    let args = sidecar["args"][1].as_str().unwrap();
    assert!(args.starts_with("for i in {1..5}; do /goofys --cheap --endpoint https://fld5.s3.example.ca "));
    assert!(args.contains(&format!(" -f {hash} /tmp;")) && args.ends_with("sleep infinity"));
    let csi = &pod["spec"]["volumes"][3];
    assert_eq!(
        csi["name"],
        json!(format!("fuse-csi-ephemeral-{filer_bucket}-reseaal"))
    );
    assert_eq!(
        csi["csi"]["volumeAttributes"]["fdPassingEmptyDirName"],
        json!(format!("fuse-fd-passing-{filer_bucket}-reseaal"))
    );
    let nb = &pod["spec"]["containers"][1];
    assert_eq!(
        nb["volumeMounts"][1],
        json!({"name": csi["name"], "mountPath": "/home/jovyan/filers/fld5filersvm/dir/share2",
               "readOnly": false, "mountPropagation": "HostToContainer"})
    );
    assert_eq!(
        names(&nb["env"]),
        [
            "NB_PREFIX",
            "fld5filersvm_access",
            "fld5filersvm_secret",
            "fld5filersvm_url",
            "fld5filersvm_projects_alpha",
            "fld5filersvm_dir_share2"
        ]
    );
    assert_eq!(nb["env"][5]["value"], json!(hash));
    assert_eq!(nb["env"][3]["value"], "https://fld5.s3.example.ca");
    assert_eq!(
        pod["metadata"]["annotations"]["filer-injector-webhook.das-zone.statcan/inject"],
        "injected"
    );
}

/// Fixed: with two shares and no initContainers (or volumes) StatCan's per-share `add` of the
/// whole list kept only the last share's sidecar (and volumes); every one is kept here, after
/// those the pod has.
#[test]
fn every_sidecar_and_volume_is_kept_with_two_shares() {
    let set = set("");
    let (pod, _) = admit(&set, &notebook("alice-research"), Operation::Create);
    assert_eq!(pod["spec"]["initContainers"].as_array().unwrap().len(), 2);
    assert_eq!(pod["spec"]["volumes"].as_array().unwrap().len(), 4);
    let mut with_lists = notebook("alice-research");
    with_lists["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox"}]);
    with_lists["spec"]["volumes"] = json!([{"name": "kube-api-access", "projected": {}}]);
    let (pod, _) = admit(&set, &with_lists, Operation::Create);
    assert_eq!(names(&pod["spec"]["initContainers"])[0], "setup");
    assert_eq!(pod["spec"]["initContainers"].as_array().unwrap().len(), 3);
    assert_eq!(names(&pod["spec"]["volumes"])[0], "kube-api-access");
    assert_eq!(pod["spec"]["volumes"].as_array().unwrap().len(), 5);
}

/// Fixed: StatCan finds the container with `NB_PREFIX` but patches `containers/0`; the notebook
/// container here is index 1, and the sidecar proxy at 0 is left alone.
#[test]
fn the_notebook_container_is_the_one_with_nb_prefix() {
    let (pod, _) = admit(&set(""), &notebook("alice-research"), Operation::Create);
    assert_eq!(
        pod["spec"]["containers"][0],
        notebook("x")["spec"]["containers"][0]
    );
    assert_eq!(
        pod["spec"]["containers"][1]["volumeMounts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// Fixed: StatCan copies `S3_ACCESS`/`S3_SECRET` into the pod as plain values; here they are
/// `secretKeyRef`s to the SVM's Secret, in the sidecar and in the notebook container.
#[test]
fn s3_keys_are_secret_key_refs() {
    let (pod, _) = admit(&set(""), &notebook("alice-research"), Operation::Create);
    let reference = |key: &str| json!({"secretKeyRef": {"name": "fld5filersvm-conn-secret", "key": key}});
    let sidecar = &pod["spec"]["initContainers"][0];
    assert_eq!(sidecar["env"][1]["valueFrom"], reference("S3_ACCESS"));
    assert_eq!(sidecar["env"][2]["valueFrom"], reference("S3_SECRET"));
    assert_eq!(
        pod["spec"]["containers"][1]["env"][1]["valueFrom"],
        reference("S3_ACCESS")
    );
    assert!(!pod.to_string().contains("s3cr3t"), "no plain secret in the pod");
}

/// StatCan: with the compatibility switch the keys are plain values, as its injector puts them.
#[test]
fn plain_secrets_switch_gives_statcans_plain_values() {
    let settings = LoadSettings {
        filer_plain_secrets: true,
        ..LoadSettings::default()
    };
    let (set, _) = load("", settings);
    let (pod, _) = admit(&set, &notebook("alice-research"), Operation::Create);
    assert_eq!(
        pod["spec"]["initContainers"][0]["env"][2],
        json!({"name": "AWS_SECRET_ACCESS_KEY", "value": "s3cr3t"})
    );
    assert_eq!(
        pod["spec"]["containers"][1]["env"][1],
        json!({"name": "fld5filersvm_access", "value": "AKIA1"})
    );
}

/// StatCan `mutationRequired`: the `notebook-name` label is required, and the inject annotation
/// `n|not|false|off|injected` (any case) opts out; other values (`true` in its ex-pod.yaml) do not.
#[test]
fn trigger_is_the_notebook_label_and_the_inject_annotation() {
    let set = set("");
    let mut plain = notebook("alice-research");
    plain["metadata"]["labels"] = json!({"app": "x"});
    assert_eq!(admit(&set, &plain, Operation::Create).0, plain);
    for value in ["n", "NOT", "False", "off", "injected"] {
        let mut pod = notebook("alice-research");
        pod["metadata"]["annotations"] = json!({"filer-injector-webhook.das-zone.statcan/inject": value});
        assert_eq!(admit(&set, &pod, Operation::Create).0, pod, "{value}");
    }
    let mut pod = notebook("alice-research");
    pod["metadata"]["annotations"] = json!({"filer-injector-webhook.das-zone.statcan/inject": "true"});
    let (admitted, _) = admit(&set, &pod, Operation::Create);
    assert_eq!(
        admitted["metadata"]["annotations"]["filer-injector-webhook.das-zone.statcan/inject"],
        "injected"
    );
    // Admitting the injected pod again (a reinvocation) changes nothing.
    assert_eq!(admit(&set, &admitted, Operation::Create).0, admitted);
}

/// StatCan: a namespace without `existing-shares` is left alone. Fixed: StatCan also acts on
/// UPDATE, where a new init container would make the API server refuse the update; here CREATE only.
#[test]
fn only_pods_created_in_namespaces_with_shares() {
    let set = set("");
    let elsewhere = notebook("bob");
    assert_eq!(admit(&set, &elsewhere, Operation::Create).0, elsewhere);
    let pod = notebook("alice-research");
    assert_eq!(admit(&set, &pod, Operation::Update).0, pod);
}

/// StatCan: an SVM whose `-conn-secret` is missing is skipped (its other SVMs still mount); with
/// known values, an empty key skips it too. The `_` of an SVM becomes `-` in the Secret's name.
#[test]
fn an_svm_without_its_secret_is_skipped_with_a_warning() {
    let extra = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: existing-shares, namespace: bob-lab}
data:
  fld5filersvm: '["a"]'
  fld9_svm: '["b"]'
---
apiVersion: v1
kind: Secret
metadata: {name: fld9-svm-conn-secret, namespace: bob-lab}
data: {S3_ACCESS: QUtJQTI=, S3_SECRET: ""}
"#;
    let (pod, warnings) = admit(&set(extra), &notebook("bob-lab"), Operation::Create);
    assert_eq!(pod, notebook("bob-lab"), "nothing to mount");
    assert_eq!(
        warnings,
        [
            "ConfigMap bob-lab/existing-shares: SVM fld5filersvm: shares not mounted: Secret bob-lab/fld5filersvm-conn-secret not found",
            "ConfigMap bob-lab/existing-shares: SVM fld9_svm: shares not mounted: Secret bob-lab/fld9-svm-conn-secret: S3_SECRET is missing or empty"
        ]
    );
}

/// Deviation, documented: a Secret read as metadata alone (outfit's watch with `secretKeyRef`s)
/// counts by its existence; its keys cannot be checked. `http://` URLs lose no character.
#[test]
fn a_metadata_only_secret_is_enough_for_secret_key_refs() {
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
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "ConfigMap bob-lab/existing-shares: SVM fld9_svm: share \"b\" not mounted: sidecar name \"fld9_-{}\"",
            bucket("b")
        )),
        "{warnings:?}"
    );
}

/// Fixed: StatCan's process dies (`klog.Fatalf`) without `filers-list`, panics on a URL shorter
/// than `https://`, and has no answer for a vserver it does not know, a share list that is not
/// JSON, or a missing template; each is skipped here with a warning naming it, and the pod is
/// admitted.
#[test]
fn missing_or_malformed_inputs_are_skipped_with_a_warning() {
    let shares = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: existing-shares, namespace: carol}
data: {fld5filersvm: 'not json', unknown: '["x"]', fld7svm: '["y"]'}
---
apiVersion: v1
kind: Secret
metadata: {name: fld5filersvm-conn-secret, namespace: carol}
---
apiVersion: v1
kind: Secret
metadata: {name: unknown-conn-secret, namespace: carol}
---
apiVersion: v1
kind: Secret
metadata: {name: fld7svm-conn-secret, namespace: carol}
"#;
    let (pod, warnings) = admit(&set(shares), &notebook("carol"), Operation::Create);
    let here = "ConfigMap carol/existing-shares";
    assert_eq!(
        pod["spec"]["initContainers"].as_array().unwrap().len(),
        1,
        "fld7svm still mounts"
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].starts_with(&format!(
        "{here}: SVM fld5filersvm: shares not mounted: data.fld5filersvm: not a JSON array of strings"
    )));
    assert_eq!(
        warnings[1],
        format!(
            "{here}: SVM unknown: shares not mounted: no vserver \"unknown\" in ConfigMap das/filers-list"
        )
    );

    // Without filers-list and the template, and with a short URL.
    let documents = parse_stream(
        &format!(
            "{shares}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: filers-list, namespace: das}}\n\
             data: {{filers: '[{{\"vserver\": \"fld7svm\", \"url\": \"https:/\"}}]'}}"
        ),
        "f.yaml",
    )
    .unwrap();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    let (set, _) = builder.build();
    let (pod, warnings) = admit(&set, &notebook("carol"), Operation::Create);
    assert_eq!(pod, notebook("carol"));
    assert_eq!(
        warnings,
        [
            "filer shares not mounted: ConfigMap das/filer-sidecar-injector-json (the sidecar template) not found"
        ]
    );
    let documents = parse_stream(
        &FILER_INPUTS.replace("http://fld7.s3.example.ca:9000", "https:/"),
        "f.yaml",
    )
    .unwrap();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    builder.add_all(&parse_stream(shares, "s.yaml").unwrap());
    let (set, _) = builder.build();
    let (_, warnings) = admit(&set, &notebook("carol"), Operation::Create);
    assert!(
        warnings.iter().any(|w| w.ends_with("SVM fld7svm: shares not mounted: ConfigMap das/filers-list: URL \"https:/\" does not start with https:// or http://")),
        "{warnings:?}"
    );
    let documents = parse_stream(&FILER_INPUTS.replace("filers: '[", "filers: '[oops"), "f.yaml").unwrap();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    let (set, report) = builder.build();
    assert!(report.warnings.iter().any(|w| {
        w.message
            .starts_with("ConfigMap das/filers-list: data.filers: invalid JSON")
    }));
    let (pod, warnings) = admit(&set, &notebook("alice-research"), Operation::Create);
    assert_eq!(pod, notebook("alice-research"));
    assert!(
        warnings[0].contains("ConfigMap das/filers-list: data.filers: invalid JSON"),
        "{warnings:?}"
    );
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
    let (set, _) = load("", LoadSettings::default());
    assert_eq!(set.count(super::CONFIG_MAP), 3);
    assert_eq!(set.count(super::SECRET), 1);
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

/// The explanation names the namespace's `existing-shares` and what it changed or why not, with
/// the warnings.
#[test]
fn explain_names_existing_shares_and_the_warnings() {
    let set = set("");
    let pod = notebook("alice-research");
    let request = Request {
        object: (&pod).into(),
        namespace: "default",
        operation: Operation::Create,
        user: None,
    };
    let explanation = set.explain(&request);
    let text = explanation.to_string();
    assert!(
        text.contains("ConfigMap alice-research/existing-shares: changed"),
        "{text}"
    );
    let mut plain = pod.clone();
    plain["metadata"]["labels"] = json!({});
    let explanation = set.explain(&Request {
        object: (&plain).into(),
        ..request
    });
    assert!(
        explanation
            .to_string()
            .contains("not matched: metadata.labels[notebook-name]: absent"),
        "{explanation}"
    );
}

/// The webhook's forms of the object (its text, and the view read with the review) give the same
/// pod as a parsed object; the namespace then comes from the request, as the API server sends it.
#[test]
fn the_webhooks_forms_of_the_object_give_the_same_result() {
    use crate::{decision::Object, view::ObjectView, view::pod::PodView};
    let set = set("");
    for pod in [notebook("alice-research"), {
        let mut plain = notebook("alice-research");
        plain["metadata"]["labels"] = json!({});
        plain
    }] {
        let (expected, _) = admit(&set, &pod, Operation::Create);
        let text = serde_json::value::to_raw_value(&pod).unwrap();
        let view = ObjectView(PodView::parse(text.get()).unwrap());
        let json = || Some(&*text);
        for object in [
            Object::Json(&text),
            Object::Read {
                view: &view,
                json: &json,
            },
        ] {
            let request = Request {
                object,
                namespace: "alice-research",
                operation: Operation::Create,
                user: None,
            };
            let Outcome::Admitted(admission) = set.apply(&request) else {
                panic!("denied")
            };
            assert_eq!(
                admission.object(&pod).unwrap().into_owned(),
                expected,
                "{object:?}"
            );
        }
    }
}
