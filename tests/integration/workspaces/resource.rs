//! The `Workspace` resource on a real API server: its CRD, as `outfit manifests --workspaces`
//! prints it, installs; `spec.started` defaults to true; the schema and its CEL rules refuse what
//! the backend could not run (a name too long for the pod's objects, an owner that is not a user
//! id, a status phase it does not know) and what must not change (the owner, the entry, a cluster
//! once set); `status` is written only through its subresource; and `kubectl get workspaces`
//! shows the owner, entry, started, phase and age columns.

use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use outfit_workspaces_core::resource::{MAX_NAME, Workspace, WorkspaceSpec};
use serde_json::{Value, json};

use super::support::{namespace, workspace_crd};
use crate::control_plane::ControlPlane;

const NS: &str = "ws-resource";

fn spec(owner: &str) -> WorkspaceSpec {
    WorkspaceSpec {
        owner: owner.to_owned(),
        entry: "jupyter".to_owned(),
        ..WorkspaceSpec::default()
    }
}

/// The API server's refusal of `result`: its code and message.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected the API server to refuse, got {other:?}"),
    }
}

async fn merge(api: &Api<Workspace>, name: &str, patch: Value) -> Result<Workspace, kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// `kubectl get workspaces`: the API server's Table of them, columns and rows.
async fn table(client: &Client) -> (Vec<String>, Vec<Vec<Value>>) {
    let request = http::Request::get(format!("/apis/outfit.dev/v1alpha1/namespaces/{NS}/workspaces"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(request).await.expect("the Table of Workspaces");
    let columns = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    let rows = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].as_array().unwrap().clone())
        .collect();
    (columns, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_resource_is_checked_by_the_api_server_and_listed_with_its_columns() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    workspace_crd(&client).await;
    namespace(&client, NS).await;
    let api = Api::<Workspace>::namespaced(client.clone(), NS);
    let create = |name: &str, spec: WorkspaceSpec| {
        let api = api.clone();
        let workspace = Workspace::new(name, NS, spec);
        async move { api.create(&PostParams::default(), &workspace).await }
    };

    // A Workspace as a launch records it, without `started`: the CRD defaults it.
    let mut values = WorkspaceSpec::default().values;
    values.insert(
        "jupyter".to_owned(),
        [("GREETING".to_owned(), "hi".to_owned())].into(),
    );
    let stored = create(
        "jupyter-alice",
        WorkspaceSpec {
            values,
            ..spec("alice@dtu.dk")
        },
    )
    .await
    .expect("a valid Workspace");
    assert!(stored.spec.started);
    assert_eq!(stored.spec.values["jupyter"]["GREETING"], "hi");
    let raw: Value = serde_json::to_value(&stored).unwrap();
    assert_eq!(raw["apiVersion"], "outfit.dev/v1alpha1");

    // Names the pod's objects could not take, and owners deic-dk's rule refuses.
    let long = "a".repeat(MAX_NAME + 1);
    let (code, message) = refusal(create(&long, spec("alice")).await);
    assert_eq!(code, 422);
    assert!(message.contains("at most 55 characters"), "{message}");
    create(&"a".repeat(MAX_NAME), spec("alice"))
        .await
        .expect("55 characters");
    let (code, message) = refusal(create("a.b", spec("alice")).await);
    assert_eq!(code, 422);
    assert!(message.contains("DNS label"), "{message}");
    for owner in ["Alice", "a@b@c", "a", "-alice"] {
        let (code, message) = refusal(create("bad-owner", spec(owner)).await);
        assert_eq!(code, 422, "{owner}");
        assert!(message.contains("spec.owner"), "{owner}: {message}");
    }

    // What must not change, and what may.
    let (_, message) = refusal(merge(&api, "jupyter-alice", json!({"spec": {"owner": "mallory"}})).await);
    assert!(message.contains("spec.owner is immutable"), "{message}");
    let (_, message) = refusal(merge(&api, "jupyter-alice", json!({"spec": {"entry": "rstudio"}})).await);
    assert!(message.contains("spec.entry is immutable"), "{message}");
    let stopped = merge(
        &api,
        "jupyter-alice",
        json!({"spec": {"started": false, "cluster": "east"}}),
    )
    .await
    .expect("stop it, and set its cluster once");
    assert!(!stopped.spec.started);
    for patch in [
        json!({"spec": {"cluster": "west"}}),
        json!({"spec": {"cluster": null}}),
    ] {
        let (_, message) = refusal(merge(&api, "jupyter-alice", patch).await);
        assert!(message.contains("spec.cluster is set once"), "{message}");
    }

    // Status only through its subresource, and only phases the backend knows.
    let ignored = merge(&api, "jupyter-alice", json!({"status": {"phase": "Stopped"}}))
        .await
        .expect("a status in the main resource is dropped, not refused");
    assert_eq!(ignored.status, None);
    let status =
        json!({"status": {"phase": "Stopped", "stopped": {"at": "2026-11-29T10:00:00Z", "reason": "user"}}});
    api.patch_status("jupyter-alice", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("the status subresource");
    let (code, _) = refusal(
        api.patch_status(
            "jupyter-alice",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Sleeping"}})),
        )
        .await,
    );
    assert_eq!(code, 422);

    let (columns, rows) = table(&client).await;
    assert_eq!(columns, ["Name", "Owner", "Entry", "Started", "Phase", "Age"]);
    let row = rows.iter().find(|r| r[0] == "jupyter-alice").expect("its row");
    assert_eq!(
        row[1..5],
        [
            json!("alice@dtu.dk"),
            json!("jupyter"),
            json!(false),
            json!("Stopped")
        ]
    );
}
