//! A stand-in for the kubelet's image side (issue 35), on nodes of its own, as the provisioner
//! stands in for a CSI driver: the nodes it makes carry no kwok annotation, so kwok leaves them
//! alone and this is their kubelet. It keeps them Ready (a Lease renewed every 10 s, a Ready
//! condition with heartbeats) and lists what each holds in `node.status.images`, as a kubelet
//! does. A pod bound to one of them waits for the images it lacks: one pull per image per node,
//! shared by every pod that needs it, init containers' images one after the other, then the
//! containers' at once. A pull takes [`ModelConfig::latency`], then its image's size at the
//! node's [`ModelConfig::bandwidth`] shared equally by the pulls downloading on that node at the
//! time (simulated in ticks of 100 ms, so concurrent pulls slow each other). Once every image is
//! there, the pod runs and is ready; a pull pod (labelled [`PRE_PULL_LABEL`]) or a pod whose
//! every container runs `true` succeeds instead. An image of [`ModelConfig::missing`] is never
//! pulled: `ErrImagePull`, then `ImagePullBackOff`. A pod being deleted is deleted at once (grace
//! 0, as a kubelet confirms); its pulls carry on. `imagePullPolicy` is not read: every image is
//! pulled if absent, never again.
//!
//! It keeps [`Records`] of every pull and every start, which the start-time benchmark and the
//! pre-pull e2e tests read from the handle. It runs on a thread of its own (a test's runtime
//! ends with the test) until the handle is stopped or dropped; the nodes stay (and turn NotReady
//! some 40 s later).
//!
//! ```no_run
//! # async fn demo(plane: &outfit_test_support::control_plane::ControlPlane) {
//! use outfit_test_support::kubelet::{ImageKubelet, ModelConfig};
//! let mut config = ModelConfig::new("img-", "outfit.test/img");
//! config.sizes.insert("jupyter/minimal:1".into(), 2_000_000_000);
//! let kubelet = ImageKubelet::start(plane, config);
//! kubelet.wait_ready(std::time::Duration::from_secs(60)).await;
//! // ... pods with nodeSelector {outfit.test/img: "yes"} and a toleration of the taint ...
//! let p95 = kubelet.records().bound_to_ready().map(|p| p.p95);
//! # }
//! ```

mod config;
mod model;
mod objects;
mod records;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Pod},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::{WatchStreamExt, reflector, watcher},
};
use outfit_workspaces_core::workspace::placement::normalize;
use serde_json::json;

use crate::{
    control_plane::{ControlPlane, client_from, try_client_from},
    wait::eventually,
};
pub use config::{ModelConfig, NODE_TYPE, PAUSE_IMAGE, PRE_PULL_LABEL};
use model::{NodeModel, Pull, Stage};
use objects::{Placed, Shown};
pub use records::{Percentiles, PodKind, PullRecord, Records, StartRecord, Waiter};

/// How often the model advances and pods are looked at.
pub const TICK: Duration = Duration::from_millis(100);
/// How often a node's Lease is renewed and its status sent again (the kubelet's default).
const HEARTBEAT: Duration = Duration::from_secs(10);
/// How long a missing image shows `ErrImagePull` before `ImagePullBackOff`.
const BACK_OFF_AFTER: Duration = Duration::from_secs(2);

/// What the handle and the stand-in's thread share.
#[derive(Debug)]
struct Shared {
    config: ModelConfig,
    records: Mutex<Records>,
    /// How many nodes there should be.
    wanted: AtomicU32,
    stop: AtomicBool,
}

impl Shared {
    fn records<T>(&self, change: impl FnOnce(&mut Records) -> T) -> T {
        change(&mut self.records.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The running stand-in; stopped when dropped.
#[derive(Debug)]
pub struct ImageKubelet {
    shared: Arc<Shared>,
    kubeconfig: PathBuf,
    thread: Option<JoinHandle<()>>,
}

impl ImageKubelet {
    /// Starts it against `plane`'s API server; it makes [`ModelConfig::nodes`] nodes at once
    /// (wait for them with [`Self::wait_ready`]).
    pub fn start(plane: &ControlPlane, config: ModelConfig) -> Self {
        Self::start_with_kubeconfig(&plane.kubeconfig(), config)
    }

    /// As [`Self::start`], against the API server of an admin's `kubeconfig`.
    pub fn start_with_kubeconfig(kubeconfig: &Path, config: ModelConfig) -> Self {
        let shared = Arc::new(Shared {
            wanted: AtomicU32::new(config.nodes),
            config,
            records: Mutex::default(),
            stop: AtomicBool::new(false),
        });
        let (ours, path) = (shared.clone(), kubeconfig.to_owned());
        let thread = std::thread::Builder::new()
            .name("image-kubelet".to_owned())
            .spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the image kubelet's runtime")
                    .block_on(run(ours, path));
            })
            .expect("the image kubelet's thread");
        ImageKubelet {
            shared,
            kubeconfig: kubeconfig.to_owned(),
            thread: Some(thread),
        }
    }

    /// The model it runs.
    pub fn config(&self) -> &ModelConfig {
        &self.shared.config
    }

    /// The names of its nodes, made or being made.
    pub fn node_names(&self) -> Vec<String> {
        let wanted = self.shared.wanted.load(Ordering::SeqCst);
        (0..wanted).map(|i| self.node_name(i)).collect()
    }

    fn node_name(&self, index: u32) -> String {
        format!("{}{index}", self.shared.config.node_prefix)
    }

    /// Adds `count` nodes (made within a tick); returns their names.
    pub fn add_nodes(&self, count: u32) -> Vec<String> {
        let first = self.shared.wanted.fetch_add(count, Ordering::SeqCst);
        (first..first + count).map(|i| self.node_name(i)).collect()
    }

    /// Waits until every node is Ready and without the not-ready taint (the node-lifecycle
    /// controller removes it within seconds), so the scheduler uses them; panics after `limit`.
    pub async fn wait_ready(&self, limit: Duration) {
        let nodes: Api<Node> = Api::all(client_from(&self.kubeconfig).await);
        let names = self.node_names();
        eventually("the image kubelet's nodes Ready", limit, || async {
            for name in &names {
                let Ok(node) = nodes.get(name).await else {
                    return false;
                };
                let tainted = node
                    .spec
                    .and_then(|s| s.taints)
                    .is_some_and(|t| t.iter().any(|t| t.key.starts_with("node.kubernetes.io/")));
                let ready = node
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if tainted || !ready {
                    return false;
                }
            }
            true
        })
        .await;
    }

    /// What it saw so far.
    pub fn records(&self) -> Records {
        self.shared.records(|r| r.clone())
    }

    /// Stops it (the nodes stay) and returns what it saw.
    pub fn stop(mut self) -> Records {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.records()
    }
}

impl Drop for ImageKubelet {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// A pod range of each node's own, unused by the test cluster (kwok's nodes and the tests' are
/// in 10.244.0.0/16): 10.245.0.0/24, 10.245.1.0/24, ... across every stand-in of the process.
fn next_range() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    format!("10.{}.{}", 245 + n / 256, n % 256)
}

/// A node as the stand-in runs it.
#[derive(Debug)]
struct NodeSim {
    /// Its address: the first of its range.
    ip: String,
    /// Its range's first three octets.
    range: String,
    next_ip: u8,
    model: NodeModel,
    since: Timestamp,
    /// Whether its status must be sent (an image came).
    dirty: bool,
    heartbeat: Instant,
}

impl NodeSim {
    /// The next pod address of its range (.2 to .254, round).
    fn pod_ip(&mut self) -> String {
        self.next_ip = if self.next_ip >= 254 { 2 } else { self.next_ip + 1 };
        format!("{}.{}", self.range, self.next_ip)
    }
}

/// A pod as the stand-in runs it.
#[derive(Debug)]
struct PodSim {
    /// Its start's index in the records.
    record: usize,
    kind: PodKind,
    /// What its status shows (once sent).
    shown: Option<Shown>,
    pod_ip: Option<String>,
    start: Timestamp,
    failing_since: Option<Instant>,
    deleting: Option<Instant>,
}

/// The stand-in's state, owned by its thread.
#[derive(Debug, Default)]
struct Sim {
    nodes: BTreeMap<String, NodeSim>,
    pods: HashMap<String, PodSim>,
    missing: BTreeSet<String>,
}

/// The stand-in's loop: a watch of the bound pods, and a tick that makes the nodes, advances
/// the pulls and shows each pod where it stands.
async fn run(shared: Arc<Shared>, kubeconfig: PathBuf) {
    let client = loop {
        match try_client_from(&kubeconfig).await {
            Ok(client) => break client,
            Err(error) => eprintln!("image kubelet: {error}; trying again"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let (store, writer) = reflector::store::<Pod>();
    let pods: Api<Pod> = Api::all(client.clone());
    let watch = watcher(pods, watcher::Config::default().fields("spec.nodeName!="))
        .default_backoff()
        .reflect(writer)
        .for_each(|_| std::future::ready(()));
    tokio::spawn(watch);
    let mut sim = Sim {
        missing: shared.config.missing.iter().map(|i| normalize(i)).collect(),
        ..Sim::default()
    };
    while !shared.stop.load(Ordering::SeqCst) {
        let tick = Instant::now();
        make_nodes(&shared, &client, &mut sim).await;
        advance(&shared, &mut sim);
        heartbeats(&client, &shared.config, &mut sim).await;
        for pod in store.state() {
            show(&shared, &client, &mut sim, &pod).await;
        }
        let present: BTreeSet<String> = store
            .state()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        sim.pods.retain(|uid, _| present.contains(uid));
        tokio::time::sleep(TICK.saturating_sub(tick.elapsed())).await;
    }
}

/// Makes the nodes wanted and not yet made (a failure is tried again next tick).
async fn make_nodes(shared: &Shared, client: &Client, sim: &mut Sim) {
    let config = &shared.config;
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    while (sim.nodes.len() as u32) < shared.wanted.load(Ordering::SeqCst) {
        let name = format!("{}{}", config.node_prefix, sim.nodes.len());
        let range = next_range();
        let cidr = format!("{range}.0/24");
        let object = serde_json::from_value(objects::node(&name, &cidr, config)).expect("a node");
        let made = match nodes.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(status)) if status.code == 409 => nodes.get(&name).await,
            made => made,
        };
        let node = match made {
            Ok(node) => node,
            Err(error) => {
                eprintln!("image kubelet: creating node {name}: {error}");
                return;
            }
        };
        let model = NodeModel {
            images: config
                .preloaded
                .iter()
                .map(|i| (normalize(i), config.size_of(i)))
                .collect(),
            pulls: Vec::new(),
        };
        let uid = node.metadata.uid.unwrap_or_default();
        let lease = serde_json::from_value(objects::lease(&name, &uid)).expect("a lease");
        match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => eprintln!("image kubelet: the lease of {name}: {error}"),
        }
        let ip = format!("{range}.1");
        sim.nodes.insert(
            name,
            NodeSim {
                ip,
                range,
                next_ip: 1,
                model,
                since: Timestamp::now(),
                dirty: true,
                heartbeat: Instant::now(),
            },
        );
    }
}

/// Advances every node's pulls to now; records the ones that finished.
fn advance(shared: &Shared, sim: &mut Sim) {
    for node in sim.nodes.values_mut() {
        let done = node.model.advance(Instant::now(), shared.config.bandwidth);
        if !done.is_empty() {
            node.dirty = true;
            let now = Timestamp::now();
            shared.records(|r| {
                for pull in &done {
                    r.pulls[pull.record].finished = Some(now);
                }
            });
        }
    }
}

/// Renews each node's Lease and sends its status every [`HEARTBEAT`], and its status at once
/// when an image came.
async fn heartbeats(client: &Client, config: &ModelConfig, sim: &mut Sim) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    for (name, node) in &mut sim.nodes {
        let due = node.heartbeat.elapsed() >= HEARTBEAT;
        if !(due || node.dirty) {
            continue;
        }
        let status = objects::node_status(&node.ip, config, &node.model.images, node.since);
        if let Err(error) = nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
        {
            eprintln!("image kubelet: the status of {name}: {error}");
            continue;
        }
        node.dirty = false;
        if due {
            let renew = json!({"spec": {"renewTime": objects::renewed()}});
            if let Err(error) = leases
                .patch(name, &PatchParams::default(), &Patch::Merge(&renew))
                .await
            {
                eprintln!("image kubelet: renewing the lease of {name}: {error}");
            }
            node.heartbeat = Instant::now();
        }
    }
}

/// Who `pod` is, as far as pulls go.
fn kind_of(pod: &Pod) -> PodKind {
    if pod
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(PRE_PULL_LABEL))
    {
        PodKind::PullPod
    } else if pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
    {
        PodKind::DaemonSet
    } else {
        PodKind::Workload
    }
}

/// Looks at one bound pod: deletes it if it is being deleted, starts the pulls it waits for,
/// and sends its status when where it stands changed.
async fn show(shared: &Shared, client: &Client, sim: &mut Sim, pod: &Pod) {
    let (Some(node_name), Some(uid), Some(namespace), Some(name)) = (
        pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        pod.metadata.uid.clone(),
        pod.metadata.namespace.clone(),
        pod.metadata.name.clone(),
    ) else {
        return;
    };
    let Some(node) = sim.nodes.get_mut(&node_name) else {
        return;
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let state = sim.pods.entry(uid.clone()).or_insert_with(|| {
        let kind = kind_of(pod);
        let record = shared.records(|r| {
            r.starts.push(StartRecord {
                namespace: namespace.clone(),
                name: name.clone(),
                node: node_name.clone(),
                kind,
                bound: Timestamp::now(),
                ready: None,
                waited_for_pull: false,
                unpullable: false,
            });
            r.starts.len() - 1
        });
        PodSim {
            record,
            kind,
            shown: None,
            pod_ip: None,
            start: Timestamp::now(),
            failing_since: None,
            deleting: None,
        }
    });
    if pod.metadata.deletion_timestamp.is_some() {
        // As a kubelet confirms a deletion once the containers stopped: at once, here.
        if state
            .deleting
            .is_none_or(|at| at.elapsed() > Duration::from_secs(5))
        {
            state.deleting = Some(Instant::now());
            let confirm = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&name, &confirm).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(error) => eprintln!("image kubelet: deleting {namespace}/{name}: {error}"),
            }
        }
        return;
    }
    if matches!(state.shown, Some(Shown::Running | Shown::Succeeded)) {
        return;
    }
    let shown = match model::stage(pod, &node.model, &sim.missing) {
        Stage::Pulling { images, init } => {
            let waiter = Waiter {
                pod: format!("{namespace}/{name}"),
                kind: state.kind,
            };
            for image in images {
                if let Some(pull) = node.model.pull_of(&image) {
                    shared.records(|r| {
                        let waiters = &mut r.pulls[pull.record].waiters;
                        if !waiters.contains(&waiter) {
                            waiters.push(waiter.clone());
                        }
                    });
                    continue;
                }
                let bytes = shared.config.size_of(&image);
                let record = shared.records(|r| {
                    r.pulls.push(PullRecord {
                        node: node_name.clone(),
                        image: image.clone(),
                        bytes,
                        started: Timestamp::now(),
                        finished: None,
                        started_for: state.kind,
                        waiters: vec![waiter.clone()],
                    });
                    r.pulls.len() - 1
                });
                node.model.pulls.push(Pull {
                    image,
                    bytes,
                    left: bytes as f64,
                    latency: shared.config.latency,
                    record,
                    advanced: Instant::now(),
                });
            }
            shared.records(|r| r.starts[state.record].waited_for_pull = true);
            if init {
                Shown::Initializing
            } else {
                Shown::Creating
            }
        }
        Stage::Unpullable {
            container,
            image,
            init,
        } => {
            let since = *state.failing_since.get_or_insert_with(Instant::now);
            shared.records(|r| r.starts[state.record].unpullable = true);
            Shown::Failing {
                container,
                image,
                init,
                backing_off: since.elapsed() >= BACK_OFF_AFTER,
            }
        }
        Stage::Started if model::runs_to_completion(pod) => Shown::Succeeded,
        Stage::Started => Shown::Running,
    };
    if state.shown.as_ref() == Some(&shown) {
        return;
    }
    if matches!(shown, Shown::Running | Shown::Succeeded) && state.pod_ip.is_none() {
        state.pod_ip = Some(node.pod_ip());
    }
    let placed = Placed {
        host_ip: &node.ip,
        pod_ip: state.pod_ip.as_deref(),
        start: state.start,
    };
    let status = objects::pod_status(pod, &shown, &placed);
    match pods
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status))
        .await
    {
        Ok(_) => {
            if matches!(shown, Shown::Running | Shown::Succeeded) {
                let now = Timestamp::now();
                shared.records(|r| r.starts[state.record].ready = Some(now));
            }
            state.shown = Some(shown);
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => eprintln!("image kubelet: the status of {namespace}/{name}: {error}"),
    }
}
