//! The native API under `/api/v1/`: callers authenticated by the real API server (TokenReview of
//! the control plane's static tokens and of a service account's token) or by a trusted proxy's
//! headers, each acting on their own workspaces only; live progress as Server-Sent Events; the
//! spawn metrics.

use std::time::{Duration, Instant};

use outfit_test_support::{
    http::{Call, loopback},
    openapi::conforms,
};
use serde_json::{Value, json};

use super::support::*;
use crate::control_plane::ControlPlane;

/// A manifest with an env field, small requests, and an Ingress.
pub(super) const WEB_FIELDS: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "80"}
spec:
  containers:
  - name: web
    image: nginx
    ports: [{containerPort: 80}]
    env: [{name: GREETING, value: hello}]
    resources: {requests: {cpu: 500m, memory: 256Mi}}
"#;

/// The catalogue config of a backend serving `web` (everyone) and `gpu` (gpu-users only).
pub(super) fn catalogue(web_url: &str) -> String {
    format!(
        "catalogue:\n\
         - {{name: web, url: '{web_url}', title: Web server, description: An nginx to try things}}\n\
         - {{name: gpu, url: '{web_url}', groups: [gpu-users]}}\n"
    )
}

pub(super) async fn metrics(port: u16) -> String {
    http(port, "GET", "/metrics", "").await.1
}

/// The value of the first metric line starting with `prefix`.
pub(super) fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_api_serves_each_caller_their_own_workspaces() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-native";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB_FIELDS);
    let admin_port = free_port();
    let extra = format!(
        "{}trustedProxyCidrs: [127.0.0.1/32]\nadminGroups: [ops]\nadminListen: 127.0.0.1:{admin_port}\n",
        catalogue(&url)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);
    let bob = Caller::Token("outfit-bob-token");
    let carol = Caller::Proxy("carol@example.com", "ops, staff");

    // Who is who: the API server's TokenReview, or the trusted proxy.
    let (status, me) = backend.call(alice, "GET", "/api/v1/me", None).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["user"], "alice");
    assert!(
        me["groups"].as_array().unwrap().contains(&json!("team-a")),
        "{me}"
    );
    assert_eq!(me["admin"], false);
    let (_, me) = backend.call(carol, "GET", "/api/v1/me", None).await;
    assert_eq!(
        (me["user"].as_str(), me["admin"].as_bool()),
        (Some("carol@example.com"), Some(true))
    );
    // Issue 33: Kubernetes user names are case-sensitive and owner ids are not, so a user who
    // differs from carol only in case is refused rather than given her workspaces.
    let (status, error) = backend
        .call(
            Caller::Proxy("Carol@example.com", "ops"),
            "GET",
            "/api/v1/me",
            None,
        )
        .await;
    assert_eq!(
        (status, error["reason"].as_str()),
        (403, Some("Forbidden")),
        "{error}"
    );
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("it has upper-case letters"),
        "{error}"
    );
    for (caller, code, reason) in [
        (Caller::Anonymous, 401, "Unauthenticated"),
        (Caller::Token("no-such-token"), 401, "Unauthenticated"),
    ] {
        let (status, error) = backend.call(caller, "GET", "/api/v1/workspaces", None).await;
        assert_eq!(
            (status, error["reason"].as_str()),
            (code, Some(reason)),
            "{error}"
        );
        assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()), "{error}");
    }
    // A service account's token works too, and owns as name@namespace.serviceaccount.
    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(client.clone(), ns);
    let account = serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts.create(&Default::default(), &account).await.unwrap();
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let token: Value = accounts
        .create_subresource("token", "robot", &Default::default(), &request)
        .await
        .unwrap();
    let robot_token = token["status"]["token"].as_str().unwrap().to_owned();
    let (_, me) = backend
        .call(Caller::Token(&robot_token), "GET", "/api/v1/me", None)
        .await;
    assert_eq!(me["user"], "robot@ws-native.serviceaccount", "{me}");

    // The description needs no credentials; unknown paths and methods are named.
    let (status, spec) = backend
        .call(Caller::Anonymous, "GET", "/api/v1/openapi.json", None)
        .await;
    assert_eq!((status, spec["info"]["version"].as_str()), (200, Some("v1")));
    let (status, error) = backend.call(alice, "PUT", "/api/v1/workspaces", None).await;
    assert_eq!(
        (status, error["reason"].as_str()),
        (405, Some("MethodNotAllowed")),
        "{error}"
    );

    // The catalogue: only what the caller may launch, with the fields each asks for.
    let (_, catalogue) = backend.call(alice, "GET", "/api/v1/catalogue", None).await;
    assert_eq!(
        catalogue["items"],
        json!([{"name": "web", "title": "Web server", "description": "An nginx to try things",
                "fields": [{"container": "web", "name": "GREETING", "default": "hello"}], "error": null}])
    );
    let (status, error) = backend
        .call(
            alice,
            "POST",
            "/api/v1/workspaces",
            Some(json!({"manifest": "gpu"})),
        )
        .await;
    assert_eq!(
        (status, error["reason"].as_str()),
        (403, Some("Forbidden")),
        "{error}"
    );
    assert!(error["error"].as_str().unwrap().contains("gpu-users"), "{error}");
    let (status, error) = backend
        .call(
            alice,
            "POST",
            "/api/v1/workspaces",
            Some(json!({"manifest": "nope"})),
        )
        .await;
    assert_eq!(
        (status, error["reason"].as_str()),
        (404, Some("UnknownManifest")),
        "{error}"
    );
    let (status, error) = backend
        .call(
            alice,
            "POST",
            "/api/v1/workspaces",
            Some(json!({"manifest": "web", "extra": 1})),
        )
        .await;
    assert_eq!(status, 400, "{error}");
    assert!(error["error"].as_str().unwrap().contains("extra"), "{error}");

    // Alice launches; the answer comes once the pod exists, the stream follows it to ready.
    let launch = json!({"manifest": "web", "settings": {"web": {"GREETING": "hi"}}});
    let (status, created) = backend
        .call(alice, "POST", "/api/v1/workspaces", Some(launch))
        .await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    // kwok turns a pod Ready within milliseconds: on a busy machine it may already be when the
    // answer is written (seen once in a full run on 2 loaded cores).
    assert!(
        matches!(created["status"].as_str(), Some("creating" | "ready")),
        "{created}"
    );
    assert_eq!(created["user"], "alice");
    assert_eq!(created["manifest"], "web");
    let events = backend.follow(alice, &name).await;
    let (last, report) = events.last().expect("events");
    assert_eq!(last, "ready", "{events:?}");
    assert_eq!(report["percent"], 100);
    assert!(
        events[..events.len() - 1].iter().all(|(n, _)| n == "progress"),
        "{events:?}"
    );
    // The steps carry what the cluster said: the node from the scheduler, times.
    let scheduling = &report["steps"][1];
    assert_eq!(scheduling["name"], "scheduling");
    assert!(
        scheduling["message"].as_str().unwrap().starts_with("on "),
        "{scheduling}"
    );
    assert!(scheduling["at"].is_string(), "{scheduling}");
    // Every event before the last is the start still going; there may be none when the pod
    // was ready before the stream opened (kwok is that fast on a loaded machine: seen once).
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|(_, r)| r["status"] == "creating"),
        "{events:?}"
    );
    let (_, workspace) = backend
        .call(alice, "GET", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(workspace["status"], "ready", "{workspace}");
    assert_eq!(workspace["url"], format!("https://{name}.pods.test"));

    // Bob sees none of it; the admin sees everyone's; bob may not ask for everyone's.
    let (_, list) = backend.call(alice, "GET", "/api/v1/workspaces", None).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    let (_, list) = backend.call(bob, "GET", "/api/v1/workspaces", None).await;
    assert_eq!(list["items"], json!([]));
    for (method, path) in [
        ("GET", format!("/api/v1/workspaces/{name}")),
        ("DELETE", format!("/api/v1/workspaces/{name}")),
        ("GET", format!("/api/v1/workspaces/{name}/progress")),
        ("POST", format!("/api/v1/workspaces/{name}/activity")),
    ] {
        let (status, error) = backend.call(bob, method, &path, None).await;
        assert_eq!(
            (status, error["reason"].as_str()),
            (404, Some("NotFound")),
            "{method} {path}: {error}"
        );
    }
    let (status, error) = backend
        .call(bob, "GET", "/api/v1/workspaces?all=true", None)
        .await;
    assert_eq!(status, 403, "{error}");
    let (_, all) = backend
        .call(carol, "GET", "/api/v1/workspaces?all=true", None)
        .await;
    assert_eq!(all["items"][0]["name"], name.as_str(), "{all}");
    let (status, _) = backend
        .call(
            alice,
            "POST",
            &format!("/api/v1/workspaces/{name}/activity"),
            None,
        )
        .await;
    assert_eq!(status, 204);

    // The spawn is measured by manifest and outcome; the API by endpoint.
    let text = metrics(admin_port).await;
    assert_eq!(
        metric(
            &text,
            "outfit_workspaces_spawn_duration_seconds_count{manifest=\"web\",outcome=\"ready\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(text.contains("endpoint=\"v1_launch\",code=\"201\""), "{text}");
    // The lifecycle counts the running workspaces in its look at every pod, once a second.
    eventually("the running gauge at 1", Duration::from_secs(5), || async {
        metric(&metrics(admin_port).await, "outfit_workspaces_running ") == Some(1.0)
    })
    .await;

    // The admin deletes it, following the delete in the same request until the pod is gone.
    let path = format!("/api/v1/workspaces/{name}?follow=true");
    let admin = [
        ("x-forwarded-user", "carol@example.com"),
        ("x-forwarded-groups", "ops"),
    ];
    let (status, text) = http_with(backend.port, "DELETE", &path, &admin, "").await;
    assert_eq!(status, 200, "{text}");
    let events = parse_events(&text);
    let (last, report) = events.last().expect("events");
    assert_eq!(last, "deleted", "{events:?}");
    assert_eq!(report["steps"][1]["name"], "gone", "{events:?}");
    let (status, _) = backend
        .call(alice, "GET", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_streams_its_step_reason_and_last_warning() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-native-fail";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("stuck.yaml", UNSCHEDULABLE);
    let admin_port = free_port();
    let extra = format!(
        "catalogue: [{{name: stuck, url: '{url}'}}]\ntimeoutCreate: 6s\nadminListen: 127.0.0.1:{admin_port}\n"
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice = Caller::Proxy("alice", "");
    // Loopback is no trusted proxy here: the headers are refused, not ignored.
    let (status, error) = backend.call(alice, "GET", "/api/v1/me", None).await;
    assert_eq!(
        (status, error["reason"].as_str()),
        (403, Some("Forbidden")),
        "{error}"
    );
    assert!(
        error["error"].as_str().unwrap().contains("trustedProxyCidrs"),
        "{error}"
    );

    let alice = Caller::Token("outfit-alice-token");
    let launching = Instant::now();
    let (status, created) = backend
        .call(
            alice,
            "POST",
            "/api/v1/workspaces",
            Some(json!({"manifest": "stuck"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    let events = backend.follow(alice, &name).await;
    let took = launching.elapsed();
    let (last, report) = events.last().unwrap();
    assert_eq!(last, "failed", "{events:?}");
    assert_eq!(report["phase"], "scheduling", "{report}");
    assert!(
        report["message"].as_str().unwrap().contains("create deadline"),
        "{report}"
    );
    // Failed at the create deadline (timeoutCreate 6s from the launch), not before it, and not
    // long after (room for a loaded machine).
    assert!(
        took >= Duration::from_secs(6) && took < Duration::from_secs(60),
        "failed {took:?} after the launch; timeoutCreate is 6s"
    );
    assert!(
        report["warning"]
            .as_str()
            .unwrap()
            .starts_with("FailedScheduling: "),
        "{report}"
    );
    // While it waited, the stream said why, from the scheduler's condition.
    assert!(
        events.iter().any(|(_, r)| r["steps"][1]["state"] == "active"
            && r["steps"][1]["message"].as_str().unwrap().contains("node")),
        "{events:?}"
    );
    eventually("the failure metric", Duration::from_secs(10), || async {
        metric(
            &metrics(admin_port).await,
            "outfit_workspaces_spawn_failures_total{phase=\"scheduling\"}",
        ) == Some(1.0)
    })
    .await;
}

/// What the OpenAPI document says of the answers of each operation, checked against the live
/// backend's answers; each operation checked is remembered, so that none goes unchecked.
struct Described {
    doc: Value,
    checked: Vec<(String, String)>,
}

impl Described {
    /// That `body`, answered `status` to `method` on `path` (the document's path, `{name}` as
    /// is), is one of the operation's documented answers: its status listed, its JSON body
    /// with every property the status's schema requires and none it does not list, a refusal's
    /// reason one of those the status gives.
    fn check(&mut self, method: &str, path: &str, status: u16, body: &Value) {
        let method = method.to_ascii_lowercase();
        let operation = &self.doc["paths"][path][&method];
        assert!(operation.is_object(), "{method} {path} is not documented");
        let answer = &operation["responses"][status.to_string()];
        assert!(
            answer.is_object(),
            "{method} {path} answered {status}, not documented: {body}"
        );
        let schema = &answer["content"]["application/json"]["schema"];
        if schema.is_null() {
            assert!(
                body.is_null(),
                "{method} {path} {status}: a body not documented: {body}"
            );
        } else {
            conforms(&self.doc, schema, body, &format!("{method} {path} {status}"));
        }
        if status >= 400 {
            let reasons = &schema["allOf"][1]["properties"]["reason"]["enum"];
            let listed = reasons.as_array().is_some_and(|r| r.contains(&body["reason"]));
            assert!(
                listed,
                "{method} {path} {status}: {} is not one of {reasons}",
                body["reason"]
            );
        }
        self.checked.push((method, path.to_owned()));
    }
}

/// The first event of the progress stream of `name` (its status, and the event's data), the
/// stream dropped after it.
async fn first_event(port: u16, headers: &[(&str, &str)], name: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut request = format!("GET /api/v1/workspaces/{name}/progress HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    for (key, value) in headers {
        request.push_str(&format!("{key}: {value}\r\n"));
    }
    request.push_str("\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    let mut buffer = [0u8; 4096];
    let read = async {
        loop {
            let n = tcp.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the stream ended before an event: {text}");
            text.push_str(&String::from_utf8_lossy(&buffer[..n]));
            if let Some(at) = text.find("\ndata: ")
                && let Some(end) = text[at + 7..].find('\n')
            {
                let status = text[9..12].parse().unwrap();
                return (status, serde_json::from_str(&text[at + 7..at + 7 + end]).unwrap());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("an event within 60 s")
}

/// Issue 44: `/api/v1/openapi.json`, generated from the backend's types, describes what the
/// running backend answers: every documented operation is asked, and each answer's status is
/// one the document lists for it, with the properties its schema requires and no others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_answer() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-native-openapi";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB_FIELDS);
    let extra = format!("{}trustedProxyCidrs: [127.0.0.1/32]\n", catalogue(&url));
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    // A user of their own: other tests on this API server launch as alice.
    let (user, groups) = ("oscar", "staff");
    let oscar = Caller::Proxy(user, groups);
    let headers = [("x-forwarded-user", user), ("x-forwarded-groups", groups)];

    let answer = Call::new("GET", "/api/v1/openapi.json")
        .send(loopback(backend.port), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    let doc: Value = serde_json::from_str(&answer.text()).expect("the document is JSON");
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        doc["openapi"]
    );
    let mut described = Described { doc, checked: vec![] };
    described.check("GET", "/api/v1/openapi.json", 200, &Value::Null);

    for path in [
        "/api/v1/me",
        "/api/v1/catalogue",
        "/api/v1/workspaces",
        "/api/v1/storage",
    ] {
        let (status, body) = backend.call(oscar, "GET", path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        described.check("GET", path, status, &body);
    }
    let launch = json!({"manifest": "web", "settings": {"web": {"GREETING": "hi", "NOPE": "x"}}});
    let (status, created) = backend
        .call(oscar, "POST", "/api/v1/workspaces", Some(launch))
        .await;
    assert_eq!(status, 201, "{created}");
    described.check("POST", "/api/v1/workspaces", status, &created);
    let name = created["name"].as_str().unwrap().to_owned();
    let at = "/api/v1/workspaces/{name}";
    let path = |tail: &str| format!("/api/v1/workspaces/{name}{tail}");

    // The progress stream: its first event is a Progress.
    let (status, event) = first_event(backend.port, &headers, &name).await;
    assert_eq!(status, 200);
    let progress = json!({"$ref": "#/components/schemas/Progress"});
    conforms(&described.doc, &progress, &event, "the progress event");
    described.check("GET", &format!("{at}/progress"), status, &Value::Null);
    backend.follow_to_ready(oscar, &name).await;

    let (status, body) = backend.call(oscar, "GET", &path(""), None).await;
    described.check("GET", at, status, &body);
    assert_eq!(status, 200, "{body}");
    let (status, body) = backend.call(oscar, "GET", &path("/sharing"), None).await;
    described.check("GET", &format!("{at}/sharing"), status, &body);
    let sharing = json!({"level": "authenticated", "users": ["erin"]});
    let (status, body) = backend.call(oscar, "PUT", &path("/sharing"), Some(sharing)).await;
    described.check("PUT", &format!("{at}/sharing"), status, &body);
    let (status, body) = backend.call(oscar, "POST", &path("/activity"), None).await;
    assert_eq!(status, 204, "{body}");
    described.check("POST", &format!("{at}/activity"), status, &body);

    let (status, body) = backend.call(oscar, "POST", &path("/stop"), None).await;
    assert_eq!(status, 202, "{body}");
    described.check("POST", &format!("{at}/stop"), status, &body);
    eventually("the workspace stopped", Duration::from_secs(60), || async {
        backend.call(oscar, "GET", &path(""), None).await.1["status"] == "stopped"
    })
    .await;
    let (status, body) = backend.call(oscar, "GET", &path(""), None).await;
    described.check("GET", at, status, &body);
    let (status, body) = backend.call(oscar, "POST", &path("/start"), None).await;
    assert_eq!(status, 202, "{body}");
    described.check("POST", &format!("{at}/start"), status, &body);
    backend.follow_to_ready(oscar, &name).await;

    // Refusals, each in the words its status documents.
    let (status, body) = backend
        .call(oscar, "GET", "/api/v1/workspaces/no-such", None)
        .await;
    assert_eq!(status, 404, "{body}");
    described.check("GET", at, status, &body);
    let (status, body) = backend.call(Caller::Anonymous, "GET", "/api/v1/me", None).await;
    assert_eq!(status, 401, "{body}");
    described.check("GET", "/api/v1/me", status, &body);
    let (status, body) = backend
        .call(
            oscar,
            "POST",
            "/api/v1/workspaces",
            Some(json!({"manifest": "nope"})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    described.check("POST", "/api/v1/workspaces", status, &body);
    // The user's home is in use while the workspace is: refused, or removed once it is not.
    let (status, body) = backend.call(oscar, "DELETE", "/api/v1/storage", None).await;
    described.check("DELETE", "/api/v1/storage", status, &body);

    let (status, body) = backend.call(oscar, "DELETE", &path(""), None).await;
    assert_eq!(status, 202, "{body}");
    described.check("DELETE", at, status, &body);

    // Every documented operation was asked.
    let mut missed = vec![];
    for (path, item) in described.doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if !described.checked.contains(&(method.clone(), path.clone())) {
                missed.push(format!("{method} {path}"));
            }
        }
    }
    assert!(missed.is_empty(), "not asked: {missed:?}");
}
