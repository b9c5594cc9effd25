//! Requests the backend must refuse, and callers it must not answer.

use std::{process::Command, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::ListParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::*;
use crate::control_plane::ControlPlane;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_a_message() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-bad-input";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let good = manifests.put("ok.yaml", UNSCHEDULABLE);
    let deployment = manifests.put(
        "deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
    );
    let unknown_volume = manifests.put(
        "volume.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: c\n    image: x\n    volumeMounts: [{name: mystery, mountPath: /m}]\n",
    );
    let backend = Backend::start(plane, ns, &manifests, "maxBodyBytes: 2048\n").await;

    let error_of = |answer: &Value| answer["error"].as_str().unwrap_or_default().to_owned();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/create_pod",
            json!({"yaml_url": good, "user_id": "Alice"}),
            "lower-case",
        ),
        (
            "/create_pod",
            json!({"yaml_url": format!("http://evil.test/?{good}"), "user_id": "alice"}),
            "whitelist",
        ),
        (
            "/create_pod",
            json!({"yaml_url": format!("http://127.0.0.1:{}/manifests/missing.yaml", manifests.port), "user_id": "alice"}),
            "404",
        ),
        (
            "/create_pod",
            json!({"yaml_url": deployment, "user_id": "alice"}),
            "Deployment",
        ),
        (
            "/create_pod",
            json!({"yaml_url": unknown_volume, "user_id": "alice"}),
            "mystery",
        ),
        ("/create_pod", json!({"user_id": "alice"}), "yaml_url"),
        ("/get_pods", json!({"user_id": "foo@bar@baz"}), "'@'"),
        (
            "/delete_pod",
            json!({"user_id": "alice", "pod_name": "nope"}),
            "no pod",
        ),
    ];
    for (path, body, hint) in cases {
        let (status, answer) = backend.post(path, body.clone()).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert!(error_of(&answer).contains(hint), "{path} {body}: {answer}");
        if path == "/create_pod" {
            assert_eq!(answer["pod_name"], "", "the compatible field stays");
        }
    }
    // Not JSON, wrong method, unknown route, too large.
    let (status, text) = http(backend.port, "POST", "/get_pods", "{not json").await;
    assert_eq!(status, 400);
    assert!(text.contains("not the expected JSON"), "{text}");
    let (status, _) = http(backend.port, "GET", "/create_pod", "").await;
    assert_eq!(status, 405);
    let (status, _) = http(backend.port, "POST", "/clean_all_unused", "{}").await;
    assert_eq!(status, 404);
    let (status, text) = http(
        backend.port,
        "POST",
        "/get_pods",
        &format!("{{\"user_id\": \"{}\"}}", "a".repeat(4096)),
    )
    .await;
    assert_eq!(status, 413, "{text}");
    // get_podip_owner: no ip, not an ip, outside the pod network.
    for (query, hint) in [
        ("", "missing"),
        ("?ip=x", "not an IP"),
        ("?ip=192.0.2.1", "outside"),
    ] {
        let (status, text) = http(backend.port, "GET", &format!("/get_podip_owner{query}"), "").await;
        assert_eq!(status, 400, "{query}");
        assert!(text.contains(hint), "{query}: {text}");
    }
    // Nothing was created by any of it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_outside_the_allowed_networks_or_without_the_token_are_refused() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-callers";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let token_file = std::env::temp_dir().join(format!("outfit-ws-token-{}", std::process::id()));
    std::fs::write(&token_file, "t0ken\n").unwrap();
    let backend = Backend::start(
        plane,
        ns,
        &manifests,
        &format!("bearerTokenFile: {}\n", token_file.display()),
    )
    .await;
    let (status, answer) = backend.post("/get_pods", json!({"user_id": "alice"})).await;
    assert_eq!(status, 401, "{answer}");
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", backend.port))
        .await
        .unwrap();
    let body = r#"{"user_id": "alice"}"#;
    let request = format!(
        "POST /get_pods HTTP/1.1\r\nhost: x\r\nauthorization: Bearer t0ken\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.ends_with("[]\n"),
        "an empty list is [], not null: {response}"
    );
    drop(backend);

    // Loopback is not in the allowed networks: refused before anything else.
    let backend = Backend::start(plane, ns, &manifests, "allowedSourceCidrs: [\"10.0.0.0/8\"]\n").await;
    let (status, answer) = backend.post("/get_pods", json!({"user_id": "alice"})).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("allowedSourceCidrs"));
    drop(backend);
    let _ = std::fs::remove_file(token_file);

    // Over HTTPS when a certificate is configured (reloaded when its files change, as the
    // webhook's).
    let certs = std::env::temp_dir().join(format!("outfit-ws-certs-{}", std::process::id()));
    let files = outfit_server::SelfSigned::ensure(&certs, &[]).expect("a self-signed certificate");
    let tls = format!(
        "tlsCertFile: {}\ntlsKeyFile: {}\n",
        files.cert.display(),
        files.key.display()
    );
    let backend = Backend::start(plane, ns, &manifests, &tls).await;
    let output = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "30", "--cacert"])
        .arg(&files.ca_cert)
        .args(["-d", r#"{"user_id": "alice"}"#])
        .arg(format!("https://localhost:{}/get_pods", backend.port))
        .output()
        .await
        .expect("curl runs");
    let _ = std::fs::remove_dir_all(&certs);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "[]\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", backend.port))
        .await
        .unwrap();
    tcp.write_all(b"POST /get_pods HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    assert!(
        !answer.starts_with(b"HTTP/1.1 200"),
        "plain HTTP is not answered on the HTTPS port"
    );
}

#[test]
fn a_bad_configuration_stops_the_backend_at_start_naming_the_key() {
    let config = std::env::temp_dir().join(format!("outfit-ws-bad-{}.yaml", std::process::id()));
    std::fs::write(&config, "namespace: ws\ntimeoutCreate: 90\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(["workspaces", "--config"])
        .arg(&config)
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("outfit workspaces runs");
    let _ = std::fs::remove_file(&config);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("timeoutCreate") && stderr.contains("unit"),
        "{stderr}"
    );
    // The environment names its variable when it is the culprit.
    let output = Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(["workspaces"])
        .env("BACKEND_PODSUBNETCIDR", "10.0.0.0/99")
        .output()
        .expect("outfit workspaces runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("BACKEND_PODSUBNETCIDR") && stderr.contains("podSubnetCidr"),
        "{stderr}"
    );
}
