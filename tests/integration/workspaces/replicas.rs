//! Several replicas of the backend on one namespace: all serve, one (the holder of the
//! `outfit-workspaces` Lease) runs the lifecycle, and another takes over when it dies.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

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
