//! What `outfit workspaces` costs, on a realistic local cluster. Run with:
//!
//! ```text
//! hack/control-plane/up.sh --nodes 2 /tmp/wsbench
//! cargo build --release -p outfit -p outfit-loadgen
//! ./target/release/workspaces-bench --state-dir /tmp/wsbench
//! hack/control-plane/down.sh /tmp/wsbench
//! ```
//!
//! Two measurements, each against its own fresh namespace:
//!
//! 1. **Create to ready**: `--creates` (50) pods, `--parallel` (10) at a time, each timed from
//!    the request to the moment it is ready: bare (the admin creates the manifest's pod and waits
//!    for its Ready condition through a watch, what `kubectl create` + `kubectl wait` do), then
//!    through the backend (`create_pod`, then `watch_create_pod` until it answers ready, which
//!    includes the http Service and Ingress the manifest asks for). Prints p50/p99 of both and of
//!    their difference.
//! 2. **get_pods**: `--users` (100) users with `--pods-per-user` (10) pods each, made straight in
//!    the API server as the backend makes them (its labels and annotations), then `--requests`
//!    (2,000) `get_pods` calls over one keep-alive connection, users in turn. Prints p50/p99/max.
//!
//! Everything listens on 127.0.0.1; the loops are bounded in count and each wait in time.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::Parser;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Parser)]
struct Args {
    /// The state directory of `hack/control-plane/up.sh --nodes N`.
    #[arg(long)]
    state_dir: PathBuf,
    /// The outfit binary.
    #[arg(long, default_value = "target/release/outfit")]
    outfit: PathBuf,
    /// Pods created in the create-to-ready measurement (each way).
    #[arg(long, default_value_t = 50)]
    creates: usize,
    /// Creates in flight at once.
    #[arg(long, default_value_t = 10)]
    parallel: usize,
    /// Users in the get_pods measurement.
    #[arg(long, default_value_t = 100)]
    users: usize,
    /// Pods of each user in the get_pods measurement.
    #[arg(long, default_value_t = 10)]
    pods_per_user: usize,
    /// get_pods requests.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
}

const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "80"}
spec:
  containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]
"#;

fn env_value(state_dir: &std::path::Path, key: &str) -> Result<String> {
    let env =
        std::fs::read_to_string(state_dir.join("env")).context("reading the control plane's env file")?;
    let prefix = format!("export {key}=");
    env.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim_matches('\'').to_owned())
        .with_context(|| format!("{key} not in the env file"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let kubeconfig = args.state_dir.join("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = Client::try_from(config)?;
    let manifests = serve_manifest().await?;

    let ns = format!("bench-create-{}", std::process::id());
    make_namespace(&client, &ns).await?;
    let backend = start_backend(&args, &ns, manifests, "")?;
    let bare = measure(args.creates, args.parallel, {
        let client = client.clone();
        let ns = ns.clone();
        move |i| bare_create(client.clone(), ns.clone(), i)
    })
    .await?;
    let url = format!("http://127.0.0.1:{manifests}/web.yaml");
    let through = measure(args.creates, args.parallel, {
        let port = backend.port;
        move |i| backend_create(port, url.clone(), i)
    })
    .await?;
    drop(backend);
    // Its pods would count against the nodes' pod capacity in the next measurement.
    Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await?;
    println!(
        "create to ready, {} pods, {} at a time:",
        args.creates, args.parallel
    );
    report("  bare (create + watch Ready)", &bare);
    report("  outfit workspaces (create_pod + watch_create_pod)", &through);
    let added: Vec<Duration> = percentiles(&through)
        .iter()
        .zip(percentiles(&bare))
        .map(|(t, b)| t.saturating_sub(b))
        .collect();
    println!(
        "  added by outfit: p50 {:.1} ms, p99 {:.1} ms",
        ms(added[0]),
        ms(added[1])
    );

    let ns = format!("bench-list-{}", std::process::id());
    make_namespace(&client, &ns).await?;
    make_pods(&client, &ns, args.users, args.pods_per_user).await?;
    let backend = start_backend(&args, &ns, manifests, "")?;
    let latencies = get_pods(&backend, args.users, args.pods_per_user, args.requests).await?;
    println!(
        "get_pods, {} pods of {} users, {} requests on one keep-alive connection:",
        args.users * args.pods_per_user,
        args.users,
        args.requests
    );
    report("  get_pods", &latencies);
    drop(backend);
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
    Ok(())
}

/// Serves the manifest on loopback; returns the port.
async fn serve_manifest() -> Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let _ = tcp.read(&mut buffer).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{MANIFEST}",
                    MANIFEST.len()
                );
                let _ = tcp.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(port)
}

async fn make_namespace(client: &Client, name: &str) -> Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    // The ServiceAccount admission plugin needs `default`, which the controller manager makes.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), name);
    let deadline = Instant::now() + Duration::from_secs(30);
    while accounts.get_opt("default").await?.is_none() {
        if Instant::now() > deadline {
            bail!(
                "no default ServiceAccount in {name}: is the controller manager running (up.sh --nodes 1)?"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

struct Backend {
    child: Child,
    port: u16,
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_backend(args: &Args, namespace: &str, manifests: u16, extra: &str) -> Result<Backend> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let config = std::env::temp_dir().join(format!("workspaces-bench-{namespace}.yaml"));
    let pod_cidr = env_value(&args.state_dir, "POD_CIDR")?;
    std::fs::write(
        &config,
        format!(
            "namespace: {namespace}\nwhitelistManifestRegex: 'http://127\\.0\\.0\\.1:{manifests}/'\n\
             ingressDomain: pods.bench\npodSubnetCidr: {pod_cidr}\ntimeoutCreate: 2m\n\
             listen: 127.0.0.1:{port}\nadminListen: ''\n{extra}"
        ),
    )?;
    let child = Command::new(&args.outfit)
        .args(["workspaces", "--config"])
        .arg(&config)
        .env("KUBECONFIG", args.state_dir.join("kubeconfig"))
        .env("OUTFIT_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", args.outfit.display()))?;
    let backend = Backend { child, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("outfit workspaces did not listen within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(backend)
}

/// Runs `count` timed operations, `parallel` at a time; returns their durations.
async fn measure<F, Fut>(count: usize, parallel: usize, operation: F) -> Result<Vec<Duration>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Duration>>,
{
    let results: Vec<Result<Duration>> = futures::stream::iter((0..count).map(operation))
        .buffer_unordered(parallel)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Creates the manifest's pod as the admin and waits for Ready through a watch.
async fn bare_create(client: Client, ns: String, i: usize) -> Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let mut pod: Pod = serde_json::from_value(serde_saphyr::from_str::<Value>(MANIFEST)?)?;
    let name = format!("bare-{i}");
    pod.metadata.name = Some(name.clone());
    let started = Instant::now();
    pods.create(&PostParams::default(), &pod).await?;
    let stream = watcher(
        pods.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .applied_objects()
    .boxed();
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        let mut stream = stream;
        while let Some(pod) = stream.next().await {
            let pod = pod?;
            let ready = pod
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return Ok::<_, anyhow::Error>(started.elapsed());
            }
        }
        bail!("the watch ended")
    })
    .await
    .context("bare pod not ready within 2 minutes")??;
    pods.delete(&name, &DeleteParams::default()).await?;
    Ok(ready)
}

/// create_pod then watch_create_pod through the backend.
async fn backend_create(port: u16, url: String, i: usize) -> Result<Duration> {
    let user = format!("bench{i}");
    let started = Instant::now();
    let (status, created) = post(port, "/create_pod", &json!({"yaml_url": url, "user_id": user})).await?;
    if status != 200 {
        bail!("create_pod answered {status}: {created}");
    }
    let pod = created["pod_name"].as_str().unwrap_or_default().to_owned();
    let (status, ready) = post(
        port,
        "/watch_create_pod",
        &json!({"user_id": user, "pod_name": pod}),
    )
    .await?;
    if status != 200 || ready["ready"] != json!(true) {
        bail!("watch_create_pod answered {status}: {ready}");
    }
    Ok(started.elapsed())
}

async fn post(port: u16, path: &str, body: &Value) -> Result<(u16, Value)> {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(180), tcp.read_to_string(&mut answer)).await??;
    let (head, body) = answer.split_once("\r\n\r\n").context("an HTTP answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("a status")?;
    Ok((status, serde_json::from_str(body)?))
}

/// Makes `users` × `per_user` pods as the backend makes them: its labels and annotations.
async fn make_pods(client: &Client, ns: &str, users: usize, per_user: usize) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let specs: Vec<(String, String)> = (0..users)
        .flat_map(|u| {
            (0..per_user).map(move |p| (format!("user{u}@bench.example"), format!("web-user{u}-{p}")))
        })
        .collect();
    let results: Vec<Result<()>> = futures::stream::iter(specs.into_iter().map(|(user, name)| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {
                    "name": name,
                    "labels": {"user": user.split('@').next().unwrap(), "domain": "bench.example",
                               "podName": name, "app.kubernetes.io/managed-by": "outfit-workspaces"},
                    "annotations": {"outfit.dev/user-id": user, "outfit.dev/started": "2026-01-01T00:00:00Z",
                                    "sciencedata.dk/ingress-port": "80"}
                },
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }))?;
            pods.create(&PostParams::default(), &pod).await?;
            Ok(())
        }
    }))
    .buffer_unordered(16)
    .collect()
    .await;
    results.into_iter().collect::<Result<()>>()?;
    // Wait until kwok has run them all, so get_pods answers about running pods.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let running = pods
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == users * per_user {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "only {running} of {} pods running after 5 minutes",
                users * per_user
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `requests` get_pods calls over one keep-alive connection, users in turn.
async fn get_pods(
    backend: &Backend,
    users: usize,
    per_user: usize,
    requests: usize,
) -> Result<Vec<Duration>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", backend.port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
    tokio::spawn(connection);
    let mut latencies = Vec::with_capacity(requests);
    let bodies: Arc<BTreeMap<usize, Bytes>> = Arc::new(
        (0..users)
            .map(|u| {
                (
                    u,
                    Bytes::from(json!({"user_id": format!("user{u}@bench.example")}).to_string()),
                )
            })
            .collect(),
    );
    // Warm-up: the first answers also wait for the cache's first read.
    for i in 0..requests + 50 {
        let body = bodies[&(i % users)].clone();
        let request = hyper::Request::post("/get_pods")
            .header("host", "x")
            .header("content-type", "application/json")
            .body(Full::new(body))?;
        sender.ready().await?;
        let started = Instant::now();
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        let took = started.elapsed();
        let pods: Value = serde_json::from_slice(&body)?;
        if status != 200 || pods.as_array().map(Vec::len) != Some(per_user) {
            bail!(
                "get_pods answered {status} with {} pods",
                pods.as_array().map_or(0, Vec::len)
            );
        }
        if i >= 50 {
            latencies.push(took);
        }
    }
    Ok(latencies)
}

fn percentiles(samples: &[Duration]) -> [Duration; 3] {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    [at(0.5), at(0.99), sorted[sorted.len() - 1]]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(label: &str, samples: &[Duration]) {
    let [p50, p99, max] = percentiles(samples);
    println!(
        "{label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n = {})",
        ms(p50),
        ms(p99),
        ms(max),
        samples.len()
    );
}
