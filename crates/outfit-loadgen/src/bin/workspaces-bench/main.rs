//! What `outfit workspaces` costs, on a realistic local cluster. Run with:
//!
//! ```text
//! hack/control-plane/up.sh --nodes 2 /tmp/wsbench
//! cargo build --release -p outfit -p outfit-loadgen
//! ./target/release/workspaces-bench --state-dir /tmp/wsbench
//! hack/control-plane/down.sh /tmp/wsbench
//! ```
//!
//! Three measurements, each against its own fresh namespace:
//!
//! 1. **Create to ready**: `--creates` (50) pods, `--parallel` (10) at a time, each timed from
//!    the request to the moment it is ready: bare (the admin creates the manifest's pod and waits
//!    for its Ready condition through a watch, what `kubectl create` + `kubectl wait` do), then
//!    through the backend (`create_pod`, then `watch_create_pod` until it answers ready, which
//!    includes the http Service and Ingress the manifest asks for). Prints p50/p99 of both and of
//!    their difference.
//! 2. **Native API**: `--creates` launches, `--parallel` at a time, each a `POST
//!    /api/v1/workspaces` with a bearer token and, right after its 201, `GET
//!    .../progress` read frame by frame as the events arrive. Timed: POST to 201, POST to the
//!    stream's first event, stream opened to its first event, POST to the final `ready` event.
//!    Twice: one launch per user (service-account tokens, checked by TokenReview like any other),
//!    then every launch by alice (the control plane's static token), whose creates the backend
//!    takes one at a time. Every token makes one untimed `GET /api/v1/me` first, so the
//!    TokenReview is remembered, as it is for someone who opened the page before launching.
//! 3. **get_pods**: `--users` (100) users with `--pods-per-user` (10) pods each, made straight in
//!    the API server as the backend makes them (its labels and annotations), then `--requests`
//!    (2,000) `get_pods` calls over one keep-alive connection, users in turn. Prints p50/p99/max.
//!
//! Everything listens on 127.0.0.1; the loops are bounded in count and each wait in time.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

mod args;
mod get_pods;
mod native;
mod support;

use outfit_loadgen::{
    harness::{install_workspace_crd, make_namespace, serve_manifests},
    workspaces::{delete_namespace, manifest, ms, percentiles, report},
};

use self::{
    args::Args,
    get_pods::{get_pods, make_pods},
    native::native,
    support::{post, start_backend},
};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let kubeconfig = args.cluster.state_dir.join("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = Client::try_from(config)?;
    install_workspace_crd(&client, &args.cluster.outfit).await?;
    let manifests = serve_manifests(manifest).await?;

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
    // Its pods would count against the nodes' pod capacity in the next measurement, and the
    // namespace controller deleting them would compete with it for the machine.
    delete_namespace(&client, &ns).await?;
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

    native(&args, &client, manifests).await?;

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
    let mut pod: Pod = serde_json::from_value(serde_saphyr::from_str::<Value>(&manifest("web"))?)?;
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
