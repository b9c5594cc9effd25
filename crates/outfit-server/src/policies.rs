//! The serving policy set and its reload from the policy paths.
//!
//! The set lives in an `ArcSwap`: requests load it without a lock and keep the `Arc` they got for
//! the whole decision, so a swap never changes a decision half-way. Changes are found by polling:
//! every file under the paths is read and hashed (content, not mtime, so Kubernetes ConfigMap and
//! Secret volumes that swap a `..data` symlink are seen like any edit), and a changed snapshot is
//! compiled on a blocking thread. A snapshot with an invalid policy is reported and the last good
//! set keeps serving.

use std::{
    collections::hash_map::DefaultHasher,
    hash::{Hash, Hasher},
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use arc_swap::ArcSwap;
use outfit_core::{DocumentError, PolicyError, PolicyKind, PolicySet, document, source};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use outfit_k8s::cluster::Snapshot as ClusterSnapshot;

use crate::metrics::{Metrics, ReloadResult};

/// How many reloads succeeded and failed so far; tests and callers wait on changes of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Reloads that swapped in new content.
    pub succeeded: u64,
    /// Reloads whose new content was rejected (the previous content keeps serving).
    pub failed: u64,
}

/// Why policies could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A path or file could not be read or parsed.
    #[error(transparent)]
    Read(#[from] DocumentError),
    /// Some policies are invalid; each error names the file, policy and field.
    #[error("{} invalid polic{}:\n  {}", .0.len(), if .0.len() == 1 { "y" } else { "ies" }, join_errors(.0))]
    Invalid(Vec<PolicyError>),
}

fn join_errors(errors: &[PolicyError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// The policy files' content at one moment.
struct Snapshot {
    fingerprint: u64,
    files: Vec<(PathBuf, String)>,
}

fn snapshot(paths: &[PathBuf]) -> Result<Snapshot, DocumentError> {
    let mut hasher = DefaultHasher::new();
    let mut files = Vec::new();
    for path in paths {
        for file in source::policy_files(path)? {
            let text = std::fs::read_to_string(&file).map_err(|source| DocumentError::Io {
                path: file.display().to_string(),
                source,
            })?;
            file.hash(&mut hasher);
            text.hash(&mut hasher);
            files.push((file, text));
        }
    }
    Ok(Snapshot {
        fingerprint: hasher.finish(),
        files,
    })
}

/// Compiles the files' policies and, when reading from the cluster, the cluster's. An invalid
/// policy in the files rejects the whole change (the last good set keeps serving); an invalid
/// object in the cluster is reported and left out, and the others keep working: nothing but the
/// object's author can fix it, and one bad object must not stop every change after it.
fn compile(
    snapshot: &Snapshot,
    cluster: Option<&ClusterSnapshot>,
    default_namespace: &str,
) -> Result<PolicySet, LoadError> {
    let mut builder = PolicySet::builder().default_namespace(default_namespace);
    for (file, text) in &snapshot.files {
        let documents = document::parse_stream(text, &file.display().to_string())?;
        builder.add_all(&documents);
    }
    let file_errors = builder.report().errors.len();
    if let Some(cluster) = cluster {
        builder.add_all(&cluster.documents);
    }
    let (set, mut report) = builder.build();
    for error in report.errors.split_off(file_errors) {
        tracing::error!(%error, "policy in the cluster rejected; the others keep serving");
    }
    for (origin, what) in &report.skipped {
        tracing::debug!(%origin, what, "skipping a document that is not a policy outfit reads");
    }
    for warning in &report.warnings {
        tracing::warn!(%warning, "policy warning");
    }
    if report.errors.is_empty() {
        Ok(set)
    } else {
        Err(LoadError::Invalid(report.errors))
    }
}

/// The serving policy set, with what is needed to reload it.
#[derive(Debug)]
pub struct PolicyStore {
    current: Arc<ArcSwap<PolicySet>>,
    paths: Vec<PathBuf>,
    default_namespace: String,
    /// The fingerprint of the last snapshot tried, good or bad, so a bad one is reported once.
    last_fingerprint: Mutex<u64>,
    metrics: Arc<Metrics>,
    reloads: watch::Sender<ReloadCounts>,
    trigger: Notify,
    /// Snapshots of the cluster's policies, when reading from the cluster.
    cluster: Option<watch::Receiver<Arc<ClusterSnapshot>>>,
    /// True once a set compiled from a fully synced cluster snapshot is serving (always true
    /// without a cluster).
    synced: watch::Sender<bool>,
}

impl PolicyStore {
    /// Loads the policies under `paths`; fails if any file is unreadable or any policy invalid.
    pub fn load(
        paths: Vec<PathBuf>,
        default_namespace: &str,
        metrics: Arc<Metrics>,
        cluster: Option<watch::Receiver<Arc<ClusterSnapshot>>>,
    ) -> Result<Self, LoadError> {
        let snapshot = snapshot(&paths)?;
        let cluster_now = cluster.as_ref().map(|c| c.borrow().clone());
        let set = compile(&snapshot, cluster_now.as_deref(), default_namespace)?;
        let synced = cluster_now.as_ref().is_none_or(|c| c.synced);
        log_loaded(&set);
        metrics.set_policies(&set);
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(set)),
            paths,
            default_namespace: default_namespace.to_owned(),
            last_fingerprint: Mutex::new(snapshot.fingerprint),
            metrics,
            reloads: watch::Sender::new(ReloadCounts::default()),
            trigger: Notify::new(),
            cluster,
            synced: watch::Sender::new(synced),
        })
    }

    /// The serving set, shared with the request handlers.
    pub fn current(&self) -> Arc<ArcSwap<PolicySet>> {
        self.current.clone()
    }

    /// Reload results so far; `changed()` fires after each reload attempt that found new content.
    pub fn reloads(&self) -> watch::Receiver<ReloadCounts> {
        self.reloads.subscribe()
    }

    /// Turns true once the policies serving include a complete first read of the cluster.
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// Asks the poll loop to look at the files now (SIGHUP).
    pub fn reload_now(&self) {
        self.trigger.notify_one();
    }

    /// Reads the files and, if they changed, compiles and swaps in the new set. Blocking.
    fn poll_once(&self) {
        let cluster = self.cluster.as_ref().map(|c| c.borrow().clone());
        let snapshot = match snapshot(&self.paths) {
            Ok(mut snapshot) => {
                if let Some(cluster) = &cluster {
                    let mut hasher = DefaultHasher::new();
                    (snapshot.fingerprint, cluster.revision).hash(&mut hasher);
                    snapshot.fingerprint = hasher.finish();
                }
                snapshot
            }
            Err(error) => {
                // Not remembered: a volume caught mid-update reads fine on the next poll.
                tracing::error!(%error, "cannot read the policies; the last good set keeps serving");
                self.metrics.policy_reload(ReloadResult::Error);
                self.reloads.send_modify(|counts| counts.failed += 1);
                return;
            }
        };
        {
            let mut last = self
                .last_fingerprint
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if *last == snapshot.fingerprint {
                return;
            }
            *last = snapshot.fingerprint;
        }
        match compile(&snapshot, cluster.as_deref(), &self.default_namespace) {
            Ok(set) => {
                log_loaded(&set);
                self.metrics.set_policies(&set);
                self.current.store(Arc::new(set));
                if cluster.as_ref().is_none_or(|c| c.synced) {
                    self.synced.send_replace(true);
                }
                self.metrics.policy_reload(ReloadResult::Success);
                self.reloads.send_modify(|counts| counts.succeeded += 1);
            }
            Err(error) => {
                tracing::error!(%error, "rejected the changed policies; the last good set keeps serving");
                self.metrics.policy_reload(ReloadResult::Error);
                self.reloads.send_modify(|counts| counts.failed += 1);
            }
        }
    }

    /// Polls the files every `interval` (or at once on [`reload_now`](Self::reload_now)) until
    /// `shutdown`.
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: CancellationToken) {
        let mut cluster = self.cluster.clone();
        loop {
            // A cluster change is compiled at once; files are polled.
            let cluster_changed = async {
                match cluster.as_mut() {
                    Some(cluster) => {
                        if cluster.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
                () = self.trigger.notified() => {}
                () = cluster_changed => {}
            }
            let store = self.clone();
            // Reading and compiling stay off the runtime's worker threads, away from requests.
            if let Err(error) = tokio::task::spawn_blocking(move || store.poll_once()).await {
                tracing::error!(%error, "the policy reload task failed");
            }
        }
    }
}

fn log_loaded(set: &PolicySet) {
    let by_kind: Vec<String> = PolicyKind::ALL
        .iter()
        .map(|kind| format!("{kind}={}", set.count(*kind)))
        .collect();
    tracing::info!(policies = set.len(), by_kind = %by_kind.join(","), "policies loaded");
}
