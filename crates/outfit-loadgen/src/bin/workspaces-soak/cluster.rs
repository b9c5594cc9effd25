//! The soak's side of the cluster, as the admin sees it: its namespace, users and manifest, and
//! what the backend left behind.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use anyhow::Result;
use k8s_openapi::api::{
    core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Service},
    networking::v1::{Ingress, NetworkPolicy},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams},
};
use serde::de::DeserializeOwned;

/// The backend's label on everything it makes.
const MANAGED: &str = "app.kubernetes.io/managed-by=outfit-workspaces";

/// The manifest: an nginx pod with an http Ingress and the user's NFS storage (PV and PVC).
const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "80"}
spec:
  containers:
  - name: web
    image: nginx
    ports: [{containerPort: 80}]
    volumeMounts: [{name: sciencedata, mountPath: /data}]
"#;

/// How long the brief workspace lives once started before the leader culls it.
pub(crate) const BRIEF_LIFETIME: &str = "5s";

/// The manifest: the brief one (culled [`BRIEF_LIFETIME`] after its start) for `brief`, the web
/// one for any other name.
pub(crate) fn manifest(name: &str) -> String {
    if name == "brief" {
        let lifetime = format!("outfit.dev/max-lifetime: {BRIEF_LIFETIME}, ");
        MANIFEST.replacen("annotations: {", &format!("annotations: {{{lifetime}"), 1)
    } else {
        MANIFEST.to_owned()
    }
}

/// The users with more than `max` workspaces now (pods of theirs not being deleted), as
/// "user has n: pods".
pub(crate) async fn over_limit(client: &Client, ns: &str, max: usize) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods.list(&ListParams::default().labels(MANAGED)).await?;
    let mut by_user: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let labels = pod.labels();
        let user = format!(
            "{}@{}",
            labels.get("user").map_or("?", String::as_str),
            labels.get("domain").map_or("?", String::as_str)
        );
        by_user.entry(user).or_default().push(pod.name_any());
    }
    Ok(by_user
        .into_iter()
        .filter(|(_, pods)| pods.len() > max)
        .map(|(user, pods)| format!("{user} has {}: {}", pods.len(), pods.join(", ")))
        .collect())
}

/// The culls in `ns` (the backend's Culled Events), and the workspaces culled more than once.
pub(crate) async fn culls(client: &Client, ns: &str) -> Result<(usize, Vec<String>)> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let list = events.list(&ListParams::default()).await?;
    let mut by_pod: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for event in list
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Culled"))
    {
        let object = &event.involved_object;
        let entry = by_pod
            .entry(object.uid.clone().unwrap_or_default())
            .or_insert_with(|| (object.name.clone().unwrap_or_default(), 0));
        // An Event repeated by one recorder is a series: count each occurrence.
        let occurrences = event.series.as_ref().and_then(|s| s.count).unwrap_or(1);
        entry.1 += usize::try_from(occurrences).unwrap_or(1).max(1);
    }
    let total = by_pod.values().map(|(_, n)| n).sum();
    let twice = by_pod
        .into_values()
        .filter(|(_, n)| *n > 1)
        .map(|(pod, n)| format!("{pod} culled {n} times"))
        .collect();
    Ok((total, twice))
}

/// Deletes namespace `name` (not waiting).
pub(crate) async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(())
}

/// The backend's pods in `ns` that no user knows of and that are not being deleted: created
/// although the launch was answered an error.
pub(crate) async fn ghosts(client: &Client, ns: &str, known: &[String]) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods.list(&ListParams::default().labels(MANAGED)).await?;
    Ok(list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !known.contains(&p.name_any()))
        .map(ResourceExt::name_any)
        .collect())
}

/// How many Events `ns` holds.
pub(crate) async fn event_count(client: &Client, ns: &str) -> Result<usize> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    Ok(events.list_metadata(&ListParams::default()).await?.items.len())
}

/// Waits up to `settle` until nothing of the backend's is left; returns what is (kind/name).
pub(crate) async fn wait_empty(client: &Client, ns: &str, settle: Duration) -> Result<Vec<String>> {
    let deadline = Instant::now() + settle;
    loop {
        let left = leftovers(client, ns).await?;
        if left.is_empty() || Instant::now() > deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Everything in `ns` of the kinds the backend makes (labelled or not), and its volumes.
async fn leftovers(client: &Client, ns: &str) -> Result<Vec<String>> {
    let mut left = Vec::new();
    left.extend(names::<Pod>(Api::namespaced(client.clone(), ns), "").await?);
    left.extend(names::<Service>(Api::namespaced(client.clone(), ns), "").await?);
    left.extend(names::<Ingress>(Api::namespaced(client.clone(), ns), "").await?);
    left.extend(names::<NetworkPolicy>(Api::namespaced(client.clone(), ns), "").await?);
    left.extend(names::<PersistentVolumeClaim>(Api::namespaced(client.clone(), ns), "").await?);
    left.extend(names::<PersistentVolume>(Api::all(client.clone()), MANAGED).await?);
    Ok(left)
}

async fn names<K>(api: Api<K>, labels: &str) -> Result<Vec<String>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(&ListParams::default().labels(labels)).await?;
    Ok(list
        .items
        .iter()
        .map(|o| format!("{}/{}", K::kind(&()), o.name_any()))
        .collect())
}
