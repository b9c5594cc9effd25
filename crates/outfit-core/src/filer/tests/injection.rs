//! What a notebook pod gets: the names, every sidecar, the right container, the keys.

use serde_json::json;

use super::{admit, load, names, notebook, set};
use crate::{
    decision::{Outcome, Request},
    filer::names::bucket,
    policy_set::LoadSettings,
    vocab::Operation,
};

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

/// The explanation names the namespace's `existing-shares` and what it changed or why not, with
/// the warnings.
#[test]
fn explain_names_existing_shares_and_the_warnings() {
    let set = set("");
    let pod = notebook("alice-research");
    let request = Request::create(&pod, "default");
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
            let request = Request::create(object, "alice-research");
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

/// The filer family runs before the Gatekeeper mutators (the kinds table's order), so a mutator
/// sees the sidecars, as it would after StatCan's webhook: here an AssignImage moves them to a
/// mirror. A mutator of what the request's pod already had keeps the sidecars too (Gatekeeper's
/// step once ran on the request's object when a whole-object step came before it, and its diff
/// dropped the sidecars).
#[test]
fn gatekeeper_mutators_see_the_sidecars() {
    let mirror = r#"
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: mirror}
spec:
  applyTo: [{groups: [""], versions: ["v1"], kinds: ["Pod"]}]
  location: "spec.initContainers[name: *].image"
  parameters: {assignDomain: mirror.example.ca}
---
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: mirror-containers}
spec:
  applyTo: [{groups: [""], versions: ["v1"], kinds: ["Pod"]}]
  location: "spec.containers[name: nb].image"
  parameters: {assignDomain: mirror.example.ca}
"#;
    let (pod, _) = admit(&set(mirror), &notebook("alice-research"), Operation::Create);
    let images: Vec<&str> = pod["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    assert_eq!(
        images,
        ["mirror.example.ca/goofys:5gb", "mirror.example.ca/goofys:5gb"]
    );
}
