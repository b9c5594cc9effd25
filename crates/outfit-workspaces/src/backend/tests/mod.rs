//! The backend's decisions on a fake cluster: per-user limits, and that another user's pod or
//! storage is never touched. Beside them, on the same helpers: homes (`homes.rs`), the records a
//! stop and start write and the controller reads (`records.rs`), the homes' snapshots
//! (`snapshots.rs`), and names no cache shows (`unseen.rs`).

mod homes;
mod records;
mod snapshots;
mod unseen;

use std::{net::IpAddr, sync::Arc};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{keys, names, user::UserId},
    resource,
    workspace::requests::{CreateRequest, Launch},
    workspace::{
        info::WorkspaceInfo,
        manifest::{Requester, Settings},
        progress::Status,
    },
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::io::{
    fake::{self, FakeCluster, NAMESPACE},
    node_images::NodeImages,
};

const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n";

/// Serves `manifest` on loopback to every request; its URL.
pub(super) async fn serve(manifest: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let mut request = [0u8; 2048];
            let _ = tcp.read(&mut request).await;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{manifest}",
                manifest.len()
            );
            let _ = tcp.write_all(answer.as_bytes()).await;
        }
    });
    format!("http://127.0.0.1:{port}/web.yaml")
}

/// Runs the controller of every cluster as the leader until dropped: it makes the pods of
/// launches and starts.
pub(super) fn controlling(backend: &Backend<FakeCluster>) -> CancellationToken {
    let shutdown = CancellationToken::new();
    for index in 0..backend.members().len() {
        let leading = tokio::sync::watch::channel(true).1;
        tokio::spawn(
            backend
                .clone()
                .control((index, Arc::default()), leading, shutdown.clone()),
        );
    }
    shutdown
}

/// Waits (paused time: instantly) until `check` holds of the fake.
pub(super) async fn until(fake: &FakeCluster, what: &str, check: impl Fn(&crate::io::fake::State) -> bool) {
    for _ in 0..600 {
        if fake.with(|s| check(s)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{what}: not within a minute; calls {:?}", fake.calls());
}

/// Another replica beside `backend` on its cluster `fake`: its own per-process turns, the same
/// cluster (and, for the tests' sake, the same cache).
pub(super) fn replica_of(backend: &Backend<FakeCluster>, fake: &FakeCluster) -> Backend<FakeCluster> {
    let here = backend.default_cluster();
    Backend::new(ClusterWorkspaces::new(
        here.name.clone(),
        here.config.clone(),
        fake.clone(),
        here.cache.clone(),
    ))
}

/// A backend over a fake cluster, configured by `env` (`BACKEND_*` variables), fetching
/// manifests from loopback.
pub(super) fn on_fake(env: &[(&str, &str)]) -> (Backend<FakeCluster>, FakeCluster) {
    let whitelist = ("BACKEND_WHITELISTMANIFESTREGEX", r"http://127\.0\.0\.1:");
    let (config, fake, cache) = fake::on_fake(&[env, &[whitelist]].concat());
    let default = ClusterWorkspaces::new(config.default_cluster.clone(), config, fake.clone(), cache);
    (Backend::new(default), fake)
}

/// A running workspace pod of `owner`'s.
pub(super) fn workspace(name: &str, owner: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
                     "annotations": {keys::ANNOTATION_USER_ID: owner}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn create(url: &str, user: &str) -> CreateRequest {
    CreateRequest {
        yaml_url: url.to_owned(),
        user_id: user.to_owned(),
        settings: None,
    }
}

pub(super) const SILO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 11));

#[tokio::test]
async fn a_create_past_the_users_workspace_limit_is_refused_and_leaves_nothing() {
    let (backend, fake) = on_fake(&[("BACKEND_MAXWORKSPACESPERUSER", "1")]);
    let _leader = controlling(&backend).drop_guard();
    fake.put_pod(workspace("web-alice", "alice@dtu.dk"));
    // Another user's pod does not count against alice.
    fake.put_pod(workspace("web-bob", "bob@dtu.dk"));
    let url = serve(WEB).await;
    let error = backend
        .create_pod(&create(&url, "alice@dtu.dk"), SILO)
        .await
        .expect_err("alice is at her limit");
    // Decided by the controller, the one maker of pods, and read back from the Workspace.
    let RequestError::Refused { reason, message } = &error else {
        panic!("a refusal, got {error:?}");
    };
    assert_eq!(reason, "LimitExceeded");
    assert!(message.contains("maxWorkspacesPerUser is 1"), "{message}");
    assert!(created_pods(&fake).is_empty(), "no pod: {:?}", fake.calls());
    assert!(
        fake.with(|s| s.workspaces.is_empty()),
        "its Workspace goes with the refusal"
    );
    assert!(
        !fake.calls().iter().any(|c| c.contains("_lease ")),
        "no per-user Lease: {:?}",
        fake.calls()
    );
}

#[tokio::test]
async fn a_create_within_the_limits_records_a_workspace_whose_pod_the_controller_makes() {
    let (backend, fake) = on_fake(&[("BACKEND_MAXWORKSPACESPERUSER", "2")]);
    let _leader = controlling(&backend).drop_guard();
    fake.put_pod(workspace("web-alice", "alice@dtu.dk"));
    let url = serve(WEB).await;
    let (name, _) = backend
        .create_pod(&create(&url, "alice@dtu.dk"), SILO)
        .await
        .unwrap();
    assert_ne!(name, "web-alice", "the name held by her other pod is skipped");
    let (record, pod) = fake.with(|s| (s.workspaces[&name].clone(), s.pods[&name].clone()));
    // deic-dk's manifest and silo in place of a catalogue entry.
    assert_eq!(record.spec.entry, "");
    assert_eq!(record.spec.manifest_url.as_deref(), Some(url.as_str()));
    assert_eq!(record.spec.silo_ip.as_deref(), Some("10.0.0.11"));
    assert!(resource::reconcile::owns(&record, &pod));
    let made: Vec<String> = fake
        .calls()
        .into_iter()
        .filter(|c| {
            c.starts_with("create_pod ") || c.starts_with("ensure_network_policy ") || c.contains("_lease ")
        })
        .collect();
    assert_eq!(
        made,
        [
            format!("create_pod {name}"),
            format!("ensure_network_policy {}", names::network_policy(&name)),
        ]
    );
    let pods: Vec<String> = backend
        .get_pods("alice@dtu.dk")
        .unwrap()
        .into_iter()
        .map(|p| p.pod_name)
        .collect();
    assert!(pods.contains(&name), "the cache shows it at once: {pods:?}");
}

#[tokio::test]
async fn a_create_prefers_the_nodes_that_hold_its_images() {
    let whitelist = ("BACKEND_WHITELISTMANIFESTREGEX", r"http://127\.0\.0\.1:");
    let (config, fake, cache) = fake::on_fake(&[whitelist]);
    let images = NodeImages::default();
    images.set("node-b", &["docker.io/library/nginx:latest", "busybox"]);
    images.set("node-a", &["nginx"]);
    images.set("node-c", &["busybox"]);
    let default = ClusterWorkspaces::new(config.default_cluster.clone(), config, fake.clone(), cache)
        .with_node_images(images);
    let backend = Backend::new(default);
    let leader = controlling(&backend);
    let url = serve(WEB).await;
    let (name, _) = backend
        .create_pod(&create(&url, "alice@dtu.dk"), SILO)
        .await
        .unwrap();
    leader.cancel();
    let pod = fake.with(|s| s.pods[&name].clone());
    let terms = serde_json::to_value(&pod).unwrap()["spec"]["affinity"]["nodeAffinity"]
        ["preferredDuringSchedulingIgnoredDuringExecution"]
        .clone();
    let preferred: Vec<&serde_json::Value> = terms
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["preference"]["matchFields"][0]["values"])
        .collect();
    assert_eq!(preferred, [&json!(["node-a"]), &json!(["node-b"])], "{terms}");

    // With imagePlacement off, no preference.
    let (backend, fake) = on_fake(&[("BACKEND_IMAGEPLACEMENT", "false")]);
    let _leader = controlling(&backend).drop_guard();
    let (name, _) = backend
        .create_pod(&create(&url, "alice@dtu.dk"), SILO)
        .await
        .unwrap();
    let pod = fake.with(|s| s.pods[&name].clone());
    assert!(pod.spec.unwrap().affinity.is_none());
}

#[tokio::test]
async fn a_create_records_the_network_policy_it_made_so_the_start_does_not_make_it_again() {
    let (backend, fake) = on_fake(&[]);
    let _leader = controlling(&backend).drop_guard();
    let url = serve(WEB).await;
    let (name, _) = backend
        .create_pod(&create(&url, "alice@dtu.dk"), SILO)
        .await
        .unwrap();
    let uid = fake
        .with(|s| s.pods[&name].uid())
        .expect("a stored pod has a uid");
    assert!(
        backend
            .default_cluster()
            .cache
            .own_writes()
            .take_isolated(&uid)
            .await
    );
}

#[tokio::test]
async fn a_name_is_chosen_from_what_the_cache_and_this_process_made_and_a_race_moves_on() {
    let (backend, fake) = on_fake(&[]);
    let _leader = controlling(&backend).drop_guard();
    let url = serve(WEB).await;
    let candidates = names::pod_name_candidates("web", &UserId::parse("alice@dtu.dk").unwrap());
    // The first name: a pod made by this process, the watch not showing it yet. The second: a
    // Workspace made by another replica a moment ago (no cache shows it).
    let lagging = workspace(&candidates[0], "alice@dtu.dk");
    fake.with(|s| s.pods.insert(candidates[0].clone(), lagging.clone()));
    backend.default_cluster().cache.own_writes().made(&lagging);
    let elsewhere = resource::Workspace::new(
        &candidates[1],
        NAMESPACE,
        resource::WorkspaceSpec {
            owner: "alice@dtu.dk".into(),
            entry: "web".into(),
            ..Default::default()
        },
    );
    fake.with(|s| s.workspaces.insert(candidates[1].clone(), elsewhere));
    let (name, _) = backend
        .create_pod(&create(&url, "alice@dtu.dk"), SILO)
        .await
        .unwrap();
    assert_eq!(name, candidates[2]);
    let records: Vec<String> = fake
        .calls()
        .into_iter()
        .filter(|call| call.starts_with("create_workspace "))
        .collect();
    assert_eq!(
        records,
        [
            format!("create_workspace {}", candidates[1]),
            format!("create_workspace {}", candidates[2])
        ],
        "the name this process made is not tried; the one taken in a race is, and answered 409"
    );
}

#[tokio::test]
async fn a_create_past_max_creates_in_flight_is_refused_until_one_ends() {
    let (backend, fake) = on_fake(&[("BACKEND_MAXCREATESINFLIGHT", "1")]);
    let _leader = controlling(&backend).drop_guard();
    // A manifest server that takes the request and never answers: the first create stays in
    // flight, fetching.
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_url = format!("http://{}/web.yaml", stalled.local_addr().unwrap());
    let first = tokio::spawn({
        let backend = backend.clone();
        async move {
            backend
                .create_pod(&create(&stalled_url, "alice@dtu.dk"), SILO)
                .await
        }
    });
    let (_held, _) = stalled.accept().await.unwrap();
    let url = serve(WEB).await;
    let error = backend
        .create_pod(&create(&url, "bob@dtu.dk"), SILO)
        .await
        .expect_err("one create is under way, the most allowed");
    assert!(matches!(error, RequestError::TooManyCreates(1)), "{error:?}");
    assert!(
        fake.calls().is_empty(),
        "refused before any request: {:?}",
        fake.calls()
    );
    first.abort();
    let _ = first.await;
    backend
        .create_pod(&create(&url, "bob@dtu.dk"), SILO)
        .await
        .expect("the slot is free again");
}

#[tokio::test]
async fn another_users_storage_is_never_taken() {
    let (backend, fake) = on_fake(&[]);
    let alice = UserId::parse("alice@dtu.dk").unwrap();
    let taken = names::storage_name(&alice);
    let claim = serde_json::from_value(json!({
        "metadata": {"name": taken, "annotations": {keys::ANNOTATION_USER_ID: "mallory@dtu.dk"}},
    }))
    .unwrap();
    fake.put_claim(claim);
    let requester = Requester {
        user: &alice,
        groups: None,
        silo_ip: "10.0.0.11",
        restore: None,
    };
    let name = backend
        .default_cluster()
        .ensure_storage(requester, "2999-01-01T00:00:00Z", "10Gi")
        .await
        .unwrap();
    assert_eq!(name, names::storage_name_for(&alice), "alice's own name instead");
    let calls = fake.calls();
    assert!(calls.contains(&format!("create_claim {name}")), "{calls:?}");
    assert!(!calls.contains(&format!("claim_storage {taken}")), "{calls:?}");
    let owner = fake.with(|s| s.claims[&taken].annotations()[keys::ANNOTATION_USER_ID].clone());
    assert_eq!(owner, "mallory@dtu.dk");
}

#[tokio::test]
async fn two_replicas_asked_for_one_users_creates_at_once_admit_one_under_the_limit() {
    let (first, fake) = on_fake(&[("BACKEND_MAXWORKSPACESPERUSER", "1")]);
    let second = replica_of(&first, &fake);
    // The first leads: its controller makes every pod, whichever replica was asked.
    let _leader = controlling(&first).drop_guard();
    let url = serve(WEB).await;
    let request = create(&url, "alice@dtu.dk");
    let (one, other) = tokio::join!(
        first.create_pod(&request, SILO),
        second.create_pod(&request, SILO)
    );
    let (admitted, refused): (Vec<_>, Vec<_>) = [one, other].into_iter().partition(Result::is_ok);
    assert_eq!(admitted.len(), 1, "{refused:?}");
    assert!(
        matches!(&refused[..], [Err(RequestError::Refused { reason, .. })] if reason == "LimitExceeded"),
        "{refused:?}"
    );
    assert_eq!(fake.with(|s| s.pods.len()), 1);
}

/// A backend over two fake clusters, `default` and `east`, with the catalogue entries `web`
/// (anywhere) and `gpu` (on east) serving `WEB`, configured further by `env`.
async fn on_two_fakes(env: &[(&str, &str)]) -> (Backend<FakeCluster>, FakeCluster, FakeCluster) {
    on_two_fakes_placed(env, NodeImages::default()).await
}

/// As [`on_two_fakes`], the nodes of `east` holding what `east_images` says.
async fn on_two_fakes_placed(
    env: &[(&str, &str)],
    east_images: NodeImages,
) -> (Backend<FakeCluster>, FakeCluster, FakeCluster) {
    let url = serve(WEB).await;
    let catalogue = format!(
        r#"[{{"name": "web", "url": "{url}"}}, {{"name": "gpu", "url": "{url}", "cluster": "east"}}]"#
    );
    let mut env = env.to_vec();
    env.push(("BACKEND_CATALOGUE", &catalogue));
    env.push((
        "BACKEND_CLUSTERS",
        r#"[{"name": "east", "kubeconfig": "/east.yaml"}]"#,
    ));
    let (backend, default) = on_fake(&env);
    let here = backend.default_cluster();
    let (east, east_cache) = FakeCluster::beside(&here.cache);
    let member = ClusterWorkspaces::new("east".to_owned(), here.config.clone(), east.clone(), east_cache)
        .with_node_images(east_images);
    (backend.with_member(member), default, east)
}

#[tokio::test]
async fn a_launch_that_chose_no_cluster_goes_where_its_image_is() {
    // No node of the default cluster holds nginx; one of east's does.
    let east_images = NodeImages::default();
    east_images.set("east-1", &["nginx"]);
    let (backend, default, east) = on_two_fakes_placed(&[], east_images.clone()).await;
    let _leader = controlling(&backend).drop_guard();
    backend.synced().await;
    let launched = launch_web(&backend, &alice()).await;
    assert!(east.with(|s| s.pods.contains_key(&launched.name)), "made on east");
    assert!(default.with(|s| s.pods.is_empty()));
    // A choice is the user's: it stays where they say.
    let (chosen, _) = backend
        .launch(&alice(), &launch("web", Some("default")), SILO)
        .await
        .unwrap();
    assert!(default.with(|s| s.pods.contains_key(&chosen.name)));
}

pub(super) fn alice() -> crate::io::auth::Identity {
    crate::io::auth::Identity {
        username: "alice".to_owned(),
        groups: Vec::new(),
        user: UserId::parse("alice@dtu.dk").unwrap(),
        admin: false,
    }
}

pub(super) fn launch(manifest: &str, cluster: Option<&str>) -> Launch {
    Launch {
        manifest: manifest.to_owned(),
        settings: Settings::new(),
        cluster: cluster.map(str::to_owned),
        snapshot: None,
    }
}

/// `who` launches the catalogue's `web` entry (`launch("web", None)`), which must succeed.
pub(super) async fn launch_web(
    backend: &Backend<FakeCluster>,
    who: &crate::io::auth::Identity,
) -> WorkspaceInfo {
    backend.launch(who, &launch("web", None), SILO).await.unwrap().0
}

pub(super) fn created_pods(fake: &FakeCluster) -> Vec<String> {
    fake.calls()
        .into_iter()
        .filter_map(|c| c.strip_prefix("create_pod ").map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_launch_goes_to_the_entrys_cluster_else_the_users_choice_else_the_default() {
    let (backend, default, east) = on_two_fakes(&[]).await;
    let _leader = controlling(&backend).drop_guard();
    let first = launch_web(&backend, &alice()).await;
    assert_eq!(first.cluster.name, "default");
    assert_eq!(created_pods(&default), std::slice::from_ref(&first.name));
    let (chosen, _) = backend
        .launch(&alice(), &launch("web", Some("east")), SILO)
        .await
        .unwrap();
    assert_eq!(chosen.cluster.name, "east");
    assert_ne!(
        chosen.name, first.name,
        "a name held on another cluster is skipped"
    );
    let (fixed, _) = backend
        .launch(&alice(), &launch("gpu", None), SILO)
        .await
        .unwrap();
    assert_eq!(fixed.cluster.name, "east");
    assert_eq!(created_pods(&east), [chosen.name.clone(), fixed.name.clone()]);
    for (request, hint) in [
        (
            launch("web", Some("moon")),
            "there is no cluster \"moon\"; the clusters are default, east",
        ),
        (
            launch("gpu", Some("default")),
            "runs on cluster east only, not default",
        ),
    ] {
        let error = backend.launch(&alice(), &request, SILO).await.unwrap_err();
        assert!(
            matches!(error, RequestError::WrongCluster(_)) && error.to_string().contains(hint),
            "{error}"
        );
    }
    assert_eq!(
        created_pods(&default).len() + created_pods(&east).len(),
        3,
        "nothing more made"
    );
    // The list, get and delete find each workspace on its own cluster.
    let listed: Vec<(String, String)> = backend
        .workspaces(&alice(), false)
        .unwrap()
        .into_iter()
        .map(|w| (w.name, w.cluster.name))
        .collect();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(
        listed.contains(&(fixed.name.clone(), "east".to_owned())),
        "{listed:?}"
    );
    assert_eq!(
        backend
            .workspace(&alice(), &fixed.name)
            .await
            .unwrap()
            .cluster
            .name,
        "east"
    );
    backend.remove(&alice(), &fixed.name).await.unwrap();
    assert!(
        east.calls().contains(&format!("delete_pod {}", fixed.name)),
        "{:?}",
        east.calls()
    );
    assert!(!default.calls().iter().any(|c| c.starts_with("delete_pod")));
}

#[tokio::test]
async fn limits_count_the_users_workspaces_on_every_cluster() {
    let (backend, default, east) = on_two_fakes(&[("BACKEND_MAXWORKSPACESPERUSER", "1")]).await;
    let _leader = controlling(&backend).drop_guard();
    east.put_pod(workspace("web-alice", "alice@dtu.dk"));
    let error = backend
        .launch(&alice(), &launch("web", None), SILO)
        .await
        .unwrap_err();
    // The controller's refusal, read back from the Workspace it then deletes.
    assert!(
        matches!(&error, RequestError::Refused { reason, .. } if reason == "LimitExceeded"),
        "{error}"
    );
    assert!(
        default.with(|s| s.workspaces.is_empty()),
        "the launch left nothing"
    );
    // Only the user's turn was taken there (the default cluster arbitrates): no pod made.
    assert!(created_pods(&default).is_empty(), "{:?}", default.calls());
    assert!(created_pods(&east).is_empty(), "{:?}", east.calls());
}

#[tokio::test]
async fn an_unreachable_clusters_workspaces_are_unknown_and_launches_to_it_refused() {
    let (backend, _default, east) = on_two_fakes(&[]).await;
    let _leader = controlling(&backend).drop_guard();
    east.put_pod(workspace("web-alice", "alice@dtu.dk"));
    east.set_unreachable(Some("connection refused"));
    let here = launch_web(&backend, &alice()).await;
    let error = backend
        .launch(&alice(), &launch("web", Some("east")), SILO)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RequestError::Unreachable { cluster, .. } if cluster == "east"),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "cluster east can't be reached now: connection refused"
    );
    let list = backend.workspaces(&alice(), false).unwrap();
    let away = list.iter().find(|w| w.cluster.name == "east").unwrap();
    assert_eq!(away.status, Status::Unknown);
    assert!(!away.cluster.reachable);
    assert_eq!(away.cluster.error.as_deref(), Some("connection refused"));
    assert!(
        away.message.contains("cluster east can't be reached"),
        "{}",
        away.message
    );
    let home = list.iter().find(|w| w.name == here.name).unwrap();
    assert!(
        home.cluster.reachable && home.status != Status::Unknown,
        "{home:?}"
    );
    // Back: its workspace is what its cache says again.
    east.set_unreachable(None);
    let back = backend.workspace(&alice(), "web-alice").await.unwrap();
    assert!(
        back.cluster.reachable && back.status != Status::Unknown,
        "{back:?}"
    );
}

#[tokio::test]
async fn with_one_cluster_an_api_server_away_changes_nothing_the_apis_answer() {
    let url = serve(WEB).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    let (backend, fake) = on_fake(&[("BACKEND_CATALOGUE", &catalogue)]);
    let _leader = controlling(&backend).drop_guard();
    fake.put_pod(workspace("web-alice", "alice@dtu.dk"));
    fake.set_unreachable(Some("connection refused"));
    let shown = backend.workspace(&alice(), "web-alice").await.unwrap();
    assert!(
        shown.cluster.reachable && shown.status != Status::Unknown,
        "{shown:?}"
    );
    // The launch is tried (here the fake answers), not refused as a cluster away.
    let launched = launch_web(&backend, &alice()).await;
    assert_eq!(created_pods(&fake), [launched.name]);
}
