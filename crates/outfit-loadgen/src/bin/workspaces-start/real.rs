//! An arm on the cluster's real node (`--real-node`; `up.sh --real-nodes 1`) rather than on the
//! image kubelet's: the catalogue's images are built and pushed to the node's registry, removed
//! from the node before each arm so that its pulls are real, and what the arm saw is read back
//! from the kubelet's Events and the pods, into the same records the image kubelet keeps.

use std::process::Command;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use outfit_test_support::{
    control_plane::ControlPlane,
    kubelet::{PodKind, PullRecord, Records, StartRecord, Waiter},
};

use crate::{args::Args, trace};

/// The catalogue's images, of the table's sizes, pushed to the real node's registry by
/// `tests/tools/node-images/build.py` (its `--bench-image`s).
pub(crate) fn push_images(args: &Args, plane: &ControlPlane) -> Result<()> {
    let registry = plane.env("REGISTRY_URL");
    let mut build = Command::new("python3");
    build
        .arg("tests/tools/node-images/build.py")
        .args(["--registry", registry.trim_start_matches("http://")])
        .args(["--name-prefix", "outfit-bench"]);
    for i in 0..args.entries {
        build.arg("--bench-image");
        build.arg(format!("{}={}", trace::entry(i), trace::size(args, i)));
    }
    let output = build
        .output()
        .context("running tests/tools/node-images/build.py")?;
    if !output.status.success() {
        bail!(
            "building the catalogue's images: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Removes the catalogue's images from the node, every name of each (containerd's CRI keeps an
/// image under its tag, its digest and its id), their content with them (`--sync`), so that the
/// arm's pulls move every byte again; then waits until the Node no longer lists them (the kubelet
/// reports its images every 10 s), or the planner and the placement of the next arm would take
/// the last arm's images for present.
pub(crate) async fn clear_images(client: &Client, plane: &ControlPlane) -> Result<()> {
    let ctr = plane.env("CTR_BIN");
    let address = plane.env("CONTAINERD_ADDRESS");
    let ctr = |args: &[&str]| {
        Command::new(&ctr)
            .args(["--address", &address, "--namespace", "k8s.io", "images"])
            .args(args)
            .output()
    };
    let listed = ctr(&["ls"]).context("ctr images ls")?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    // REF TYPE DIGEST SIZE PLATFORMS LABELS
    let rows: Vec<(&str, &str)> = listed
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut columns = line.split_whitespace();
            Some((columns.next()?, columns.nth(1)?))
        })
        .collect();
    let ours: Vec<&str> = rows
        .iter()
        .filter(|(reference, _)| reference.contains("/outfit-bench/"))
        .map(|(_, digest)| *digest)
        .collect();
    let references: Vec<&str> = rows
        .iter()
        .filter(|(_, digest)| ours.contains(digest))
        .map(|(reference, _)| *reference)
        .collect();
    if !references.is_empty() {
        let removed = ctr(&[&["rm", "--sync"], references.as_slice()].concat()).context("ctr images rm")?;
        if !removed.status.success() {
            bail!("ctr images rm: {}", String::from_utf8_lossy(&removed.stderr));
        }
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let node = plane.env("REAL_NODE_NAMES");
    for _ in 0..600 {
        let listed = nodes.get(&node).await?.status.and_then(|s| s.images);
        let ours = listed
            .iter()
            .flatten()
            .flat_map(|i| i.names.iter().flatten())
            .any(|n| n.contains("/outfit-bench/"));
        if !ours {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    bail!("node {node} still lists the catalogue's images a minute after their removal")
}

/// Deletes the pods of `ns` at once and waits until the node has stopped them, so that the next
/// arm starts on an idle node. (Not the namespace: its Workspaces keep the finalizer of the
/// backend, which has exited.)
pub(crate) async fn remove_pods(client: &Client, ns: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete_collection(&DeleteParams::default().grace_period(0), &ListParams::default())
        .await?;
    for _ in 0..600 {
        if pods.list(&ListParams::default()).await?.items.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    bail!("the pods of {ns} still there a minute after their delete")
}

fn kind(pod: &str) -> PodKind {
    if pod.starts_with("outfit-pull-") {
        PodKind::PullPod
    } else if pod.starts_with("pre-pull-") {
        PodKind::DaemonSet
    } else {
        PodKind::Workload
    }
}

fn when(event: &Event) -> Option<Timestamp> {
    event
        .event_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.first_timestamp.as_ref().map(|t| t.0))
}

/// The image between the first pair of double quotes of a kubelet message.
fn quoted(message: &str) -> Option<&str> {
    message.split('"').nth(1)
}

/// What the arm in `ns` saw on the node, from the kubelet's Events (a `Pulling` and its
/// `Successfully pulled ... Image size: N bytes` per pod that pulled; containerd shares one
/// download among the pods pulling an image at once, so a pod whose pull began while another's
/// of the same image ran waited for that one, as the image kubelet records it) and the pods'
/// conditions (bound: `PodScheduled`; ready: `Ready`, to the second).
pub(crate) async fn records(client: &Client, ns: &str) -> Result<Records> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = events.list(&ListParams::default()).await?.items;
    let pod_of = |e: &Event| e.involved_object.name.clone().unwrap_or_default();
    let mut pulls: Vec<PullRecord> = Vec::new();
    let mut pulling_events: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Pulling"))
        .collect();
    pulling_events.sort_by_key(|e| when(e));
    for pulling in pulling_events {
        let pod = pod_of(pulling);
        let message = pulling.message.as_deref().unwrap_or_default();
        let (Some(image), Some(started)) = (quoted(message), when(pulling)) else {
            continue;
        };
        let pulled = events.iter().find(|e| {
            e.reason.as_deref() == Some("Pulled")
                && pod_of(e) == pod
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Successfully pulled") && quoted(m) == Some(image))
        });
        let waiter = Waiter {
            pod: format!("{ns}/{pod}"),
            kind: kind(&pod),
        };
        if let Some(shared) = pulls
            .iter_mut()
            .find(|p| p.image == image && p.started <= started && p.finished.is_none_or(|f| started <= f))
        {
            shared.waiters.push(waiter);
            continue;
        }
        let bytes = pulled
            .and_then(|e| e.message.as_deref())
            .and_then(|m| m.split("Image size: ").nth(1))
            .and_then(|m| m.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        pulls.push(PullRecord {
            node: pulling
                .source
                .as_ref()
                .and_then(|s| s.host.clone())
                .unwrap_or_default(),
            image: image.to_owned(),
            bytes,
            started,
            finished: pulled.and_then(when),
            started_for: kind(&pod),
            waiters: vec![waiter],
        });
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut starts = Vec::new();
    for pod in pods.list(&ListParams::default()).await?.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = pod.status.unwrap_or_default();
        let condition = |type_: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == type_ && c.status == "True")
                .and_then(|c| c.last_transition_time.as_ref().map(|t| t.0))
        };
        let Some(bound) = condition("PodScheduled") else {
            continue;
        };
        starts.push(StartRecord {
            namespace: ns.to_owned(),
            node: pod.spec.and_then(|s| s.node_name).unwrap_or_default(),
            kind: kind(&name),
            bound,
            ready: condition("Ready"),
            waited_for_pull: pulls
                .iter()
                .any(|p| p.waiters.iter().any(|w| w.pod == format!("{ns}/{name}"))),
            unpullable: false,
            name,
        });
    }
    Ok(Records { pulls, starts })
}
