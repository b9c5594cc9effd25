//! Issue 31: workspaces that keep their state. A native launch records a `Workspace` that owns
//! its pod; a stop deletes the pod and keeps the record, its name and the user's storage; a start
//! makes the pod again under the same name and URL; `kubectl patch` of `spec.started` does the
//! same through the leader's controller; a restarted backend keeps a stopped workspace stopped;
//! another user is told it does not exist; a delete takes the record and the pod. The backend
//! runs with exactly the permissions `outfit manifests --workspaces` gives.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};
use outfit_workspaces_core::resource::{Phase, StopReason, Workspace, WorkspaceSpec};
use serde_json::{Value, json};

use super::support::*;
use crate::control_plane::ControlPlane;

const NS: &str = "ws-stop-start";

/// Waits (up to a minute) until the Workspace `name` satisfies `check`; returns it.
pub(super) async fn workspace_until(
    api: &Api<Workspace>,
    name: &str,
    what: &str,
    check: impl Fn(&Workspace) -> bool,
) -> Workspace {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let current = api.get_opt(name).await.expect("reading the Workspace");
        if let Some(workspace) = current.as_ref().filter(|w| check(w)) {
            return workspace.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within a minute; last {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(super) fn phase(workspace: &Workspace) -> Option<Phase> {
    workspace.status.as_ref().and_then(|s| s.phase)
}

/// Waits (up to a minute) until the pod `name` is gone (`false`) or there and not going.
pub(super) async fn pod_until(pods: &Api<Pod>, name: &str, there: bool) -> Option<Pod> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pod = pods.get_opt(name).await.expect("reading the pod");
        let live = pod
            .as_ref()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none());
        if live == there && (there || pod.is_none()) {
            return pod;
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} there={there}: not within a minute"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The one workspace `caller` lists, by name.
async fn listed(backend: &Backend, caller: Caller<'_>, name: &str) -> Value {
    let (status, list) = backend.call(caller, "GET", "/api/v1/workspaces", None).await;
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not listed: {list}"))
}

async fn claims(client: &Client) -> usize {
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

// About 60 s (66 s in CI, four tests at a time): a launch, a stop and a start each waited to ready
// or gone on the cluster, a backend restart, and the 12 s and 5 s waits that prove nothing moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_stops_and_starts_with_its_name_url_and_storage() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    namespace(&client, NS).await;
    let manifests = Manifests::start().await;
    let notebook = manifests.put("notebook.yaml", &JUPYTER.replace("TOKEN_KEY", "none"));
    // Users of their own, from the trusted proxy: a user's storage volume is cluster-wide, and
    // other tests on this API server launch notebooks as alice.
    let extra =
        format!("catalogue: [{{name: notebook, url: '{notebook}'}}]\ntrustedProxyCidrs: [127.0.0.1/32]\n");
    let kubeconfig = least_privilege(plane, &client, "ws-stop-start-system", NS).await;
    let mut backend = Backend::start_as(plane, NS, &manifests, &extra, kubeconfig).await;
    let erin = Caller::Proxy("erin", "staff");
    let frank = Caller::Proxy("frank", "staff");
    let records: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // A launch records a Workspace that owns the pod.
    let (status, launched) = backend.launch(erin, "notebook").await;
    assert_eq!(status, 201, "{launched}");
    let name = launched["name"].as_str().unwrap().to_owned();
    backend.follow_to_ready(erin, &name).await;
    let url = listed(&backend, erin, &name).await["url"].clone();
    assert!(url.as_str().is_some_and(|u| u.starts_with("https://")), "{url}");
    let record = workspace_until(&records, &name, "Running", |w| phase(w) == Some(Phase::Running)).await;
    assert_eq!(
        (record.spec.owner.as_str(), record.spec.entry.as_str()),
        ("erin", "notebook")
    );
    assert_eq!(
        record.status.as_ref().unwrap().url.as_ref(),
        url.as_str().map(str::to_owned).as_ref()
    );
    let pod = pods.get(&name).await.unwrap();
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Workspace", record.metadata.uid.as_deref().unwrap())
    );
    assert_eq!(claims(&client).await, 1, "the user's storage");

    // Another user can neither stop nor start it: it does not exist for them.
    for verb in ["stop", "start"] {
        let (status, error) = backend
            .call(frank, "POST", &format!("/api/v1/workspaces/{name}/{verb}"), None)
            .await;
        assert_eq!(
            (status, error["reason"].as_str()),
            (404, Some("NotFound")),
            "{verb}: {error}"
        );
    }

    // Stop: 202, the pod goes, the record stays, listed as stopped by its owner.
    let (status, answer) = backend
        .call(erin, "POST", &format!("/api/v1/workspaces/{name}/stop"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    pod_until(&pods, &name, false).await;
    let record = workspace_until(&records, &name, "Stopped", |w| phase(w) == Some(Phase::Stopped)).await;
    assert!(!record.spec.started);
    assert_eq!(
        record.status.unwrap().stopped.map(|s| s.reason),
        Some(StopReason::User)
    );
    let shown = listed(&backend, erin, &name).await;
    assert_eq!(
        (shown["status"].as_str(), shown["stopped"]["reason"].as_str()),
        (Some("stopped"), Some("user")),
        "{shown}"
    );

    // The storage stays while the record does: the sweep runs every 5 s with no grace here.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        claims(&client).await,
        1,
        "the claim outlives the pod of a stopped workspace"
    );

    // A restarted backend keeps it stopped.
    backend.restart().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        pods.get_opt(&name).await.unwrap().is_none(),
        "still stopped after a restart"
    );
    assert_eq!(listed(&backend, erin, &name).await["status"], "stopped");

    // Start, following its progress to ready: same name, same URL.
    let (status, text) = http_with(
        backend.port,
        "POST",
        &format!("/api/v1/workspaces/{name}/start?follow=true"),
        &[("x-forwarded-user", "erin"), ("x-forwarded-groups", "staff")],
        "",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let events = parse_events(&text);
    assert_eq!(
        events.last().map(|(n, _)| n.as_str()),
        Some("ready"),
        "{events:?}"
    );
    let shown = listed(&backend, erin, &name).await;
    assert_eq!(
        (shown["status"].as_str(), &shown["url"]),
        (Some("ready"), &url),
        "{shown}"
    );
    workspace_until(&records, &name, "Running again", |w| {
        phase(w) == Some(Phase::Running)
    })
    .await;

    // kubectl patch: stopped by the controller, then started again.
    let patch = |started: bool| json!({"spec": {"started": started}});
    records
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch(false)))
        .await
        .unwrap();
    pod_until(&pods, &name, false).await;
    workspace_until(&records, &name, "Stopped by kubectl", |w| {
        phase(w) == Some(Phase::Stopped)
    })
    .await;
    records
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch(true)))
        .await
        .unwrap();
    pod_until(&pods, &name, true).await;
    backend.follow_to_ready(erin, &name).await;

    // A Workspace an admin writes with kubectl is launched as the owner's launch would be; one
    // whose entry the catalogue lacks gets a condition saying why, and no pod.
    let written = |name: &str, entry: &str| {
        let mut record = Workspace::new(
            name,
            NS,
            WorkspaceSpec {
                owner: "erin".to_owned(),
                entry: entry.to_owned(),
                ..WorkspaceSpec::default()
            },
        );
        record.metadata.labels = None;
        record
    };
    let params = kube::api::PostParams::default();
    records
        .create(&params, &written("by-admin-erin", "notebook"))
        .await
        .unwrap();
    pod_until(&pods, "by-admin-erin", true).await;
    backend.follow_to_ready(erin, "by-admin-erin").await;
    let made = pods.get("by-admin-erin").await.unwrap();
    let env: Vec<String> = made.spec.unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert!(
        env.contains(&"SD_UID".to_owned()),
        "made as erin's launch: {env:?}"
    );
    records
        .create(&params, &written("unknown-erin", "no-such-entry"))
        .await
        .unwrap();
    let refused = workspace_until(&records, "unknown-erin", "refused", |w| {
        phase(w) == Some(Phase::Failed)
    })
    .await;
    let condition = &refused.status.unwrap().conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        ("Ready", "False", "UnknownEntry")
    );
    assert!(condition.message.contains("no-such-entry"), "{condition:?}");
    assert!(pods.get_opt("unknown-erin").await.unwrap().is_none());
    for made_by_admin in ["by-admin-erin", "unknown-erin"] {
        let (status, answer) = backend
            .call(
                erin,
                "DELETE",
                &format!("/api/v1/workspaces/{made_by_admin}"),
                None,
            )
            .await;
        assert_eq!(status, 202, "{answer}");
    }

    // Delete: the record and the pod go.
    let (status, answer) = backend
        .call(erin, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    pod_until(&pods, &name, false).await;
    assert!(records.get_opt(&name).await.unwrap().is_none());
    // The backend's cache may show the pod's and the record's end a moment after the API server.
    eventually(
        "the workspace gone from the API",
        Duration::from_secs(10),
        || async {
            let path = format!("/api/v1/workspaces/{name}");
            backend.call(erin, "GET", &path, None).await.0 == 404
        },
    )
    .await;
}

/// `stoppedRetention`: a workspace stopped longer is deleted by the leader, with an Event on its
/// Workspace that says since when and why it was stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_stopped_past_the_retention_is_deleted_with_an_event() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-retention";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", super::native::WEB_FIELDS);
    let extra = format!(
        "catalogue: [{{name: web, url: '{url}'}}]\ntrustedProxyCidrs: [127.0.0.1/32]\nstoppedRetention: 3s\n"
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let gina = Caller::Proxy("gina", "staff");
    let (status, launched) = backend.launch(gina, "web").await;
    assert_eq!(status, 201, "{launched}");
    let name = launched["name"].as_str().unwrap().to_owned();
    backend.follow_to_ready(gina, &name).await;
    // From before the request: the stop's time is taken when it is asked for.
    let stopped = Instant::now();
    let (status, answer) = backend
        .call(gina, "POST", &format!("/api/v1/workspaces/{name}/stop"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    let records: Api<Workspace> = Api::namespaced(client.clone(), ns);
    eventually("the record deleted", Duration::from_secs(60), || async {
        records.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(
        stopped.elapsed() >= Duration::from_secs(3),
        "deleted {:?} after the stop; the retention is 3s",
        stopped.elapsed()
    );
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let about = ListParams::default().fields(&format!(
        "involvedObject.name={name},involvedObject.kind=Workspace"
    ));
    let notes: Vec<String> = events
        .list(&about)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("StoppedRetention"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("stopped since") && n.contains("(user)")),
        "{notes:?}"
    );
    let (status, _) = backend
        .call(gina, "GET", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 404);
}
