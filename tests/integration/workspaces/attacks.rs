//! The backend under attack (issue 26): each attack as an attacker would send it, against the
//! real backend on the real API server, and the refusal it must get.

use std::{net::Ipv4Addr, time::Duration};

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

use super::{native::catalogue, support::*};
use crate::control_plane::ControlPlane;

/// The backend's own address, and this test's client address unless one is chosen.
const HERE: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// A connection to the backend on `port` from the local address `from`: any of 127.0.0.0/8 is
/// this host's, so each is a client address of its own.
async fn connect_from(from: Ipv4Addr, port: u16) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind((from, 0).into())?;
    socket.connect((HERE, port).into()).await
}

/// Sends `request` as it is over a fresh connection; returns the whole answer, head and body.
async fn raw(port: u16, request: &str) -> String {
    raw_from(HERE, port, request).await
}

/// As [`raw`], from the local address `from`.
async fn raw_from(from: Ipv4Addr, port: u16, request: &str) -> String {
    let mut tcp = connect_from(from, port).await.expect("connect");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), tcp.read_to_end(&mut answer))
        .await
        .expect("an answer within a minute")
        .expect("read the answer");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Asks for a progress stream (`request`) on a fresh connection: the connection, held open by
/// the stream while it lasts, once its answer's first 12 bytes (`HTTP/1.1 200` for a stream)
/// are read.
async fn open_stream(port: u16, request: &str) -> std::io::Result<(TcpStream, [u8; 12])> {
    open_stream_from(HERE, port, request).await
}

/// As [`open_stream`], from the local address `from`.
async fn open_stream_from(
    from: Ipv4Addr,
    port: u16,
    request: &str,
) -> std::io::Result<(TcpStream, [u8; 12])> {
    let mut tcp = connect_from(from, port).await?;
    tcp.write_all(request.as_bytes()).await?;
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).await?;
    Ok((tcp, head))
}

/// As [`raw_from`], for a request that must be refused: a stream opened instead (whose answer
/// never ends) fails the test at once, saying so.
async fn refusal_from(from: Ipv4Addr, port: u16, request: &str) -> String {
    let (mut tcp, head) = open_stream_from(from, port, request).await.expect("an answer");
    assert_ne!(
        &head, b"HTTP/1.1 200",
        "a stream was opened where a refusal was due"
    );
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), tcp.read_to_end(&mut rest))
        .await
        .expect("the refusal within a minute")
        .expect("read the refusal");
    format!(
        "{}{}",
        String::from_utf8_lossy(&head),
        String::from_utf8_lossy(&rest)
    )
}

/// Asserts that `answer` is a refusal with `status` and `reason` that says to try again in a
/// second.
fn assert_try_again(answer: &str, status: u16, reason: &str) {
    assert_eq!(
        (status_of(answer), json_body(answer)["reason"].clone()),
        (status, json!(reason)),
        "{answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1\r\n"),
        "{answer}"
    );
}

fn status_of(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

/// A native API request with `headers` exactly as given (no content type added).
fn native_request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn json_body(answer: &str) -> Value {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_native_callers_are_refused_cheaply() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-attacks-native";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let stuck = manifests.put("stuck.yaml", UNSCHEDULABLE);
    let missing = format!("http://127.0.0.1:{}/manifests/gone.yaml", manifests.port);
    let admin_port = free_port();
    let extra = format!(
        "{}- {{name: gone, url: '{missing}'}}\n- {{name: stuck, url: '{stuck}'}}\n\
         trustedProxyCidrs: [127.0.0.1/32, 127.0.0.2/32]\nadminGroups: [ops]\n\
         maxConnections: 4\nmaxStreamsPerUser: 2\nmaxStreams: 3\nmaxStreamsPerSource: 3\nbodyReadTimeout: 1s\nadminListen: 127.0.0.1:{admin_port}\n",
        catalogue(&url)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let port = backend.port;
    let alice_token = plane.env("ALICE_TOKEN");
    let bearer = format!("Bearer {alice_token}");
    let alice = Caller::Token(&alice_token);

    // A token far larger than any real one is refused unread, never sent for review.
    let huge = format!("Bearer {}", "x".repeat(64 << 10));
    let answer = raw(
        port,
        &native_request("GET", "/api/v1/me", &[("authorization", &huge)], ""),
    )
    .await;
    let error = json_body(&answer);
    assert_eq!(
        (status_of(&answer), error["reason"].as_str()),
        (401, Some("TokenTooLarge")),
        "{error}"
    );
    assert!(error["error"].as_str().unwrap().contains("8192 bytes"), "{error}");

    // Identity headers sent twice are refused, not merged into admin rights.
    let twice = native_request(
        "GET",
        "/api/v1/workspaces?all=true",
        &[
            ("x-forwarded-user", "mallory"),
            ("x-forwarded-groups", "dev"),
            ("x-forwarded-groups", "ops"),
        ],
        "",
    );
    let answer = raw(port, &twice).await;
    assert_eq!(status_of(&answer), 400, "{answer}");
    assert!(answer.contains("more than once"), "{answer}");

    // A cross-site form post (text/plain) and a cross-site script are refused before anything runs.
    let launch = json!({"manifest": "web", "settings": {"web": {"GREETING": "pwned"}}}).to_string();
    let form = native_request(
        "POST",
        "/api/v1/workspaces",
        &[("authorization", &bearer), ("content-type", "text/plain")],
        &launch,
    );
    let answer = raw(port, &form).await;
    assert_eq!(status_of(&answer), 415, "{answer}");
    let script = native_request(
        "POST",
        "/api/v1/workspaces",
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
            ("origin", "https://evil.example"),
        ],
        &launch,
    );
    let answer = raw(port, &script).await;
    assert_eq!(
        (status_of(&answer), json_body(&answer)["reason"].clone()),
        (403, json!("CrossSite")),
        "{answer}"
    );
    let (_, listed) = backend.call(alice, "GET", "/api/v1/workspaces", None).await;
    assert_eq!(listed["items"], json!([]), "nothing was launched: {listed}");

    // The page answers only reads, and may not be framed.
    let answer = raw(port, &native_request("POST", "/", &[], "x")).await;
    assert_eq!(status_of(&answer), 405, "{answer}");
    let page = raw(port, &native_request("GET", "/", &[], ""))
        .await
        .to_ascii_lowercase();
    assert_eq!(status_of(&page), 200);
    assert!(
        page.contains("frame-ancestors 'none'") && page.contains("x-frame-options: deny"),
        "{page}"
    );

    // A name that is a path is refused as a name, not sent to the API server.
    let (status, error) = backend
        .call(alice, "DELETE", "/api/v1/workspaces/%2e%2e", None)
        .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("not a workspace name"),
        "{error}"
    );

    // A catalogue manifest that can't be fetched: 502, without its (internal) address.
    let (status, error) = backend.launch(alice, "gone").await;
    assert_eq!(status, 502, "{error}");
    assert!(!error.to_string().contains("127.0.0.1"), "{error}");
    let (_, listed) = backend.call(alice, "GET", "/api/v1/catalogue", None).await;
    assert!(!listed.to_string().contains("gone.yaml"), "{listed}");

    // A body sent a byte at a time is cut at bodyReadTimeout.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    slow.write_all(b"POST /get_pods HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), slow.read_to_end(&mut answer))
        .await
        .expect("the slow body is cut")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status_of(&answer), 408, "{answer}");
    assert!(answer.contains("bodyReadTimeout"), "{answer}");

    // At maxConnections a new caller is served, and the oldest idle connection makes room; on
    // the admin port too.
    for (listener, path) in [(port, "/api/v1/openapi.json"), (admin_port, "/livez")] {
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(TcpStream::connect(("127.0.0.1", listener)).await.unwrap());
        }
        let (status, _) = http(listener, "GET", path, "").await;
        assert_eq!(status, 200, "{path}");
        let mut byte = [0u8; 1];
        let closed = tokio::time::timeout(Duration::from_secs(20), idle[0].read(&mut byte))
            .await
            .expect("the oldest idle connection is closed to make room");
        assert!(matches!(closed, Ok(0) | Err(_)), "{path}: {closed:?}");
    }

    // One user holds at most maxStreamsPerUser progress streams (each keeps its connection busy,
    // never evicted as idle): the next is 429 before anything is read, and a closed one gives
    // its slot back. A workspace that never schedules keeps its streams open.
    let (status, launched) = backend.launch(alice, "stuck").await;
    assert_eq!(status, 201, "{launched}");
    let progress = format!(
        "/api/v1/workspaces/{}/progress",
        launched["name"].as_str().unwrap()
    );
    let follow = native_request("GET", &progress, &[("authorization", &bearer)], "");
    let mut streams = Vec::new();
    for _ in 0..2 {
        let (tcp, head) = open_stream(port, &follow).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200", "a stream within the cap");
        streams.push(tcp);
    }
    let answer = raw(port, &follow).await;
    assert_eq!(
        (status_of(&answer), json_body(&answer)["reason"].clone()),
        (429, json!("TooManyStreams")),
        "{answer}"
    );
    assert!(answer.contains("maxStreamsPerUser"), "{answer}");

    // Streams over every user are capped below maxConnections too (maxStreams: 3 of 4), so a
    // few identities, each within its own cap, cannot take every connection (issue 46, point 2:
    // three users' 14 streams each filled a port of 40). Alice holds two; mallory's first is
    // the third; trudy's, from another address, is 503 with Retry-After before anything is
    // read; and a victim's request is still answered, on the connection the streams leave.
    let (status, mallorys) = backend.launch(Caller::Proxy("mallory", ""), "stuck").await;
    assert_eq!(status, 201, "{mallorys}");
    let stream_of = |user: &str, name: &str| {
        let path = format!("/api/v1/workspaces/{name}/progress");
        native_request("GET", &path, &[("x-forwarded-user", user)], "")
    };
    let mallorys_name = mallorys["name"].as_str().unwrap();
    let (mallory, head) = open_stream(port, &stream_of("mallory", mallorys_name))
        .await
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the port's third stream");
    let elsewhere = Ipv4Addr::new(127, 0, 0, 2);
    let answer = raw_from(elsewhere, port, &stream_of("trudy", "any-trudy")).await;
    assert_try_again(&answer, 503, "StreamsFull");
    assert!(answer.contains("maxStreams)"), "{answer}");
    let answer = raw(
        port,
        &native_request("GET", "/api/v1/me", &[("x-forwarded-user", "victim")], ""),
    )
    .await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    drop(mallory);
    drop(streams.pop());
    outfit_test_support::wait::eventually(
        "a closed stream's slot given back",
        Duration::from_secs(20),
        || async {
            let (_stream, head) = open_stream(port, &follow).await.ok()?;
            (&head == b"HTTP/1.1 200").then_some(())
        },
    )
    .await;
    backend.assert_running();
}

/// Issue 46, point 2, per source: any ServiceAccount token the cluster accepts is an identity, so
/// one machine with several, each within `maxStreamsPerUser`, could still hold every one of
/// `maxStreams`. One client address holds at most `maxStreamsPerSource`: the next stream from it
/// is 503 `SourceStreamsFull` with `Retry-After`, whichever identity asks and whatever
/// `X-Forwarded-For` it sends itself; another address, or a client an ingress of
/// `clientAddressFromCidrs` names, still gets its stream, the same identities included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_with_many_identities_holds_at_most_its_share_of_the_streams() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-attacks-sources";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let stuck = manifests.put("stuck.yaml", UNSCHEDULABLE);
    let ingress = Ipv4Addr::new(127, 0, 0, 3);
    let extra = format!(
        "catalogue:\n- {{name: stuck, url: '{stuck}'}}\n\
         maxConnections: 12\nmaxStreamsPerUser: 2\nmaxStreams: 8\nmaxStreamsPerSource: 3\n\
         clientAddressFromCidrs: [{ingress}/32]\n"
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let port = backend.port;

    // Four identities of one machine, each with a workspace that never schedules (its progress
    // stream stays open).
    let mut streams_of = Vec::new();
    for n in 0..4 {
        let token = service_account_token(&client, ns, &format!("robot-{n}")).await;
        let (status, launched) = backend.launch(Caller::Token(&token), "stuck").await;
        assert_eq!(status, 201, "{launched}");
        let progress = format!(
            "/api/v1/workspaces/{}/progress",
            launched["name"].as_str().unwrap()
        );
        streams_of.push((format!("Bearer {token}"), progress));
    }
    let stream = |robot: usize, forwarded_for: Option<&str>| {
        let (bearer, progress) = &streams_of[robot];
        let mut headers = vec![("authorization", bearer.as_str())];
        headers.extend(forwarded_for.map(|f| ("x-forwarded-for", f)));
        native_request("GET", progress, &headers, "")
    };

    // Three identities fill the machine's share, each far within its own cap and the port's.
    let mut held = Vec::new();
    for robot in 0..3 {
        let (tcp, head) = open_stream(port, &stream(robot, None)).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200", "robot-{robot}'s stream within the share");
        held.push(tcp);
    }
    // A fourth identity of the same machine is refused, and so is the machine naming another
    // address itself: only the ingress's X-Forwarded-For is believed.
    for forwarded_for in [None, Some("198.51.100.9")] {
        let answer = refusal_from(HERE, port, &stream(3, forwarded_for)).await;
        assert_try_again(&answer, 503, "SourceStreamsFull");
        let error = json_body(&answer)["error"].as_str().unwrap().to_owned();
        assert!(
            error.contains("127.0.0.1 holds 3") && error.contains("maxStreamsPerSource"),
            "{error}"
        );
    }
    // Another address gets its streams: a new identity's, and one already holding a stream at
    // the full address.
    let elsewhere = Ipv4Addr::new(127, 0, 0, 2);
    for robot in [3, 0] {
        let (tcp, head) = open_stream_from(elsewhere, port, &stream(robot, None))
            .await
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200", "robot-{robot} from another address");
        held.push(tcp);
    }
    // Behind the ingress, the client is the right-most address it appended: the full machine's
    // address on the right is refused whatever it wrote on the left; another client is served.
    let answer = refusal_from(ingress, port, &stream(1, Some("203.0.113.9, 127.0.0.1"))).await;
    assert_eq!(
        json_body(&answer)["reason"],
        json!("SourceStreamsFull"),
        "{answer}"
    );
    let (tcp, head) = open_stream_from(ingress, port, &stream(1, Some("203.0.113.9")))
        .await
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "another client behind the ingress");
    held.push(tcp);

    // A stream the machine closes gives its share's slot back.
    drop(held.remove(0));
    outfit_test_support::wait::eventually(
        "the machine's slot given back",
        Duration::from_secs(20),
        || async {
            let (tcp, head) = open_stream(port, &stream(2, None)).await.ok()?;
            (&head == b"HTTP/1.1 200").then_some(tcp)
        },
    )
    .await;
    backend.assert_running();
}

/// A token of the ServiceAccount `name`, made in `ns`: an identity anyone who may create
/// ServiceAccounts can mint.
async fn service_account_token(client: &kube::Client, ns: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let account = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    accounts.create(&Default::default(), &account).await.unwrap();
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let answer: Value = accounts
        .create_subresource("token", name, &Default::default(), &request)
        .await
        .unwrap();
    answer["status"]["token"].as_str().unwrap().to_owned()
}

/// Issue 46, point 4: 2,446 GETs of unknown workspaces from one user made 2,446 pod GETs, all in
/// the backend's one flow of the API server with everyone's TokenReviews and creates. Now each
/// user has a pace (`requestsPerUserPerSecond`, after a burst of `requestBurstPerUser`): past it a
/// request is 429 with `Retry-After`, before the backend or the API server is asked, and another
/// user is not held by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_past_their_pace_is_answered_429_and_others_are_not() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-attacks-pace";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let extra = "trustedProxyCidrs: [127.0.0.1/32]\nrequestsPerUserPerSecond: 2\nrequestBurstPerUser: 10\n";
    let backend = Backend::start(plane, ns, &manifests, extra).await;
    let port = backend.port;
    let as_user = |user: &str, path: &str| native_request("GET", path, &[("x-forwarded-user", user)], "");

    let mut answered = 0;
    let mut refused = Vec::new();
    for i in 0..40 {
        let answer = raw(port, &as_user("mallory", &format!("/api/v1/workspaces/nope-{i}"))).await;
        match status_of(&answer) {
            404 => answered += 1,
            429 => refused.push(answer),
            _ => panic!("{answer}"),
        }
    }
    // The burst, and the few the pace refilled while they were sent; the rest refused.
    assert!((10..=20).contains(&answered), "{answered} answered");
    assert!(refused.len() >= 20, "{} refused", refused.len());
    let answer = refused.last().unwrap();
    assert_eq!(json_body(answer)["reason"], json!("TooManyRequests"), "{answer}");
    assert!(answer.contains("requestsPerUserPerSecond"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1\r\n"),
        "{answer}"
    );
    // Another user is answered at once; mallory again once the pace allows.
    let answer = raw(port, &as_user("victim", "/api/v1/me")).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let answer = raw(port, &as_user("mallory", "/api/v1/me")).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    backend.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_from_requests_stay_names_and_ids_keep_their_own() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-attacks-names";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("stuck.yaml", UNSCHEDULABLE);
    let backend = Backend::start(plane, ns, &manifests, "").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let create = |user: &str| json!({"yaml_url": url, "user_id": user});

    let (status, created) = backend.post("/create_pod", create("alice")).await;
    assert_eq!(
        (status, created["pod_name"].as_str()),
        (200, Some("stuck-alice")),
        "{created}"
    );
    // A query or a subresource in the name does not reach the API server's URL.
    for name in ["stuck-alice?dryRun=All", "stuck-alice/status", ".."] {
        let (status, answer) = backend
            .post("/delete_pod", json!({"user_id": "alice", "pod_name": name}))
            .await;
        assert_eq!(
            (status, answer["requested"].as_bool()),
            (400, Some(false)),
            "{name}: {answer}"
        );
        assert!(
            answer["error"].as_str().unwrap().contains("not a workspace name"),
            "{answer}"
        );
    }
    let alive = pods.get("stuck-alice").await.unwrap();
    assert!(
        alive.metadata.deletion_timestamp.is_none(),
        "the pod was deleted through a bad name"
    );

    // An id whose storage name could not fit is refused up front, about the id.
    let long = "a".repeat(241);
    let (status, answer) = backend.post("/create_pod", create(&long)).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("longer than 231"),
        "{answer}"
    );

    // `a-b` takes every deic-dk name `a.b` would get; `a.b` gets names of its own.
    for n in 0..10 {
        let (status, answer) = backend.post("/create_pod", create("a-b")).await;
        assert_eq!(status, 200, "create {n} of a-b: {answer}");
    }
    let (status, answer) = backend.post("/create_pod", create("a.b")).await;
    assert_eq!(status, 200, "{answer}");
    let own = answer["pod_name"].as_str().unwrap();
    assert!(
        own.starts_with("stuck-a-b-") && own.len() == "stuck-a-b-".len() + 8,
        "{own}"
    );
    // Out of names itself, `a-b` is told the truth.
    let (status, answer) = backend.post("/create_pod", create("a-b")).await;
    assert_eq!(status, 400, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("10 by the user's pods"), "{error}");
}
