//! The serving policy set and its reload from the policy paths.
//!
//! The set lives in an `ArcSwap`: requests load it without a lock and keep the `Arc` they got for
//! the whole decision, so a swap never changes a decision half-way. Changes are found by polling:
//! every file under the paths is read and hashed (content, not mtime, so Kubernetes ConfigMap and
//! Secret volumes that swap a `..data` symlink are seen like any edit), and a changed snapshot is
//! compiled on a blocking thread. A snapshot with an invalid policy is reported and the last good
//! set keeps serving. The files' parsed documents are kept with their fingerprint, so a change in
//! the cluster (when reading from it) is compiled with them and the cluster's new snapshot without
//! reading or parsing the files again; only a file poll reads the disk.

use std::{
    collections::hash_map::DefaultHasher,
    hash::{Hash, Hasher},
    path::PathBuf,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use arc_swap::ArcSwap;
use outfit_core::{
    Document, DocumentError, PolicyError, PolicySet, PolicySetBuilder, document, family::Table,
    policy_set::LoadSettings, source,
};
use tokio::{
    sync::{Notify, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use outfit_k8s::cluster::Snapshot as ClusterSnapshot;

use crate::metrics::{Metrics, ReloadResult};

/// How many reloads succeeded and failed so far, the same counts the serving certificate keeps.
pub use outfit_http::tls::ReloadCounts;

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

/// The policy files' documents, parsed, at one moment.
#[derive(Debug)]
struct ParsedFiles {
    /// The fingerprint of the [`Snapshot`] they were parsed from.
    fingerprint: u64,
    documents: Vec<Document>,
}

/// Parses every file of the snapshot, in order; the first file that does not parse fails it.
fn parse(snapshot: &Snapshot) -> Result<ParsedFiles, DocumentError> {
    let mut documents = Vec::new();
    for (file, text) in &snapshot.files {
        documents.extend(document::parse_stream(text, &file.display().to_string())?);
    }
    Ok(ParsedFiles {
        fingerprint: snapshot.fingerprint,
        documents,
    })
}

/// The files' documents as one compile reads them: kept from an earlier parse, or parsed from a
/// snapshot one file at a time, so that a set compiled without a cluster never has every file's
/// documents in memory at once (at 20,000 policies they weigh several times the compiled set, and
/// the allocator keeps the pages they took).
#[derive(Clone, Copy)]
enum FileDocuments<'a> {
    Parsed(&'a [Document]),
    Snapshot(&'a Snapshot),
}

impl FileDocuments<'_> {
    /// Adds every document to `builder`, in order; the first file that does not parse fails.
    fn add_to(self, builder: &mut PolicySetBuilder) -> Result<(), DocumentError> {
        match self {
            FileDocuments::Parsed(documents) => builder.add_all(documents),
            FileDocuments::Snapshot(snapshot) => {
                for (file, text) in &snapshot.files {
                    builder.add_all(&document::parse_stream(text, &file.display().to_string())?);
                }
            }
        }
        Ok(())
    }
}

/// The files a reload compiles: parsed already (kept from an earlier reload), or just read.
enum Files {
    Parsed(Arc<ParsedFiles>),
    Read(Snapshot),
}

impl Files {
    fn fingerprint(&self) -> u64 {
        match self {
            Self::Parsed(parsed) => parsed.fingerprint,
            Self::Read(snapshot) => snapshot.fingerprint,
        }
    }
}

/// What a reload is compared on: the files' fingerprint and, when reading from the cluster, the
/// cluster's revision.
fn content_fingerprint(files: u64, cluster: Option<&ClusterSnapshot>) -> u64 {
    match cluster {
        Some(cluster) => {
            let mut hasher = DefaultHasher::new();
            (files, cluster.revision).hash(&mut hasher);
            hasher.finish()
        }
        None => files,
    }
}

/// Compiles the files' policies and, when reading from the cluster, the cluster's. An invalid
/// policy in the files rejects the whole change (the last good set keeps serving); an invalid
/// object in the cluster is reported and left out, and the others keep working: nothing but the
/// object's author can fix it, and one bad object must not stop every change after it.
fn compile(
    files: FileDocuments<'_>,
    cluster: Option<&ClusterSnapshot>,
    options: &CompileOptions,
) -> Result<PolicySet, LoadError> {
    let mut builder = PolicySetBuilder::with_families(options.families)
        .settings(LoadSettings {
            default_namespace: options.default_namespace.clone(),
            filer_namespace: options.filer_namespace.clone(),
            filer_plain_secrets: options.filer_plain_secrets,
            unreadable: cluster.map(|c| c.unreadable.clone()).unwrap_or_default(),
        })
        .annotate(options.annotate)
        .warnings(options.warnings)
        .max_patch_bytes(options.max_patch_bytes);
    files.add_to(&mut builder)?;
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

/// How the store compiles its policy sets.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// The kinds table (`outfit_core::kinds::FAMILIES`; a test may add a kind).
    pub families: Table,
    /// Namespace of namespaced policies whose documents name none.
    pub default_namespace: String,
    /// Whether admissions list the policies that changed an object in `outfit.dev/mutated-by`.
    pub annotate: bool,
    /// Whether admissions carry warnings for the requesting user.
    pub warnings: bool,
    /// Namespace of the filer injector's `filers-list` and sidecar template (`das`).
    pub filer_namespace: String,
    /// S3 keys as plain env values in filer sidecars, as StatCan does (off: `secretKeyRef`s, and
    /// of the Secrets only whether the keys are set is read).
    pub filer_plain_secrets: bool,
    /// The most bytes of JSON a patch may take; an object whose patch would take more is refused
    /// (`--max-patch-bytes`).
    pub max_patch_bytes: usize,
}

/// The API server's limit on a request body (apiserver's `MaxRequestBodyBytes`, 3 MiB): no patch
/// larger than this could ever be applied, so none is sent by default.
pub const DEFAULT_MAX_PATCH_BYTES: usize = 3 * 1024 * 1024;

impl From<&str> for CompileOptions {
    /// The policies' default namespace, warnings on and no annotation (the library's defaults),
    /// patches bounded by [`DEFAULT_MAX_PATCH_BYTES`].
    fn from(default_namespace: &str) -> Self {
        Self {
            families: outfit_core::kinds::FAMILIES,
            default_namespace: default_namespace.to_owned(),
            annotate: false,
            warnings: true,
            filer_namespace: LoadSettings::default().filer_namespace,
            filer_plain_secrets: false,
            max_patch_bytes: DEFAULT_MAX_PATCH_BYTES,
        }
    }
}

/// The serving policy set, with what is needed to reload it.
#[derive(Debug)]
pub struct PolicyStore {
    current: Arc<ArcSwap<PolicySet>>,
    paths: Vec<PathBuf>,
    options: CompileOptions,
    /// The fingerprint of the last snapshot tried, good or bad, so a bad one is reported once.
    last_fingerprint: Mutex<u64>,
    /// The files' documents as last parsed, so a cluster change does not read them again; `None`
    /// when the last read or parse of the files failed, and the next reload must read them.
    /// Kept only when reading from a cluster: without one only a file change compiles, and it
    /// reads the files anyway, and the parsed documents outweigh the compiled set.
    parsed: Mutex<Option<Arc<ParsedFiles>>>,
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
        options: impl Into<CompileOptions>,
        metrics: Arc<Metrics>,
        cluster: Option<watch::Receiver<Arc<ClusterSnapshot>>>,
    ) -> Result<Self, LoadError> {
        let options = options.into();
        let snapshot = snapshot(&paths)?;
        let fingerprint = snapshot.fingerprint;
        let cluster_now = cluster.as_ref().map(|c| c.borrow().clone());
        let parsed = match cluster {
            Some(_) => Some(Arc::new(parse(&snapshot)?)),
            None => None,
        };
        let files = parsed.as_ref().map_or(FileDocuments::Snapshot(&snapshot), |p| {
            FileDocuments::Parsed(&p.documents)
        });
        let set = compile(files, cluster_now.as_deref(), &options)?;
        let synced = cluster_now.as_ref().is_none_or(|c| c.synced);
        log_loaded(&set);
        metrics.set_policies(&set);
        if let Some(cluster) = &cluster_now {
            metrics.set_absent_kinds(&cluster.absent);
        }
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(set)),
            paths,
            options,
            // Of the files alone, even with a cluster, so the first reload with one compiles again.
            last_fingerprint: Mutex::new(fingerprint),
            parsed: Mutex::new(parsed),
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

    /// Compiles and swaps in the new set if the files or the cluster changed. Blocking.
    ///
    /// With `read_files` the files are read and fingerprinted; without (a cluster change), the
    /// files' documents as last parsed are used, and the files are read only when there are none.
    fn poll_once(&self, read_files: bool) {
        let cluster = self.cluster.as_ref().map(|c| c.borrow().clone());
        let files = match self.files(read_files) {
            Ok(files) => files,
            Err(error) => {
                // Not remembered: a volume caught mid-update reads fine on the next poll.
                tracing::error!(%error, "cannot read the policies; the last good set keeps serving");
                self.metrics.policy_reload(ReloadResult::Error);
                self.reloads.send_modify(|counts| counts.failed += 1);
                return;
            }
        };
        if !self.remember(content_fingerprint(files.fingerprint(), cluster.as_deref())) {
            return;
        }
        let compiled = self.compile_files(files, cluster.as_deref());
        match compiled {
            Ok(set) => {
                log_loaded(&set);
                self.metrics.set_policies(&set);
                if let Some(cluster) = &cluster {
                    self.metrics.set_absent_kinds(&cluster.absent);
                }
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

    /// The files to compile: the documents as last parsed when `read_files` is false and there are
    /// some, else the files as read now (still the parsed documents if their content is the same).
    fn files(&self, read_files: bool) -> Result<Files, DocumentError> {
        let parsed = self.parsed_files().clone();
        if let Some(parsed) = parsed.as_ref().filter(|_| !read_files) {
            return Ok(Files::Parsed(parsed.clone()));
        }
        let snapshot = snapshot(&self.paths).inspect_err(|_| *self.parsed_files() = None)?;
        Ok(match parsed {
            Some(parsed) if parsed.fingerprint == snapshot.fingerprint => Files::Parsed(parsed),
            _ => Files::Read(snapshot),
        })
    }

    /// Compiles `files` (and `cluster`'s policies). Files just read are parsed whole and kept when
    /// reading from a cluster (a cluster change compiles them again), else parsed file by file.
    fn compile_files(&self, files: Files, cluster: Option<&ClusterSnapshot>) -> Result<PolicySet, LoadError> {
        let options = &self.options;
        match files {
            Files::Parsed(parsed) => compile(FileDocuments::Parsed(&parsed.documents), cluster, options),
            Files::Read(snapshot) if self.cluster.is_some() => {
                let parsed = parse(&snapshot).map(Arc::new);
                *self.parsed_files() = parsed.as_ref().ok().cloned();
                compile(FileDocuments::Parsed(&parsed?.documents), cluster, options)
            }
            Files::Read(snapshot) => compile(FileDocuments::Snapshot(&snapshot), cluster, options),
        }
    }

    fn parsed_files(&self) -> MutexGuard<'_, Option<Arc<ParsedFiles>>> {
        self.parsed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `fingerprint` as the last content tried; false if it already was.
    fn remember(&self, fingerprint: u64) -> bool {
        let mut last = self
            .last_fingerprint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *last == fingerprint {
            return false;
        }
        *last = fingerprint;
        true
    }

    /// Polls the files every `interval` (or at once on [`reload_now`](Self::reload_now)) until
    /// `shutdown`.
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: CancellationToken) {
        let mut cluster = self.cluster.clone();
        let mut next_poll = Instant::now() + interval;
        loop {
            // A cluster change is compiled at once, with the files as last read; files are polled,
            // on their own schedule, which cluster changes do not push back.
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
            let read_files = tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(next_poll) => true,
                () = self.trigger.notified() => true,
                () = cluster_changed => false,
            };
            let store = self.clone();
            // Reading and compiling stay off the runtime's worker threads, away from requests.
            if let Err(error) = tokio::task::spawn_blocking(move || store.poll_once(read_files)).await {
                tracing::error!(%error, "the policy reload task failed");
            }
            if read_files {
                next_poll = Instant::now() + interval;
            }
        }
    }
}

fn log_loaded(set: &PolicySet) {
    let by_kind: Vec<String> = set
        .kinds()
        .iter()
        .map(|&kind| format!("{kind}={}", set.count(kind)))
        .collect();
    tracing::info!(policies = set.len(), by_kind = %by_kind.join(","), "policies loaded");
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = "
apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata:
  name: plain-env
  namespace: team-a
spec:
  desc: Tag plain pods
  selector:
    matchLabels:
      app: plain
  env:
  - name: PLAIN
    value: \"yes\"
";

    fn cluster(revision: u64) -> Arc<ClusterSnapshot> {
        Arc::new(ClusterSnapshot {
            documents: Vec::new(),
            synced: true,
            revision,
            ..ClusterSnapshot::default()
        })
    }

    #[test]
    fn a_cluster_change_compiles_the_files_as_last_read_without_reading_them() {
        let dir = std::env::temp_dir().join(format!("outfit-policies-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create dir");
        std::fs::write(dir.join("policy.yaml"), POLICY).expect("write");
        let (cluster_tx, cluster_rx) = watch::channel(cluster(1));
        let store =
            PolicyStore::load(vec![dir.clone()], "default", Metrics::new(), Some(cluster_rx)).expect("load");
        std::fs::remove_dir_all(&dir).expect("remove dir");

        cluster_tx.send_replace(cluster(2));
        store.poll_once(false);
        assert_eq!(
            *store.reloads.borrow(),
            ReloadCounts {
                succeeded: 1,
                failed: 0
            }
        );
        assert_eq!(store.current.load().len(), 1);

        // A file poll reads the disk, and fails; the next cluster change reads it again too.
        store.poll_once(true);
        cluster_tx.send_replace(cluster(3));
        store.poll_once(false);
        assert_eq!(
            *store.reloads.borrow(),
            ReloadCounts {
                succeeded: 1,
                failed: 2
            }
        );

        std::fs::create_dir_all(&dir).expect("create dir");
        std::fs::write(dir.join("policy.yaml"), POLICY).expect("write");
        store.poll_once(false);
        assert_eq!(
            *store.reloads.borrow(),
            ReloadCounts {
                succeeded: 2,
                failed: 2
            }
        );
        store.poll_once(true);
        store.poll_once(false);
        assert_eq!(
            *store.reloads.borrow(),
            ReloadCounts {
                succeeded: 2,
                failed: 2
            }
        );
        std::fs::remove_dir_all(&dir).expect("remove dir");
    }
}
