//! Start time with pulls planned ahead (issue 35), a simulation: the image kubelet stand-in
//! (`outfit_test_support::kubelet`) on nodes of its own, whose pulls take a modelled time (a
//! latency, then the image's size at the node's bandwidth shared by the pulls running there), a
//! catalogue of `--entries` images of 0.3 to 3 GB launched Zipf-like, and a launch trace (a
//! morning ramp, nodes added at 40 %, a new image launched from 60 %), run in turn for each of
//! three arms on fresh nodes, a fresh namespace and a fresh backend: `none` (no pre-pull),
//! `everywhere` (a DaemonSet of every image, the anchors' way) and `planner` (the backend's
//! `prePull`). Run with `hack/bench-workspaces-start.sh`; by hand:
//!
//! ```text
//! hack/control-plane/up.sh --nodes 1 /tmp/wsstart
//! cargo build --release -p outfit -p outfit-loadgen
//! ./target/release/workspaces-start --state-dir /tmp/wsstart --arms none,everywhere
//! hack/control-plane/down.sh /tmp/wsstart
//! ```
//!
//! Prints the model, then one row per arm: p50/p95/p99 from the launch's first request to its
//! final progress event (a failed start counts at its failure), the share of starts that waited
//! for a pull, starts that passed `timeoutCreate`, pulls done ahead that overlapped a start on
//! the same node, and the pulls in all. Fails (after printing everything) if an arm could not
//! run or a launch could not be made or followed.

use anyhow::{Result, bail};
use clap::Parser;
use kube::{
    Api, Client,
    api::{DynamicObject, PostParams},
    discovery::ApiResource,
};
use outfit_loadgen::harness::{install_workspace_crd, printed_manifests, serve_manifests};
use outfit_test_support::control_plane::try_client_from;

mod args;
mod arm;
mod real;
mod report;
mod trace;

use self::args::Args;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.entries == 0 || args.launches == 0 || args.nodes == 0 || args.bandwidth == 0 {
        bail!("--entries, --launches, --nodes and --bandwidth must be above 0");
    }
    let work = match &args.work {
        Some(work) => work.clone(),
        None => std::env::temp_dir().join(format!("workspaces-start-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work)?;
    let client = try_client_from(&args.cluster.state_dir.join("kubeconfig")).await?;
    install_workspace_crd(&client, &args.cluster.outfit).await?;
    priority_class(&client, &args).await?;
    if args.real_node {
        real::push_images(
            &args,
            &outfit_test_support::control_plane::ControlPlane::at(&args.cluster.state_dir),
        )?;
    }
    let real = args.real_node;
    let manifests = serve_manifests(move |name| trace::manifest(name, real)).await?;
    report::model(&args);
    let mut rows = Vec::new();
    for &arm in &args.arms {
        println!("arm {}: running", arm.name());
        let measured = arm::run(&args, arm, &client, manifests, &work).await;
        if let Err(error) = &measured {
            println!("arm {}: failed: {error:#}", arm.name());
        }
        rows.push((arm, measured));
    }
    report::table(&args, &rows);
    let failed = rows.iter().filter(|(_, m)| m.is_err()).count();
    let errors: usize = rows
        .iter()
        .filter_map(|(_, m)| m.as_ref().ok())
        .map(|m| {
            m.outcomes
                .iter()
                .filter(|o| matches!(o, arm::Outcome::Error))
                .count()
        })
        .sum();
    if failed > 0 || errors > 0 {
        bail!("{failed} arms could not run, {errors} launches could not be made or followed");
    }
    Ok(())
}

/// The PriorityClass of the planner's pull pods (and the placeholders'), as `outfit manifests
/// --workspaces` prints it.
async fn priority_class(client: &Client, args: &Args) -> Result<()> {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("scheduling.k8s.io", "v1", "PriorityClass"),
        "priorityclasses",
    );
    let classes: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    for object in printed_manifests(&args.cluster.outfit, &["--workspaces"])? {
        if object["kind"] != "PriorityClass" {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(object)?;
        match classes.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}
