//! Pulling the catalogue's images ahead (issue 35, `prePull`): every [`EVERY`], the leader of a
//! cluster reads which images the catalogue's entries run (their manifests, fetched again each
//! [`REFETCH_EVERY`]), counts each entry's launches in the window, and has the pure planner
//! ([`workspace::pre_pull::plan`]) say which node pulls which image next; it makes those pull pods,
//! and removes each once its pull is done or failed (a failed pull of an image on a node rests
//! [`REST_AFTER_FAILURE`] before it is tried there again).
//!
//! What it reads of the nodes comes from the watch behind [`NodeImages`]; the launches are the
//! workspace pods it sees in the cache, remembered through the window (a new leader starts from
//! the pods there are).
//!
//! [`workspace::pre_pull::plan`]: outfit_workspaces_core::workspace::pre_pull::plan

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{LocalObjectReference, Pod};
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{config::Config, keys},
    workspace::{
        manifest, placement,
        pre_pull::{self, NodeView, Pull, PullState, Wanted},
        progress,
    },
};
// Tokio's clock, so that the tests' paused time moves what rests and what counts as done.
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::io::{
    cache::Cache,
    calls::ClusterCalls,
    cluster::Cluster,
    fetch::Fetcher,
    metrics::Metrics,
    node_images::{NodeFacts, NodeImages},
};

/// How often the leader plans.
pub const EVERY: Duration = Duration::from_secs(2);
/// How often, with `prePull` off, the leader looks for pull pods left from when it was on.
const CLEAR_EVERY: Duration = Duration::from_secs(60);
/// How often an entry's manifest is fetched again for its images.
const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// How long a failed pull of an image onto a node waits before it is tried there again.
const REST_AFTER_FAILURE: Duration = Duration::from_secs(300);
/// The least time a done pull counts as the node holding the image, listed or not: its kubelet
/// posts the node's status every 10 s to a minute, and lists at most 50 images
/// (`nodeStatusMaxImages`), so a small image on a busy node may never be listed. A done pull
/// counts for the whole `prePull.window`, if that is longer (issue 46: pulled again every 120 s,
/// forever, before).
const DONE_COUNTS_FOR: Duration = Duration::from_secs(120);
/// The most launches remembered (a bound on memory whatever the window and the rate).
const MAX_REMEMBERED: usize = 100_000;

/// One image to pull: as a manifest names it, with its pull secrets.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The image as the manifest names it (what the pull pod runs).
    pub reference: String,
    /// The pull secrets the manifest names.
    pub secrets: Vec<LocalObjectReference>,
}

/// The images a cluster's catalogue wants ahead: each normalized image, with its launches in the
/// window and where to pull it from.
pub type Demand = BTreeMap<String, (usize, Source)>;

/// What the planner keeps between passes.
#[derive(Debug, Default)]
pub struct Puller {
    /// Pulls that failed lately, until when they rest.
    resting: BTreeMap<Pull, Instant>,
    /// Pull pods already counted done or failed (their delete may take a moment).
    counted: BTreeSet<String>,
    /// Pulls done lately, until when they count as held.
    done: BTreeMap<Pull, Instant>,
}

impl Puller {
    /// One pass: counts and removes the pull pods that are done or failed, then makes the ones
    /// `demand` asks for on the nodes `seen` shows, none on `starting` ones. Answers how many
    /// are under way.
    pub async fn pass<C: ClusterCalls>(
        &mut self,
        cluster: &C,
        config: &Config,
        demand: &Demand,
        seen: &NodeImages,
        starting: &BTreeSet<String>,
        metrics: &Metrics,
    ) -> usize {
        let nodes = &seen.nodes();
        let now = Instant::now();
        self.resting.retain(|_, until| *until > now);
        self.done.retain(|_, until| *until > now);
        let pods = match cluster.pull_pods().await {
            Ok(pods) => pods,
            Err(error) => {
                tracing::warn!(%error, "could not list the pull pods; trying later");
                return 0;
            }
        };
        let running = self.settle(cluster, config, &pods, (nodes, seen), metrics).await;
        // What each node holds, with what it pulled lately and does not list yet.
        let mut held: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for pull in self.done.keys() {
            if let Some(facts) = nodes.get(&pull.node) {
                held.entry(pull.node.as_str())
                    .or_insert_with(|| facts.images.clone())
                    .insert(pull.image.clone());
            }
        }
        let views: Vec<NodeView<'_>> = nodes
            .iter()
            .map(|(name, facts)| NodeView {
                name,
                images: held.get(name.as_str()).unwrap_or(&facts.images),
                eligible: pre_pull::eligible(
                    facts.ready,
                    facts.unschedulable,
                    &facts.labels,
                    &facts.taints,
                    &config.pre_pull,
                ),
                starting: starting.contains(name),
            })
            .collect();
        let wanted: Vec<Wanted> = demand
            .iter()
            .map(|(image, (launches, _))| Wanted {
                image: image.clone(),
                launches: *launches,
            })
            .collect();
        let resting: BTreeSet<Pull> = self.resting.keys().cloned().collect();
        let planned = pre_pull::plan(&wanted, &views, &running, &resting, &config.pre_pull);
        let mut under_way = running.len();
        for pull in planned {
            let Some((_, source)) = demand.get(&pull.image) else {
                continue;
            };
            let pod = pre_pull::pod(&pull, &source.reference, &source.secrets, &config.pre_pull);
            match cluster.create_pod(&pod).await {
                Ok(_) => {
                    tracing::debug!(node = pull.node, image = pull.image, "pulling ahead");
                    metrics.pre_pull("planned", None);
                    under_way += 1;
                }
                Err(error) if error.is_conflict() => {}
                Err(error) => {
                    tracing::warn!(%error, node = pull.node, image = pull.image, "could not make a pull pod (is the PriorityClass outfit-workspace-placeholder installed?)");
                    break;
                }
            }
        }
        metrics.set_pre_pulls_running(under_way);
        under_way
    }

    /// Counts and removes the pull pods that are done (the node lists the image, or the kubelet
    /// made the container), failed or past `prePull.timeout`; answers the pulls still running.
    async fn settle<C: ClusterCalls>(
        &mut self,
        cluster: &C,
        config: &Config,
        pods: &[Pod],
        (nodes, seen): (&BTreeMap<String, NodeFacts>, &NodeImages),
        metrics: &Metrics,
    ) -> Vec<Pull> {
        let listed: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
        self.counted.retain(|name| listed.contains(name));
        let timeout =
            jiff::SignedDuration::try_from(config.pre_pull.timeout).unwrap_or(jiff::SignedDuration::MAX);
        let mut running = Vec::new();
        for pod in pods {
            let name = pod.name_any();
            let Some(pull) = pre_pull::pull_of(pod) else {
                continue;
            };
            let held = nodes
                .get(&pull.node)
                .is_some_and(|n| n.images.contains(&pull.image));
            let old = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .is_some_and(|t| Timestamp::now().duration_since(t.0) >= timeout);
            let state = match pre_pull::state(pod) {
                PullState::Running if held => PullState::Done,
                PullState::Running if old => PullState::Failed("not done by prePull.timeout".to_owned()),
                state => state,
            };
            if state == PullState::Running {
                running.push(pull);
                continue;
            }
            if self.counted.insert(name.clone()) {
                match &state {
                    PullState::Failed(reason) => {
                        tracing::warn!(
                            node = pull.node,
                            image = pull.image,
                            reason,
                            "a pull ahead failed; trying that node again later"
                        );
                        metrics.pre_pull("failed", None);
                        self.resting.insert(pull, Instant::now() + REST_AFTER_FAILURE);
                    }
                    _ => {
                        metrics.pre_pull("done", Some(seen.size_of(&pull.image).unwrap_or(0)));
                        let counts_for = config.pre_pull.window.max(DONE_COUNTS_FOR);
                        self.done.insert(pull, Instant::now() + counts_for);
                    }
                }
            }
            if pod.metadata.deletion_timestamp.is_none()
                && let Err(error) = cluster.delete_pod(&name, None).await
            {
                tracing::debug!(%error, pod = name, "could not remove a pull pod; next pass");
            }
        }
        running
    }
}

/// The nodes where a workspace is starting: its pod placed there and not yet ready.
pub fn starting_on(pods: &[Arc<Pod>]) -> BTreeSet<String> {
    pods.iter()
        .filter(|p| progress::stage(p) == progress::Stage::Creating && !progress::is_ready(p))
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect()
}

/// Each entry's launches remembered through the window: the workspace pods seen, by uid, with
/// their manifest's URL and when they were made.
#[derive(Debug, Default)]
pub struct Launches {
    seen: HashMap<String, (String, Timestamp)>,
}

impl Launches {
    /// Remembers the pods in `pods` made within `window`, forgets the older ones, and answers
    /// the launches per manifest URL.
    pub fn count(&mut self, pods: &[Arc<Pod>], window: Duration, now: Timestamp) -> HashMap<String, usize> {
        let window = jiff::SignedDuration::try_from(window).unwrap_or(jiff::SignedDuration::MAX);
        let recent = |at: Timestamp| now.duration_since(at) < window;
        self.seen.retain(|_, (_, at)| recent(*at));
        for pod in pods {
            let (Some(uid), Some(url), Some(created)) = (
                pod.metadata.uid.as_ref(),
                pod.annotations().get(keys::ANNOTATION_MANIFEST),
                pod.metadata.creation_timestamp.as_ref(),
            ) else {
                continue;
            };
            if recent(created.0) && self.seen.len() < MAX_REMEMBERED {
                self.seen
                    .entry(uid.clone())
                    .or_insert_with(|| (url.clone(), created.0));
            }
        }
        let mut counts = HashMap::new();
        for (url, _) in self.seen.values() {
            *counts.entry(url.clone()).or_default() += 1;
        }
        counts
    }
}

/// The catalogue's entries' images for the cluster `cluster`: each entry that is pulled ahead
/// and launched there (it names that cluster, or none), its manifest fetched at most every
/// [`REFETCH_EVERY`].
#[derive(Debug, Default)]
pub struct Catalogue {
    fetched: HashMap<String, (Instant, Vec<String>, Vec<LocalObjectReference>)>,
}

impl Catalogue {
    /// The demand: every image of the entries, with the launches of the entries that run it.
    pub async fn demand(
        &mut self,
        config: &Config,
        cluster: &str,
        fetcher: &Fetcher,
        launches: &HashMap<String, usize>,
    ) -> Demand {
        let mut demand = Demand::new();
        for entry in &config.catalogue {
            if !entry.pre_pull || entry.cluster.as_deref().is_some_and(|c| c != cluster) {
                continue;
            }
            let stale = self
                .fetched
                .get(&entry.name)
                .is_none_or(|(at, _, _)| at.elapsed() >= REFETCH_EVERY);
            if stale {
                let read = match fetcher.fetch(&entry.url).await {
                    Ok(text) => manifest::read_pod(&text).map_err(|e| e.to_string()),
                    Err(error) => Err(error.to_string()),
                };
                let (images, secrets) = match read {
                    Ok(pod) => manifest::pulls_of(pod, config),
                    Err(error) => {
                        tracing::debug!(
                            entry = entry.name,
                            error,
                            "no images to pull ahead for this entry"
                        );
                        (Vec::new(), Vec::new())
                    }
                };
                self.fetched
                    .insert(entry.name.clone(), (Instant::now(), images, secrets));
            }
            let Some((_, images, secrets)) = self.fetched.get(&entry.name) else {
                continue;
            };
            let count = launches.get(&entry.url).copied().unwrap_or(0);
            for reference in images {
                let (launched, _) = demand.entry(placement::normalize(reference)).or_insert_with(|| {
                    (
                        0,
                        Source {
                            reference: reference.clone(),
                            secrets: secrets.clone(),
                        },
                    )
                });
                *launched += count;
            }
        }
        demand
    }
}

/// The pulls ahead of one cluster, while this replica leads it.
pub struct PrePull {
    /// The cluster's name (entries that name another are not pulled here).
    pub cluster_name: String,
    /// Its configuration.
    pub config: Arc<Config>,
    /// Its API.
    pub cluster: Cluster,
    /// Its workspace pods.
    pub cache: Cache,
    /// Its nodes.
    pub nodes: NodeImages,
    /// Where the manifests come from.
    pub fetcher: Fetcher,
    /// Where the counts go.
    pub metrics: Arc<Metrics>,
    /// Whether this replica leads the cluster.
    pub leading: watch::Receiver<bool>,
}

impl PrePull {
    /// Plans every [`EVERY`] while leading, until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        if !self.config.pre_pull.enabled {
            return self.clear(shutdown).await;
        }
        self.cache.synced().await;
        let mut puller = Puller::default();
        let mut launches = Launches::default();
        let mut catalogue = Catalogue::default();
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let pods = self.cache.pods();
            // Counted while another replica leads too, so a new leader knows the window.
            let counts = launches.count(&pods, self.config.pre_pull.window, Timestamp::now());
            if !*self.leading.borrow() {
                continue;
            }
            let demand = catalogue
                .demand(&self.config, &self.cluster_name, &self.fetcher, &counts)
                .await;
            let starting = starting_on(&pods);
            puller
                .pass(
                    &self.cluster,
                    &self.config,
                    &demand,
                    &self.nodes,
                    &starting,
                    &self.metrics,
                )
                .await;
        }
    }
}

impl PrePull {
    /// With `prePull` off: removes, every [`CLEAR_EVERY`] while leading, the pull pods a run with
    /// it on left behind (they would stay, ended, forever).
    async fn clear(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(CLEAR_EVERY);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if !*self.leading.borrow() {
                continue;
            }
            clear(&self.cluster).await;
        }
    }
}

/// Removes every pull pod.
pub async fn clear<C: ClusterCalls>(cluster: &C) {
    let pods = match cluster.pull_pods().await {
        Ok(pods) => pods,
        Err(error) => {
            tracing::debug!(%error, "could not list the pull pods; trying later");
            return;
        }
    };
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let name = pod.name_any();
        match cluster.delete_pod(&name, None).await {
            Ok(_) => tracing::info!(pod = name, "removed a pull pod left from when prePull was on"),
            Err(error) => tracing::debug!(%error, pod = name, "could not remove a pull pod"),
        }
    }
}

#[cfg(test)]
mod tests;
