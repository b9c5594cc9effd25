//! What the filer family adds to the notebook pods of one namespace, resolved once when the set
//! is built: the sidecars and volumes, the notebook container's mounts and env vars, and the
//! warnings for what had to be skipped. The admission copies these values into the pod.

use serde_json::{Value, json};

use super::{
    inputs::{Inputs, Shares},
    names::{bucket, bucket_host, check_name, filer_bucket, sanitize, secret_name, short_namespace},
    template::{Fill, Template},
    upstream::{ACCESS_KEY, EXISTING_SHARES, FILERS_LIST, MOUNT_ROOT, SECRET_KEY, TEMPLATE},
};
use crate::vocab::PolicyRef;

/// The additions for one namespace's notebook pods.
#[derive(Debug, Default)]
pub(super) struct NamespacePlan {
    /// The namespace's `existing-shares`, named as the policy that applied.
    pub(super) reference: Option<PolicyRef>,
    /// Native sidecars, for `spec.initContainers`.
    pub(super) sidecars: Vec<Value>,
    /// Their volumes, for `spec.volumes`.
    pub(super) volumes: Vec<Value>,
    /// The notebook container's `volumeMounts`.
    pub(super) mounts: Vec<Value>,
    /// The notebook container's `env`.
    pub(super) env: Vec<Value>,
    /// What was skipped, and why.
    pub(super) warnings: Vec<String>,
}

impl NamespacePlan {
    /// Whether it adds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.sidecars.is_empty()
    }
}

/// One SVM of the namespace, once its filer and Secret are found.
struct Svm<'a> {
    name: &'a str,
    url: &'a str,
    host: &'a str,
    access: Value,
    secret_key: Value,
    /// Its Secret could not be checked (outfit may not read it).
    unchecked: bool,
}

/// Resolves the plan of `namespace`, whose `existing-shares` lists `shares`.
pub(super) fn plan(
    namespace: &str,
    reference: &PolicyRef,
    shares: &[(String, Shares)],
    inputs: &Inputs,
    filer_namespace: &str,
    plain_secrets: bool,
) -> NamespacePlan {
    let mut plan = NamespacePlan {
        reference: Some(reference.clone()),
        ..NamespacePlan::default()
    };
    let template = match &inputs.template {
        Some(Ok(template)) => template,
        Some(Err(why)) => {
            plan.warnings.push(format!(
                "filer shares not mounted: ConfigMap {filer_namespace}/{TEMPLATE}: {why}"
            ));
            return plan;
        }
        None => {
            plan.warnings.push(format!(
                "filer shares not mounted: ConfigMap {filer_namespace}/{TEMPLATE} not found"
            ));
            return plan;
        }
    };
    let short_ns = short_namespace(namespace);
    for (svm_name, listed) in shares {
        let skip = |why: String| format!("filer SVM {svm_name} not mounted: {why}");
        let svm = match resolve(namespace, svm_name, inputs, filer_namespace, plain_secrets) {
            Ok(svm) => svm,
            Err(why) => {
                plan.warnings.push(skip(why));
                continue;
            }
        };
        let listed = match listed {
            Ok(listed) => listed,
            Err(why) => {
                plan.warnings
                    .push(skip(format!("{EXISTING_SHARES} data.{svm_name}: {why}")));
                continue;
            }
        };
        if svm.unchecked {
            plan.warnings.push(format!(
                "filer SVM {svm_name} mounted unchecked: outfit may not read Secret {} (see outfit manifests)",
                secret_name(svm_name)
            ));
        }
        let sidecars_before = plan.sidecars.len();
        let env_start = plan.env.len();
        for share in listed {
            if let Err(why) = add_share(&mut plan, template, &svm, share, &short_ns) {
                plan.warnings
                    .push(format!("filer share {svm_name}/{share} not mounted: {why}"));
            }
        }
        // Its env vars only with a share mounted: StatCan adds them even when every share is then
        // skipped (a documented deviation).
        if plan.sidecars.len() == sidecars_before {
            plan.warnings
                .push(skip("none of its shares can be mounted".to_owned()));
            continue;
        }
        let svm_env = [
            env_var(format!("{svm_name}_access"), &svm.access),
            env_var(format!("{svm_name}_secret"), &svm.secret_key),
            json!({"name": format!("{svm_name}_url"), "value": svm.url}),
        ];
        plan.env.splice(env_start..env_start, svm_env);
    }
    plan
}

/// Finds an SVM's filer and Secret.
fn resolve<'i>(
    namespace: &str,
    svm: &'i str,
    inputs: &'i Inputs,
    filer_namespace: &str,
    plain_secrets: bool,
) -> Result<Svm<'i>, String> {
    let filers = match &inputs.filers {
        Some(Ok(filers)) => filers,
        Some(Err(why)) => return Err(format!("ConfigMap {filer_namespace}/{FILERS_LIST}: {why}")),
        None => return Err(format!("ConfigMap {filer_namespace}/{FILERS_LIST} not found")),
    };
    let url = filers
        .get(svm)
        .ok_or_else(|| format!("no vserver {svm:?} in ConfigMap {filer_namespace}/{FILERS_LIST}"))?;
    let host = bucket_host(url).map_err(|why| format!("ConfigMap {filer_namespace}/{FILERS_LIST}: {why}"))?;
    let secret = secret_name(svm);
    let source = |key: &str, value: String| {
        if plain_secrets {
            json!({"value": value})
        } else {
            json!({"valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
        }
    };
    let Some(keys) = inputs.secrets.get(&(namespace.to_owned(), secret.clone())) else {
        if !inputs.unreadable_secrets.contains(&secret) {
            return Err(format!("Secret {secret} not found"));
        }
        if plain_secrets {
            return Err(format!(
                "outfit may not read Secret {secret} (see outfit manifests)"
            ));
        }
        // Whether it exists is not known: mounted, as before outfit checked, and the kubelet
        // reports it if it is missing.
        return Ok(Svm {
            name: svm,
            url,
            host,
            access: source(ACCESS_KEY, String::new()),
            secret_key: source(SECRET_KEY, String::new()),
            unchecked: true,
        });
    };
    // StatCan: "If any of these key values are empty then the sidecar will skip as the mounting
    // would just fail."
    let set = |value: &Option<String>, name: &str| {
        value
            .clone()
            .ok_or_else(|| format!("Secret {secret}: {name} is missing or empty"))
    };
    let access = set(&keys.access, ACCESS_KEY)?;
    let secret_key = set(&keys.secret, SECRET_KEY)?;
    Ok(Svm {
        name: svm,
        url,
        host,
        access: source(ACCESS_KEY, access),
        secret_key: source(SECRET_KEY, secret_key),
        unchecked: false,
    })
}

/// Adds one share's sidecar, volumes, mount and env var, once every name it makes is valid.
fn add_share(
    plan: &mut NamespacePlan,
    template: &Template,
    svm: &Svm<'_>,
    share: &str,
    short_ns: &str,
) -> Result<(), String> {
    if share.is_empty() {
        return Err("the share path is empty".to_owned());
    }
    let bucket = bucket(share);
    let filer_bucket = filer_bucket(svm.name, &bucket);
    let sidecar = template.fill(&Fill {
        filer_bucket: &filer_bucket,
        short_namespace: short_ns,
        bucket: &bucket,
        url: svm.url,
        host: svm.host,
        access: &svm.access,
        secret: &svm.secret_key,
    });
    check_name(&filer_bucket).map_err(|why| format!("sidecar name {why}"))?;
    // The same share listed twice, or two SVMs sharing their first 5 characters and a share path:
    // StatCan would add two containers of one name, and the API server would refuse the pod.
    if plan.sidecars.iter().any(|s| s["name"] == filer_bucket.as_str()) {
        return Err(format!(
            "sidecar name {filer_bucket:?} is taken by an earlier share"
        ));
    }
    for volume in &sidecar.volumes {
        let name = volume["name"].as_str().unwrap_or_default();
        check_name(name).map_err(|why| format!("volume name {why}"))?;
    }
    plan.sidecars.push(sidecar.container);
    plan.volumes.extend(sidecar.volumes);
    plan.mounts.push(json!({
        "name": sidecar.csi_name,
        "mountPath": format!("{MOUNT_ROOT}/{}/{share}", svm.name),
        "readOnly": false,
        "mountPropagation": "HostToContainer",
    }));
    plan.env
        .push(json!({"name": format!("{}_{}", svm.name, sanitize(share)), "value": bucket}));
    Ok(())
}

/// An env var named `name` whose value is `source` (`{"value": ...}` or `{"valueFrom": ...}`).
fn env_var(name: String, source: &Value) -> Value {
    let mut var = serde_json::Map::new();
    var.insert("name".to_owned(), Value::String(name));
    if let Some(source) = source.as_object() {
        var.extend(source.clone());
    }
    Value::Object(var)
}
