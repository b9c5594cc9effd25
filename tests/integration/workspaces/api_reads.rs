//! What the backend asks of the API server per request (issue 46, point 4: 2,446 GETs of unknown
//! workspaces made 2,446 pod GETs, 2,157 `GET /api/v1/storage` made 2,157 VolumeSnapshot LISTs,
//! all in the backend's one flow with everyone's TokenReviews and creates). Counted by the API
//! server itself: each test gives the backend's ServiceAccount a FlowSchema of its own for the
//! reads it watches, and reads that FlowSchema's dispatched requests from `/metrics`.

use std::time::Duration;

use kube::Client;
use outfit_test_support::{provisioner, wait::eventually};
use serde_json::json;

use super::{snapshots::backend_with_snapshots, storage::launched_ready, support::*};
use crate::control_plane::{ControlPlane, api, create, resource};

/// A FlowSchema `name` matching `verb` on `group`'s `resources` in `ns` by the backend of `ns`
/// (the ServiceAccount `outfit-workspaces` of `<ns>-system`), ahead of the suggested ones.
async fn flow_schema(client: &Client, name: &str, ns: &str, (verb, group, resources): (&str, &str, &[&str])) {
    let schema = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "matchingPrecedence": 100,
            "priorityLevelConfiguration": {"name": "workload-low"},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                    "name": "outfit-workspaces", "namespace": format!("{ns}-system")}}],
                "resourceRules": [{"verbs": [verb], "apiGroups": [group],
                                   "resources": resources, "namespaces": [ns]}],
            }],
        },
    });
    let flow_schemas = resource("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "flowschemas");
    match create(client, None, &flow_schemas, schema).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating FlowSchema {name}: {error}"),
    }
    // In effect once the API server's flow-control configuration has taken it (it then says
    // whether its priority level exists): requests before that are another FlowSchema's.
    let flow_schemas = api(client, None, &flow_schemas);
    eventually("the FlowSchema in effect", Duration::from_secs(30), || async {
        let taken = flow_schemas.get(name).await.ok()?;
        let conditions = taken.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Dangling" && c["status"] == "False")
            .then_some(())
    })
    .await;
}

/// The requests the API server dispatched under the FlowSchema `name`, by its `/metrics`.
async fn dispatched(client: &Client, name: &str) -> u64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let metrics = client
        .request_text(request)
        .await
        .expect("the API server's metrics");
    let label = format!("flow_schema=\"{name}\"");
    metrics
        .lines()
        .filter(|line| line.starts_with("apiserver_flowcontrol_dispatched_requests_total{"))
        .filter(|line| line.contains(&label))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .map(|count| count as u64)
        .sum()
}

/// The backend of `ns` (homes per user, snapshotted), the FlowSchema that counts its reads of
/// `rule` (verb, group, resources), and ines's workspace launched ready.
struct Counted {
    client: Client,
    backend: Backend,
    schema: String,
    ines: Caller<'static>,
    name: String,
}

async fn counted(ns: &str, rule: (&str, &str, &[&str])) -> Counted {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let backend = backend_with_snapshots(
        plane,
        (&client, ns),
        "per-user",
        (provisioner::SNAPSHOT_CLASS, 2, "60s"),
    )
    .await;
    let schema = format!("outfit-test-{ns}");
    flow_schema(&client, &schema, ns, rule).await;
    let ines = Caller::Proxy("ines", "staff");
    let name = launched_ready(&backend, ines, "notebook").await;
    Counted {
        client,
        backend,
        schema,
        ines,
        name,
    }
}

/// Names no launch gives the caller are answered "not found" without a read of the API server,
/// by every call that names a workspace; names a launch of theirs could have given are asked (the
/// cache may be behind another replica's launch), one read each: the count can move, and does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_names_cost_the_api_server_nothing_unless_the_caller_could_hold_them() {
    let Counted {
        client,
        backend,
        schema,
        ines,
        name,
    } = counted("ws-reads-names", ("get", "", &["pods"])).await;
    let before = dispatched(&client, &schema).await;
    for i in 0..40 {
        let unknown = format!("/api/v1/workspaces/nobodys-{i}");
        let (status, answer) = backend.call(ines, "GET", &unknown, None).await;
        assert_eq!(
            (status, answer["reason"].as_str()),
            (404, Some("NotFound")),
            "{answer}"
        );
    }
    let (status, _) = backend
        .call(ines, "DELETE", "/api/v1/workspaces/someone-else", None)
        .await;
    assert_eq!(status, 404);
    let after_unknown = dispatched(&client, &schema).await;
    assert_eq!(
        after_unknown, before,
        "no pod read for 41 names that can't be hers"
    );
    // Hers by their shape (`<name>-N`, a launch's next names), not made: each asked once.
    for n in 1..=5 {
        let (status, _) = backend
            .call(ines, "GET", &format!("/api/v1/workspaces/{name}-{n}"), None)
            .await;
        assert_eq!(status, 404);
    }
    eventually("the reads counted", Duration::from_secs(20), || async {
        let asked = dispatched(&client, &schema).await - after_unknown;
        (asked >= 5).then_some(())
    })
    .await;
    backend.assert_running();
}

/// `GET /api/v1/storage` lists snapshots from the backend's watch: 30 lists make no LIST of the
/// API server (each made one before); a removal answered 202 is shown by the next list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_lists_cost_the_api_server_no_list_and_show_a_removals_snapshot() {
    let rule = ("list", "snapshot.storage.k8s.io", &["volumesnapshots"][..]);
    let Counted {
        client,
        backend,
        schema,
        ines,
        name,
    } = counted("ws-reads-storage", rule).await;
    let (status, _) = backend
        .call(ines, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 202);
    let removed = eventually("the home removed", Duration::from_secs(90), || async {
        let (status, answer) = backend.call(ines, "DELETE", "/api/v1/storage", None).await;
        (status == 202).then_some(answer)
    })
    .await;
    assert!(!removed["deleting"].as_array().unwrap().is_empty(), "{removed}");
    // The snapshot the removal kept, ready, in the very next list.
    let (status, storage) = backend.call(ines, "GET", "/api/v1/storage", None).await;
    assert_eq!(status, 200);
    let snapshots = storage["snapshots"].as_array().unwrap();
    assert!(
        snapshots
            .iter()
            .any(|s| s["reason"] == "removal" && s["ready"] == true),
        "{storage}"
    );
    let before = dispatched(&client, &schema).await;
    for _ in 0..30 {
        let (status, again) = backend.call(ines, "GET", "/api/v1/storage", None).await;
        assert_eq!(status, 200);
        assert_eq!(again["snapshots"], storage["snapshots"]);
    }
    assert_eq!(
        dispatched(&client, &schema).await,
        before,
        "30 storage lists, no VolumeSnapshot LIST"
    );
    backend.assert_running();
}
