//! Several replicas of the backend on one namespace: all serve, one (the holder of the
//! `outfit-workspaces` Lease) runs the lifecycle, and another takes over when it dies.

use std::time::{Duration, Instant};

use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration,
    coordination::v1::Lease,
    core::v1::{Event, Node, Service},
    networking::v1::{Ingress, NetworkPolicy},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use super::{
    native::{metric, metrics},
    support::*,
};
use crate::control_plane::ControlPlane;

/// A replica and its admin port (metrics).
struct Replica {
    backend: Backend,
    admin_port: u16,
}

impl Replica {
    async fn start(plane: &ControlPlane, ns: &str, manifests: &Manifests, catalogue: &str) -> Self {
        let admin_port = free_port();
        let extra = format!("{catalogue}adminListen: 127.0.0.1:{admin_port}\n");
        let backend = Backend::start(plane, ns, manifests, &extra).await;
        Self { backend, admin_port }
    }

    async fn metric(&self, name: &str) -> f64 {
        metric(&metrics(self.admin_port).await, name).unwrap_or(0.0)
    }

    async fn leads(&self) -> bool {
        self.metric("outfit_workspaces_leader ").await == 1.0
    }
}

/// Launches `manifest` through `replica` as alice and follows it to its end; the workspace's name.
async fn launch_ready(replica: &Replica, manifest: &str) -> String {
    let alice = Caller::Token("outfit-alice-token");
    let (status, created) = replica.backend.launch(alice, manifest).await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    replica.backend.follow_to_ready(alice, &name).await;
    name
}

/// Issue 25: the culler runs on one elected leader, nothing is culled twice, and a leader that
/// dies is replaced (Kubernetes' own controllers elect theirs the same way). The follower's
/// metrics show it never culled; the launch after the kill can only turn ready once the survivor
/// leads, since only the leader finishes starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_runs_the_lifecycle_and_another_takes_over_when_it_dies() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replicas";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let short = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: short\n  annotations: {outfit.dev/max-lifetime: 3s}\nspec: {containers: [{name: main, image: x}]}\n";
    let long =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: long}\nspec: {containers: [{name: main, image: x}]}\n";
    let catalogue = format!(
        "catalogue:\n- {{name: short, url: '{}'}}\n- {{name: long, url: '{}'}}\n",
        manifests.put("short.yaml", short),
        manifests.put("long.yaml", long),
    );
    let first = Replica::start(plane, ns, &manifests, &catalogue).await;
    let second = Replica::start(plane, ns, &manifests, &catalogue).await;

    eventually("one replica leading", Duration::from_secs(30), || async {
        first.leads().await || second.leads().await
    })
    .await;
    let (first_leads, second_leads) = (first.leads().await, second.leads().await);
    assert!(first_leads != second_leads, "exactly one replica leads");
    let (leader, follower) = if first_leads {
        (first, second)
    } else {
        (second, first)
    };
    let lease = Api::<Lease>::namespaced(client.clone(), ns)
        .get("outfit-workspaces")
        .await
        .unwrap();
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty()),
        "the Lease names its holder"
    );

    // Launched through the follower, finished and culled by the leader alone, once.
    let short = launch_ready(&follower, "short").await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    eventually("the short workspace culled", Duration::from_secs(30), || async {
        pods.get_opt(&short).await.unwrap().is_none()
    })
    .await;
    let culled = "outfit_workspaces_culled_total{reason=\"lifetime\"}";
    assert_eq!(leader.metric(culled).await, 1.0);
    assert_eq!(follower.metric(culled).await, 0.0, "the follower culls nothing");

    // The leader dies without giving the Lease up; the survivor takes it once it expires and
    // finishes the next start.
    let killed = Instant::now();
    drop(leader);
    let long = launch_ready(&follower, "long").await;
    assert!(follower.leads().await);
    eprintln!(
        "failover: {long} ready {:.1} s after the leader was killed",
        killed.elapsed().as_secs_f64()
    );
}

/// Issue 25: per-user limits hold across replicas. Each round, alice's two launches go to the two
/// replicas at the same moment with `maxWorkspacesPerUser: 1`: the per-user Lease lets one
/// replica check and create at a time, and the next waits until its own cache shows the pod the
/// other made, so exactly one is admitted and the other refused with the limit's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_users_limit_holds_when_two_replicas_are_asked_at_the_same_moment() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replica-limits";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let web =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: main, image: x}]}\n";
    let config = format!(
        "maxWorkspacesPerUser: 1\ncatalogue:\n- {{name: web, url: '{}'}}\n",
        manifests.put("web.yaml", web),
    );
    let first = Replica::start(plane, ns, &manifests, &config).await;
    let second = Replica::start(plane, ns, &manifests, &config).await;
    let alice = Caller::Token("outfit-alice-token");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    for round in 0..6 {
        let ((first_status, first_answer), (second_status, second_answer)) = tokio::join!(
            first.backend.launch(alice, "web"),
            second.backend.launch(alice, "web")
        );
        let answers = [(first_status, &first_answer), (second_status, &second_answer)];
        let admitted: Vec<&Value> = answers
            .iter()
            .filter(|(s, _)| *s == 201)
            .map(|(_, a)| *a)
            .collect();
        let refused: Vec<&Value> = answers
            .iter()
            .filter(|(s, _)| *s != 201)
            .map(|(_, a)| *a)
            .collect();
        assert_eq!(
            admitted.len(),
            1,
            "round {round}: exactly one admitted: {answers:?}"
        );
        let refusal = refused[0];
        assert_eq!(
            refusal["reason"].as_str(),
            Some("LimitExceeded"),
            "round {round}: {refusal}"
        );
        let message = refusal["error"].as_str().unwrap();
        assert!(
            message.starts_with("maxWorkspacesPerUser is 1: you have 1 workspace,"),
            "round {round}: {message}"
        );
        // The admitted workspace is deleted, and gone from both replicas' views, before the next
        // round.
        let name = admitted[0]["name"].as_str().unwrap().to_owned();
        let (status, answer) = first
            .backend
            .call(alice, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
            .await;
        assert!(status < 300, "{status} {answer}");
        let (name, pods, first, second) = (name.as_str(), &pods, &first, &second);
        eventually(
            "the admitted workspace gone",
            Duration::from_secs(30),
            || async move {
                pods.get_opt(name).await.unwrap().is_none()
                    && !lists(first, name).await
                    && !lists(second, name).await
            },
        )
        .await;
    }
}

/// Issue 43: the stopped-workspace limit holds across replicas without per-user Leases. With
/// `maxStoppedWorkspacesPerUser: 1`, alice's two workspaces are stopped at the same moment through
/// the two replicas: the leader's controller decides both requests in her turn, so one stops (202)
/// and the other is refused (403 `LimitExceeded`) and keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_users_stopped_limit_holds_when_two_replicas_are_asked_to_stop_at_the_same_moment() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replica-stops";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let config = format!(
        "maxStoppedWorkspacesPerUser: 1\ncatalogue:\n- {{name: site, url: '{}'}}\n",
        manifests.put("site.yaml", &web("", "")),
    );
    let (leader, follower) = leader_and_follower(plane, ns, &manifests, &config).await;
    let alice = Caller::Token("outfit-alice-token");
    let first = launch_ready(&follower, "site").await;
    let second = launch_ready(&leader, "site").await;
    let (stop_first, stop_second) = (
        format!("/api/v1/workspaces/{first}/stop"),
        format!("/api/v1/workspaces/{second}/stop"),
    );
    let ((first_status, first_answer), (second_status, second_answer)) = tokio::join!(
        follower.backend.call(alice, "POST", &stop_first, None),
        leader.backend.call(alice, "POST", &stop_second, None)
    );
    let mut statuses = [first_status, second_status];
    statuses.sort_unstable();
    assert_eq!(statuses, [202, 403], "{first_answer} {second_answer}");
    let refusal = if first_status == 403 {
        &first_answer
    } else {
        &second_answer
    };
    assert_eq!(refusal["reason"], "LimitExceeded", "{refusal}");
    let message = refusal["error"].as_str().unwrap();
    assert!(
        message.starts_with("maxStoppedWorkspacesPerUser is 1"),
        "{message}"
    );
    let refused = if first_status == 403 { &first } else { &second };
    let records: Api<outfit_workspaces_core::resource::Workspace> = Api::namespaced(client.clone(), ns);
    assert!(
        records.get(refused).await.unwrap().spec.started,
        "the refused one runs on"
    );
}

/// Whether `replica` lists alice's workspace `name`.
async fn lists(replica: &Replica, name: &str) -> bool {
    let alice = Caller::Token("outfit-alice-token");
    let (_, list) = replica
        .backend
        .call(alice, "GET", "/api/v1/workspaces", None)
        .await;
    list.to_string().contains(name)
}

/// The two replicas of a test, started on `ns` with `config`; (leader, follower) once one leads.
async fn leader_and_follower(
    plane: &ControlPlane,
    ns: &str,
    manifests: &Manifests,
    config: &str,
) -> (Replica, Replica) {
    let first = Replica::start(plane, ns, manifests, config).await;
    let second = Replica::start(plane, ns, manifests, config).await;
    eventually("one replica leading", Duration::from_secs(30), || async {
        first.leads().await || second.leads().await
    })
    .await;
    if first.leads().await {
        (first, second)
    } else {
        (second, first)
    }
}

/// Whether the Service, Ingress and NetworkPolicy made for the pod `pod` exist: (all, none).
async fn made_for(client: &kube::Client, ns: &str, pod: &str) -> (bool, bool) {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns);
    let found = [
        services.get_opt(&format!("{pod}-http")).await.unwrap().is_some(),
        ingresses
            .get_opt(&format!("{pod}-ingress"))
            .await
            .unwrap()
            .is_some(),
        policies
            .get_opt(&format!("{pod}-isolation"))
            .await
            .unwrap()
            .is_some(),
    ];
    (found.iter().all(|f| *f), found.iter().all(|f| !*f))
}

/// A web workspace (an http Service and an Ingress, besides its NetworkPolicy), with `extra`
/// lines under `metadata` and under `spec`.
fn web(annotations: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations: {{sciencedata.dk/ingress-port: '80'{annotations}}}\n\
         spec:\n  {spec}containers: [{{name: web, image: nginx, ports: [{{containerPort: 80}}]}}]\n"
    )
}

/// Issue 25: a leader killed while a cull is due. The workspace's lifetime ends while the leader
/// is dead (or as it dies): the survivor, once it holds the Lease, culls it once (the metrics of
/// both show one cull in all, wherever it happened), and the pod and what was made for it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cull_due_while_the_leader_is_dead_is_done_once_by_the_survivor() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replica-cull";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let config = format!(
        "catalogue:\n- {{name: brief, url: '{}'}}\n",
        manifests.put("brief.yaml", &web(", outfit.dev/max-lifetime: 8s", "")),
    );
    let (leader, follower) = leader_and_follower(plane, ns, &manifests, &config).await;
    let name = launch_ready(&follower, "brief").await;
    assert_eq!(made_for(&client, ns, &name).await, (true, false));

    let culled = "outfit_workspaces_culled_total{reason=\"lifetime\"}";
    let culled_by_leader = leader.metric(culled).await;
    drop(leader);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    eventually("the workspace culled", Duration::from_secs(45), || async {
        pods.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    eventually(
        "what was made for it removed",
        Duration::from_secs(30),
        || async { made_for(&client, ns, &name).await.1 },
    )
    .await;
    assert!(follower.leads().await);
    assert_eq!(
        culled_by_leader + follower.metric(culled).await,
        1.0,
        "one cull in all"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let culls = events.list(&about).await.unwrap().items;
    let culls: Vec<_> = culls
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Culled"))
        .collect();
    assert!(
        culls.len() == 1 && culls[0].series.is_none(),
        "one Culled Event: {culls:?}"
    );
}

/// Issue 25: a launch accepted by one replica whose start is not finished when the leader is
/// killed (its pod waits for a node label that only comes after the kill) is finished by the
/// survivor: ready, with its Service, Ingress and NetworkPolicy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_unfinished_when_the_leader_dies_is_finished_by_the_survivor() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replica-finish";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let label = "outfit.test/replica-finish";
    let config = format!(
        "catalogue:\n- {{name: held, url: '{}'}}\n",
        manifests.put(
            "held.yaml",
            &web("", &format!("nodeSelector: {{{label}: 'yes'}}\n  "))
        ),
    );
    let (leader, follower) = leader_and_follower(plane, ns, &manifests, &config).await;
    let alice = Caller::Token("outfit-alice-token");
    let (status, created) = follower.backend.launch(alice, "held").await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    drop(leader);

    let nodes: Api<Node> = Api::all(client.clone());
    // The plane's own node (other tests add tainted nodes of their own beside it).
    let node = "kwok-node-0";
    let labelled = |value: Option<&str>| json!({"metadata": {"labels": {label: value}}});
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(labelled(Some("yes"))),
        )
        .await
        .unwrap();
    follower.backend.follow_to_ready(alice, &name).await;
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(labelled(None)))
        .await
        .unwrap();
    assert!(follower.leads().await);
    assert_eq!(made_for(&client, ns, &name).await, (true, false));
}

/// Issue 31: the Workspace controller runs on the leader and survives it. A workspace stopped
/// through the follower is started with kubectl (`spec.started: true`) as the leader is killed:
/// the survivor, once it leads, makes the pod under the Workspace's name, and it turns ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_written_as_the_leader_dies_is_made_by_the_survivor() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replica-start";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let config = format!(
        "catalogue:\n- {{name: site, url: '{}'}}\n",
        manifests.put("site.yaml", &web("", "")),
    );
    let (leader, follower) = leader_and_follower(plane, ns, &manifests, &config).await;
    let name = launch_ready(&follower, "site").await;
    let alice = Caller::Token("outfit-alice-token");
    let (status, answer) = follower
        .backend
        .call(alice, "POST", &format!("/api/v1/workspaces/{name}/stop"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    eventually(
        "the stopped workspace's pod gone",
        Duration::from_secs(30),
        || async { pods.get_opt(&name).await.unwrap().is_none() },
    )
    .await;

    drop(leader);
    let records: Api<outfit_workspaces_core::resource::Workspace> = Api::namespaced(client.clone(), ns);
    let started = json!({"spec": {"started": true}});
    records
        .patch(&name, &PatchParams::default(), &Patch::Merge(&started))
        .await
        .unwrap();
    let killed = Instant::now();
    eventually("the survivor makes the pod", Duration::from_secs(60), || async {
        pods.get_opt(&name).await.unwrap().is_some()
    })
    .await;
    follower.backend.follow_to_ready(alice, &name).await;
    eprintln!(
        "failover: {name} started {:.1} s after the leader was killed",
        killed.elapsed().as_secs_f64()
    );
    assert!(follower.leads().await);
    let pod = pods.get(&name).await.unwrap();
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Workspace", name.as_str())
    );
}

/// Issue 25: a replica killed between a pod's delete and the delete of what was made for it
/// leaves the Service, Ingress and NetworkPolicy to the garbage collector alone, which stalls
/// after API server restarts (RELIABILITY.md); here kube-controller-manager is stopped, so only
/// the next leader's sweep of what gone pods left can remove them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_replica_killed_mid_delete_left_is_removed_by_the_next_leader() {
    let plane = ControlPlane::start_with_nodes("replica-orphans", 1);
    let client = plane.admin_client().await;
    let ns = "ws-replica-orphans";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let config = format!(
        "catalogue:\n- {{name: web, url: '{}'}}\n",
        manifests.put("web.yaml", &web("", ""))
    );
    let first = Replica::start(&plane, ns, &manifests, &config).await;
    let name = launch_ready(&first, "web").await;
    assert_eq!(made_for(&client, ns, &name).await, (true, false));

    // The replica dies with the pod deleted and nothing else: the delete is made here as the
    // API's is, the Workspace first (else its controller makes the pod again), then the pod.
    kill_controller_manager(&plane);
    drop(first);
    let records: Api<outfit_workspaces_core::resource::Workspace> = Api::namespaced(client.clone(), ns);
    records.delete(&name, &DeleteParams::default()).await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("the pod gone", Duration::from_secs(30), || async {
        pods.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(made_for(&client, ns, &name).await, (true, false), "left behind");

    let _next = Replica::start(&plane, ns, &manifests, &config).await;
    eventually(
        "what the gone pod left removed",
        Duration::from_secs(30),
        || async { made_for(&client, ns, &name).await.1 },
    )
    .await;
}

/// Kills `plane`'s kube-controller-manager (its garbage collector with it).
fn kill_controller_manager(plane: &ControlPlane) {
    let pid = std::fs::read_to_string(plane.state_dir.join("kube-controller-manager.pid")).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success(), "kill kube-controller-manager {pid}");
}

/// The ValidatingWebhookConfiguration of [`refusing_pod_creates`].
const REFUSING: &str = "outfit-test-refuse-pods";

/// A webhook no one serves, asked about every pod created in `ns` and failing closed: the API
/// server refuses each such create with 500 ("failed calling webhook"), as it does while a
/// cluster's policy webhook is away. Only `ns`'s pods: the other tests share the cluster.
async fn refusing_pod_creates(client: &kube::Client, ns: &str) {
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let nowhere = format!("https://127.0.0.1:{}/refuse", free_port());
    let webhook = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": REFUSING},
        "webhooks": [{
            "name": "refuse.outfit.test",
            "clientConfig": {"url": nowhere},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }],
    }))
    .unwrap();
    webhooks.create(&PostParams::default(), &webhook).await.unwrap();
}

/// Removes [`refusing_pod_creates`]' webhook: pod creates are let through again.
async fn accepting_pod_creates(client: &kube::Client) {
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    webhooks.delete(REFUSING, &DeleteParams::default()).await.unwrap();
}

/// Issue 43: one reconcile per Workspace, which backs off and survives its leader. While the API
/// server refuses the namespace's pod creates (a webhook it can't reach), a launch's Workspace
/// waits for its pod: the leader's reconcile fails at the start step (counted), three times, and
/// is tried again after growing waits; once creates are let through it makes the pod, and the
/// launch, still waiting, answers 201. Then, creates refused again, the leader is killed between
/// a Workspace's creation and its pod's: the survivor, once it leads, makes the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_create_is_tried_again_and_a_dead_leader_s_launch_is_made_by_the_survivor() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-replica-refused";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let site = manifests.put("site.yaml", &web("", ""));
    let config = format!("catalogue:\n- {{name: site, url: '{site}'}}\n- {{name: page, url: '{site}'}}\n");
    let (leader, follower) = leader_and_follower(plane, ns, &manifests, &config).await;
    let alice = Caller::Token("outfit-alice-token");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    let refused = "outfit_workspaces_reconcile_failures_total{step=\"start\"}";

    refusing_pod_creates(&client, ns).await;
    let ((status, created), ()) = tokio::join!(follower.backend.launch(alice, "site"), async {
        eventually("three refused pod creates", Duration::from_secs(60), || async {
            leader.metric(refused).await >= 3.0
        })
        .await;
        accepting_pod_creates(&client).await;
    });
    assert_eq!(status, 201, "{created}");
    let first = created["name"].as_str().unwrap().to_owned();
    follower.backend.follow_to_ready(alice, &first).await;
    assert_eq!(follower.metric(refused).await, 0.0, "only the leader reconciles");

    refusing_pod_creates(&client, ns).await;
    let before = leader.metric(refused).await;
    let ((status, created), killed) = tokio::join!(follower.backend.launch(alice, "page"), async move {
        eventually(
            "the next launch's pod refused",
            Duration::from_secs(60),
            || async { leader.metric(refused).await > before },
        )
        .await;
        drop(leader);
        let killed = Instant::now();
        accepting_pod_creates(&client).await;
        killed
    });
    assert_eq!(status, 201, "{created}");
    let second = created["name"].as_str().unwrap().to_owned();
    follower.backend.follow_to_ready(alice, &second).await;
    eprintln!(
        "failover: {second} made {:.1} s after the leader was killed",
        killed.elapsed().as_secs_f64()
    );
    assert!(follower.leads().await);
    let pod = pods.get(&second).await.unwrap();
    assert_eq!(pod.owner_references()[0].name, second);
}
