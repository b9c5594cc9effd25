//! The policies that change: PodDefaults in a file rewritten atomically and in the cluster
//! created, patched and deleted in turn.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::Result;
use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::shared::{CLUSTER_NS, Expected, FILE_NS, ROTATING, Soak};

pub(crate) fn poddefault_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1alpha1", "PodDefault"),
        "poddefaults",
    )
}

pub(crate) fn poddefault(name: &str, namespace: &str, label: &str, env_name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "desc": format!("soak {name}"),
            "selector": {"matchLabels": {label: "true"}},
            "env": [{"name": env_name, "value": value}]
        }
    })
}

/// Writes the changing policy file atomically (a temporary file renamed over it).
pub(crate) fn write_file_policy(dir: &Path, generation: u64) -> Result<()> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FILE_NS}},
        poddefault(ROTATING, FILE_NS, FILE_NS, "SOAK_FILE", &format!("gen-{generation}")),
    ]});
    let tmp = dir.join(".soak-file.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&list)?)?;
    std::fs::rename(&tmp, dir.join("soak-file.json"))?;
    Ok(())
}

pub(crate) async fn change_policies(
    soak: Arc<Soak>,
    policy_dir: PathBuf,
    stop: CancellationToken,
) -> Result<()> {
    let pds: Api<DynamicObject> =
        Api::namespaced_with(soak.client.clone(), CLUSTER_NS, &poddefault_resource());
    let mut tick = tokio::time::interval(Duration::from_secs_f64(soak.args.policy_every));
    tick.tick().await;
    let mut generation = 0u64;
    let mut patches = 0;
    // Whether the rotating PodDefault exists (`None`: unknown after a failed call).
    let mut present = Some(false);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        // Stop changing a little before the end so the last change can be checked.
        if soak.deadline.saturating_duration_since(Instant::now()) < Duration::from_secs_f64(soak.args.window)
        {
            continue;
        }
        generation += 1;
        let value = format!("gen-{generation}");
        soak.file_policy.push(Expected::Value(Some(value.clone())));
        write_file_policy(&policy_dir, generation)?;
        soak.stats.file_changes.fetch_add(1, Ordering::Relaxed);
        if soak.api_down.load(Ordering::Relaxed) {
            continue;
        }
        if present.is_none() {
            // Learn the state after a failed call.
            match pds.get_opt(ROTATING).await {
                Ok(found) => {
                    let value = found
                        .as_ref()
                        .and_then(|pd| pd.data["spec"]["env"][0]["value"].as_str().map(str::to_owned));
                    present = Some(found.is_some());
                    soak.cluster_policy.push(Expected::Value(value));
                }
                Err(_) => continue,
            }
        }
        let result = match present {
            Some(false) => {
                soak.cluster_policy.push(Expected::Value(Some(value.clone())));
                let pd = poddefault(ROTATING, CLUSTER_NS, CLUSTER_NS, "SOAK_CLUSTER", &value);
                patches = 0;
                pds.create(&PostParams::default(), &serde_json::from_value(pd)?)
                    .await
                    .map(|_| Some(true))
            }
            _ if patches < 2 => {
                soak.cluster_policy.push(Expected::Value(Some(value.clone())));
                patches += 1;
                let patch = json!({"spec": {"env": [{"name": "SOAK_CLUSTER", "value": value}]}});
                pds.patch(ROTATING, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| Some(true))
            }
            _ => {
                soak.cluster_policy.push(Expected::Value(None));
                pds.delete(ROTATING, &DeleteParams::default())
                    .await
                    .map(|_| Some(false))
            }
        };
        match result {
            Ok(now) => {
                present = now;
                soak.stats.cluster_changes.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                soak.cluster_policy.push(Expected::Unknown);
                present = None;
                soak.stats.cluster_change_errors.fetch_add(1, Ordering::Relaxed);
                soak.stats.note(format!(
                    "cluster change failed (not counted as a failure): {error}"
                ));
            }
        }
    }
    Ok(())
}
