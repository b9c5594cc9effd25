//! Several replicas of the backend on one namespace: all serve, one (the holder of the
//! `outfit-workspaces` Lease) runs the lifecycle, and another takes over when it dies.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::Value;

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

/// Whether `replica` lists alice's workspace `name`.
async fn lists(replica: &Replica, name: &str) -> bool {
    let alice = Caller::Token("outfit-alice-token");
    let (_, list) = replica
        .backend
        .call(alice, "GET", "/api/v1/workspaces", None)
        .await;
    list.to_string().contains(name)
}
