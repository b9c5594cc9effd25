//! The filer family on plain documents: each test names the StatCan behaviour it keeps
//! (`cmd/webhook.go` unless said otherwise) or the bug it fixes. `injection`: what a notebook pod
//! gets; `inputs`: what happens with missing, malformed or foreign inputs; `secrets`: the SVMs'
//! Secrets, missing, incomplete or unreadable.

mod injection;
mod inputs;
mod secrets;

use serde_json::{Value, json};

use crate::{
    decision::{Outcome, Request},
    document::parse_stream,
    policy_set::{LoadReport, LoadSettings, PolicySet},
    vocab::Operation,
};

pub(super) const FILER_INPUTS: &str = r#"
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

pub(super) fn load(extra: &str, settings: LoadSettings) -> (PolicySet, LoadReport) {
    let text = format!("{FILER_INPUTS}\n---\n{extra}");
    let documents = parse_stream(&text, "filer.yaml").expect("YAML");
    let mut builder = PolicySet::builder().settings(settings);
    builder.add_all(&documents);
    builder.build()
}

pub(super) fn set(extra: &str) -> PolicySet {
    let (set, report) = load(extra, LoadSettings::default());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    set
}

/// Namespace `bob-lab` with share `b` on `svm`, and the SVM's Secret with both S3 keys.
pub(super) fn one_share(svm: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: existing-shares, namespace: bob-lab}}\n\
         data: {{{svm}: '[\"b\"]'}}\n---\napiVersion: v1\nkind: Secret\n\
         metadata: {{name: {}-conn-secret, namespace: bob-lab}}\n\
         stringData: {{S3_ACCESS: AKIA2, S3_SECRET: s3cr3t2}}\n",
        svm.replace('_', "-")
    )
}

pub(super) fn notebook(namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "nb-0", "namespace": namespace, "labels": {"notebook-name": "nb"}},
           "spec": {"containers": [
               {"name": "istio-proxy", "image": "proxy"},
               {"name": "nb", "image": "jupyter", "env": [{"name": "NB_PREFIX", "value": "/notebook/x/nb"}]}]}})
}

/// The admitted pod and the warnings, checking that the patch turns the pod into it.
pub(super) fn admit(set: &PolicySet, pod: &Value, operation: Operation) -> (Value, Vec<String>) {
    let request = Request {
        operation,
        ..Request::create(pod, "default")
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

pub(super) fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|l| l.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default()
}

/// A set built from `text` alone, with the report.
pub(super) fn build(text: &str) -> (PolicySet, LoadReport) {
    let documents = parse_stream(text, "inputs.yaml").expect("YAML");
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    builder.build()
}
