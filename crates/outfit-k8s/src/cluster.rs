//! Policies read from the API server: one watch per policy kind plus Namespaces (for their
//! labels), merged into [`Snapshot`]s of raw documents that the server compiles off the request
//! path.
//!
//! - A kind whose CRD is not installed (Gatekeeper absent, say) counts as synced and empty, and is
//!   retried with backoff, so its later installation is picked up.
//! - While the API server is unreachable the last snapshot stays in force; the watches retry with
//!   backoff and a relist replaces each kind's objects whole, so deletions made meanwhile are seen.
//! - `synced` turns true once every kind has listed once; readiness waits for it.
//! - Built-in kinds a family reads (the filer injector's ConfigMaps and Secrets) are watched only
//!   for the objects it reads: by name, and as metadata alone when the values are not needed.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::{api::core::v1::Namespace, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Client,
    api::{Api, ApiResource, DynamicObject},
    runtime::{WatchStreamExt, watcher},
};
use outfit_core::{
    Document, Origin,
    family::Table,
    vocab::{Names, Served},
};
use serde_json::Value;
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

/// One watch of the API server.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The resource.
    pub resource: ApiResource,
    /// A `metadata.name` field selector: only the object(s) of this name.
    pub name: Option<&'static str>,
    /// Only objects whose name ends so are kept (the others are dropped as they arrive).
    pub suffix: Option<&'static str>,
    /// A kind the API server serves itself (no CRD) that a family reads beside the policies. A
    /// refusal (403: a ClusterRole from before the family) counts as absent, logged, rather than
    /// holding readiness back: the policies proper still serve.
    pub built_in: bool,
}

/// What the watches read: the kinds of a table, and more than it asks for.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// The kinds table whose kinds are watched (`outfit_core::kinds::FAMILIES`).
    pub families: Table,
    /// Also watch the kinds a family reads only for their values (`Served::BuiltIn::values_only`):
    /// the filer injector's plain-values switch needs the Secrets.
    pub values: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            families: outfit_core::kinds::FAMILIES,
            values: false,
        }
    }
}

/// What outfit watches: every kind of the kinds table (`outfit_core::kinds`), at the version it
/// lists first (the API server converts the others), and Namespaces. A built-in kind is watched
/// only for the objects its family reads: one watch per name where the names are known, so that
/// not every ConfigMap of the cluster is cached, and as metadata where the values are not needed.
pub fn watched_resources(options: WatchOptions) -> Vec<Watched> {
    let mut watched = Vec::new();
    for kind in outfit_core::kinds::of(options.families) {
        let info = kind.info();
        let version = info.versions[0];
        let resource = ApiResource {
            group: info.group.to_owned(),
            version: version.to_owned(),
            api_version: if info.group.is_empty() {
                version.to_owned()
            } else {
                format!("{}/{version}", info.group)
            },
            kind: info.name.to_owned(),
            plural: info.plural.to_owned(),
        };
        let all = Watched {
            resource,
            name: None,
            suffix: None,
            built_in: matches!(info.served, Served::BuiltIn { .. }),
        };
        match &info.served {
            Served::Crd => watched.push(all),
            // Read only for values nobody asked for: not watched at all.
            Served::BuiltIn {
                values_only: true, ..
            } if !options.values => {}
            Served::BuiltIn { names, .. } => match names {
                Names::Exactly(names) => watched.extend(names.iter().map(|name| Watched {
                    name: Some(name),
                    ..all.clone()
                })),
                Names::EndingWith(suffix) => watched.push(Watched {
                    suffix: Some(suffix),
                    ..all
                }),
            },
        }
    }
    watched.push(Watched {
        resource: ApiResource::erase::<Namespace>(&()),
        name: None,
        suffix: None,
        built_in: false,
    });
    watched
}

/// Every watched object at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The objects, as raw documents, in a stable order (kind, namespace, name).
    pub documents: Vec<Document>,
    /// Whether every kind has been listed at least once (a kind whose CRD is not installed counts
    /// as listed, and empty).
    pub synced: bool,
    /// The kinds whose CRD the API server does not serve (yet).
    pub absent: Vec<String>,
    /// Increases with every change.
    pub revision: u64,
}

/// What a watch task reports to the aggregator.
enum Update {
    /// The full set of a kind's objects after a (re)list.
    Listed(usize, BTreeMap<(String, String), Value>),
    Applied(usize, (String, String), Value),
    Deleted(usize, (String, String)),
    /// The kind's CRD is not installed.
    Absent(usize),
}

/// Running watches; dropping it stops them.
#[derive(Debug)]
pub struct ClusterSource {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    tasks: Vec<JoinHandle<()>>,
}

impl ClusterSource {
    /// Starts watching. Must run inside a tokio runtime.
    pub fn start(client: Client, options: WatchOptions) -> Self {
        let resources = watched_resources(options);
        let (updates_tx, updates_rx) = mpsc::unbounded_channel();
        let (snapshot_tx, snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let mut tasks: Vec<JoinHandle<()>> = resources
            .iter()
            .enumerate()
            .map(|(index, resource)| {
                tokio::spawn(watch_kind(
                    client.clone(),
                    index,
                    resource.clone(),
                    updates_tx.clone(),
                ))
            })
            .collect();
        let resources = resources.into_iter().map(|w| w.resource).collect();
        tasks.push(tokio::spawn(aggregate(resources, updates_rx, snapshot_tx)));
        Self { snapshots, tasks }
    }

    /// A receiver of snapshots; the current one is available at once.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }
}

impl Drop for ClusterSource {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// An object as the watches pass it on: its key and its raw value.
type Keyed = ((String, String), Value);

/// The key and the raw object, with `apiVersion` and `kind` filled in (list items of built-in
/// kinds omit them).
fn keyed(resource: &ApiResource, metadata: &ObjectMeta, object: Value) -> Keyed {
    let key = (
        metadata.namespace.clone().unwrap_or_default(),
        metadata.name.clone().unwrap_or_default(),
    );
    let mut value = object;
    value["apiVersion"] = Value::String(resource.api_version.clone());
    value["kind"] = Value::String(resource.kind.clone());
    (key, value)
}

/// The watch's events, objects keyed.
fn events(
    client: Client,
    watched: &Watched,
) -> BoxStream<'static, Result<watcher::Event<Keyed>, watcher::Error>> {
    let resource = watched.resource.clone();
    let mut config = watcher::Config::default();
    if let Some(name) = watched.name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    watcher(api, config)
        .map(move |event| {
            event.map(|event| {
                convert(event, |object: DynamicObject| {
                    let value = serde_json::to_value(&object).unwrap_or_default();
                    keyed(&resource, &object.metadata, value)
                })
            })
        })
        .backoff(WatchBackoff::default())
        .boxed()
}

fn convert<K>(event: watcher::Event<K>, f: impl Fn(K) -> Keyed) -> watcher::Event<Keyed> {
    match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(f(object)),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(object) => watcher::Event::Apply(f(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(f(object)),
    }
}

async fn watch_kind(client: Client, index: usize, watched: Watched, updates: mpsc::UnboundedSender<Update>) {
    let resource = &watched.resource;
    let wanted = |key: &(String, String)| watched.suffix.is_none_or(|suffix| key.1.ends_with(suffix));
    let mut listing: Option<BTreeMap<(String, String), Value>> = None;
    let mut absent = false;
    let mut events = events(client, &watched);
    while let Some(event) = events.next().await {
        let update = match event {
            Ok(watcher::Event::Init) => {
                listing = Some(BTreeMap::new());
                continue;
            }
            Ok(watcher::Event::InitApply((key, value))) => {
                if let Some(listing) = listing.as_mut().filter(|_| wanted(&key)) {
                    listing.insert(key, value);
                }
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                if absent {
                    tracing::info!(kind = %resource.kind, "CRD installed (or access granted); reading its objects");
                    absent = false;
                }
                Update::Listed(index, listing.take().unwrap_or_default())
            }
            Ok(watcher::Event::Apply((key, value))) if wanted(&key) => Update::Applied(index, key, value),
            Ok(watcher::Event::Apply(_)) => continue,
            // As for an Apply: an object the family does not read (a Secret of another name) was
            // never in the snapshot, and its deletion must not make a new one.
            Ok(watcher::Event::Delete((key, _))) if wanted(&key) => Update::Deleted(index, key),
            Ok(watcher::Event::Delete(_)) => continue,
            Err(error) if watched.built_in && status_code(&error) == Some(403) => {
                if !absent {
                    tracing::warn!(kind = %resource.kind, name = watched.name, %error, "not allowed to watch; the family reading these objects sees none (outfit manifests grants it)");
                    absent = true;
                }
                Update::Absent(index)
            }
            Err(error) if is_not_found(&error) => {
                if !absent {
                    tracing::info!(kind = %resource.kind, group = %resource.group, "CRD not installed; its policies are not read until it is");
                    absent = true;
                }
                Update::Absent(index)
            }
            Err(error) => {
                tracing::warn!(kind = %resource.kind, %error, "watch failed; retrying, last policies stay in force");
                continue;
            }
        };
        if updates.send(update).is_err() {
            return;
        }
    }
}

/// Whether the API server does not serve the kind. For a group it does not know at all, it
/// answers a plain-text `404 page not found`, which kube-rs turns into a Status whose reason is
/// not `NotFound` (so `Status::is_not_found` says no): the code is what counts.
/// Retries of a failed policy watch: 250 ms doubling to 4 s, reset by the next event. kube's
/// default (client-go's: 0.8 s doubling to 30 s) is kind to a struggling API server, but after an
/// outage it left the policies stale for 35–40 s in the soak (RELIABILITY.md): the first retry
/// after the API server came back was up to 30 s away, and the re-watch then met `410 Expired`
/// (the restarted server has no history) and backed off once more. outfit runs a few replicas
/// with one watch per kind; a retry every 4 s costs the API server nothing that matters.
#[derive(Debug, Clone)]
struct WatchBackoff {
    next: Duration,
}

impl WatchBackoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MAX: Duration = Duration::from_secs(4);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

fn is_not_found(error: &watcher::Error) -> bool {
    status_code(error) == Some(404)
}

/// The HTTP status of a failed list or watch start.
fn status_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

async fn aggregate(
    resources: Vec<ApiResource>,
    mut updates: mpsc::UnboundedReceiver<Update>,
    snapshots: watch::Sender<Arc<Snapshot>>,
) {
    let mut objects: Vec<BTreeMap<(String, String), Value>> = vec![BTreeMap::new(); resources.len()];
    let mut listed = vec![false; resources.len()];
    let mut absent = vec![false; resources.len()];
    let mut revision = 0;
    while let Some(update) = updates.recv().await {
        // Take every update already queued before publishing once: a relist of many objects
        // becomes one snapshot, and one compilation.
        let mut next = Some(update);
        while let Some(update) = next {
            match update {
                Update::Listed(kind, all) => {
                    objects[kind] = all;
                    listed[kind] = true;
                    absent[kind] = false;
                }
                Update::Applied(kind, key, value) => {
                    objects[kind].insert(key, value);
                }
                Update::Deleted(kind, key) => {
                    objects[kind].remove(&key);
                }
                Update::Absent(kind) => {
                    objects[kind].clear();
                    listed[kind] = true;
                    absent[kind] = true;
                }
            }
            next = updates.try_recv().ok();
        }
        revision += 1;
        let origin = Origin::named(CLUSTER_ORIGIN);
        let documents = objects
            .iter()
            .flat_map(|objects| {
                objects.values().map(|value| Document {
                    origin: origin.clone(),
                    value: value.clone(),
                })
            })
            .collect();
        let snapshot = Snapshot {
            documents,
            synced: listed.iter().all(|l| *l),
            absent: resources
                .iter()
                .zip(&absent)
                .filter(|(_, absent)| **absent)
                .map(|(resource, _)| resource.kind.clone())
                .collect(),
            revision,
        };
        if snapshots.send(Arc::new(snapshot)).is_err() {
            return;
        }
    }
}

/// The origin of every watched object. A message about one names the object itself (kind,
/// namespace and name, from the policy) after it, as in `cluster: PodDefault team-a/bad:
/// spec.selector: ...`; a file's document index has no counterpart here.
pub const CLUSTER_ORIGIN: &str = "cluster";

#[cfg(test)]
mod tests {
    use outfit_core::PolicySet;
    use serde_json::json;

    use super::*;

    #[test]
    fn policy_watches_retry_within_seconds_and_start_over_after_an_event() {
        use kube::runtime::utils::Backoff;
        let mut backoff = WatchBackoff::default();
        let waits: Vec<u64> = backoff.by_ref().take(7).map(|d| d.as_millis() as u64).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 4000, 4000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(250)));
    }

    /// The filer injector's ConfigMaps are watched by name (not every ConfigMap of the cluster),
    /// its Secrets not at all unless their values are asked for.
    #[test]
    fn built_in_kinds_are_watched_by_name_and_secrets_only_for_values() {
        let summary = |options| {
            watched_resources(options)
                .into_iter()
                .filter(|w| w.resource.group.is_empty() && w.resource.kind != "Namespace")
                .map(|w| (w.resource.api_version, w.resource.plural, w.name, w.suffix))
                .collect::<Vec<_>>()
        };
        let v1 = || "v1".to_owned();
        let configmaps = |name| (v1(), "configmaps".to_owned(), Some(name), None);
        assert_eq!(
            summary(WatchOptions::default()),
            [
                configmaps("existing-shares"),
                configmaps("filers-list"),
                configmaps("filer-sidecar-injector-json"),
            ]
        );
        let with_values = summary(WatchOptions {
            values: true,
            ..WatchOptions::default()
        });
        assert_eq!(
            with_values[3],
            (v1(), "secrets".to_owned(), None, Some("-conn-secret"))
        );
    }

    /// A PodDefault read from the cluster with an invalid selector is reported by its kind,
    /// namespace and name (a file's document index would point at nothing), and the others load.
    #[tokio::test]
    async fn a_bad_policy_from_the_cluster_is_named_by_kind_namespace_and_name() {
        let resources: Vec<ApiResource> = watched_resources(WatchOptions::default())
            .into_iter()
            .map(|w| w.resource)
            .collect();
        let (updates, updates_rx) = mpsc::unbounded_channel();
        let (snapshot_tx, mut snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let aggregator = tokio::spawn(aggregate(resources.clone(), updates_rx, snapshot_tx));
        let pod_default = |name: &str, selector: Value| {
            json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
                   "metadata": {"name": name, "namespace": "team-a"},
                   "spec": {"selector": selector, "env": [{"name": "A", "value": "1"}]}})
        };
        let bad = pod_default(
            "bad",
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
        );
        let listed = BTreeMap::from([
            (("team-a".to_owned(), "bad".to_owned()), bad),
            (
                ("team-a".to_owned(), "good".to_owned()),
                pod_default("good", json!({})),
            ),
        ]);
        updates.send(Update::Listed(0, listed)).unwrap();
        let snapshot = snapshots
            .wait_for(|s| s.revision > 0)
            .await
            .expect("a snapshot")
            .clone();
        aggregator.abort();

        let mut builder = PolicySet::builder();
        builder.add_all(&snapshot.documents);
        let (set, report) = builder.build();
        let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "cluster: PodDefault team-a/bad: spec.selector: invalid label selector: \
              matchExpressions[0].values: must be non-empty for operator In"
            ]
        );
        assert_eq!(set.len(), 1, "the good one still loads");
    }
}
