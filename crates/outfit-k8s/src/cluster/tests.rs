//! The watches' plan, the aggregator and the keys-only form, on plain data.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use kube::api::{ApiResource, DynamicObject};
use outfit_core::PolicySet;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::{
    aggregate::{Aggregator, Spawn, aggregate},
    watches::{KEY_SET, Update, WatchBackoff, keys_only, retried},
    *,
};

#[test]
fn policy_watches_retry_within_seconds_and_start_over_after_an_event() {
    use kube::runtime::utils::Backoff;
    let mut backoff = WatchBackoff::default();
    let waits: Vec<u64> = backoff.by_ref().take(7).map(|d| d.as_millis() as u64).collect();
    assert_eq!(waits, [250, 500, 1000, 2000, 4000, 4000, 4000]);
    backoff.reset();
    assert_eq!(backoff.next(), Some(Duration::from_millis(250)));
}

/// After an outage the watch keeps failing to start (each wait longer), then the restarted API
/// server ends the first watch with 410 Gone: the relist follows at once, not after one more
/// grown wait. Virtual time (a paused clock), so the waits are exact and cost nothing.
#[tokio::test(start_paused = true)]
async fn a_watch_expired_after_an_outage_lists_again_without_waiting_out_the_backoff() {
    use futures::StreamExt;
    use kube::{core::Status, runtime::watcher};
    let refused = || {
        let status = Status::failure("connection refused", "ServiceUnavailable").with_code(503);
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(
            status,
        ))))
    };
    let expired = Err(watcher::Error::WatchError(Box::new(
        Status::failure("too old resource version", "Expired").with_code(410),
    )));
    let events = futures::stream::iter([refused(), refused(), expired, Ok(watcher::Event::<()>::Init)]);
    let start = tokio::time::Instant::now();
    let mut events = retried(events);
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        seen.push((event.is_ok(), start.elapsed().as_millis()));
    }
    // The two refusals wait 250 and 500 ms; the 410 is not passed on and adds no wait (it
    // would have added 1,000 ms).
    assert_eq!(seen, [(false, 0), (false, 250), (true, 750)]);
}

/// The filer injector's ConfigMaps are watched by name from the start (not every ConfigMap
/// of the cluster); its Secrets only by the names `filers-list` lists, once it is read.
#[test]
fn built_in_kinds_are_watched_by_name_and_secrets_not_from_the_start() {
    let summary: Vec<_> = watched_resources(&WatchOptions::default())
        .into_iter()
        .filter(|w| w.resource.group.is_empty() && w.resource.kind != "Namespace")
        .map(|w| (w.resource.plural, w.name))
        .collect();
    let configmaps = |name: &str| ("configmaps".to_owned(), Some(name.to_owned()));
    assert_eq!(
        summary,
        [
            configmaps("existing-shares"),
            configmaps("filers-list"),
            configmaps("filer-sidecar-injector-json"),
        ]
    );
}

/// The watches an aggregator was asked to start, in order.
type Started = Arc<std::sync::Mutex<Vec<Watched>>>;

/// An aggregator whose watches are not started, and the watches it was asked to start.
fn aggregator(options: &WatchOptions) -> (Aggregator, Started) {
    let started = Started::default();
    let log = started.clone();
    let spawn: Spawn = Box::new(move |_, watched| {
        log.lock().unwrap().push(watched);
        tokio::spawn(async {})
    });
    (Aggregator::new(options, spawn), started)
}

fn filers_list(namespace: &str, vservers: &[&str]) -> BTreeMap<(String, String), Value> {
    let filers: Vec<Value> = vservers
        .iter()
        .map(|v| json!({"vserver": v, "url": "https://s3.example.ca"}))
        .collect();
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "filers-list", "namespace": namespace},
        "data": {"filers": serde_json::to_string(&filers).unwrap()}});
    BTreeMap::from([((namespace.to_owned(), "filers-list".to_owned()), object)])
}

/// The indexes of the running watches of Secrets, by name.
fn secret_watches(aggregator: &Aggregator) -> Vec<(usize, String)> {
    aggregator
        .slots
        .iter()
        .enumerate()
        .filter(|(_, slot)| slot.watched.resource.kind == "Secret" && !slot.stopped)
        .map(|(index, slot)| (index, slot.watched.name.clone().unwrap()))
        .collect()
}

/// Issue 23: the Secrets watched are exactly the `<svm>-conn-secret` of the SVMs the injector's
/// `filers-list` lists (a `filers-list` elsewhere lists none), each by name; the snapshot is
/// not synced until each has listed (a pod admitted before would miss its filer); an SVM
/// dropped from the list stops its watch; a refused watch makes its Secret unreadable, not
/// missing.
#[tokio::test]
async fn secrets_are_watched_by_the_names_filers_list_lists() {
    let (mut aggregator, started) = aggregator(&WatchOptions::default());
    let filers_list_slot = aggregator
        .slots
        .iter()
        .position(|slot| slot.watched.name.as_deref() == Some("filers-list"))
        .unwrap();
    let statics = aggregator.slots.len();
    for index in 0..statics {
        aggregator.apply(Update::Listed(index, BTreeMap::new()));
    }
    let mut listed = filers_list("das", &["fld5_svm", "fld7svm", "Bad Name"]);
    listed.extend(filers_list("alice", &["intruder"]));
    aggregator.apply(Update::Listed(filers_list_slot, listed));
    assert!(aggregator.follow_listed_names().is_empty());
    let secrets = secret_watches(&aggregator);
    let names: Vec<&str> = secrets.iter().map(|(_, name)| name.as_str()).collect();
    assert_eq!(names, ["fld5-svm-conn-secret", "fld7svm-conn-secret"]);
    let started: Vec<Watched> = started.lock().unwrap().iter().skip(statics).cloned().collect();
    assert_eq!(started.len(), 2);
    assert_eq!(
        started[0].keys_only,
        ["S3_ACCESS", "S3_SECRET"],
        "values are not kept"
    );
    assert!(
        !aggregator.snapshot(1, Vec::new()).synced,
        "not synced before the Secrets list"
    );

    aggregator.apply(Update::Listed(secrets[0].0, BTreeMap::new()));
    aggregator.apply(Update::Absent(secrets[1].0));
    let snapshot = aggregator.snapshot(2, Vec::new());
    assert!(snapshot.synced);
    assert_eq!(
        snapshot.unreadable,
        [("Secret".to_owned(), "fld7svm-conn-secret".to_owned())]
    );

    aggregator.apply(Update::Listed(
        filers_list_slot,
        filers_list("das", &["fld5_svm"]),
    ));
    aggregator.follow_listed_names();
    let names: Vec<String> = secret_watches(&aggregator).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["fld5-svm-conn-secret"]);
    assert!(aggregator.snapshot(3, Vec::new()).unreadable.is_empty());
    // A late update of the stopped watch is dropped.
    aggregator.apply(Update::Listed(
        secrets[1].0,
        BTreeMap::from([(("a".to_owned(), "x".to_owned()), json!({}))]),
    ));
    let documents = aggregator.snapshot(4, Vec::new()).documents;
    assert_eq!(documents.len(), 1, "filers-list alone: {documents:?}");
}

/// Issue 23: with `secretKeyRef`s a Secret is kept as its name and whether each S3 key is set;
/// no value, and no other key, goes past the watch.
#[test]
fn a_secret_is_kept_as_whether_its_keys_are_set() {
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "fld5-conn-secret", "namespace": "alice", "annotations": {"a": "b"}},
        "data": {"S3_ACCESS": "QUtJQTE=", "S3_SECRET": "", "OTHER": "c2VjcmV0"}
    }))
    .unwrap();
    let (key, value) = keys_only(&resource, &object, &["S3_ACCESS", "S3_SECRET"]);
    assert_eq!(key, ("alice".to_owned(), "fld5-conn-secret".to_owned()));
    assert_eq!(
        value,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "fld5-conn-secret", "namespace": "alice"},
               "data": {"S3_ACCESS": KEY_SET, "S3_SECRET": ""}})
    );
}

/// A PodDefault read from the cluster with an invalid selector is reported by its kind,
/// namespace and name (a file's document index would point at nothing), and the others load.
#[tokio::test]
async fn a_bad_policy_from_the_cluster_is_named_by_kind_namespace_and_name() {
    let (aggregator, _) = aggregator(&WatchOptions::default());
    let (updates, updates_rx) = mpsc::unbounded_channel();
    let (snapshot_tx, mut snapshots) = watch::channel(Arc::new(Snapshot::default()));
    let aggregator = tokio::spawn(aggregate(aggregator, updates_rx, snapshot_tx));
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
