//! The SVMs' `<svm>-conn-secret` Secrets. StatCan (`cmd/webhook.go`, README "Getting the values to
//! use in the json patch"): "The secret and access keys are read in from a secret in the user's
//! namespace. If any of these key values are empty then the sidecar will skip as the mounting
//! would just fail." outfit skips such an SVM in both modes, with `secretKeyRef`s (the default)
//! knowing only whether each key is set.

use serde_json::Value;

use super::{admit, load, names, notebook, set};
use crate::{
    document::parse_stream,
    filer::inputs::{SecretKeys, secret_keys},
    policy_set::LoadSettings,
    vocab::Operation,
};

/// Namespace `bob-lab` sharing `a` on fld5filersvm and `b` on fld7svm, with `secrets` beside.
fn two_svms(secrets: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: existing-shares, namespace: bob-lab}}\n\
         data: {{fld5filersvm: '[\"a\"]', fld7svm: '[\"b\"]'}}\n---\n{secrets}"
    )
}

fn secret(name: &str, keys: &str) -> String {
    format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: bob-lab}}\n{keys}\n---\n")
}

const FLD7_SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata: {name: fld7svm-conn-secret, namespace: bob-lab}\n\
                           data: {S3_ACCESS: QUtJQTc=, S3_SECRET: c2VjcmV0Nw==}\n";

fn plain() -> LoadSettings {
    LoadSettings {
        filer_plain_secrets: true,
        ..LoadSettings::default()
    }
}

/// The names of the notebook container's env vars.
fn env_names(pod: &Value) -> Vec<&str> {
    names(&pod["spec"]["containers"][1]["env"])
}

/// StatCan: an SVM whose Secret is missing, or lacks a key, or holds an empty one, is skipped for
/// the pod: neither its sidecar, its mount nor its env vars; the other SVMs still mount. outfit
/// does the same with `secretKeyRef`s and with plain values, with a warning naming the Secret.
#[test]
fn an_svm_whose_secret_is_missing_or_has_an_empty_key_is_skipped_as_statcan_does() {
    let cases = [
        ("", "Secret fld5filersvm-conn-secret not found"),
        (
            "stringData: {S3_ACCESS: AKIA5}",
            "Secret fld5filersvm-conn-secret: S3_SECRET is missing or empty",
        ),
        (
            "data: {S3_ACCESS: '', S3_SECRET: c2VjcmV0}",
            "Secret fld5filersvm-conn-secret: S3_ACCESS is missing or empty",
        ),
        // The API server leaves `data` out of a Secret with no key.
        (
            "type: Opaque",
            "Secret fld5filersvm-conn-secret: S3_ACCESS is missing or empty",
        ),
    ];
    for (keys, why) in cases {
        let fld5 = if keys.is_empty() {
            String::new()
        } else {
            secret("fld5filersvm-conn-secret", keys)
        };
        let inputs = two_svms(&format!("{fld5}{FLD7_SECRET}"));
        for settings in [LoadSettings::default(), plain()] {
            let (set, report) = load(&inputs, settings);
            assert!(report.errors.is_empty(), "{:?}", report.errors);
            let (pod, warnings) = admit(&set, &notebook("bob-lab"), Operation::Create);
            assert_eq!(
                warnings,
                [format!("filer SVM fld5filersvm not mounted: {why}")],
                "{keys}"
            );
            let sidecars = names(&pod["spec"]["initContainers"]);
            assert_eq!(sidecars.len(), 1, "{keys}: {sidecars:?}");
            assert!(sidecars[0].starts_with("fld7s-"), "{sidecars:?}");
            let env = env_names(&pod);
            assert!(
                env.iter().all(|name| !name.starts_with("fld5filersvm")),
                "{keys}: {env:?}"
            );
            assert!(env.contains(&"fld7svm_access"), "{env:?}");
        }
    }
}

/// With `secretKeyRef`s the Secret is read for whether each key is set, and no value is kept:
/// base64 is not even decoded. With plain values the values are read, as StatCan reads them.
#[test]
fn with_secret_key_refs_only_whether_each_key_is_set_is_kept() {
    let documents = parse_stream(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: x-conn-secret}\n\
         data: {S3_ACCESS: QUtJQTE=, S3_SECRET: ''}\nstringData: {OTHER: v}\n",
        "s.yaml",
    )
    .unwrap();
    assert_eq!(
        secret_keys(&documents[0], false),
        SecretKeys {
            access: Some(String::new()),
            secret: None
        }
    );
    assert_eq!(
        secret_keys(&documents[0], true),
        SecretKeys {
            access: Some("AKIA1".to_owned()),
            secret: None
        }
    );
    // And the pod carries references, never the values.
    let inputs = two_svms(&secret(
        "fld5filersvm-conn-secret",
        "stringData: {S3_ACCESS: AKIA5, S3_SECRET: s3cr3t5}",
    ));
    let (pod, warnings) = admit(&set(&inputs), &notebook("bob-lab"), Operation::Create);
    assert_eq!(
        warnings,
        ["filer SVM fld7svm not mounted: Secret fld7svm-conn-secret not found"]
    );
    assert!(!pod.to_string().contains("s3cr3t5") && !pod.to_string().contains("AKIA5"));
}

/// A Secret the cluster's watches may not read (its name was not given to `outfit manifests`)
/// may exist or not: with `secretKeyRef`s its SVM is mounted as before outfit checked (the
/// kubelet reports a missing Secret), with a warning saying it was not checked; plain values
/// cannot be had, so there the SVM is skipped.
#[test]
fn an_svm_whose_secret_outfit_may_not_read_is_mounted_unchecked() {
    let inputs = two_svms(FLD7_SECRET);
    let unreadable = vec![("Secret".to_owned(), "fld5filersvm-conn-secret".to_owned())];
    let (set, _) = load(
        &inputs,
        LoadSettings {
            unreadable: unreadable.clone(),
            ..LoadSettings::default()
        },
    );
    let (pod, warnings) = admit(&set, &notebook("bob-lab"), Operation::Create);
    assert_eq!(names(&pod["spec"]["initContainers"]).len(), 2);
    assert_eq!(
        warnings,
        [
            "filer SVM fld5filersvm mounted unchecked: outfit may not read Secret fld5filersvm-conn-secret (see outfit manifests)"
        ]
    );
    let (set, _) = load(
        &inputs,
        LoadSettings {
            unreadable,
            ..plain()
        },
    );
    let (pod, warnings) = admit(&set, &notebook("bob-lab"), Operation::Create);
    assert_eq!(names(&pod["spec"]["initContainers"]).len(), 1);
    assert_eq!(
        warnings,
        [
            "filer SVM fld5filersvm not mounted: outfit may not read Secret fld5filersvm-conn-secret (see outfit manifests)"
        ]
    );
}

/// Deviation, documented: StatCan adds an SVM's `_access`, `_secret` and `_url` env vars before
/// its shares, and keeps them when every share is then skipped; outfit skips the SVM whole.
#[test]
fn an_svm_all_of_whose_shares_fail_is_skipped_whole() {
    let inputs = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: existing-shares, namespace: bob-lab}\n\
                  data: {fld5filersvm: '[\"\"]', fld7svm: '[\"b\"]'}\n---\n"
        .to_owned()
        + &secret(
            "fld5filersvm-conn-secret",
            "stringData: {S3_ACCESS: AKIA5, S3_SECRET: s3cr3t5}",
        )
        + FLD7_SECRET;
    let (pod, warnings) = admit(&set(&inputs), &notebook("bob-lab"), Operation::Create);
    assert_eq!(
        warnings,
        [
            "filer share fld5filersvm/ not mounted: the share path is empty",
            "filer SVM fld5filersvm not mounted: none of its shares can be mounted"
        ]
    );
    assert_eq!(
        env_names(&pod),
        [
            "NB_PREFIX",
            "fld7svm_access",
            "fld7svm_secret",
            "fld7svm_url",
            "fld7svm_b"
        ]
    );
}
