//! Bad input gets its answer and the server keeps serving: bodies that are not reviews get 400
//! with a JSON error, oversized bodies 413, an object too deep for the policies that must read it
//! a denial with the uid, and connections that never speak are cut off by the handshake and header
//! timeouts.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::{Request, StatusCode};
use outfit_server::Limits;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    Client, EVENT_TIMEOUT, HANDSHAKE_TIMEOUT, HEADER_READ_TIMEOUT, TempDir, assert_timed_out_after, fixture,
    fixture_webhook, fixtures, post, read_once, start_self_signed, tls_connect, webhook_for, within,
};

fn review_with(mutate: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&fixture("pod-create-notebook")).expect("JSON");
    mutate(&mut review);
    serde_json::to_vec(&review).expect("JSON")
}

#[tokio::test]
async fn bodies_that_are_not_reviews_get_400_with_a_json_error() {
    let (webhook, metrics) = fixture_webhook();
    let notebook = fixture("pod-create-notebook");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "not JSON",
            b"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n".to_vec(),
            "not a JSON",
        ),
        ("truncated JSON", notebook[..notebook.len() / 2].to_vec(), "EOF"),
        ("empty body", Vec::new(), "not a JSON"),
        ("JSON array", b"[1,2,3]".to_vec(), "not a JSON"),
        (
            "v1beta1",
            review_with(|r| r["apiVersion"] = json!("admission.k8s.io/v1beta1")),
            "admission.k8s.io/v1beta1",
        ),
        (
            "wrong kind",
            review_with(|r| r["kind"] = json!("Pod")),
            "kind \"Pod\"",
        ),
        (
            "no request",
            review_with(|r| r["request"] = Value::Null),
            "no request",
        ),
        (
            "missing uid",
            review_with(|r| {
                r["request"].as_object_mut().expect("request").remove("uid");
            }),
            "no uid",
        ),
        (
            "unknown operation",
            review_with(|r| r["request"]["operation"] = json!("PATCH")),
            "PATCH",
        ),
        (
            "uid not a string",
            review_with(|r| r["request"]["uid"] = json!(42)),
            "not a JSON",
        ),
    ];
    let count = cases.len();
    for (what, body, says) in cases {
        let (status, answer) = post(&webhook, "/mutate", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {answer}");
        let error = answer["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: JSON error: {answer}"));
        assert!(error.contains(says), "{what}: {error:?} mentions {says:?}");
    }
    let text = metrics.encode();
    assert!(
        text.contains(&format!(
            "outfit_admission_requests_total{{outcome=\"bad_request\"}} {count}"
        )),
        "{text}"
    );
    // Still serving.
    let (status, answer) = post(&webhook, "/mutate", fixture("pod-create-notebook")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true);
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413() {
    let (webhook, _) = fixture_webhook();
    // The default limit is above the API server's 3 MiB request limit.
    assert!(Limits::default().max_body_bytes >= 3 * 1024 * 1024);
    let ten_mib = vec![b' '; 10 * 1024 * 1024];
    let (status, answer) = post(&webhook, "/mutate", ten_mib).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("limit")));

    // The limit is configurable: a review just over a small limit is refused, one under it served.
    let small = Limits {
        max_body_bytes: 1024,
        ..Limits::default()
    };
    let (webhook, _) = webhook_for(&fixtures().join("policies"), small);
    let (status, _) = post(&webhook, "/mutate", fixture("pod-create-notebook")).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let tiny = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"DELETE"}}"#;
    let (status, answer) = post(&webhook, "/mutate", &tiny[..]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["uid"], "u");
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

#[tokio::test]
async fn an_object_too_deep_to_read_is_denied_with_its_uid_and_a_reason() {
    // PodDefaults read the fields they merge in place, so nesting in a field they never read
    // (here `status`, 100,000 levels) does not stop them.
    let deep_status = || {
        String::from_utf8(fixture("pod-create-notebook"))
            .expect("utf-8")
            .replacen("\"status\": {}", &format!("\"status\": {}", nested(100_000)), 1)
    };
    let (webhook, _) = fixture_webhook();
    let body = deep_status();
    assert!(body.len() > 500_000);
    let (status, answer) = post(&webhook, "/mutate", body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");

    // A Gatekeeper mutator needs the whole object, which serde_json refuses beyond 128 levels: the
    // review is answered with its uid and the reason, as a bad request.
    let policies = TempDir::new("deep-gatekeeper");
    std::fs::write(
        policies.path().join("mutator.yaml"),
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: team}\n\
         spec: {location: metadata.labels.team, parameters: {assign: {value: a}}}\n",
    )
    .expect("write");
    let (webhook, _) = webhook_for(policies.path(), Limits::default());
    let (status, answer) = post(&webhook, "/mutate", deep_status()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let response = &answer["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("cannot read the object") && message.contains("recursion limit"),
        "{message}"
    );

    // Nesting serde_json can read, on an object no policy matches, is allowed untouched.
    let (webhook, _) = fixture_webhook();
    let body = review_with(|r| {
        r["request"]["object"]["metadata"]["labels"] = json!({});
        r["request"]["object"]["spec"]["x"] = serde_json::from_str(&nested(100)).expect("JSON");
    });
    let (status, answer) = post(&webhook, "/mutate", body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none());
}

#[tokio::test]
async fn silent_connections_are_cut_off_and_the_server_keeps_serving() {
    let certs = TempDir::new("silent");
    let (server, config) = start_self_signed(&certs, |_| {}).await;

    // No TLS handshake at all: closed after the handshake timeout. Each clock starts before the
    // server's can (before the connect; once the client's side of the handshake is done, which is
    // before the server's), so a close sooner than the timeout is the server's doing.
    let started = Instant::now();
    let mut tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let read = read_once("the server to close a connection without handshake", &mut tcp).await;
    assert!(matches!(read, Ok(0) | Err(_)), "closed, got {read:?}");
    assert_timed_out_after(
        "closing a connection without handshake",
        started,
        HANDSHAKE_TIMEOUT,
    );

    // A handshake, then no request headers: closed after the header timeout.
    let mut tls = tls_connect(server.addr, &config).await.expect("handshake");
    let started = Instant::now();
    let read = read_once("the server to close a connection that sends no headers", &mut tls).await;
    assert!(matches!(read, Ok(0) | Err(_)), "closed, got {read:?}");
    assert_timed_out_after(
        "closing a connection that sends no headers",
        started,
        HEADER_READ_TIMEOUT,
    );

    // Half the headers, then silence: closed too, after the header timeout.
    let mut tls = tls_connect(server.addr, &config).await.expect("handshake");
    let started = Instant::now();
    tls.write_all(b"POST /mutate HTTP/1.1\r\nhost: localhost\r\n")
        .await
        .expect("write");
    let mut response = Vec::new();
    let _ = within(
        "the server to close a connection with partial headers",
        EVENT_TIMEOUT,
        tls.read_to_end(&mut response),
    )
    .await;
    assert_timed_out_after(
        "closing a connection with partial headers",
        started,
        HEADER_READ_TIMEOUT,
    );

    // A 10 MiB declared body is refused from its headers, without reading it.
    let mut tls = tls_connect(server.addr, &config).await.expect("handshake");
    tls.write_all(b"POST /mutate?timeout=10s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 10485760\r\n\r\n{")
        .await
        .expect("write");
    let mut head = vec![0u8; 12];
    within("the 413 response", EVENT_TIMEOUT, tls.read_exact(&mut head))
        .await
        .expect("response");
    assert_eq!(&head, b"HTTP/1.1 413");

    drop(tls);

    // And a normal client still gets served, repeatedly, on one keep-alive connection.
    let mut client = Client::connect(server.addr, &config).await.expect("connect");
    for _ in 0..3 {
        let (status, answer) = client
            .review(Bytes::from(fixture("pod-create-notebook")))
            .await
            .expect("served");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
    }
    let (status, _) = client
        .review(Bytes::from_static(b"{not json"))
        .await
        .expect("answered");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = client
        .review(Bytes::from(fixture("pod-delete")))
        .await
        .expect("still served");
    assert_eq!(status, StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_stops_half_way_gets_408() {
    let limits = Limits {
        body_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let certs = TempDir::new("slow-body");
    let (server, client) = start_self_signed(&certs, |config| config.limits = limits).await;
    let mut tls = tls_connect(server.addr, &client).await.expect("handshake");
    let started = Instant::now();
    tls.write_all(b"POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1000\r\n\r\n{\"apiVersion\"")
        .await
        .expect("write");
    let mut head = vec![0u8; 12];
    within("the 408 response", EVENT_TIMEOUT, tls.read_exact(&mut head))
        .await
        .expect("response");
    assert_eq!(&head, b"HTTP/1.1 408");
    assert_timed_out_after("the 408 for a body that stopped", started, limits.body_timeout);
    server.stop().await;
}

/// A body that never comes: it holds its request at the body read.
struct NeverBody;

impl hyper::body::Body for NeverBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Pending
    }
}

/// A request to `/mutate` declaring `length` bytes, whose body never comes.
fn held(length: usize) -> Request<NeverBody> {
    Request::post("/mutate")
        .header("content-length", length.to_string())
        .body(NeverBody)
        .expect("request")
}

/// Large bodies are read only within their room: one that finds it taken until its deadline gets
/// 503 unread, a small review never waits for it. Time is paused: the deadlines pass as the
/// runtime idles, in order, so the test waits for none of them.
#[tokio::test(start_paused = true)]
async fn a_large_body_waits_for_room_and_a_small_one_never_does() {
    let limits = Limits {
        max_body_bytes: 1024 * 1024,
        large_bodies_bytes: 1024 * 1024,
        body_timeout: Duration::from_secs(2),
    };
    let (webhook, metrics) = webhook_for(&fixtures().join("policies"), limits);
    let large = 900 * 1024;
    // Two large bodies that never come: the first takes the room at once and holds it to its
    // deadline (2 s, then 408); the second waits, takes the room at 2 s and holds it to 4 s.
    let first = tokio::spawn({
        let webhook = webhook.clone();
        async move { webhook.handle(held(large)).await.status() }
    });
    tokio::task::yield_now().await;
    let second = tokio::spawn({
        let webhook = webhook.clone();
        async move { webhook.handle(held(large)).await.status() }
    });
    tokio::task::yield_now().await;
    // A small review is answered at once, room or none.
    let started = tokio::time::Instant::now();
    let (status, _) = post(&webhook, "/mutate", fixture("pod-create-notebook")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(started.elapsed(), Duration::ZERO, "no wait for a small review");
    // A large one at 1 s: the room is the first's, then the second's until 4 s, past its deadline
    // of 3 s: 503, unread.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut padded: Value = serde_json::from_slice(&fixture("pod-create-notebook")).unwrap();
    padded["request"]["object"]["metadata"]["annotations"] = json!({"pad": "x".repeat(800 * 1024)});
    let padded = serde_json::to_vec(&padded).unwrap();
    let started = tokio::time::Instant::now();
    let (status, answer) = post(&webhook, "/mutate", padded.clone()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("too many large reviews at once"),
        "{answer}"
    );
    assert_eq!(first.await.unwrap(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(second.await.unwrap(), StatusCode::REQUEST_TIMEOUT);
    // The room free again, the same large review is read and decided.
    let (status, answer) = post(&webhook, "/mutate", padded).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let rendered = metrics.encode();
    assert!(
        rendered.contains(r#"outfit_admission_requests_total{outcome="busy"} 1"#),
        "{rendered}"
    );
}
