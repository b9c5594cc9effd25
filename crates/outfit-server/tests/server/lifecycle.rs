//! The admin port and shutdown: `/livez`, `/readyz` (false once shutdown begins), `/metrics`;
//! on shutdown no new connection is accepted, idle connections close, and a request in flight is
//! still answered.

use hyper::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    Client, EVENT_TIMEOUT, TempDir, admin_get, fixture, read_once, start_self_signed, tls_connect, within,
};

#[tokio::test]
async fn admin_endpoints_report_liveness_readiness_and_metrics() {
    let certs = TempDir::new("admin");
    let (server, trust) = start_self_signed(&certs, |_| {}).await;
    server.ready().await;
    assert_eq!(admin_get(server.admin, "/livez").await.0, StatusCode::OK);
    assert_eq!(admin_get(server.admin, "/readyz").await.0, StatusCode::OK);
    assert_eq!(admin_get(server.admin, "/nope").await.0, StatusCode::NOT_FOUND);

    let mut client = Client::connect(server.addr, &trust).await.expect("connect");
    for name in [
        "pod-create-notebook",
        "pod-create-no-match",
        "pod-create-conflict",
    ] {
        let (status, _) = client.review(fixture(name).into()).await.expect("served");
        assert_eq!(status, StatusCode::OK);
    }
    let (status, metrics) = admin_get(server.admin, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        "outfit_admission_requests_total{outcome=\"mutated\"} 1",
        "outfit_admission_requests_total{outcome=\"allowed\"} 1",
        "outfit_admission_requests_total{outcome=\"denied\"} 1",
        "outfit_admission_duration_seconds_count 3",
        "outfit_policies{kind=\"PodDefault\"} 6",
        "outfit_policy_reloads_total{result=\"success\"} 0",
        "outfit_tls_reloads_total{result=\"error\"} 0",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    server.stop().await;
}

#[tokio::test]
async fn shutdown_drains_the_request_in_flight_and_refuses_new_connections() {
    let certs = TempDir::new("shutdown");
    let (server, trust) = start_self_signed(&certs, |_| {}).await;
    let mut readiness = server.ready().await;

    // An idle keep-alive connection, and one with a request half sent.
    let mut idle = tls_connect(server.addr, &trust).await.expect("idle connection");
    let body = fixture("pod-create-notebook");
    let (head, tail) = body.split_at(body.len() / 2);
    let mut in_flight = tls_connect(server.addr, &trust).await.expect("connection");
    in_flight
        .write_all(
            format!(
                "POST /mutate?timeout=10s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .expect("headers");
    in_flight.write_all(head).await.expect("half the body");
    in_flight.flush().await.expect("flush");
    // Shut down only once the server has the request's headers (the in-flight gauge says so);
    // before that the connection is idle and would rightly be closed.
    let metrics = server.handle.metrics().clone();
    within("the request to be in flight", EVENT_TIMEOUT, async {
        while metrics.in_flight() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await;

    server.shutdown.cancel();
    within(
        "readiness to turn false",
        EVENT_TIMEOUT,
        readiness.wait_for(|ready| !*ready),
    )
    .await
    .expect("server alive");
    assert_eq!(
        admin_get(server.admin, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(admin_get(server.admin, "/livez").await.0, StatusCode::OK);

    // The idle connection is closed.
    let read = read_once("the idle connection to close", &mut idle).await;
    assert!(matches!(read, Ok(0) | Err(_)), "closed, got {read:?}");
    // New connections are refused: the listener is gone.
    assert!(
        Client::connect(server.addr, &trust).await.is_err(),
        "no new connection after shutdown began"
    );

    // The request in flight is answered in full.
    in_flight.write_all(tail).await.expect("rest of the body");
    let mut response = Vec::new();
    within(
        "the in-flight response",
        EVENT_TIMEOUT,
        in_flight.read_to_end(&mut response),
    )
    .await
    .expect("response");
    let response = String::from_utf8(response).expect("utf-8");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let json: Value = serde_json::from_str(response.split("\r\n\r\n").nth(1).expect("body")).expect("JSON");
    assert_eq!(json["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(json["response"]["patchType"], "JSONPatch");

    server.join().await;
}
