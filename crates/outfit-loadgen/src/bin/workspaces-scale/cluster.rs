//! The cluster's side: the backend's own identity (so the audit log can single out its
//! requests), the audit log's count, the nodes, and the CPU and memory of every process from
//! /proc.

use std::{
    collections::BTreeMap,
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, ServiceAccount};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// The backend's ServiceAccount (in `default`), bound to cluster-admin; the audit policy of
/// hack/bench-workspaces-scale.sh logs this user's requests only. Named as `outfit manifests
/// --workspaces` names the backend's, so that the FlowSchema it ships covers it.
pub(crate) const BACKEND_ACCOUNT: &str = "outfit-workspaces";

/// The label the held workspaces' pods select; the nodes get it when the streams are released.
pub(crate) const HOLD_LABEL: &str = "outfit.dev/scale-hold";

/// Makes the backend's ServiceAccount and a kubeconfig for it (the admin's, with its token);
/// returns the kubeconfig's path and the user name the API server knows it by.
pub(crate) async fn backend_kubeconfig(
    client: &Client,
    state_dir: &Path,
    work: &Path,
) -> Result<(PathBuf, String)> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": BACKEND_ACCOUNT}}))?;
    accounts.create(&PostParams::default(), &account).await?;
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": BACKEND_ACCOUNT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": BACKEND_ACCOUNT, "namespace": "default"}],
    }))?;
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 86400},
    });
    let answer: Value = accounts
        .create_subresource("token", BACKEND_ACCOUNT, &PostParams::default(), &request)
        .await?;
    let token = answer["status"]["token"]
        .as_str()
        .context("a TokenRequest answer without a token")?;
    let admin_token = outfit_test_support::control_plane::env_value(state_dir, "ADMIN_TOKEN")?;
    let admin = std::fs::read_to_string(state_dir.join("kubeconfig"))?;
    let path = work.join("kubeconfig-backend");
    std::fs::write(&path, admin.replace(&admin_token, token))?;
    Ok((path, format!("system:serviceaccount:default:{BACKEND_ACCOUNT}")))
}

/// Applies the priority level and FlowSchema that `outfit manifests --workspaces --namespace
/// default` prints (the shipped ones, for [`BACKEND_ACCOUNT`]), so the figures are the ones an
/// installed backend gets.
pub(crate) async fn apply_flow_schema(client: &Client, outfit: &Path) -> Result<()> {
    let objects =
        outfit_loadgen::harness::printed_manifests(outfit, &["--workspaces", "--namespace", "default"])?;
    let mut applied = 0;
    for object in objects {
        if !matches!(
            object["kind"].as_str(),
            Some("PriorityLevelConfiguration" | "FlowSchema")
        ) {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(object)?;
        let types = object.types.as_ref().context("an object without a kind")?;
        let gvk = GroupVersionKind::try_from(types)?;
        Api::<DynamicObject>::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating the {}", gvk.kind))?;
        applied += 1;
    }
    if applied != 2 {
        bail!("outfit manifests --workspaces printed {applied} flow-control objects, not 2");
    }
    Ok(())
}

/// Gives every node the hold label, so the held workspaces' pods can be scheduled.
pub(crate) async fn open_nodes(client: &Client) -> Result<usize> {
    let nodes: Api<Node> = Api::all(client.clone());
    let names: Vec<String> = nodes
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let patch = json!({"metadata": {"labels": {HOLD_LABEL: "open"}}});
    for name in &names {
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(names.len())
}

/// The claims of a namespace (the users' homes, under any strategy but `ephemeral`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Homes {
    pub(crate) claims: usize,
    /// Those whose phase is `Bound`.
    pub(crate) bound: usize,
}

/// Counts [`Homes`] in namespace `ns`.
pub(crate) async fn homes(client: &Client, ns: &str) -> Result<Homes> {
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await?
        .items;
    let bound = claims
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .count();
    Ok(Homes {
        claims: claims.len(),
        bound,
    })
}

/// The size of the audit log now (0 before kube-apiserver writes its first line): requests
/// after this mark are read by [`audit_requests`].
pub(crate) fn audit_mark(log: &Path) -> Result<u64> {
    match std::fs::metadata(log) {
        Ok(metadata) => Ok(metadata.len()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(error) => Err(error).with_context(|| format!("reading {}", log.display())),
    }
}

/// `user`'s requests in the audit log between two marks, by `verb resource[/subresource]`.
pub(crate) fn audit_requests(log: &Path, from: u64, to: u64, user: &str) -> Result<BTreeMap<String, usize>> {
    if to <= from {
        return Ok(BTreeMap::new());
    }
    let mut file = std::fs::File::open(log)?;
    file.seek(SeekFrom::Start(from))?;
    let mut text = String::new();
    file.take(to.saturating_sub(from)).read_to_string(&mut text)?;
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] != user || event["stage"] != "ResponseComplete" {
            continue;
        }
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("-").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let key = format!("{} {resource}", event["verb"].as_str().unwrap_or("-"));
        *counts.entry(key).or_insert(0) += 1;
    }
    Ok(counts)
}

/// CPU time (user + system, seconds) and resident memory (bytes) of one process.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    pub(crate) cpu: f64,
    pub(crate) rss: u64,
}

/// Reads [`Usage`] of `pid` from /proc (`ticks` clock ticks a second).
pub(crate) fn usage(pid: u32, ticks: f64) -> Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command (which may hold spaces) start at the state, field 3.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("a /proc stat without a command")?
        .1
        .split_whitespace()
        .collect();
    let field = |n: usize| -> Result<f64> { Ok(fields.get(n - 3).context("a short /proc stat")?.parse()?) };
    let cpu = (field(14)? + field(15)?) / ticks;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Ok(Usage {
        cpu,
        rss: rss_kib * 1024,
    })
}

/// The processes whose CPU is measured: the backend and the cluster's components.
#[derive(Debug, Clone)]
pub(crate) struct Processes {
    pub(crate) pids: Vec<(&'static str, u32)>,
    ticks: f64,
}

/// Every process's usage at one moment, with the machine's load average.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) at: Instant,
    pub(crate) usage: Vec<Usage>,
    pub(crate) load: String,
}

impl Processes {
    /// The cluster components of `state_dir` (those with a pid file) and the backend `outfit`.
    pub(crate) fn new(state_dir: &Path, outfit: u32) -> Result<Self> {
        let mut pids = vec![("outfit", outfit)];
        for name in [
            "kube-apiserver",
            "etcd",
            "kwok",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            if let Ok(pid) = std::fs::read_to_string(state_dir.join(format!("{name}.pid"))) {
                pids.push((name, pid.trim().parse()?));
            }
        }
        let ticks = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(100.0);
        Ok(Self { pids, ticks })
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            usage: self
                .pids
                .iter()
                .map(|(_, pid)| usage(*pid, self.ticks).unwrap_or_default())
                .collect(),
            load: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Each process's CPU between two snapshots, in percent of one core.
    pub(crate) fn cpu_percent(before: &Snapshot, after: &Snapshot) -> Vec<f64> {
        let wall = (after.at - before.at).as_secs_f64().max(1e-3);
        before
            .usage
            .iter()
            .zip(&after.usage)
            .map(|(b, a)| (a.cpu - b.cpu) / wall * 100.0)
            .collect()
    }
}
