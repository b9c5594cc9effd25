//! The TLS socket: a client trusting only `DIR/ca.crt` from `--self-signed`, and certificate
//! rotation the way Kubernetes Secret volumes do it (swapping the `..data` symlink), picked up
//! while a client keeps sending, with no failed request.

use std::{
    os::unix::fs::symlink,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use bytes::Bytes;
use hyper::StatusCode;
use outfit_server::{SelfSigned, TlsSource, tls::issue_leaf_with_ca_pem};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use tokio::sync::watch;

use crate::support::{
    Client, EVENT_TIMEOUT, TempDir, client_config, fixture, fixtures, start, start_self_signed, test_config,
    wait_reloads, within,
};

#[tokio::test]
async fn self_signed_certificates_are_generated_once_and_reused() {
    let dir = TempDir::new("self-signed");
    let first = SelfSigned::ensure(dir.path(), &["outfit.outfit-system.svc".to_owned()]).expect("generated");
    let ca = std::fs::read(&first.ca_cert).expect("ca.crt");
    let leaf = std::fs::read(&first.cert).expect("tls.crt");
    let second = SelfSigned::ensure(dir.path(), &[]).expect("reused");
    assert_eq!(std::fs::read(&second.ca_cert).expect("ca.crt"), ca);
    assert_eq!(std::fs::read(&second.cert).expect("tls.crt"), leaf);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&first.key)
            .expect("tls.key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key is private");
    }
    // A leaf lost from the directory is re-issued by the same CA.
    std::fs::remove_file(&first.cert).expect("remove");
    let third = SelfSigned::ensure(dir.path(), &[]).expect("re-issued");
    assert_eq!(std::fs::read(&third.ca_cert).expect("ca.crt"), ca);
    assert_ne!(std::fs::read(&third.cert).expect("tls.crt"), leaf);
}

/// Lays out a Secret volume: `dir/..<generation>/{tls.crt,tls.key}`, `..data` pointing at it, and
/// `tls.crt`/`tls.key` pointing through `..data`. Later generations swap `..data` atomically.
fn publish(dir: &Path, generation: &str, cert: &[u8], key: &[u8]) {
    let target = dir.join(format!("..{generation}"));
    std::fs::create_dir_all(&target).expect("generation dir");
    std::fs::write(target.join("tls.crt"), cert).expect("write cert");
    std::fs::write(target.join("tls.key"), key).expect("write key");
    let staged = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&staged);
    symlink(format!("..{generation}"), &staged).expect("stage link");
    std::fs::rename(&staged, dir.join("..data")).expect("swap ..data");
    for file in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(file)).is_err() {
            symlink(format!("..data/{file}"), dir.join(file)).expect("file link");
        }
    }
}

fn first_cert(pem: &[u8]) -> CertificateDer<'static> {
    CertificateDer::pem_slice_iter(pem)
        .next()
        .expect("a certificate")
        .expect("valid PEM")
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_failed_request() {
    let ca_dir = TempDir::new("rotation-ca");
    let ca = SelfSigned::ensure(ca_dir.path(), &[]).expect("CA");
    let ca_key = std::fs::read_to_string(&ca.ca_key).expect("ca.key");
    let volume = TempDir::new("rotation-volume");
    let first = std::fs::read(&ca.cert).expect("tls.crt");
    publish(
        volume.path(),
        "2026_01",
        &first,
        &std::fs::read(&ca.key).expect("tls.key"),
    );

    let server = start(test_config(
        &fixtures().join("policies"),
        TlsSource::Files {
            cert: volume.path().join("tls.crt"),
            key: volume.path().join("tls.key"),
        },
    ))
    .await;
    let trust = client_config(&ca.ca_cert);
    let initial = Client::connect(server.addr, &trust)
        .await
        .expect("TLS with the CA");
    assert_eq!(initial.peer_certificate, first_cert(&first));

    // A client that keeps sending: on a keep-alive connection, plus a new connection every few
    // requests so that handshakes happen throughout the rotation.
    let (served_tx, mut served) = watch::channel(0u64);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = tokio::spawn({
        let stop = stop.clone();
        let trust = trust.clone();
        let addr = server.addr;
        async move {
            let body = Bytes::from(fixture("pod-create-notebook"));
            let mut client = Client::connect(addr, &trust).await.map_err(|e| e.to_string())?;
            let mut count = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if count % 5 == 4 {
                    client = Client::connect(addr, &trust)
                        .await
                        .map_err(|e| format!("reconnect: {e}"))?;
                }
                let (status, answer) = client.review(body.clone()).await?;
                if status != StatusCode::OK || answer["response"]["patchType"] != "JSONPatch" {
                    return Err(format!("request {count} failed: {status} {answer}"));
                }
                count += 1;
                served_tx.send_replace(count);
            }
            Ok::<u64, String>(count)
        }
    });
    within(
        "requests before the rotation",
        EVENT_TIMEOUT,
        served.wait_for(|n| *n >= 10),
    )
    .await
    .expect("the client is running");

    // Rotate to a new leaf from the same CA.
    let mut reloads = server.handle.tls_reloads();
    let (second, second_key) = issue_leaf_with_ca_pem(&ca_key, &[]).expect("new leaf");
    publish(volume.path(), "2026_02", second.as_bytes(), second_key.as_bytes());
    wait_reloads("the rotated certificate", &mut reloads, |r| r.succeeded == 1).await;
    let after = *served.borrow();
    within(
        "requests after the rotation",
        EVENT_TIMEOUT,
        served.wait_for(|n| *n >= after + 10),
    )
    .await
    .expect("the client is running");
    // A new client configuration: no session to resume, so the server presents its certificate.
    let fresh = Client::connect(server.addr, &client_config(&ca.ca_cert))
        .await
        .expect("TLS after rotation");
    assert_eq!(fresh.peer_certificate, first_cert(second.as_bytes()));

    // A broken certificate is rejected and the last good one keeps serving.
    publish(
        volume.path(),
        "2026_03",
        b"-----BEGIN CERTIFICATE-----\nnot base64\n",
        second_key.as_bytes(),
    );
    wait_reloads("the rejected certificate", &mut reloads, |r| r.failed == 1).await;
    let after = *served.borrow();
    within(
        "requests after the bad rotation",
        EVENT_TIMEOUT,
        served.wait_for(|n| *n >= after + 10),
    )
    .await
    .expect("the client is running");
    let fresh = Client::connect(server.addr, &client_config(&ca.ca_cert))
        .await
        .expect("TLS after a bad rotation");
    assert_eq!(fresh.peer_certificate, first_cert(second.as_bytes()));
    // A key that does not match the certificate is rejected too.
    let (_, other_key) = issue_leaf_with_ca_pem(&ca_key, &[]).expect("another key");
    publish(volume.path(), "2026_04", second.as_bytes(), other_key.as_bytes());
    wait_reloads("the mismatched key", &mut reloads, |r| r.failed == 2).await;

    stop.store(true, Ordering::Relaxed);
    let sent = within("the client to stop", EVENT_TIMEOUT, sender)
        .await
        .expect("client task")
        .expect("no failed request");
    assert!(sent >= 30);
    let metrics = server.handle.metrics().encode();
    assert!(
        metrics.contains("outfit_tls_reloads_total{result=\"success\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("outfit_tls_reloads_total{result=\"error\"} 2"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_not_trusting_the_ca_is_refused() {
    let served = TempDir::new("trust-served");
    let other = TempDir::new("trust-other");
    let (server, trust) = start_self_signed(&served, |_| {}).await;
    let other_ca = SelfSigned::ensure(other.path(), &[]).expect("another CA");
    let refused = Client::connect(server.addr, &client_config(&other_ca.ca_cert)).await;
    assert!(refused.is_err(), "a certificate from another CA must not verify");
    let mut trusted = Client::connect(server.addr, &trust).await.expect("trusted");
    let (status, _) = trusted
        .review(Bytes::from(fixture("pod-delete")))
        .await
        .expect("served");
    assert_eq!(status, StatusCode::OK);
    server.stop().await;
}
