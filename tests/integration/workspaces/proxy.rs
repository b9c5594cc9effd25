//! The workspace proxy (issue 42, `proxyDomain`) over a real network path: the workspace's pod
//! address (kwok's, from the test cluster's pod network) is made a loopback address of this
//! machine and a server of the test's listens on it as the workspace's app, so the backend
//! connects to the pod's IP and port from its watch cache as it would on a node. Signed in with
//! the real provider of `sign_in.rs`: the owner's ticket and pass, what the app is told and not
//! told, a WebSocket echoed both ways, and what strangers, replays and other hosts get.

use std::{convert::Infallible, net::IpAddr, process::Command, time::Duration};

use futures::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming, header, service::service_fn};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use outfit_test_support::http::Call;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, handshake::derive_accept_key, protocol::Role};

use super::{
    native::WEB_FIELDS,
    sign_in::{Provider, location, oidc_config, send, session_of, set_cookies},
    support::*,
};
use crate::control_plane::ControlPlane;

/// An address of this machine's loopback device for the test's life.
struct LoopbackAddress(IpAddr);

impl LoopbackAddress {
    fn add(ip: IpAddr) -> Self {
        let status = Command::new("ip")
            .args(["addr", "add", &format!("{ip}/32"), "dev", "lo"])
            .status()
            .expect("ip (iproute2) runs");
        assert!(
            status.success(),
            "ip addr add {ip}/32 dev lo (the tests run as root)"
        );
        LoopbackAddress(ip)
    }
}

impl Drop for LoopbackAddress {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["addr", "del", &format!("{}/32", self.0), "dev", "lo"])
            .status();
    }
}

/// The workspace's app: a WebSocket echo for an upgrade, and for any other request its method,
/// path and headers as JSON.
async fn app(mut request: Request<Incoming>) -> Result<Response<Full<hyper::body::Bytes>>, Infallible> {
    if let Some(key) = request.headers().get("sec-websocket-key").cloned() {
        let upgraded = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let Ok(upgraded) = upgraded.await else { return };
            let mut socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
                TokioIo::new(upgraded),
                Role::Server,
                None,
            )
            .await;
            while let Some(Ok(message)) = socket.next().await {
                if message.is_text() && socket.send(message).await.is_err() {
                    break;
                }
            }
        });
        let response = Response::builder()
            .status(101)
            .header(header::CONNECTION, "upgrade")
            .header(header::UPGRADE, "websocket")
            .header("sec-websocket-accept", derive_accept_key(key.as_bytes()))
            .body(Full::default())
            .unwrap();
        return Ok(response);
    }
    if request.uri().path() == "/page" {
        let user = request
            .headers()
            .get("x-forwarded-user")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let page = format!("{PAGE_HEAD}<p id=\"user\">{user}</p><p id=\"echo\">waiting</p>{PAGE_SCRIPT}");
        let response = Response::builder()
            .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
            .body(Full::new(page.into()))
            .unwrap();
        return Ok(response);
    }
    let headers: serde_json::Map<String, Value> = request
        .headers()
        .iter()
        .map(|(name, value)| (name.to_string(), json!(value.to_str().unwrap_or_default())))
        .collect();
    let seen =
        json!({"method": request.method().as_str(), "path": request.uri().to_string(), "headers": headers});
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::SET_COOKIE, "outfit-pass=overwritten; Path=/")
        .header(header::SET_COOKIE, "app=1; Path=/")
        .body(Full::new(seen.to_string().into()))
        .unwrap();
    Ok(response)
}

const PAGE_HEAD: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>app</title></head><body>";
/// The app's page: a WebSocket to its own host, a message sent, the echo shown.
const PAGE_SCRIPT: &str = r#"<script>
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/socket");
ws.onopen = () => ws.send("hello from the browser");
ws.onmessage = (m) => { document.getElementById("echo").textContent = "echo: " + m.data; };
ws.onerror = () => { document.getElementById("echo").textContent = "error"; };
</script></body></html>"#;

/// Serves [`app`] on `ip`:80 until the test ends.
async fn serve_app(ip: IpAddr) {
    let listener = tokio::net::TcpListener::bind((ip, 80))
        .await
        .expect("the app listens on the pod's address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service_fn(app))
                    .with_upgrades(),
            );
        }
    });
}

/// A call to the backend's `port` for `host`.
async fn at(port: u16, host: &str, path: &str, cookie: Option<&str>) -> outfit_test_support::http::Answer {
    let host = format!("{host}:{port}");
    let mut headers = vec![("host", host.as_str())];
    if let Some(cookie) = cookie {
        headers.push(("cookie", cookie));
    }
    send(port, Call::new("GET", path).headers(&headers)).await
}

/// The pass cookie `session` gets for `host` (through the backend's ticket), and the ticket's
/// path, to try again.
async fn pass_for(port: u16, host: &str, session: &str) -> (String, String) {
    let first = at(port, host, "/hello?x=1", None).await;
    assert_eq!(first.status, 303, "{}", first.text());
    let to_backend = location(&first);
    let expected =
        format!("http://127.0.0.1:{port}/auth/workspace?to=http%3A%2F%2F{host}%3A{port}%2Fhello%3Fx%3D1");
    assert_eq!(to_backend, expected);
    let path = to_backend.trim_start_matches(&format!("http://127.0.0.1:{port}"));
    let ticket = send(port, Call::new("GET", path).headers(&[("cookie", session)])).await;
    assert_eq!(ticket.status, 303, "{}", ticket.text());
    let ticket_url = location(&ticket);
    let prefix = format!("http://{host}:{port}/.outfit/ticket?t=");
    assert!(ticket_url.starts_with(&prefix), "{ticket_url}");
    let ticket_path = ticket_url
        .trim_start_matches(&format!("http://{host}:{port}"))
        .to_owned();
    let taken = at(port, host, &ticket_path, None).await;
    assert_eq!(
        (taken.status, location(&taken)),
        (303, "/hello?x=1".to_owned()),
        "{}",
        taken.text()
    );
    let pass = set_cookies(&taken)
        .into_iter()
        .find(|c| c.starts_with("outfit-pass="))
        .expect("a pass");
    (pass, ticket_path)
}

/// A backend serving workspaces' hosts under `ws.test`, signing in with a provider of its own,
/// and alice's `web` workspace running there, its app on the pod's address.
struct Proxied {
    backend: Backend,
    provider: Provider,
    /// alice's session cookie at the backend.
    alice: String,
    name: String,
    host: String,
    port: u16,
    admin_port: u16,
    _address: LoopbackAddress,
}

async fn launched(ns: &str) -> Proxied {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let web = manifests.put("web.yaml", WEB_FIELDS);
    let port = free_port();
    let provider = Provider::start(ns, &format!("http://127.0.0.1:{port}/auth/callback")).await;
    let admin_port = free_port();
    let extra = format!(
        "proxyDomain: ws.test\n\
         adminListen: 127.0.0.1:{admin_port}\n\
         catalogue:\n- {{name: web, url: '{web}'}}\n{}",
        oidc_config(&provider, port, ns)
    );
    let backend = Backend::start_on(plane, ns, &manifests, &extra, plane.kubeconfig(), port).await;
    let alice = session_of(port, &provider, "alice").await;
    let launch = Some(json!({"manifest": "web"}));
    let (status, launched) = backend
        .call(Caller::Cookie(&alice), "POST", "/api/v1/workspaces", launch)
        .await;
    assert_eq!(status, 201, "{launched}");
    let name = launched["name"].as_str().unwrap().to_owned();
    let steps = backend.follow(Caller::Cookie(&alice), &name).await;
    assert_eq!(steps.last().map(|e| e.0.as_str()), Some("ready"), "{steps:?}");
    let pod = kube::Api::<Pod>::namespaced(client.clone(), ns)
        .get(&name)
        .await
        .unwrap();
    let ip: IpAddr = pod.status.unwrap().pod_ip.unwrap().parse().unwrap();
    let address = LoopbackAddress::add(ip);
    serve_app(ip).await;
    let host = format!("{name}.ws.test");
    Proxied {
        backend,
        provider,
        alice,
        name,
        host,
        port,
        admin_port,
        _address: address,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_lets_the_owner_in_and_nobody_else() {
    let proxied = launched("ws-proxy").await;
    let Proxied {
        backend,
        provider,
        alice,
        name,
        host,
        port,
        admin_port,
        ..
    } = &proxied;
    let (port, admin_port) = (*port, *admin_port);
    let (alice, name, host) = (alice.as_str(), name.as_str(), host.as_str());

    // Behind the proxy, the workspace has no Service nor Ingress for HTTP: the proxy alone
    // reaches it, and the API gives its host as its address.
    let client = ControlPlane::with_nodes().admin_client().await;
    let ingresses =
        kube::Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(client.clone(), "ws-proxy");
    assert!(
        ingresses
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let services = kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(client, "ws-proxy");
    assert!(services.list(&Default::default()).await.unwrap().items.is_empty());
    let (_, view) = backend
        .call(
            Caller::Cookie(alice),
            "GET",
            &format!("/api/v1/workspaces/{name}"),
            None,
        )
        .await;
    assert_eq!(view["url"], format!("http://{host}:{port}"), "{view}");

    // The owner: to the backend for a ticket, the ticket traded for this host's pass, once.
    let (pass, ticket_path) = pass_for(port, host, alice).await;
    let again = at(port, host, &ticket_path, None).await;
    assert_eq!(again.status, 403, "a ticket is good once: {}", again.text());

    // Through to the app: the user as the backend says, never as the client says; none of
    // outfit's cookies; the app's own cookie passes, its attempt at outfit's does not.
    let cookies = format!("{pass}; app=1; {alice}");
    let headers = [
        ("host", format!("{host}:{port}")),
        ("cookie", cookies),
        ("x-forwarded-user", "mallory".to_owned()),
        ("x-forwarded-groups", "admins".to_owned()),
    ];
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = send(port, Call::new("GET", "/hello?x=1").headers(&headers)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let seen = answer.json().unwrap();
    assert_eq!(seen["path"], "/hello?x=1", "{seen}");
    assert_eq!(seen["headers"]["x-forwarded-user"], "alice", "{seen}");
    assert_eq!(seen["headers"]["x-forwarded-groups"], "gpu-users,staff", "{seen}");
    assert_eq!(seen["headers"]["x-forwarded-host"], host, "{seen}");
    assert_eq!(
        seen["headers"]["cookie"], "app=1",
        "outfit's cookies stay with outfit: {seen}"
    );
    assert_eq!(
        set_cookies(&answer),
        ["app=1"],
        "the app can't set outfit's cookies"
    );

    // A WebSocket, both ways.
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = Request::builder()
        .uri(format!("ws://{host}:{port}/socket"))
        .header("host", format!("{host}:{port}"))
        .header("cookie", &pass)
        .header(
            "sec-websocket-key",
            tokio_tungstenite::tungstenite::handshake::client::generate_key(),
        )
        .header("sec-websocket-version", "13")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .body(())
        .unwrap();
    let (mut socket, _) = tokio_tungstenite::client_async(request, tcp)
        .await
        .expect("a WebSocket through the proxy");
    for text in ["hello", "from the browser"] {
        socket.send(Message::text(text)).await.unwrap();
        let echoed = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(echoed.into_text().unwrap().as_str(), text);
    }

    // The pass of this host is nothing on another: the browser is sent for a ticket there.
    let elsewhere = at(port, &format!("8080-{host}"), "/", Some(&pass)).await;
    assert_eq!(elsewhere.status, 303, "{}", elsewhere.text());
    // A stranger signs in, gets a ticket and a pass for the host, and still gets 403.
    let bob = session_of(port, provider, "bob").await;
    let (bobs_pass, _) = pass_for(port, host, &bob).await;
    let refused = at(port, host, "/hello?x=1", Some(&bobs_pass)).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        !refused.text().contains("x-forwarded"),
        "nothing of the workspace: {}",
        refused.text()
    );
    // Shared with a group of bob's, bob gets in as himself; taken back, he does not.
    let sharing = format!("/api/v1/workspaces/{name}/sharing");
    let share = |body: Value| {
        let sharing = sharing.clone();
        async move {
            backend
                .call(Caller::Cookie(alice), "PUT", &sharing, Some(body))
                .await
        }
    };
    let (status, set) = share(json!({"groups": ["staff"]})).await;
    assert_eq!((status, &set["groups"]), (200, &json!(["staff"])), "{set}");
    let shared = eventually("bob let in by the share", Duration::from_secs(10), || async {
        let answer = at(port, host, "/hello?x=1", Some(&bobs_pass)).await;
        (answer.status == 200).then_some(answer)
    })
    .await;
    assert_eq!(shared.json().unwrap()["headers"]["x-forwarded-user"], "bob");
    let (_, seen) = backend.call(Caller::Cookie(alice), "GET", &sharing, None).await;
    assert_eq!(seen, json!({"level": "owner", "users": [], "groups": ["staff"]}));
    assert_eq!(share(json!({})).await.0, 200);
    eventually(
        "bob refused once the share is taken back",
        Duration::from_secs(10),
        || async { at(port, host, "/hello?x=1", Some(&bobs_pass)).await.status == 403 },
    )
    .await;
    // Bob may not share alice's workspace; a bad share says what is wrong.
    let (status, _) = backend
        .call(
            Caller::Cookie(&bob),
            "PUT",
            &sharing,
            Some(json!({"level": "public"})),
        )
        .await;
    assert_eq!(status, 404);
    let (status, bad) = share(json!({"users": ["Not Valid"]})).await;
    assert_eq!(
        (status, bad["reason"].as_str()),
        (400, Some("BadRequest")),
        "{bad}"
    );
    assert!(bad["error"].as_str().unwrap().contains("users"), "{bad}");
    // Public: anyone, signed in or not, and the app is told of no user.
    assert_eq!(share(json!({"level": "public"})).await.0, 200);
    let anonymous = eventually("an anonymous visitor let in", Duration::from_secs(10), || async {
        let answer = at(port, host, "/hello?x=1", None).await;
        (answer.status == 200).then_some(answer)
    })
    .await;
    assert_eq!(
        anonymous.json().unwrap()["headers"]["x-forwarded-user"],
        Value::Null
    );
    assert_eq!(share(json!({})).await.0, 200);

    // A host naming no workspace: 404, after the sign-in.
    let (nobodys_pass, _) = pass_for(port, "nobody.ws.test", alice).await;
    assert_eq!(
        at(port, "nobody.ws.test", "/", Some(&nobodys_pass)).await.status,
        404
    );
    // The backend hands tickets only to workspaces' hosts.
    let evil = "/auth/workspace?to=http%3A%2F%2Fevil.example.org%2F";
    assert_eq!(
        send(port, Call::new("GET", evil).headers(&[("cookie", alice)]))
            .await
            .status,
        400
    );

    // Stopped, the host shows a page that starts it, from that page only.
    let stop = format!("/api/v1/workspaces/{name}/stop");
    let (status, stopped) = backend.call(Caller::Cookie(alice), "POST", &stop, None).await;
    assert!(matches!(status, 200 | 202), "{status} {stopped}");
    let shown = eventually(
        "the stopped workspace's page",
        Duration::from_secs(30),
        || async {
            let answer = at(port, host, "/", Some(&pass)).await;
            (answer.status == 503 && answer.text().contains("is stopped")).then_some(answer)
        },
    )
    .await;
    assert!(
        shown.text().contains("action=\"/.outfit/start\""),
        "{}",
        shown.text()
    );
    let start = |origin: Option<String>| {
        let mut headers = vec![
            ("host".to_owned(), format!("{host}:{port}")),
            ("cookie".to_owned(), pass.clone()),
        ];
        if let Some(origin) = origin {
            headers.push(("origin".to_owned(), origin));
        }
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            send(port, Call::new("POST", "/.outfit/start").headers(&headers)).await
        }
    };
    assert_eq!(
        start(Some("https://evil.example.org".to_owned())).await.status,
        403
    );
    assert_eq!(start(None).await.status, 403);
    let started = start(Some(format!("http://{host}:{port}"))).await;
    assert_eq!(
        (started.status, location(&started)),
        (303, "/".to_owned()),
        "{}",
        started.text()
    );
    eventually("the workspace running again", Duration::from_secs(60), || async {
        let (_, view) = backend
            .call(
                Caller::Cookie(alice),
                "GET",
                &format!("/api/v1/workspaces/{name}"),
                None,
            )
            .await;
        view["status"] == "ready"
    })
    .await;

    // Signing out at the backend ends the pass on the workspace's host too: the browser is
    // sent for a ticket again, and, signed out, gets none.
    let session_only = [("cookie", alice)];
    let out = send(
        port,
        Call::new("POST", "/auth/logout")
            .json(&json!({}))
            .headers(&session_only),
    )
    .await;
    assert_eq!(out.status, 204, "{}", out.text());
    let after = at(port, host, "/hello?x=1", Some(&pass)).await;
    assert_eq!(after.status, 303, "{}", after.text());
    let path = location(&after)
        .trim_start_matches(&format!("http://127.0.0.1:{port}"))
        .to_owned();
    let again = send(port, Call::new("GET", &path).headers(&[("cookie", alice)])).await;
    assert!(
        location(&again).starts_with("/auth/login?"),
        "sent to sign in: {}",
        location(&again)
    );

    let metrics = super::native::metrics(admin_port).await;
    // Twice at least (before the share and after it was taken back), more if a request beat the
    // cache to a change.
    let forbidden: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"outfit_workspaces_proxy_refusals_total{reason="forbidden"} "#))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(forbidden >= 2, "{metrics}");
    assert!(
        metrics.contains(r#"outfit_workspaces_proxy_refusals_total{reason="ticket"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_opens_its_workspace_through_the_proxy_and_a_stranger_cannot() {
    let proxied = launched("ws-proxy-browser").await;
    let backend = format!("http://127.0.0.1:{}/", proxied.port);
    let workspace = format!("http://{}:{}/page", proxied.host, proxied.port);
    let summary = browser_session(
        "workspace_proxy.py",
        [
            "--backend",
            &backend,
            "--workspace",
            &workspace,
            "--domain",
            "ws.test",
            "--owner",
            "alice:alice-password",
            "--stranger",
            "bob:bob-password",
            "--name",
            &proxied.name,
            "--group",
            "staff",
        ],
    )
    .await;
    assert_eq!(summary["owner"]["user"], "alice", "{summary}");
    assert_eq!(
        summary["owner"]["echo"], "echo: hello from the browser",
        "{summary}"
    );
    assert_eq!(
        summary["owner"]["url"],
        json!(workspace),
        "back where it asked to go: {summary}"
    );
    assert!(
        summary["stranger"]["status_text"]
            .as_str()
            .unwrap()
            .contains("bob may not open"),
        "{summary}"
    );
    assert_eq!(summary["stranger"]["echo"], Value::Null, "{summary}");
    // Shared on the page with a group of bob's, bob gets in as himself.
    assert_eq!(summary["shared"], "Saved", "{summary}");
    assert_eq!(summary["stranger_shared"]["user"], "bob", "{summary}");
    assert_eq!(
        summary["stranger_shared"]["echo"], "echo: hello from the browser",
        "{summary}"
    );
}
