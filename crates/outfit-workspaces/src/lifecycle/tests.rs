//! What the lifecycle decides for each pod, and what it does about it, on a fake cluster.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use outfit_workspaces_core::{model::names, resource};
use serde_json::json;

use super::*;
use crate::io::fake::{self, FakeCluster, NAMESPACE};

fn pod(annotations: serde_json::Value, status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "annotations": annotations},
        "status": status,
    }))
    .unwrap()
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

const DEADLINE: &str = "2026-01-01T00:01:30Z";

#[test]
fn a_ready_creating_pod_is_finished() {
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE}), ready);
    assert_eq!(
        next_step(&pod, None, &[], at("2026-01-01T00:00:10Z")),
        Next::Finish
    );
}

#[test]
fn a_pod_past_its_deadline_fails_with_its_phase() {
    let pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE}), json!({}));
    assert_eq!(next_step(&pod, None, &[], at("2026-01-01T00:01:00Z")), Next::Wait);
    let Next::Fail(phase, why) = next_step(&pod, None, &[], at("2026-01-01T00:01:30Z")) else {
        panic!("expected a failure");
    };
    assert_eq!(phase, Phase::Scheduling);
    assert!(why.contains("deadline"), "{why}");
}

#[test]
fn a_pod_that_ended_fails_before_its_deadline() {
    let ended = json!({"phase": "Failed", "conditions": [{"type": "PodScheduled", "status": "True"}]});
    let pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE}), ended);
    assert!(matches!(
        next_step(&pod, None, &[], at("2026-01-01T00:00:01Z")),
        Next::Fail(Phase::Readiness, _)
    ));
}

/// What a real kubelet (1.37, on containerd 1.6) says of a pod with `hostUsers: false`, again and
/// again, while the pod stays in ContainerCreating (seen on the test cluster's real node).
fn sandbox_event(message: &str) -> Arc<Event> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "p.1"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "FailedCreatePodSandBox", "type": "Warning", "message": message,
            "source": {"component": "kubelet"}
        }))
        .unwrap(),
    )
}

#[test]
fn a_pod_on_a_runtime_without_user_namespaces_fails_at_once_and_says_so() {
    let pod = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE}), json!({}));
    let early = at("2026-01-01T00:00:05Z");
    let no_user_namespaces = sandbox_event(
        "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces",
    );
    let Next::Fail(phase, why) = next_step(&pod, None, &[no_user_namespaces], early) else {
        panic!("expected a failure before the deadline");
    };
    assert_eq!(phase, Phase::Scheduling);
    assert!(
        why.contains("hostUsers: false") && why.contains("does not support user namespaces"),
        "{why}"
    );
    // The same of the pod's RuntimeClass (seen on the test cluster's real node, whose handler of
    // runc 1.1 has no user namespaces).
    let handler_without = sandbox_event(
        "Failed to create pod sandbox: can't set `spec.hostUsers: false`, RuntimeClass handler \"runc-without-userns\" does not support user namespaces",
    );
    let Next::Fail(_, why) = next_step(&pod, None, &[handler_without], early) else {
        panic!("expected a failure before the deadline, for a RuntimeClass too");
    };
    assert!(why.contains("RuntimeClass handler"), "{why}");
    // A sandbox failure the kubelet gets past by retrying waits for the deadline as before.
    let network_not_ready =
        sandbox_event("Failed to create pod sandbox: plugin type=\"bridge\" failed: not ready");
    assert_eq!(next_step(&pod, None, &[network_not_ready], early), Next::Wait);
}

#[test]
fn started_failed_and_foreign_pods_are_left_alone() {
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let started = pod(
        json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE, keys::ANNOTATION_STARTED: "x"}),
        ready.clone(),
    );
    let failed = pod(
        json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE, keys::ANNOTATION_FAILED: "x"}),
        json!({}),
    );
    let foreign = pod(json!({}), ready);
    let late = at("2030-01-01T00:00:00Z");
    for pod in [started, foreign] {
        assert_eq!(next_step(&pod, None, &[], late), Next::Wait);
    }
    // A failed pod whose delete did not go through is deleted again, until it is going.
    assert_eq!(next_step(&failed, None, &[], late), Next::Remove);
    let culled = pod(
        json!({keys::ANNOTATION_STARTED: "x", keys::ANNOTATION_CULLED: "idle"}),
        json!({}),
    );
    assert_eq!(next_step(&culled, None, &[], late), Next::Remove);
    let mut going = failed;
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(late));
    assert_eq!(next_step(&going, None, &[], late), Next::Wait);
}

/// A lifecycle over a fake cluster, configured by `env` (`BACKEND_*` variables).
fn on_fake(env: &[(&str, &str)]) -> (Lifecycle<FakeCluster>, FakeCluster) {
    let (config, fake, cache) = fake::on_fake(env);
    let leading = tokio::sync::watch::channel(true).1;
    let lifecycle = Lifecycle::new(config, fake.clone(), cache, Arc::default(), leading);
    (lifecycle, fake)
}

/// alice's workspace pod `name`, with `annotations` besides her user id.
fn workspace(name: &str, owner: &str, annotations: serde_json::Value, status: serde_json::Value) -> Pod {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}"), "annotations": annotations,
                     "labels": {"user": "alice", "domain": "dtu.dk", "podName": name}},
        "spec": {"containers": [{"name": "main", "image": "x", "ports": [{"containerPort": 22}]}]},
        "status": status,
    }))
    .unwrap();
    pod.annotations_mut()
        .insert(keys::ANNOTATION_USER_ID.to_owned(), owner.to_owned());
    pod
}

impl<C: ClusterCalls> Lifecycle<C> {
    /// What every pod in the cache needs at `now` (as a pass each second asks).
    fn due_all(&self, now: Timestamp) -> Vec<(Arc<Pod>, Next)> {
        self.due(self.cache.pods(), now)
    }
}

fn names_of(due: &[(Arc<Pod>, Next)]) -> Vec<(String, Next)> {
    due.iter()
        .map(|(pod, next)| (pod.name_any(), next.clone()))
        .collect()
}

#[tokio::test]
async fn a_creating_pod_past_its_deadline_is_failed_and_removed() {
    let (lifecycle, fake) = on_fake(&[]);
    let deadline = json!({keys::ANNOTATION_CREATE_DEADLINE: DEADLINE});
    fake.put_pod(workspace("ws", "alice@dtu.dk", deadline, json!({})));
    assert!(
        lifecycle.due_all(at("2026-01-01T00:01:00Z")).is_empty(),
        "not before its deadline"
    );

    let due = lifecycle.due_all(at("2026-01-01T00:01:30Z"));
    let [(pod, next)] = &due[..] else {
        panic!("one pod due: {:?}", names_of(&due));
    };
    assert!(matches!(next, Next::Fail(Phase::Scheduling, _)), "{next:?}");
    lifecycle.act(pod, next.clone()).await;
    assert_eq!(
        fake.calls(),
        // Marked before the Event: a leader killed in between leaves the survivor only the delete.
        [
            format!("annotate_pod ws {}", keys::ANNOTATION_FAILED),
            "event ws CreateFailed".to_owned(),
            "delete_pod ws".to_owned(),
        ]
    );
    assert!(fake.with(|s| s.pods.is_empty()), "the pod is removed");
    assert!(lifecycle.cache.pods().is_empty(), "and the cache shows it gone");
}

#[tokio::test]
async fn a_ready_pod_whose_create_here_made_its_network_policy_is_not_given_another() {
    let (lifecycle, fake) = on_fake(&[]);
    let annotations = json!({keys::ANNOTATION_CREATE_DEADLINE: "2999-01-01T00:00:00Z"});
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    fake.put_pod(workspace("ws", "alice@dtu.dk", annotations, ready));
    lifecycle.cache.own_writes().isolated("uid-ws", true);
    let pod = fake.with(|s| s.pods["ws"].clone());
    lifecycle.act(&pod, Next::Finish).await;
    let calls = fake.calls();
    assert!(
        !calls.iter().any(|call| call.starts_with("ensure_network_policy")),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(|call| call.starts_with("annotate_pod ws")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_ready_pod_gets_what_its_plan_says_then_is_marked_started() {
    let (lifecycle, fake) = on_fake(&[("BACKEND_INGRESSDOMAIN", "ws.example")]);
    let annotations = json!({
        keys::ANNOTATION_CREATE_DEADLINE: "2999-01-01T00:00:00Z",
        keys::ANNOTATION_INGRESS_PORT: "8888",
        keys::ANNOTATION_COPY_TOKEN: "appendURL",
    });
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    fake.put_pod(workspace("ws", "alice@dtu.dk", annotations, ready));
    let due = lifecycle.due_all(Timestamp::now());
    assert_eq!(names_of(&due), [("ws".to_owned(), Next::Finish)]);
    lifecycle.act(&due[0].0, Next::Finish).await;

    let mut marks = [
        keys::ANNOTATION_SSH_PORT,
        keys::ANNOTATION_STARTED,
        keys::ANNOTATION_TOKENS,
    ];
    marks.sort_unstable();
    assert_eq!(
        fake.calls(),
        [
            format!("ensure_network_policy {}", names::network_policy("ws")),
            format!("ensure_service {}", names::ssh_service("ws")),
            format!("ensure_service {}", names::http_service("ws")),
            format!("ensure_ingress {}", names::ingress("ws")),
            "read_token ws/main appendURL".to_owned(),
            format!("annotate_pod ws {}", marks.join(",")),
            "event ws WorkspaceReady".to_owned(),
        ]
    );
    let stored = fake.with(|s| s.pods["ws"].clone());
    let annotations = stored.annotations();
    assert_eq!(
        annotations[keys::ANNOTATION_SSH_PORT],
        "30022",
        "the node port the API server chose"
    );
    assert_eq!(
        annotations[keys::ANNOTATION_TOKENS],
        r#"{"appendURL":"token-appendURL"}"#
    );
    assert!(
        lifecycle.due_all(Timestamp::now()).is_empty(),
        "a started pod needs nothing more"
    );
}

#[tokio::test(start_paused = true)]
async fn a_change_is_acted_on_at_once_not_at_the_next_look_at_every_pod() {
    let (lifecycle, fake) = on_fake(&[]);
    let shutdown = CancellationToken::new();
    tokio::spawn(lifecycle.clone().run(shutdown.clone()));
    // The first look, at every pod (there are none), happens now.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let began = tokio::time::Instant::now();
    let annotations = json!({keys::ANNOTATION_CREATE_DEADLINE: "2999-01-01T00:00:00Z"});
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    fake.put_pod(workspace("ws", "alice@dtu.dk", annotations, ready));
    let started = |cache: &Cache| {
        let pod = cache.pod("ws")?;
        pod.annotations()
            .contains_key(keys::ANNOTATION_STARTED)
            .then_some(())
    };
    let finished = lifecycle.cache.wait_for(began + 10 * TICK, started).await;
    assert!(
        finished.is_some(),
        "the ready pod was finished: {:?}",
        fake.calls()
    );
    // Time stands still while tasks run: only the change can have woken the lifecycle.
    assert!(began.elapsed() < TICK, "finished after {:?}", began.elapsed());
    shutdown.cancel();
}

#[tokio::test]
async fn started_workspaces_past_their_lifetime_or_idle_too_long_are_culled() {
    let (lifecycle, fake) = on_fake(&[("BACKEND_MAXLIFETIME", "1h"), ("BACKEND_IDLETIMEOUT", "30m")]);
    let started = |at: &str, active: &str| json!({keys::ANNOTATION_STARTED: at, keys::ANNOTATION_LAST_ACTIVITY: active});
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let old = started("2026-01-01T10:00:00Z", "2026-01-01T11:59:00Z");
    let idle = started("2026-01-01T11:20:00Z", "2026-01-01T11:25:00Z");
    let busy = started("2026-01-01T11:20:00Z", "2026-01-01T11:59:00Z");
    fake.put_pod(workspace("old", "alice@dtu.dk", old, ready.clone()));
    fake.put_pod(workspace("idle", "alice@dtu.dk", idle, ready.clone()));
    fake.put_pod(workspace("busy", "alice@dtu.dk", busy, ready));

    let mut due = lifecycle.due_all(at("2026-01-01T12:00:00Z"));
    due.sort_by_key(|(pod, _)| pod.name_any());
    let reasons: Vec<_> = due
        .iter()
        .map(|(pod, next)| match next {
            Next::Cull(cull) => (pod.name_any(), cull.reason()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        reasons,
        [("idle".to_owned(), "idle"), ("old".to_owned(), "lifetime")]
    );

    let (pod, next) = &due[1];
    lifecycle.act(pod, next.clone()).await;
    assert_eq!(
        fake.calls(),
        // Confirmed on the API server's copy; marked before the Event (a leader killed in
        // between leaves the survivor only the delete), which comes before anything can delete
        // the pod (the controller may, once a Workspace is stopped).
        [
            "get_pod old".to_owned(),
            format!("annotate_pod old {}", keys::ANNOTATION_CULLED),
            "event old Culled".to_owned(),
            "delete_pod old".to_owned(),
        ]
    );
    let left: Vec<String> = fake.with(|s| s.pods.keys().cloned().collect());
    assert_eq!(left, ["busy", "idle"]);
}

/// A storage claim of `owner`'s, with `annotations`.
fn claim(name: &str, owner: &str, annotations: serde_json::Value) -> PersistentVolumeClaim {
    let mut claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
    }))
    .unwrap();
    claim
        .annotations_mut()
        .insert(keys::ANNOTATION_USER_ID.to_owned(), owner.to_owned());
    claim
}

/// The claims of the storage sweep's tests: ann's lapsed mark, bob's wanted, cat's used by a
/// pod, dan's changed since the sweep's copy was read (its delete is refused).
fn storage_of_four(fake: &FakeCluster) {
    let wanted = json!({keys::ANNOTATION_STORAGE_WANTED_UNTIL: "2999-01-01T00:00:00Z"});
    let lapsed = json!({keys::ANNOTATION_STORAGE_WANTED_UNTIL: "2000-01-01T00:00:00Z"});
    fake.put_claim(claim("unused", "ann@x.dk", lapsed));
    fake.put_claim(claim("wanted", "bob@x.dk", wanted));
    fake.put_claim(claim("in-use", "cat@x.dk", json!({})));
    fake.put_pod(workspace("cats", "cat@x.dk", json!({}), json!({})));
    fake.put_claim(claim("changed", "dan@x.dk", json!({})));
    fake.with(|s| s.conflicts.insert("changed".to_owned()));
}

#[tokio::test]
async fn the_storage_sweep_removes_only_storage_no_pod_uses_and_no_create_wants() {
    let (lifecycle, fake) = on_fake(&[("BACKEND_STORAGEGRACEPERIOD", "0")]);
    storage_of_four(&fake);

    let mut unused = storage::Unused::default();
    let now = tokio::time::Instant::now();
    storage::sweep(
        &lifecycle.cluster,
        &lifecycle.cache,
        &lifecycle.config,
        &mut unused,
        now,
    )
    .await;
    let mut deletes = fake.calls();
    deletes.sort();
    assert_eq!(deletes, ["delete_storage changed", "delete_storage unused"]);
    let left: Vec<String> = fake.with(|s| s.claims.keys().cloned().collect());
    assert_eq!(left, ["changed", "in-use", "wanted"]);
}

#[tokio::test]
async fn the_storage_sweep_keeps_unused_storage_for_the_grace_period() {
    let (lifecycle, fake) = on_fake(&[]);
    storage_of_four(&fake);
    let (cluster, cache, config) = (&lifecycle.cluster, &lifecycle.cache, &lifecycle.config);
    let mut unused = storage::Unused::default();
    let start = tokio::time::Instant::now();

    storage::sweep(cluster, cache, config, &mut unused, start).await;
    let later = start + std::time::Duration::from_secs(59);
    storage::sweep(cluster, cache, config, &mut unused, later).await;
    assert!(
        fake.calls().is_empty(),
        "nothing removed within the minute: {:?}",
        fake.calls()
    );

    let after = start + std::time::Duration::from_secs(60);
    storage::sweep(cluster, cache, config, &mut unused, after).await;
    let mut deletes = fake.calls();
    deletes.sort();
    assert_eq!(deletes, ["delete_storage changed", "delete_storage unused"]);
}

/// A per-user Lease `name`, last written at `renewed`.
fn turn_lease(fake: &FakeCluster, name: &str, renewed: &str, holder: Option<&str>) {
    let lease: k8s_openapi::api::coordination::v1::Lease = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": format!("v-{name}")},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 10, "renewTime": renewed},
    }))
    .unwrap();
    fake.with(|s| s.leases.insert(name.to_owned(), lease));
}

#[tokio::test]
async fn the_sweep_deletes_the_turn_leases_of_earlier_versions_no_one_wrote_for_long() {
    let (lifecycle, fake) = on_fake(&[]);
    let now = Timestamp::now();
    let recent = (now - jiff::SignedDuration::from_secs(60)).to_string();
    let long_ago = (now - jiff::SignedDuration::from_secs(3600)).to_string();
    turn_lease(&fake, "outfit-user-released", &long_ago, None);
    // Its holder died long ago without releasing it.
    turn_lease(&fake, "outfit-user-abandoned", &long_ago, Some("gone_1"));
    turn_lease(&fake, "outfit-user-recent", &recent, None);
    turn_lease(&fake, "outfit-user-held", &recent, Some("live_1"));

    old_leases::sweep(&lifecycle.cluster).await;
    let left: Vec<String> = fake.with(|s| s.leases.keys().cloned().collect());
    assert_eq!(left, ["outfit-user-held", "outfit-user-recent"]);
}

/// Issue 25: a leader killed between marking a workspace culled and deleting it. The survivor
/// deletes it, without a second Culled Event or count.
#[tokio::test]
async fn a_cull_marked_but_not_deleted_is_deleted_by_the_survivor_and_not_culled_again() {
    let (survivor, fake) = on_fake(&[("BACKEND_MAXLIFETIME", "1h")]);
    let marked =
        json!({keys::ANNOTATION_STARTED: "2026-01-01T10:00:00Z", keys::ANNOTATION_CULLED: "lifetime"});
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    fake.put_pod(workspace("old", "alice@dtu.dk", marked, ready));

    let due = survivor.due_all(at("2026-01-01T12:00:00Z"));
    assert_eq!(names_of(&due), [("old".to_owned(), Next::Remove)]);
    survivor.act(&due[0].0, Next::Remove).await;
    assert_eq!(fake.calls(), ["delete_pod old"]);
    assert!(fake.with(|s| s.pods.is_empty()));
}

/// A leader killed between a cull's mark and its stop: the survivor stops the Workspace as the
/// mark says (deleting the pod alone would have the controller make it again), and culls nothing.
#[tokio::test]
async fn a_cull_marked_but_not_stopped_is_stopped_by_the_survivor() {
    let (survivor, fake) = on_fake(&[("BACKEND_IDLETIMEOUT", "30m")]);
    idle_since_eleven(&fake, None);
    let why = "culled: idle since 2026-01-01T11:00:00Z, longer than its idle timeout of 30m0s";
    fake.with(|s| {
        let pod = s.pods.get_mut("idle").unwrap();
        pod.annotations_mut()
            .insert(keys::ANNOTATION_CULLED.to_owned(), why.to_owned());
    });
    let pod = fake.with(|s| s.pods["idle"].clone());
    fake.put_pod(pod);
    let due = survivor.due_all(at("2026-01-01T12:00:00Z"));
    assert_eq!(names_of(&due), [("idle".to_owned(), Next::Remove)]);
    survivor.act(&due[0].0, Next::Remove).await;
    let record = fake.with(|s| s.workspaces["idle"].clone());
    assert!(!record.spec.started, "stopped");
    let stop = resource::reconcile::stop_request(&record, Timestamp::now());
    assert_eq!(stop.reason, StopReason::Idle);
    assert!(
        fake.calls()
            .iter()
            .all(|c| !c.starts_with("event") && !c.starts_with("delete_pod")),
        "{:?}",
        fake.calls()
    );
}

/// A Workspace of alice's called `name`, stopped or not, as the fake stores it.
fn record(fake: &FakeCluster, name: &str, started: bool) -> resource::Workspace {
    fake.put_workspace(resource::Workspace::new(
        name,
        NAMESPACE,
        resource::WorkspaceSpec {
            owner: "alice@dtu.dk".into(),
            entry: "web".into(),
            started,
            ..Default::default()
        },
    ))
}

/// alice's started Workspace `idle` and its ready pod, idle since 11:00 (with `cull_action` as
/// its manifest's `outfit.dev/cull-action`, if any).
fn idle_since_eleven(fake: &FakeCluster, cull_action: Option<&str>) {
    let owner = record(fake, "idle", true);
    let mut marks = json!({keys::ANNOTATION_STARTED: "2026-01-01T11:00:00Z",
                           keys::ANNOTATION_LAST_ACTIVITY: "2026-01-01T11:00:00Z"});
    if let Some(action) = cull_action {
        marks[keys::ANNOTATION_CULL_ACTION] = json!(action);
    }
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let mut pod = workspace("idle", "alice@dtu.dk", marks, ready);
    pod.metadata.owner_references = resource::reconcile::owner_reference(&owner).map(|r| vec![r]);
    fake.put_pod(pod);
}

/// Issue 31: culling stops a workspace that has a Workspace (its record, and so its name and
/// storage, stay, saying why), unless `cullAction` or the manifest's annotation says delete.
#[tokio::test]
async fn a_cull_stops_a_recorded_workspace_saying_why_or_deletes_it_as_configured() {
    for (config, annotation, stopped) in [
        (None, None, true),
        (Some("delete"), None, false),
        (Some("delete"), Some("stop"), true),
        (None, Some("delete"), false),
    ] {
        let env: Vec<(&str, &str)> = [("BACKEND_IDLETIMEOUT", "30m")]
            .into_iter()
            .chain(config.map(|c| ("BACKEND_CULLACTION", c)))
            .collect();
        let (lifecycle, fake) = on_fake(&env);
        idle_since_eleven(&fake, annotation);
        let due = lifecycle.due_all(at("2026-01-01T12:00:00Z"));
        let case = format!("cullAction {config:?}, annotation {annotation:?}");
        assert!(matches!(due[0].1, Next::Cull(_)), "{case}");
        lifecycle.act(&due[0].0, due[0].1.clone()).await;
        let left = fake.with(|s| s.workspaces.get("idle").cloned());
        // Deleted with its record here; a stopped one's pod is the controller's to delete (its
        // one writer: backend/tests/records.rs), so the lifecycle leaves it.
        assert_eq!(
            fake.with(|s| s.pods.is_empty()),
            !stopped,
            "{case}: the pod goes here only with its record; {:?}",
            fake.calls()
        );
        if stopped {
            let left = left.unwrap_or_else(|| panic!("{case}: the record stays"));
            assert!(!left.spec.started, "{case}");
            let stop = resource::reconcile::stop_request(&left, Timestamp::now());
            assert_eq!(stop.reason, StopReason::Idle, "{case}");
        } else {
            assert!(left.is_none(), "{case}: the record goes");
        }
    }
}

/// Issue 31: a stopped workspace keeps its owner's storage (the sweep would remove it once the
/// pod is gone); the storage goes once the owner has neither pod nor Workspace.
#[tokio::test]
async fn the_storage_sweep_keeps_the_storage_of_a_user_with_a_stopped_workspace() {
    let (lifecycle, fake) = on_fake(&[("BACKEND_STORAGEGRACEPERIOD", "0")]);
    fake.put_claim(claim("alices", "alice@dtu.dk", json!({})));
    let stopped = record(&fake, "web-alice", false);
    let mut unused = storage::Unused::default();
    let (cluster, cache, config) = (&lifecycle.cluster, &lifecycle.cache, &lifecycle.config);
    storage::sweep(cluster, cache, config, &mut unused, tokio::time::Instant::now()).await;
    assert!(
        fake.calls().iter().all(|c| !c.starts_with("delete_storage")),
        "{:?}",
        fake.calls()
    );
    fake.delete_workspace("web-alice", stopped.metadata.uid.as_deref())
        .await
        .unwrap();
    storage::sweep(cluster, cache, config, &mut unused, tokio::time::Instant::now()).await;
    assert!(
        fake.calls().contains(&"delete_storage alices".to_owned()),
        "{:?}",
        fake.calls()
    );
}

/// A cull decided on the cache's copy is not done when the API server's copy shows activity the
/// cache has not (a CI run culled a pinged workspace as idle; its watch was behind); one made
/// anew under the name is not culled for the old one either.
#[tokio::test]
async fn a_cull_is_done_only_if_the_api_servers_copy_is_still_due() {
    let (lifecycle, fake) = on_fake(&[("BACKEND_IDLETIMEOUT", "30m")]);
    idle_since_eleven(&fake, None);
    let due = lifecycle.due_all(at("2026-01-01T12:00:00Z"));
    assert!(matches!(due[0].1, Next::Cull(_)), "{due:?}");
    let pinged = Timestamp::now().to_string();
    fake.with(|s| {
        let pod = s.pods.get_mut("idle").unwrap();
        pod.annotations_mut()
            .insert(keys::ANNOTATION_LAST_ACTIVITY.to_owned(), pinged);
    });
    lifecycle.act(&due[0].0, due[0].1.clone()).await;
    assert_eq!(fake.calls(), ["get_pod idle"], "read, then left alone");
    assert!(fake.with(|s| s.workspaces["idle"].spec.started));

    fake.with(|s| {
        let pod = s.pods.get_mut("idle").unwrap();
        pod.metadata.uid = Some("uid-anew".into());
        let idle_again = "2026-01-01T11:00:00Z".to_owned();
        pod.annotations_mut()
            .insert(keys::ANNOTATION_LAST_ACTIVITY.to_owned(), idle_again);
    });
    lifecycle.act(&due[0].0, due[0].1.clone()).await;
    assert_eq!(fake.calls(), ["get_pod idle", "get_pod idle"]);
    assert!(fake.with(|s| s.workspaces["idle"].spec.started && s.pods.contains_key("idle")));
}

/// A cull that would pass maxStoppedWorkspacesPerUser deletes the workspace instead.
#[tokio::test]
async fn a_cull_past_the_stopped_limit_deletes() {
    let (lifecycle, fake) = on_fake(&[
        ("BACKEND_IDLETIMEOUT", "30m"),
        ("BACKEND_MAXSTOPPEDWORKSPACESPERUSER", "1"),
    ]);
    record(&fake, "kept", false);
    idle_since_eleven(&fake, None);
    let due = lifecycle.due_all(at("2026-01-01T12:00:00Z"));
    lifecycle.act(&due[0].0, due[0].1.clone()).await;
    let left: Vec<String> = fake.with(|s| s.workspaces.keys().cloned().collect());
    assert_eq!(left, ["kept"], "the stopped one stays, the culled one goes");
}

/// Issue 32: a `per-user` home is kept after its user's last workspace (as zero-to-jupyterhub
/// keeps its claims), whatever the strategy is now; an `nfs` claim beside it goes as before.
#[tokio::test]
async fn the_storage_sweep_keeps_per_user_homes() {
    let (lifecycle, fake) = on_fake(&[("BACKEND_STORAGEGRACEPERIOD", "0")]);
    let per_user = json!({"outfit.dev/storage-strategy": "per-user"});
    fake.put_claim(claim("alices", "alice@dtu.dk", per_user));
    fake.put_claim(claim("bobs", "bob@dtu.dk", json!({})));
    let mut unused = storage::Unused::default();
    let (cluster, cache, config) = (&lifecycle.cluster, &lifecycle.cache, &lifecycle.config);
    storage::sweep(cluster, cache, config, &mut unused, tokio::time::Instant::now()).await;
    let deletes: Vec<String> = fake
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("delete_storage"))
        .collect();
    assert_eq!(deletes, ["delete_storage bobs"]);
}
