//! One arm: fresh nodes of the image kubelet (or the real node, its catalogue images removed), a
//! fresh namespace and backend, the pre-pull the arm says, the warm-up, then the trace's launches
//! as users through the native API, each timed to its final progress event.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use outfit_loadgen::{
    harness::{AdminPort, Backend, make_namespace},
    workspaces::{call, follow_progress, open_progress},
};
use outfit_test_support::{
    control_plane::ControlPlane,
    http::{Call, loopback},
    kubelet::{ImageKubelet, PAUSE_IMAGE, Records},
};
use serde_json::json;

use crate::{
    args::{Args, Arm},
    real,
    trace::{self, Launch, NODES_ADDED_AT},
};

/// How a launch ended, and when (from its first request).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Ready(Duration),
    /// The backend reported it failed (past `timeoutCreate`, or otherwise).
    Failed(Duration),
    /// The benchmark could not launch or follow it.
    Error,
}

/// What an arm measured.
#[derive(Debug)]
pub(crate) struct Measured {
    pub(crate) outcomes: Vec<Outcome>,
    pub(crate) records: Records,
}

/// Runs `arm` on the cluster; `manifests` serves the catalogue.
pub(crate) async fn run(
    args: &Args,
    arm: Arm,
    client: &Client,
    manifests: u16,
    work: &Path,
) -> Result<Measured> {
    let ns = format!("start-{}", arm.name());
    make_namespace(client, &ns).await?;
    let plane = ControlPlane::at(&args.cluster.state_dir);
    let (result, records) = if args.real_node {
        real::clear_images(client, &plane).await?;
        let result = measure(args, arm, client, None, (&ns, manifests), work).await;
        (result, real::records(client, &ns).await)
    } else {
        let kubelet = ImageKubelet::start(&plane, trace::model(args, &format!("{}-", arm.name())));
        kubelet.wait_ready(Duration::from_secs(120)).await;
        let result = measure(args, arm, client, Some(&kubelet), (&ns, manifests), work).await;
        let nodes = kubelet.node_names();
        let records = kubelet.stop();
        // The next arm starts on fresh nodes: these go, with their pods.
        let node_api: Api<Node> = Api::all(client.clone());
        for node in nodes {
            let _ = node_api.delete(&node, &DeleteParams::default()).await;
        }
        (result, Ok(records))
    };
    // The DaemonSet before the pods, or it would make its pod again.
    let _ = Api::<DaemonSet>::namespaced(client.clone(), &ns)
        .delete("pre-pull", &DeleteParams::default())
        .await;
    if args.real_node {
        real::remove_pods(client, &ns).await?;
    }
    Ok(Measured {
        outcomes: result?,
        records: records?,
    })
}

/// The backend started, the pre-pull made, the warm-up waited, the trace launched and followed;
/// nodes added to the image kubelet's, if it is the arm's.
async fn measure(
    args: &Args,
    arm: Arm,
    client: &Client,
    kubelet: Option<&ImageKubelet>,
    (ns, manifests): (&str, u16),
    work: &Path,
) -> Result<Vec<Outcome>> {
    let backend = Backend::start(
        &args.cluster.outfit,
        &args.cluster.state_dir.join("kubeconfig"),
        &work.join(format!("{}.yaml", arm.name())),
        &settings(args, arm, ns, manifests),
        Some((&work.join(format!("{}.log", arm.name())), "warn")),
        AdminPort::Loopback,
    )?;
    ready(&backend).await?;
    if arm == Arm::Everywhere {
        daemon_set(args, client, ns).await?;
    }
    tokio::time::sleep(Duration::from_secs_f64(args.warm_up)).await;
    let started = Instant::now();
    let mut launches = tokio::task::JoinSet::new();
    let mut added = false;
    let limit = args.timeout_create() + Duration::from_secs(30);
    let trace = trace::trace(args);
    let count = trace.len();
    for (index, Launch { at, user, entry }) in trace.into_iter().enumerate() {
        let add_at = Duration::from_secs_f64(args.seconds * NODES_ADDED_AT);
        if !added && at >= add_at {
            tokio::time::sleep(add_at.saturating_sub(started.elapsed())).await;
            if let Some(kubelet) = kubelet {
                kubelet.add_nodes(args.add_nodes);
            }
            added = true;
        }
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let port = backend.port;
        launches.spawn(async move {
            let outcome = tokio::time::timeout(limit, launch(port, &user, &trace::entry(entry)))
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("no final event within {limit:?}")));
            (
                index,
                outcome.unwrap_or_else(|error| {
                    eprintln!("launch {index} of {user}: {error:#}");
                    Outcome::Error
                }),
            )
        });
    }
    if !added && let Some(kubelet) = kubelet {
        kubelet.add_nodes(args.add_nodes);
    }
    let mut outcomes = vec![Outcome::Error; count];
    while let Some(done) = launches.join_next().await {
        let (index, outcome) = done?;
        outcomes[index] = outcome;
    }
    if !backend.alive() {
        bail!("the backend exited during the arm (see {})", work.display());
    }
    Ok(outcomes)
}

/// Waits (at most two minutes) until the backend's `/readyz` answers 200.
async fn ready(backend: &Backend) -> Result<()> {
    let admin = backend.admin_port.context("a backend without an admin port")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let answer = Call::new("GET", "/readyz")
            .send(loopback(admin), Duration::from_secs(5))
            .await;
        if answer.is_ok_and(|a| a.status == 200) {
            return Ok(());
        }
        if !backend.alive() || Instant::now() > deadline {
            bail!("the backend did not turn ready (exited, or not within 2 minutes)");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `user` launches `entry` through the native API (as an authenticating proxy's user) and
/// follows its progress to the final event.
async fn launch(port: u16, user: &str, entry: &str) -> Result<Outcome> {
    let started = Instant::now();
    let headers = [("x-forwarded-user", user)];
    let body = json!({"manifest": entry, "settings": {}});
    let (status, workspace) = loop {
        let (status, answer) = call(port, "POST", "/api/v1/workspaces", &headers, Some(&body)).await?;
        // 429: creates in flight at the backend's limit; its Retry-After is 1 s.
        if status != 429 {
            break (status, answer);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    if status != 201 {
        bail!("POST /api/v1/workspaces answered {status}: {workspace}");
    }
    let name = workspace["name"].as_str().context("a workspace without a name")?;
    let mut stream = open_progress(port, name, &headers).await?;
    let last = follow_progress(&mut stream, |_, _| {}).await?;
    Ok(match last.as_str() {
        "ready" => Outcome::Ready(started.elapsed()),
        _ => Outcome::Failed(started.elapsed()),
    })
}

/// The anchors' pre-pull: a DaemonSet on the arm's nodes whose init containers pull every
/// catalogue image (each running `true`), its one container the pause image every node holds.
async fn daemon_set(args: &Args, client: &Client, ns: &str) -> Result<()> {
    let real = args.real_node;
    let init: Vec<_> = (0..args.entries)
        .map(|i| json!({"name": trace::entry(i), "image": trace::image(&trace::entry(i), real), "command": ["true"]}))
        .collect();
    let placement = trace::placement(real);
    let pause = if real { REAL_PAUSE_IMAGE } else { PAUSE_IMAGE };
    let daemon_set: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "pre-pull"},
        "spec": {
            "selector": {"matchLabels": {"app": "pre-pull"}},
            "template": {
                "metadata": {"labels": {"app": "pre-pull"}},
                "spec": {
                    "nodeSelector": placement["nodeSelector"],
                    "tolerations": placement["tolerations"],
                    "initContainers": init,
                    "containers": [{"name": "pause", "image": pause}]
                }
            }
        }
    }))?;
    Api::<DaemonSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &daemon_set)
        .await?;
    Ok(())
}

/// The pause image of the real node's registry (`tests/tools/node-images`), its sandbox image.
const REAL_PAUSE_IMAGE: &str = "registry.outfit.test/outfit-test/pause:1";

/// The backend's configuration: the arm's namespace, the catalogue, a `timeoutCreate` at the
/// model's scale, no placeholders, homes in `emptyDir`s, and for the planner `prePull` on the
/// arm's nodes.
fn settings(args: &Args, arm: Arm, ns: &str, manifests: u16) -> String {
    let entries: String = (0..args.entries)
        .map(|i| {
            let name = trace::entry(i);
            format!("- {{name: {name}, url: 'http://127.0.0.1:{manifests}/{name}.yaml'}}\n")
        })
        .collect();
    let placement = trace::placement(args.real_node);
    let pre_pull = if arm == Arm::Planner {
        format!(
            "prePull: {{enabled: true, pullsPerNode: 1, nodesPerImage: 2, window: 1h, timeout: 10m, \
             nodeSelector: {}, tolerations: {}}}\n",
            placement["nodeSelector"], placement["tolerations"]
        )
    } else {
        String::new()
    };
    format!(
        "namespace: {ns}\nwhitelistManifestRegex: 'http://127\\.0\\.0\\.1:{manifests}/'\n\
         ingressDomain: pods.start\npodSubnetCidr: 10.244.0.0/15\ntimeoutCreate: {}s\n\
         maxWorkspacesPerUser: 100\ntrustedProxyCidrs: ['127.0.0.0/8']\nadminGroups: [start-admins]\n\
         storageStrategy: ephemeral\nplaceholders: {{count: 0}}\n{pre_pull}catalogue:\n{entries}",
        args.timeout_create
    )
}
