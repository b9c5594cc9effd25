//! The native API's launches: POST to 201, to the progress stream's first event, and to ready.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::Client;
use serde_json::json;

use crate::{args::Args, support::start_backend};
use outfit_loadgen::{
    harness::make_namespace,
    workspaces::{WORKSPACES_PER_MANIFEST, call, delete_namespace, follow_progress, open_progress, report},
};
use outfit_test_support::control_plane::env_value;

pub(crate) async fn native(args: &Args, client: &Client, manifests: u16) -> Result<()> {
    let ns = format!("bench-native-{}", std::process::id());
    make_namespace(client, &ns).await?;
    // alice's launches are spread over `web0`, `web1`, ... so no manifest gets more of hers than
    // the backend has names for.
    let alice_manifests = args.creates.div_ceil(WORKSPACES_PER_MANIFEST);
    let catalogue: String = std::iter::once("web".to_owned())
        .chain((0..alice_manifests).map(|m| format!("web{m}")))
        .map(|name| format!("- {{name: {name}, url: 'http://127.0.0.1:{manifests}/{name}.yaml'}}\n"))
        .collect();
    let backend = start_backend(args, &ns, manifests, &format!("catalogue:\n{catalogue}"))?;

    let tokens = outfit_loadgen::harness::service_account_tokens(client, &ns, "bench", args.creates).await?;
    let launches: Vec<(String, String)> = tokens.into_iter().map(|t| (t, "web".to_owned())).collect();
    let users = launch_all(backend.port, launches, args.parallel).await?;
    let alice = env_value(&args.cluster.state_dir, "ALICE_TOKEN")?;
    let launches = (0..args.creates)
        .map(|i| (alice.clone(), format!("web{}", i % alice_manifests)))
        .collect();
    let alone = launch_all(backend.port, launches, args.parallel).await?;
    drop(backend);
    delete_namespace(client, &ns).await?;

    println!(
        "native API (POST /api/v1/workspaces, then GET .../progress), {} launches, {} at a time:",
        args.creates, args.parallel
    );
    for (label, launched) in [
        ("one launch per user (service-account tokens)", &users),
        ("all by alice (static token)", &alone),
    ] {
        println!(" {label}:");
        let of = |f: fn(&Launched) -> Duration| launched.iter().map(f).collect::<Vec<_>>();
        report("  POST to 201", &of(|l| l.created));
        report("  POST to first event", &of(|l| l.first_event));
        report("  stream opened to first event", &of(|l| l.first_from_open));
        report("  POST to ready event", &of(|l| l.ready));
        let progress = launched.iter().filter(|l| l.first_was_progress).count();
        println!(
            "  first event `progress` in {progress} of {} streams (the others opened on a workspace already ready)",
            launched.len()
        );
    }
    Ok(())
}

/// What one launch through the native API took.
struct Launched {
    /// From sending the POST to its 201.
    created: Duration,
    /// From sending the POST to the progress stream's first event.
    first_event: Duration,
    /// From opening the progress stream (connecting) to its first event.
    first_from_open: Duration,
    /// Whether that first event was `progress` (not already `ready`).
    first_was_progress: bool,
    /// From sending the POST to the stream's `ready` event.
    ready: Duration,
}

/// Launches each `(token, manifest)`, `parallel` at a time, after one untimed `GET
/// /api/v1/me` per token.
async fn launch_all(port: u16, launches: Vec<(String, String)>, parallel: usize) -> Result<Vec<Launched>> {
    let tokens: std::collections::BTreeSet<&str> = launches.iter().map(|(t, _)| t.as_str()).collect();
    for token in tokens {
        let authorization = format!("Bearer {token}");
        let (status, me) = call(
            port,
            "GET",
            "/api/v1/me",
            &[("authorization", &authorization)],
            None,
        )
        .await?;
        if status != 200 {
            bail!("GET /api/v1/me answered {status}: {me}");
        }
    }
    let results: Vec<Result<Launched>> = futures::stream::iter(
        launches
            .into_iter()
            .map(|(token, manifest)| launch(port, token, manifest)),
    )
    .buffer_unordered(parallel)
    .collect()
    .await;
    results.into_iter().collect()
}

/// One launch: the POST, then the progress stream, read as it arrives, until `ready`.
async fn launch(port: u16, token: String, manifest: String) -> Result<Launched> {
    tokio::time::timeout(Duration::from_secs(180), async {
        let authorization = format!("Bearer {token}");
        let headers = [("authorization", authorization.as_str())];
        let started = Instant::now();
        let body = json!({"manifest": manifest, "settings": {}});
        let (status, workspace) = call(port, "POST", "/api/v1/workspaces", &headers, Some(&body)).await?;
        let created = started.elapsed();
        if status != 201 {
            bail!("POST /api/v1/workspaces answered {status}: {workspace}");
        }
        let name = workspace["name"].as_str().context("a workspace without a name")?;

        let opened = Instant::now();
        let mut response = open_progress(port, name, &headers).await?;
        let mut first: Option<(Duration, Duration, bool)> = None;
        let mut ready = Duration::ZERO;
        let last = follow_progress(&mut response, |kind, now| {
            first.get_or_insert((now - started, now - opened, kind == "progress"));
            ready = now - started;
        })
        .await?;
        if last != "ready" {
            bail!("workspace {name} ended with {last}");
        }
        let (first_event, first_from_open, first_was_progress) = first.context("a stream without events")?;
        Ok(Launched {
            created,
            first_event,
            first_from_open,
            first_was_progress,
            ready,
        })
    })
    .await
    .context("a launch not ready within 3 minutes")?
}
