//! What outfit watches, and each watch as a stream of updates for the aggregator: objects keyed
//! by namespace and name, kept whole or as their keys only, a refusal or an absent CRD reported.

use std::{collections::BTreeMap, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::{api::core::v1::Namespace, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Client,
    api::{Api, ApiResource, DynamicObject},
    runtime::{WatchStreamExt, watcher},
};
use outfit_core::{
    family::Table,
    vocab::{ListedNames, Names, Served},
};
use serde_json::Value;
use tokio::sync::mpsc;

/// One watch of the API server.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The resource.
    pub resource: ApiResource,
    /// A `metadata.name` field selector: only the object(s) of this name.
    pub name: Option<String>,
    /// The `data` keys of which only whether each is set is kept (the filer injector's Secrets
    /// with `secretKeyRef`s): the rest of the object, and the values, are dropped as it arrives.
    /// Empty: the object is kept whole.
    pub keys_only: &'static [&'static str],
    /// A kind the API server serves itself (no CRD) that a family reads beside the policies. A
    /// refusal (403: a ClusterRole from before the family) counts as absent, logged, rather than
    /// holding readiness back: the policies proper still serve.
    pub built_in: bool,
}

/// What the watches read: the kinds of a table, and more than it asks for.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// The kinds table whose kinds are watched (`outfit_core::kinds::FAMILIES`).
    pub families: Table,
    /// Keep the values of the objects a family otherwise reads only the keys of
    /// (`Served::BuiltIn::keys_only`): the filer injector's plain-values switch needs the S3 keys.
    pub values: bool,
    /// The namespace of the filer injector's own ConfigMaps (`das`): only its `filers-list`
    /// lists the Secrets watched ([`Names::Listed`]).
    pub filer_namespace: String,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            families: outfit_core::kinds::FAMILIES,
            values: false,
            filer_namespace: "das".to_owned(),
        }
    }
}

/// A kind whose objects are watched by the names other watched objects list.
#[derive(Debug, Clone)]
pub(super) struct ListedKind {
    /// The watch of one of its objects, the name left out.
    pub(super) watch: Watched,
    pub(super) names: ListedNames,
}

/// What outfit watches from the start: every kind of the kinds table (`outfit_core::kinds`), at
/// the version it lists first (the API server converts the others), and Namespaces. A built-in
/// kind is watched only for the objects its family reads: one watch per name, so that not every
/// ConfigMap or Secret of the cluster is cached or readable. The kinds whose names other objects
/// list (the filer injector's Secrets) are watched as those objects come: [`super::ClusterSource`].
pub fn watched_resources(options: &WatchOptions) -> Vec<Watched> {
    let (watched, _) = plan_watches(options);
    watched
}

pub(super) fn plan_watches(options: &WatchOptions) -> (Vec<Watched>, Vec<ListedKind>) {
    let mut watched = Vec::new();
    let mut listed = Vec::new();
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
            keys_only: &[],
            built_in: false,
        };
        match &info.served {
            Served::Crd => watched.push(all),
            Served::BuiltIn { names, keys_only } => {
                let all = Watched {
                    keys_only: if options.values { &[] } else { keys_only },
                    built_in: true,
                    ..all
                };
                match names {
                    Names::Exactly(names) => watched.extend(names.iter().map(|name| Watched {
                        name: Some((*name).to_owned()),
                        ..all.clone()
                    })),
                    Names::Listed(names) => listed.push(ListedKind {
                        watch: all,
                        names: *names,
                    }),
                }
            }
        }
    }
    watched.push(Watched {
        resource: ApiResource::erase::<Namespace>(&()),
        name: None,
        keys_only: &[],
        built_in: false,
    });
    (watched, listed)
}

/// What a watch task reports to the aggregator.
pub(super) enum Update {
    /// The full set of a kind's objects after a (re)list.
    Listed(usize, BTreeMap<(String, String), Value>),
    Applied(usize, (String, String), Value),
    Deleted(usize, (String, String)),
    /// The kind's CRD is not installed, or outfit may not read it.
    Absent(usize),
}

/// An object as the watches pass it on: its key and its raw value.
pub(super) type Keyed = ((String, String), Value);

/// The key of an object.
fn key_of(metadata: &ObjectMeta) -> (String, String) {
    (
        metadata.namespace.clone().unwrap_or_default(),
        metadata.name.clone().unwrap_or_default(),
    )
}

/// The key and the raw object, with `apiVersion` and `kind` filled in (list items of built-in
/// kinds omit them).
fn keyed(resource: &ApiResource, object: &DynamicObject) -> Keyed {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    value["apiVersion"] = Value::String(resource.api_version.clone());
    value["kind"] = Value::String(resource.kind.clone());
    (key_of(&object.metadata), value)
}

/// What stands for a set key in an object kept as its keys only: any non-empty `data` value
/// (this is base64 of `*`), never the object's own.
pub(super) const KEY_SET: &str = "Kg==";

/// The object as its name and, for each of `keys`, whether it is set: `data.KEY` is [`KEY_SET`]
/// when the key holds a value, `""` when it holds an empty one, absent when it is absent. The
/// values go no further than this function.
pub(super) fn keys_only(resource: &ApiResource, object: &DynamicObject, keys: &[&str]) -> Keyed {
    let data = object.data.get("data").and_then(Value::as_object);
    let set: serde_json::Map<String, Value> = keys
        .iter()
        .filter_map(|key| {
            let value = data?.get(*key)?.as_str()?;
            let set = if value.is_empty() { "" } else { KEY_SET };
            Some(((*key).to_owned(), Value::String(set.to_owned())))
        })
        .collect();
    let (namespace, name) = key_of(&object.metadata);
    let value = serde_json::json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": name, "namespace": namespace},
        "data": set,
    });
    ((namespace, name), value)
}

/// The watch's events, objects keyed.
fn events(
    client: Client,
    watched: &Watched,
) -> BoxStream<'static, Result<watcher::Event<Keyed>, watcher::Error>> {
    let resource = watched.resource.clone();
    let keys = watched.keys_only;
    let mut config = watcher::Config::default();
    if let Some(name) = &watched.name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    retried(watcher(api, config).map(move |event| {
        event.map(|event| {
            convert(event, |object: DynamicObject| {
                if keys.is_empty() {
                    keyed(&resource, &object)
                } else {
                    keys_only(&resource, &object, keys)
                }
            })
        })
    }))
}

/// A watch's events with its failures retried after [`WatchBackoff`]'s waits, except a `410 Gone`.
///
/// A 410 during a watch (the API server's watch cache no longer holds the resourceVersion, as
/// after an API server restart) says the server is back, and the watcher relists on its next
/// step. Passed to the backoff, that relist would first wait out a step grown while the server was
/// away (4 s), and policy changes made meanwhile would wait with it: a soak saw them applied ~8 s
/// after an outage, where 5 s is the bound (RELIABILITY.md).
pub(super) fn retried<T: Send + 'static>(
    events: impl futures::Stream<Item = Result<T, watcher::Error>> + Send + 'static,
) -> BoxStream<'static, Result<T, watcher::Error>> {
    events
        .filter(|event| {
            let expired = event.as_ref().err().is_some_and(is_expired);
            if expired {
                tracing::info!("watch expired (410 Gone); listing again at once");
            }
            std::future::ready(!expired)
        })
        .backoff(WatchBackoff::default())
        .boxed()
}

/// Whether the API server ended a watch with `410 Gone`: the watcher lists again by itself.
fn is_expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
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

pub(super) async fn watch_kind(
    client: Client,
    index: usize,
    watched: Watched,
    updates: mpsc::UnboundedSender<Update>,
) {
    let resource = &watched.resource;
    let name = watched.name.as_deref();
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
                if let Some(listing) = listing.as_mut() {
                    listing.insert(key, value);
                }
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                if absent {
                    tracing::info!(kind = %resource.kind, name, "CRD installed (or access granted); reading its objects");
                    absent = false;
                }
                Update::Listed(index, listing.take().unwrap_or_default())
            }
            Ok(watcher::Event::Apply((key, value))) => Update::Applied(index, key, value),
            Ok(watcher::Event::Delete((key, _))) => Update::Deleted(index, key),
            Err(error) if watched.built_in && status_code(&error) == Some(403) => {
                if !absent {
                    tracing::warn!(kind = %resource.kind, name, %error, "not allowed to watch; the family reading these objects sees none (outfit manifests grants it)");
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
                tracing::warn!(kind = %resource.kind, name, %error, "watch failed; retrying, last policies stay in force");
                continue;
            }
        };
        if updates.send(update).is_err() {
            return;
        }
    }
}

/// Retries of a failed policy watch: 250 ms doubling to 4 s, reset by the next event. kube's
/// default (client-go's: 0.8 s doubling to 30 s) is kind to a struggling API server, but after an
/// outage it left the policies stale for 35–40 s in the soak (RELIABILITY.md): the first retry
/// after the API server came back was up to 30 s away, and the re-watch then met `410 Expired`
/// (the restarted server has no history) and backed off once more. outfit runs a few replicas
/// with one watch per kind; a retry every 4 s costs the API server nothing that matters.
#[derive(Debug, Clone)]
pub(super) struct WatchBackoff {
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

/// The HTTP status of a failed list or watch start.
fn status_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// Whether the API server does not serve the kind. For a group it does not know at all, it
/// answers a plain-text `404 page not found`, which kube-rs turns into a Status whose reason is
/// not `NotFound` (so `Status::is_not_found` says no): the code is what counts.
fn is_not_found(error: &watcher::Error) -> bool {
    status_code(error) == Some(404)
}
