//! What keeps workspaces in bounds: isolation by default (pod defaults and a NetworkPolicy the
//! pod owns), per-user limits, and culling at the end of a lifetime or an idle spell.

use std::time::{Duration, Instant};

use k8s_openapi::api::{
    core::v1::{Event, Pod},
    networking::v1::NetworkPolicy,
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{Api, api::ListParams};
use serde_json::json;

use super::{native::WEB_FIELDS, support::*};
use crate::control_plane::ControlPlane;

/// A manifest that asks for 2 CPUs.
const BIG: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: main, image: x, resources: {requests: {cpu: "2"}}}]
"#;

/// A manifest that wants its service account token, and says so.
const WITH_TOKEN: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: robot}
spec:
  automountServiceAccountToken: true
  containers: [{name: main, image: x}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_are_isolated_and_limited_per_user() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-guards";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let extra = format!(
        "catalogue:\n\
         - {{name: web, url: '{}'}}\n\
         - {{name: big, url: '{}'}}\n\
         - {{name: robot, url: '{}'}}\n\
         maxWorkspacesPerUser: 2\nmaxCpuPerUser: '1'\nallowedEgressCidrs: [192.168.10.0/24]\n",
        manifests.put("web.yaml", WEB_FIELDS),
        manifests.put("big.yaml", BIG),
        manifests.put("robot.yaml", WITH_TOKEN),
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice = Caller::Token("outfit-alice-token");
    let bob = Caller::Token("outfit-bob-token");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns);

    let (status, first) = backend.launch(alice, "web").await;
    assert_eq!(status, 201, "{first}");
    let first = first["name"].as_str().unwrap().to_owned();
    // Pod defaults: no Service env vars, no API token, unless the manifest says otherwise.
    let pod = pods.get(&first).await.unwrap();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.enable_service_links, Some(false));
    assert_eq!(spec.automount_service_account_token, Some(false));
    let (_, robot) = backend.launch(bob, "robot").await;
    let robot = pods.get(robot["name"].as_str().unwrap()).await.unwrap();
    assert_eq!(robot.spec.unwrap().automount_service_account_token, Some(true));

    // The NetworkPolicy: this pod only, owned by it, egress denied to the cluster's ranges and
    // the metadata address, with the configured and silo holes.
    let policy = policies
        .get(&format!("{first}-isolation"))
        .await
        .expect("the pod's NetworkPolicy");
    let owner = &policy.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(owner.uid.as_str())),
        ("Pod", pod.metadata.uid.as_deref())
    );
    let policy = serde_json::to_value(&policy.spec).unwrap();
    let selected = policy["podSelector"]["matchLabels"].as_object().unwrap();
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert!(
        selected
            .iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str()),
        "{policy}"
    );
    assert_eq!(policy["policyTypes"], json!(["Ingress", "Egress"]));
    let text = policy["egress"].to_string();
    for range in [
        "169.254.0.0/16",
        "10.0.0.0/8",
        &plane.env("POD_CIDR"),
        "192.168.10.0/24",
        "10.0.0.20/32",
    ] {
        assert!(text.contains(range), "{range} missing from {text}");
    }
    assert!(
        policy["ingress"].to_string().contains("ingress-nginx"),
        "{policy}"
    );

    // Limits: CPU first (500m used, 2 more would pass 1), then the number of workspaces.
    let (status, refused) = backend.launch(alice, "big").await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (403, Some("LimitExceeded")),
        "{refused}"
    );
    let message = refused["error"].as_str().unwrap();
    assert!(message.starts_with("maxCpuPerUser is 1: "), "{message}");
    assert!(
        message.contains("500m") && message.contains("2500m in all"),
        "{message}"
    );
    let (status, second) = backend.launch(alice, "web").await;
    assert_eq!(status, 201, "500m + 500m fits under 1 CPU: {second}");
    let (status, refused) = backend.launch(alice, "web").await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("maxWorkspacesPerUser is 2"),
        "{refused}"
    );
    // deic-dk's API is held to the same limits.
    let (status, refused) = backend
        .post(
            "/create_pod",
            json!({"yaml_url": manifests.put("web2.yaml", WEB_FIELDS), "user_id": "alice"}),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("maxWorkspacesPerUser"),
        "{refused}"
    );
    // Another user is not held by alice's use.
    let (status, _) = backend.launch(bob, "web").await;
    assert_eq!(status, 201);

    // A deleted workspace frees its share, and its NetworkPolicy goes with it.
    let (status, _) = backend
        .call(alice, "DELETE", &format!("/api/v1/workspaces/{first}"), None)
        .await;
    assert_eq!(status, 202);
    let gone = format!("{first}-isolation");
    eventually(
        "the NetworkPolicy's removal with its pod",
        Duration::from_secs(60),
        || async { policies.get_opt(&gone).await.unwrap().is_none() },
    )
    .await;
    eventually("room for one more workspace", Duration::from_secs(30), || async {
        backend.launch(alice, "web").await.0 == 201
    })
    .await;
}

/// When the backend culled `pod`: the time of its Culled Event.
async fn culled_at(client: &kube::Client, ns: &str, pod: &str) -> Timestamp {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Culled"))
        .find_map(|e| e.event_time.map(|t| t.0).or(e.first_timestamp.map(|t| t.0)))
        .unwrap_or_else(|| panic!("no timed Culled Event about {pod}"))
}

/// The backend's Events about `pod` with `reason`.
async fn events(client: &kube::Client, ns: &str, pod: &str, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_are_culled_at_the_end_of_their_lifetime_or_idleness() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-culling";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let status_url = format!("http://127.0.0.1:{}/manifests/status", manifests.port);
    let short = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: short\n  annotations: {outfit.dev/max-lifetime: 3s, outfit.dev/idle-timeout: never}\nspec: {containers: [{name: main, image: x}]}\n";
    let idle =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: idle}\nspec: {containers: [{name: main, image: x}]}\n";
    let jupyter = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lab\n  annotations: {{outfit.dev/activity-url: '{status_url}'}}\nspec: {{containers: [{{name: main, image: x}}]}}\n"
    );
    let admin_port = free_port();
    let extra = format!(
        "catalogue:\n- {{name: short, url: '{}'}}\n- {{name: idle, url: '{}'}}\n- {{name: lab, url: '{}'}}\n\
         idleTimeout: 6s\nactivityCheckInterval: 1s\nadminListen: 127.0.0.1:{admin_port}\n",
        manifests.put("short.yaml", short),
        manifests.put("idle.yaml", idle),
        manifests.put("lab.yaml", &jupyter),
    );
    let jupyter_status = |at: Timestamp| json!({"last_activity": at.to_string(), "kernels": 1}).to_string();
    manifests.put("status", &jupyter_status(Timestamp::now()));
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice = Caller::Token("outfit-alice-token");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut names = Vec::new();
    let mut started = Vec::new();
    for manifest in ["short", "idle", "lab"] {
        let (status, created) = backend.launch(alice, manifest).await;
        assert_eq!(status, 201, "{created}");
        let name = created["name"].as_str().unwrap().to_owned();
        let events = backend.follow(alice, &name).await;
        let (last, report) = events.last().unwrap();
        assert_eq!(last, "ready", "{events:?}");
        // The start its lifetime counts from: when the last step (Services, Ingress, tokens) was
        // done, which is the backend's `started` mark.
        let services = report["steps"]
            .as_array()
            .and_then(|steps| steps.iter().find(|step| step["name"] == "services"))
            .unwrap_or_else(|| panic!("no services step: {report}"));
        started.push(
            services["at"]
                .as_str()
                .and_then(|at| at.parse::<Timestamp>().ok())
                .unwrap_or_else(|| panic!("no start time: {report}")),
        );
        names.push(name);
    }
    let [short, idle, lab] = [&names[0], &names[1], &names[2]];
    let short_started = started[0];

    // For 9 s (longer than the 6 s idle timeout) the user pings `idle`, and `lab`'s own status
    // endpoint says it is busy: both stay. `short` reaches its 3 s lifetime meanwhile.
    let busy_until = Instant::now() + Duration::from_secs(9);
    let (mut last_ping, mut last_status) = (Timestamp::now(), Timestamp::now());
    // The longest time between two pings, said if a workspace is culled while pinged: a test
    // stalled past the idle timeout is not the backend's fault.
    let (mut longest_gap, mut pinged) = (Duration::ZERO, Instant::now());
    while Instant::now() < busy_until {
        longest_gap = longest_gap.max(pinged.elapsed());
        (last_ping, pinged) = (Timestamp::now(), Instant::now());
        let (status, _) = backend
            .call(
                alice,
                "POST",
                &format!("/api/v1/workspaces/{idle}/activity"),
                None,
            )
            .await;
        assert_eq!(status, 204);
        last_status = Timestamp::now();
        manifests.put("status", &jupyter_status(last_status));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for name in [idle, lab] {
        let pod = pods.get_opt(name).await.unwrap();
        assert!(
            pod.as_ref()
                .is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
            "{name} was culled while active (the longest gap between pings: {longest_gap:?})"
        );
    }
    let recorded = pods.get(lab).await.unwrap().metadata.annotations.unwrap();
    assert!(
        recorded.contains_key("outfit.dev/last-activity"),
        "lab's activity not recorded: {recorded:?}"
    );
    eventually("short's removal", Duration::from_secs(30), || async {
        pods.get_opt(short).await.unwrap().is_none()
    })
    .await;
    let why = events(&client, ns, short, "Culled").await;
    assert!(
        why.iter().any(|m| m.contains("maximum lifetime of 3s")),
        "{why:?}"
    );
    // At the end of its lifetime: not before 3 s from its start, and not long after (the bound
    // leaves room for a loaded machine; without culling it would never come).
    let lifetime = culled_at(&client, ns, short).await.duration_since(short_started);
    assert!(
        lifetime >= SignedDuration::from_secs(3) && lifetime <= SignedDuration::from_secs(18),
        "short was culled {lifetime:?} after its start; its lifetime is 3s"
    );

    // Then quiet: both are culled as idle, each with an Event that says since when.
    for name in [idle, lab] {
        eventually("an idle workspace's removal", Duration::from_secs(30), || async {
            pods.get_opt(name).await.unwrap().is_none()
        })
        .await;
        let why = events(&client, ns, name, "Culled").await;
        assert!(why.iter().any(|m| m.contains("idle since")), "{name}: {why:?}");
    }
    // At the end of the 6 s idle timeout, counted from the last activity the backend recorded:
    // for `lab`, the last status its endpoint gave; for `idle`, the last ping, which the backend
    // records at most every idleTimeout / 3 = 2 s, so up to 2 s early. Not long after either.
    let after_status = culled_at(&client, ns, lab).await.duration_since(last_status);
    assert!(
        after_status >= SignedDuration::from_secs(6) && after_status <= SignedDuration::from_secs(21),
        "lab was culled {after_status:?} after its last activity; the idle timeout is 6s"
    );
    let after_ping = culled_at(&client, ns, idle).await.duration_since(last_ping);
    assert!(
        after_ping >= SignedDuration::from_secs(4) && after_ping <= SignedDuration::from_secs(21),
        "idle was culled {after_ping:?} after its last ping; the idle timeout is 6s"
    );
    let text = http(admin_port, "GET", "/metrics", "").await.1;
    assert!(
        text.contains("outfit_workspaces_culled_total{reason=\"lifetime\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("outfit_workspaces_culled_total{reason=\"idle\"} 2"),
        "{text}"
    );

    // Issue 31: culled is stopped (cullAction's default), not gone: each is listed stopped with
    // why, its Workspace says the same, and a start brings it back under its name.
    // The backend's cache may show a pod's end a moment after the API server does ("stopping").
    for (name, reason) in [(short, "lifetime"), (idle, "idle"), (lab, "idle")] {
        let shown = eventually("listed as stopped", Duration::from_secs(10), || async {
            let (_, list) = backend.call(alice, "GET", "/api/v1/workspaces", None).await;
            let shown = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["name"] == name.as_str())
                .unwrap_or_else(|| panic!("{name} is not listed: {list}"))
                .clone();
            (shown["status"] != "stopping").then_some(shown)
        })
        .await;
        assert_eq!(
            (shown["status"].as_str(), shown["stopped"]["reason"].as_str()),
            (Some("stopped"), Some(reason)),
            "{shown}"
        );
    }
    let records: Api<outfit_workspaces_core::resource::Workspace> = Api::namespaced(client.clone(), ns);
    let record = records.get(idle).await.unwrap();
    assert!(!record.spec.started);
    assert_eq!(
        record.metadata.annotations.unwrap()["outfit.dev/stop-reason"],
        "idle"
    );
    let (status, answer) = backend
        .call(alice, "POST", &format!("/api/v1/workspaces/{idle}/start"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    backend.follow_to_ready(alice, idle).await;
}

/// The API server's refusal of what a workspace asks for reaches the caller with its status: a
/// ResourceQuota the launch would pass is 403 `RefusedByCluster`, naming the step and the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_past_a_resource_quota_is_refused_with_the_quota_s_message() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-quota";
    namespace(&client, ns).await;
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(client.clone(), ns);
    let quota = serde_json::from_value(json!({
        "metadata": {"name": "no-more-cpu"},
        "spec": {"hard": {"requests.cpu": "1"}}
    }))
    .unwrap();
    match quotas.create(&Default::default(), &quota).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the quota: {error}"),
    }
    let manifests = Manifests::start().await;
    let extra = format!(
        "storageStrategy: ephemeral\ncatalogue: [{{name: big, url: '{}'}}]\n",
        manifests.put("big.yaml", BIG)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice = Caller::Token("outfit-alice-token");
    // The quota admits pods once the quota controller has written its status.
    outfit_test_support::wait::eventually("the quota's status", Duration::from_secs(30), || async {
        let quota = quotas.get("no-more-cpu").await.unwrap();
        quota.status.and_then(|s| s.hard).map(drop)
    })
    .await;
    let (status, refused) = backend.launch(alice, "big").await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["reason"], "RefusedByCluster", "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("creating Pod") && message.contains("exceeded quota: no-more-cpu"),
        "{message}"
    );
    backend.assert_running();
}
