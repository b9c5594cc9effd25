//! Load generator for `outfit serve`. Run with:
//!
//! ```text
//! cargo run --release -p outfit-loadgen -- --connections 32 --seconds 8
//! ```
//!
//! In one run it drives three servers over HTTPS with keep-alive connections, as the API server
//! does, at fixed concurrency (closed loop): a *ceiling* server on the same rustls/hyper stack
//! that reads the body and returns a fixed allow response (the most this machine can do with
//! this client), then outfit with 0 and with 1,000 policies. It then runs outfit with 1,000
//! policies open loop at half of its measured throughput, where latency is the figure that
//! matters. Everything binds 127.0.0.1 and every phase is bounded in time and request count.
//!
//! Servers and client run in one process on separate runtimes (2 worker threads each), so the
//! client's cost is inside every figure, equally for the three servers.

use std::{
    net::SocketAddr,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Result;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, client::conn::http1};
use hyper_util::rt::TokioIo;
use outfit_server::{
    CertStore, Config, Metrics, SelfSigned, Server, TlsSource,
    accept::{self, Handler, Timeouts},
};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

// The same allocator as the `outfit` binary, so the in-process server is the one that ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "Benchmark outfit serve against a fixed-response TLS server")]
struct Args {
    /// Concurrent keep-alive connections (one request in flight on each).
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Seconds measured per configuration (after a warm-up of a quarter of that).
    #[arg(long, default_value_t = 8.0)]
    seconds: f64,
    /// Policies in the large configuration.
    #[arg(long, default_value_t = 1000)]
    policies: usize,
    /// Namespaces the policies are spread over.
    #[arg(long, default_value_t = 50)]
    namespaces: usize,
    /// Upper bound on requests per phase.
    #[arg(long, default_value_t = 5_000_000)]
    max_requests: u64,
}

/// Latencies of one phase, in nanoseconds.
struct Phase {
    name: String,
    requests: u64,
    elapsed: Duration,
    latencies: Vec<u64>,
    errors: u64,
}

impl Phase {
    fn throughput(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        Duration::from_nanos(self.latencies[rank.clamp(1, self.latencies.len()) - 1])
    }

    fn row(&self) -> String {
        let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
        format!(
            "| {:<34} | {:>9} | {:>9.0} | {:>8} | {:>8} | {:>8} | {:>6} |",
            self.name,
            self.requests,
            self.throughput(),
            us(self.percentile(50.0)),
            us(self.percentile(99.0)),
            us(self.percentile(99.9)),
            self.errors
        )
    }
}

/// The ceiling: same accept loop, TLS and HTTP stack; reads the body, answers a fixed allow.
#[derive(Clone)]
struct Ceiling {
    answer: Bytes,
}

impl Handler for Ceiling {
    async fn call(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let _ = request.into_body().collect().await;
        let mut response = Response::new(Full::new(self.answer.clone()));
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let work = std::env::temp_dir().join(format!("outfit-loadgen-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let result = run(&args, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn run(args: &Args, work: &Path) -> Result<()> {
    let certs = SelfSigned::ensure(&work.join("certs"), &[])?;
    let empty = work.join("policies-0");
    std::fs::create_dir_all(&empty)?;
    let large = work.join(format!("policies-{}", args.policies));
    generate_policies(&large, args.policies, args.namespaces)?;
    let bodies = Arc::new(review_mix(
        args.namespaces,
        args.policies / args.namespaces.max(1),
    ));

    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("server")
        .enable_all()
        .build()?;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client")
        .enable_all()
        .build()?;
    let client = client_config(&certs.ca_cert)?;
    let measure = Duration::from_secs_f64(args.seconds);
    let warmup = measure / 4;

    println!(
        "outfit-loadgen: {} connections, {:.1}s per phase, {} review bodies, {} policies over {} namespaces",
        args.connections,
        args.seconds,
        bodies.len(),
        args.policies,
        args.namespaces
    );
    let mut phases = Vec::new();

    // Ceiling.
    let shutdown = CancellationToken::new();
    let addr = server_rt.block_on(start_ceiling(&certs, shutdown.clone()))?;
    phases.push(client_rt.block_on(closed_loop(
        "ceiling (fixed allow)",
        addr,
        &client,
        &bodies,
        args,
        warmup,
        measure,
    ))?);
    shutdown.cancel();

    // outfit, 0 and N policies.
    for (name, policies) in [
        ("outfit, 0 policies".to_owned(), &empty),
        (format!("outfit, {} policies", args.policies), &large),
    ] {
        let shutdown = CancellationToken::new();
        let addr = server_rt.block_on(start_outfit(&certs, policies, shutdown.clone()))?;
        phases.push(client_rt.block_on(closed_loop(&name, addr, &client, &bodies, args, warmup, measure))?);
        shutdown.cancel();
    }

    // Open loop at half of outfit's throughput with N policies.
    let half = phases[2].throughput() / 2.0;
    let shutdown = CancellationToken::new();
    let addr = server_rt.block_on(start_outfit(&certs, &large, shutdown.clone()))?;
    let name = format!("outfit, {} policies, {:.0} rps open", args.policies, half);
    phases.push(client_rt.block_on(open_loop(&name, addr, &client, &bodies, args, half, measure))?);
    shutdown.cancel();

    println!();
    println!(
        "| configuration                      |  requests |   req/s   |   p50    |   p99    |  p99.9   | errors |"
    );
    println!(
        "|------------------------------------|-----------|-----------|----------|----------|----------|--------|"
    );
    for phase in &phases {
        println!("{}", phase.row());
    }
    println!();
    let ceiling = phases[0].throughput();
    for phase in &phases[1..3] {
        println!(
            "{}: {:.1}% of the ceiling's throughput",
            phase.name,
            100.0 * phase.throughput() / ceiling
        );
    }
    println!(
        "{}: p99 {:.0} µs at {:.0} req/s achieved",
        phases[3].name,
        phases[3].percentile(99.0).as_secs_f64() * 1e6,
        phases[3].throughput()
    );
    let failed: u64 = phases.iter().map(|p| p.errors).sum();
    anyhow::ensure!(failed == 0, "{failed} requests failed");
    Ok(())
}

async fn start_ceiling(certs: &SelfSigned, shutdown: CancellationToken) -> Result<SocketAddr> {
    let store = Arc::new(CertStore::load(
        certs.cert.clone(),
        certs.key.clone(),
        Metrics::new(),
    )?);
    let tls = store.server_config()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let answer = Bytes::from_static(
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#,
    );
    tokio::spawn(accept::serve_tls(
        listener,
        tokio_rustls::TlsAcceptor::from(tls),
        Ceiling { answer },
        Timeouts::default(),
        shutdown,
        TaskTracker::new(),
    ));
    Ok(addr)
}

async fn start_outfit(
    certs: &SelfSigned,
    policies: &Path,
    shutdown: CancellationToken,
) -> Result<SocketAddr> {
    let mut config = Config::new(
        vec![policies.to_path_buf()],
        TlsSource::Files {
            cert: certs.cert.clone(),
            key: certs.key.clone(),
        },
    );
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin_listen = None;
    config.poll_interval = Duration::from_secs(3600);
    let server = Server::bind(config).await?;
    let addr = server.local_addr();
    tokio::spawn(server.run(shutdown));
    Ok(addr)
}

fn client_config(ca: &Path) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let mut config = ClientConfig::builder_with_provider(outfit_server::tls::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The API server speaks HTTP/1.1 to webhooks that are not on loopback.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

type Sender = http1::SendRequest<Full<Bytes>>;

async fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Result<Sender> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = TlsConnector::from(config.clone())
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let (sender, connection) = http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn send(sender: &mut Sender, body: &Bytes) -> Result<()> {
    sender.ready().await?;
    let request = Request::post("/mutate?timeout=10s")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let _ = response.into_body().collect().await?;
    anyhow::ensure!(status == hyper::StatusCode::OK, "status {status}");
    Ok(())
}

/// Each connection sends its next request as soon as the previous answer arrives.
async fn closed_loop(
    name: &str,
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    bodies: &Arc<Vec<Bytes>>,
    args: &Args,
    warmup: Duration,
    measure: Duration,
) -> Result<Phase> {
    let start = Instant::now();
    let measure_from = start + warmup;
    let deadline = measure_from + measure;
    let per_connection = args.max_requests / args.connections as u64;
    let mut tasks = Vec::new();
    for worker in 0..args.connections {
        let mut sender = connect(addr, config).await?;
        let bodies = bodies.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut i = worker;
            while latencies.len() < per_connection as usize {
                let sent = Instant::now();
                if sent >= deadline {
                    break;
                }
                let ok = send(&mut sender, &bodies[i % bodies.len()]).await.is_ok();
                i += 1;
                if sent >= measure_from {
                    if ok {
                        latencies.push(sent.elapsed().as_nanos() as u64);
                    } else {
                        errors += 1;
                    }
                }
            }
            (latencies, errors)
        }));
    }
    collect(name, tasks, measure).await
}

/// Requests at a fixed total rate, spread over the connections; latency from the actual send.
async fn open_loop(
    name: &str,
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    bodies: &Arc<Vec<Bytes>>,
    args: &Args,
    rate: f64,
    measure: Duration,
) -> Result<Phase> {
    let warmup = measure / 4;
    let period = Duration::from_secs_f64(args.connections as f64 / rate);
    let start = Instant::now() + Duration::from_millis(50);
    let measure_from = start + warmup;
    let deadline = measure_from + measure;
    let per_connection = args.max_requests / args.connections as u64;
    let mut tasks = Vec::new();
    for worker in 0..args.connections {
        let mut sender = connect(addr, config).await?;
        let bodies = bodies.clone();
        // Stagger the connections evenly over one period.
        let offset = period.mul_f64(worker as f64 / args.connections as f64);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut next = start + offset;
            let mut i = worker;
            let mut interval = tokio::time::interval_at(next.into(), period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while latencies.len() < per_connection as usize && next < deadline {
                interval.tick().await;
                let sent = Instant::now();
                let ok = send(&mut sender, &bodies[i % bodies.len()]).await.is_ok();
                i += 1;
                if sent >= measure_from {
                    if ok {
                        latencies.push(sent.elapsed().as_nanos() as u64);
                    } else {
                        errors += 1;
                    }
                }
                next += period;
            }
            (latencies, errors)
        }));
    }
    collect(name, tasks, measure).await
}

async fn collect(
    name: &str,
    tasks: Vec<tokio::task::JoinHandle<(Vec<u64>, u64)>>,
    measure: Duration,
) -> Result<Phase> {
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (mut l, e) = task.await?;
        latencies.append(&mut l);
        errors += e;
    }
    latencies.sort_unstable();
    Ok(Phase {
        name: name.to_owned(),
        requests: latencies.len() as u64,
        elapsed: measure,
        latencies,
        errors,
    })
}

/// `count` PodDefaults spread over `namespaces` namespaces, each namespace in one JSON List file.
/// In each namespace, PodDefault `i` selects pods labelled `pd-<i>: "true"` and adds an env
/// variable, a volume and a mount, like the Kubeflow examples.
fn generate_policies(dir: &Path, count: usize, namespaces: usize) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let per_namespace = count.div_ceil(namespaces.max(1));
    let mut made = 0;
    for ns in 0..namespaces {
        let namespace = format!("team-{ns}");
        let mut items = vec![json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/part-of": "kubeflow-profile"}}
        })];
        for i in 0..per_namespace {
            if made == count {
                break;
            }
            made += 1;
            items.push(json!({
                "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
                "metadata": {"name": format!("pd-{i}"), "namespace": namespace},
                "spec": {
                    "desc": format!("configuration {i}"),
                    "selector": {"matchLabels": {format!("pd-{i}"): "true"}},
                    "env": [{"name": format!("PD_{i}_ENDPOINT"), "value": format!("https://svc-{i}.{namespace}.svc:8443")}],
                    "volumes": [{"name": format!("pd-{i}-secret"), "secret": {"secretName": format!("pd-{i}-credentials")}}],
                    "volumeMounts": [{"name": format!("pd-{i}-secret"), "mountPath": format!("/var/run/secrets/pd-{i}"), "readOnly": true}]
                }
            }));
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(dir.join(format!("{namespace}.json")), serde_json::to_vec(&list)?)?;
    }
    Ok(())
}

fn pod(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": namespace, "creationTimestamp": null, "labels": labels,
            "annotations": {"notebooks.kubeflow.org/server-type": "jupyter"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": "0b5e1f9a-3c2d-4e8f-9a7b-6c5d4e3f2a10", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "volumes": [{"name": "kube-api-access-7xk2p", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}, {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}], "defaultMode": 420}}],
            "containers": [{
                "name": "main", "image": "kubeflownotebookswg/jupyter-scipy:v1.9.0",
                "ports": [{"name": "notebook-port", "containerPort": 8888, "protocol": "TCP"}],
                "env": [{"name": "NB_PREFIX", "value": format!("/notebook/{namespace}/{name}")}],
                "resources": {"limits": {"memory": "8Gi"}, "requests": {"cpu": "500m", "memory": "2Gi"}},
                "volumeMounts": [{"name": "kube-api-access-7xk2p", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default-editor", "securityContext": {"fsGroup": 100}, "schedulerName": "default-scheduler"
        },
        "status": {}
    })
}

fn review(uid: usize, operation: &str, namespace: &str, name: &str, object: Value, old: Value) -> Bytes {
    let kind = object["kind"].as_str().unwrap_or("Pod").to_owned();
    let body = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{uid:012}"),
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name, "namespace": namespace, "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kubeflow:notebook-controller-service-account", "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false
        }
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// 200 bodies: 60% pod CREATEs opting in to 1–3 PodDefaults, 20% pod CREATEs matching none,
/// 10% pod UPDATEs, 5% DELETEs, 5% CREATEs of other kinds.
fn review_mix(namespaces: usize, per_namespace: usize) -> Vec<Bytes> {
    let per_namespace = per_namespace.max(1);
    (0..200)
        .map(|n| {
            let namespace = format!("team-{}", n % namespaces.max(1));
            let name = format!("nb-{n}");
            match n % 20 {
                0..12 => {
                    let mut labels = serde_json::Map::new();
                    labels.insert("app".into(), json!("notebook"));
                    for k in 0..=(n % 3) {
                        labels.insert(format!("pd-{}", (n + 7 * k) % per_namespace), json!("true"));
                    }
                    review(n, "CREATE", &namespace, &name, pod(&namespace, &name, Value::Object(labels)), Value::Null)
                }
                12..16 => review(
                    n,
                    "CREATE",
                    &namespace,
                    &name,
                    pod(&namespace, &name, json!({"app": "batch"})),
                    Value::Null,
                ),
                16 | 17 => {
                    let old = pod(&namespace, &name, json!({"app": "batch"}));
                    let new = pod(&namespace, &name, json!({"app": "batch", "pd-1": "true"}));
                    review(n, "UPDATE", &namespace, &name, new, old)
                }
                18 => review(
                    n,
                    "DELETE",
                    &namespace,
                    &name,
                    Value::Null,
                    pod(&namespace, &name, json!({"app": "batch"})),
                ),
                _ => review(
                    n,
                    "CREATE",
                    &namespace,
                    &name,
                    json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}}),
                    Value::Null,
                ),
            }
        })
        .collect()
}
