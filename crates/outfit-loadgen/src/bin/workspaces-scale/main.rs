//! outfit's workspace backend at a university's scale (issue 25): `--workspaces` (10,000)
//! workspaces of `--users` (2,000) on the simulated nodes of `hack/control-plane/up.sh --nodes K`
//! (200). Run with `hack/bench-workspaces-scale.sh`, which starts that cluster with an audit log
//! of the backend's requests; by hand:
//!
//! ```text
//! hack/control-plane/up.sh --nodes 200 /tmp/wsscale
//! cargo build --release -p outfit -p outfit-loadgen
//! ./target/release/workspaces-scale --state-dir /tmp/wsscale
//! hack/control-plane/down.sh /tmp/wsscale
//! ```
//!
//! In turn:
//!
//! 1. **Bare creates**: `--bare-creates` pods made by the admin at `--rate`, timed to Ready.
//! 2. **Fill**: the backend (its own ServiceAccount under the FlowSchema `outfit manifests
//!    --workspaces` ships, unless `--without-flow-schema`; `maxWorkspacesPerUser` just above each
//!    user's share) gets `--workspaces` creates at `--rate` a second, every other one through
//!    `create_pod` + `watch_create_pod` and the others through `POST /api/v1/workspaces` + the
//!    progress stream, each timed to ready; every `--churn-every`th user also launches one more
//!    through the other API and deletes it once ready; `--list-rate` lists a second run
//!    alongside. The backend's RSS and CPU, and the cluster's CPU, every `--sample-every`.
//! 3. **Lists at scale**: `--list-requests` `get_pods` and `GET /api/v1/workspaces`, each
//!    answer checked against the user's count, and admin lists of everything.
//! 4. **A fresh replica**: a second backend on the same namespace, timed to `/readyz`.
//! 5. **Half stopped** (issue 31): every native workspace (half of them: each has a Workspace)
//!    stopped through the API at `--rate`, until every Workspace says `Stopped`; the lists, the
//!    backend's RSS and a fresh replica again; then `--starts` of them started again at `--rate`,
//!    nine in ten through the API (to `ready`), one in ten through the controller (`spec.started`
//!    patched, to `Running`).
//! 6. **Held progress streams**: `--streams` launches whose pods wait for a node label, each
//!    followed through its stream; then the nodes get the label and every stream must end
//!    `ready`.
//! 7. **API requests per create**, from kube-apiserver's audit log (`--audit-log`): the
//!    backend's requests during the fill, by verb and resource.
//!
//! With `--storage-strategy` (issue 32) every workspace mounts its user's home, which the backend
//! makes as it says (`nfs`: a PersistentVolume and a claim per user, both outfit's; `per-user`: a
//! claim per user of the class of `outfit_test_support::provisioner`, the test cluster's
//! stand-in for a CSI driver's provisioner, which this process runs); without it they mount
//! none.
//!
//! Fails (after printing everything) if any create, delete, list or stream failed.

use std::time::Instant;

use anyhow::{Result, bail};
use clap::Parser;
use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};
use outfit_loadgen::{
    harness::{AdminPort, Backend, install_workspace_crd, make_namespace, serve_manifests},
    workspaces::{home_manifest, pod_manifest},
};
use outfit_test_support::{
    control_plane::{ControlPlane, env_value},
    provisioner,
};

mod args;
mod at_scale;
mod bare;
mod cluster;
mod fill;
mod launch;
mod report;
mod stopped;
mod streams;

use self::{
    args::{Args, HOME, StorageStrategy},
    cluster::{HOLD_LABEL, Processes, apply_flow_schema, audit_mark, backend_kubeconfig},
    streams::HELD,
};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.workspaces == 0 || args.users == 0 || args.rate <= 0.0 {
        bail!("--workspaces, --users and --rate must be above 0");
    }
    let work = args
        .work
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("workspaces-scale-{}", std::process::id())));
    std::fs::create_dir_all(&work)?;
    let kubeconfig = Kubeconfig::read_from(args.cluster.state_dir.join("kubeconfig"))?;
    let client = Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?,
    )?;
    install_workspace_crd(&client, &args.cluster.outfit).await?;
    report::storage(&args);
    if args.storage_strategy.is_some_and(StorageStrategy::provisioned) {
        provisioner::ensure(&ControlPlane::at(&args.cluster.state_dir)).await;
    }
    let manifests = serve_manifests(served).await?;
    let marks = args.audit_log.as_deref().map(audit_mark).transpose()?;

    let bare = bare::bare_creates(&client, args.bare_creates, args.rate).await?;

    let ns = format!("scale-{}", std::process::id());
    make_namespace(&client, &ns).await?;
    let (backend_kubeconfig, backend_user) =
        backend_kubeconfig(&client, &args.cluster.state_dir, &work).await?;
    if !args.without_flow_schema {
        apply_flow_schema(&client, &args.cluster.outfit).await?;
    }
    let settings = settings(&args, &ns, manifests)?;
    let start = |name: &str| {
        Backend::start(
            &args.cluster.outfit,
            &backend_kubeconfig,
            &work.join(format!("{name}.yaml")),
            &settings,
            Some((&work.join(format!("{name}.log")), "warn")),
            AdminPort::Loopback,
        )
    };
    let started = Instant::now();
    let backend = start("backend")?;
    let admin_port = backend.admin_port.unwrap_or_default();
    // The fill's requests are counted from here, after the backend's first full read.
    at_scale::wait_ready(backend.child.id(), admin_port, started, started.elapsed()).await?;
    let processes = Processes::new(&args.cluster.state_dir, backend.child.id())?;
    let fill_from = args.audit_log.as_deref().map(audit_mark).transpose()?;
    let fill = fill::fill(&args, backend.port, manifests, &processes).await?;
    let fill_to = args.audit_log.as_deref().map(audit_mark).transpose()?;
    report::fill(&args, &bare, &fill, &processes);
    report::homes(&args, &cluster::homes(&client, &ns).await?);

    let owned = |u: usize| args.workspaces / args.users + usize::from(u < args.workspaces % args.users);
    settle(&client, &ns, args.workspaces, owned).await?;
    let lists = at_scale::lists(
        backend.port,
        args.users,
        args.list_requests,
        |u| (owned(u), owned(u)),
        args.workspaces,
    )
    .await?;
    report::lists(&args, &lists);

    let fresh = fresh_replica(&start).await?;
    report::replica(&args, &fresh);

    let stopped = if args.starts > 0 {
        Some(half_stopped(&args, &client, &ns, backend.port, &processes, owned, &start).await?)
    } else {
        None
    };

    let held = if args.streams > 0 {
        Some(
            streams::held_streams(
                &client,
                backend.port,
                &args.entry(HELD),
                args.streams,
                args.users,
                args.rate,
                &processes,
            )
            .await?,
        )
    } else {
        None
    };
    if let Some(held) = &held {
        report::streams(held, &processes);
    }
    let end = args.audit_log.as_deref().map(audit_mark).transpose()?;
    if let (Some(log), Some(from), Some(to), Some(start), Some(end)) =
        (&args.audit_log, fill_from, fill_to, marks, end)
    {
        report::requests(log, (from, to), (start, end), &backend_user, &fill)?;
    }
    report::goals(&bare, &fill, &lists, &fresh, held.as_ref(), &processes);
    let failures = fill.failures.len()
        + held.as_ref().map_or(0, |h| h.failures.len())
        + stopped
            .as_ref()
            .map_or(0, |(stops, starts)| stops.failures.len() + starts.failures.len());
    if failures > 0 {
        bail!("{failures} operations failed (listed above)");
    }
    Ok(())
}

/// A fresh replica (`start`ed) timed to `/readyz`, then stopped.
async fn fresh_replica(start: &impl Fn(&str) -> Result<Backend>) -> Result<at_scale::Replica> {
    let started = Instant::now();
    let replica = start("replica")?;
    let listening = started.elapsed();
    let admin_port = replica.admin_port.unwrap_or_default();
    at_scale::wait_ready(replica.child.id(), admin_port, started, listening).await
}

/// Issue 31: every native workspace stopped (half of them), the lists and a fresh replica again,
/// then `--starts` of them started again.
async fn half_stopped(
    args: &Args,
    client: &Client,
    ns: &str,
    port: u16,
    processes: &Processes,
    owned: impl Fn(usize) -> usize,
    start: &impl Fn(&str) -> Result<Backend>,
) -> Result<(stopped::Stops, stopped::Starts)> {
    let stops = stopped::stop_all(client, ns, port, args.rate).await?;
    let after_stops = processes.snapshot();
    let per_user = |u: usize| {
        let stopped = stops.per_user.get(&u).copied().unwrap_or(0);
        (owned(u).saturating_sub(stopped), owned(u))
    };
    let lists = at_scale::lists(port, args.users, args.list_requests, per_user, args.workspaces).await?;
    let fresh = fresh_replica(start).await?;
    let starts = stopped::start_some(client, ns, port, args.rate, args.starts).await?;
    report::stopped(args, &stops, &after_stops, &lists, &fresh, &starts);
    Ok((stops, starts))
}

/// The manifests served: `held` waits for the nodes' hold label, anything else is
/// [`pod_manifest`]'s pod; with [`HOME`] after the name (`webhome`, `heldhome`), the same one
/// mounting the user's home.
fn served(name: &str) -> String {
    let (base, home) = match name.strip_suffix(HOME) {
        Some(base) => (base, true),
        None => (name, false),
    };
    let spec_lines = if base == HELD {
        format!("  nodeSelector: {{{HOLD_LABEL}: open}}\n")
    } else {
        String::new()
    };
    if home {
        home_manifest(base, &spec_lines)
    } else {
        pod_manifest(base, &spec_lines)
    }
}

/// The backends' configuration: the namespace, manifests from the local server (the catalogue
/// offers `web` and `held`, and each with [`HOME`]), a per-user limit just above each user's share, room for the held
/// streams' connections, 127.0.0.1 as the authenticating proxy, and the homes'
/// `--storage-strategy` (a provisioned one on the stand-in provisioner's class).
fn settings(args: &Args, ns: &str, manifests: u16) -> Result<String> {
    let pod_cidr = env_value(&args.cluster.state_dir, "POD_CIDR")?;
    // Each user's share, one churn launch and one held stream per round of users.
    let limit = args.workspaces.div_ceil(args.users) + 1 + args.streams.div_ceil(args.users);
    let connections = args.streams + 1_024;
    let url = |name: &str| format!("'http://127.0.0.1:{manifests}/{name}.yaml'");
    let mut storage = String::new();
    if let Some(strategy) = args.storage_strategy {
        storage = format!("storageStrategy: {}\n", strategy.as_config());
        if strategy.provisioned() {
            storage.push_str(&format!("storageClassName: {}\n", provisioner::CLASS));
        }
    }
    let entries: String = ["web", HELD]
        .iter()
        .flat_map(|base| [base.to_string(), format!("{base}{HOME}")])
        .map(|name| format!("- {{name: {name}, url: {}}}\n", url(&name)))
        .collect();
    // The scale's one admin lists every user's workspaces as fast as it can: the per-user pace
    // (requestsPerUserPerSecond) would measure itself, not the backend.
    Ok(format!(
        "namespace: {ns}\nwhitelistManifestRegex: 'http://127\\.0\\.0\\.1:{manifests}/'\n\
         ingressDomain: pods.scale\npodSubnetCidr: {pod_cidr}\ntimeoutCreate: 30m\n\
         maxWorkspacesPerUser: {limit}\nmaxConnections: {connections}\n\
         requestsPerUserPerSecond: 1000000\nrequestBurstPerUser: 1000000\n\
         trustedProxyCidrs: ['127.0.0.0/8']\nadminGroups: [scale-admins]\n\
         {storage}catalogue:\n{entries}"
    ))
}

/// Waits (at most five minutes) until namespace `ns` holds exactly `count` pods: the churn's
/// deleted ones gone, so every list can be checked against each user's share. Pods beyond a
/// user's share `owned(u)` are those of launches the benchmark gave up on (counted as failed)
/// that the backend went on to finish: past the five minutes they are deleted, newest first, so
/// that the phases after the fill still run on the counts they check.
async fn settle(client: &Client, ns: &str, count: usize, owned: impl Fn(usize) -> usize) -> Result<()> {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client.clone(), ns);
    let there = || async {
        let page = pods
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await?;
        anyhow::Ok(page.items.len() + page.metadata.remaining_item_count.unwrap_or(0) as usize)
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(300);
    let mut trimmed = false;
    loop {
        let there = there().await?;
        if there == count {
            return Ok(());
        }
        if Instant::now() > deadline {
            if trimmed || there < count {
                bail!("{there} pods in {ns} 5 minutes after the fill, not {count}");
            }
            let extra = trim_extras(&pods, &owned).await?;
            println!(
                "settle: {there} pods 5 minutes after the fill, not {count}: deleted {extra} beyond their users' shares (launches given up on, then finished)"
            );
            trimmed = true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Deletes each user's pods beyond `owned(user)`, newest first; answers how many.
async fn trim_extras(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    owned: &impl Fn(usize) -> usize,
) -> Result<usize> {
    let mut by_user: std::collections::BTreeMap<usize, Vec<_>> = Default::default();
    for pod in pods.list_metadata(&Default::default()).await?.items {
        let user = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("outfit.dev/user-id"))
            .and_then(|id| id.strip_prefix('u')?.split('@').next()?.parse::<usize>().ok());
        if let Some(user) = user {
            by_user.entry(user).or_default().push(pod.metadata);
        }
    }
    let mut deleted = 0;
    for (user, mut metas) in by_user {
        metas.sort_by(|a, b| b.creation_timestamp.cmp(&a.creation_timestamp));
        let extra = metas.len().saturating_sub(owned(user));
        for meta in metas.into_iter().take(extra) {
            let name = meta.name.unwrap_or_default();
            pods.delete(&name, &Default::default()).await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
