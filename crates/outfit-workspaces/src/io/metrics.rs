//! Prometheus metrics of the backend, served on the admin port: requests by endpoint and status
//! with their latency, creates accepted, spawn durations by manifest and outcome, failures by
//! phase, culls by reason, and the workspaces running. The workspace API is not a hot path (a few
//! requests a second), so prometheus-client's own metric types are used as they are.

use std::time::Duration;

use hyper::StatusCode;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    code: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpawnLabels {
    manifest: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    step: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The backend's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<EndpointLabels, Histogram>,
    creates: Counter,
    spawns: Family<SpawnLabels, Histogram>,
    failures: Family<PhaseLabels, Counter>,
    culls: Family<ReasonLabels, Counter>,
    running: Gauge,
    leader: Gauge,
    pre_pulls: Family<OutcomeLabels, Counter>,
    pre_pull_bytes: Counter,
    pre_pulls_running: Gauge,
    placeholders: Gauge,
    reconcile_failures: Family<StepLabels, Counter>,
    proxy_refusals: Family<ReasonLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("outfit_workspaces");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "API requests by endpoint and HTTP status",
            requests.clone(),
        );
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 4.0, 10))
        });
        registry.register(
            "request_duration_seconds",
            "Time to answer an API request: long polls to their answer, progress streams to their first byte",
            latency.clone(),
        );
        let creates = Counter::default();
        registry.register("creates", "Pods created through either API", creates.clone());
        let spawns = Family::<SpawnLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.5, 2.0, 10))
        });
        registry.register(
            "spawn_duration_seconds",
            "Time from a workspace pod's creation (whole seconds, as the API server records it) to ready with its Services (outcome ready) or to its failure (outcome failed), by the manifest's metadata.name",
            spawns.clone(),
        );
        let failures = Family::<PhaseLabels, Counter>::default();
        registry.register(
            "spawn_failures",
            "Failed starts by the phase they were stuck in",
            failures.clone(),
        );
        let culls = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "culled",
            "Workspaces culled, by reason (lifetime, idle)",
            culls.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "running",
            "Workspaces ready and not being deleted (counted once a second)",
            running.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the Lease and so runs the lifecycle (finish, fail, cull, storage sweep)",
            leader.clone(),
        );
        let pre_pulls = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "pre_pulls",
            "Images pulled ahead onto nodes (prePull), by outcome: planned (a pull pod made), done, failed",
            pre_pulls.clone(),
        );
        let pre_pull_bytes = Counter::default();
        registry.register(
            "pre_pull_bytes",
            "Bytes of the images pulled ahead, as the nodes list their sizes (pulls of images no node lists a size for count 0)",
            pre_pull_bytes.clone(),
        );
        let pre_pulls_running = Gauge::default();
        registry.register(
            "pre_pulls_running",
            "Pull pods not yet done, as the leader last counted them",
            pre_pulls_running.clone(),
        );
        let placeholders = Gauge::default();
        registry.register(
            "placeholders",
            "Placeholder pods not being deleted, as the leader last counted them (a preempted one is back within 2 s)",
            placeholders.clone(),
        );
        let reconcile_failures = Family::<StepLabels, Counter>::default();
        registry.register(
            "reconcile_failures",
            "Reconciles of a Workspace that failed and are tried again after a back-off, by the step that failed (read, start, stop, expire, finalize, status, decide: a stop request)",
            reconcile_failures.clone(),
        );
        let proxy_refusals = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "proxy_refusals",
            "Requests for a workspace's host refused (proxyDomain), by reason: forbidden (not the owner nor an admin), unknown (no such workspace), ticket (a ticket for another host, expired or used)",
            proxy_refusals.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            creates,
            spawns,
            failures,
            culls,
            running,
            leader,
            pre_pulls,
            pre_pull_bytes,
            pre_pulls_running,
            placeholders,
            reconcile_failures,
            proxy_refusals,
        }
    }
}

impl Metrics {
    /// Counts a request to `endpoint`.
    pub fn request(&self, endpoint: &'static str, status: StatusCode, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint,
                code: status.as_u16(),
            })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels { endpoint })
            .observe(took.as_secs_f64());
    }

    /// Counts a pod created.
    pub fn created(&self) {
        self.creates.inc();
    }

    /// Records a start of `manifest` that ended ready (`failed_in` is `None`) or failed, `took`
    /// after the pod was created.
    pub fn spawned(&self, manifest: &str, failed_in: Option<&'static str>, took: Duration) {
        let outcome = if failed_in.is_some() { "failed" } else { "ready" };
        self.spawns
            .get_or_create(&SpawnLabels {
                manifest: manifest.to_owned(),
                outcome,
            })
            .observe(took.as_secs_f64());
        if let Some(phase) = failed_in {
            self.failures.get_or_create(&PhaseLabels { phase }).inc();
        }
    }

    /// Counts a request for a workspace's host refused for `reason`.
    pub fn proxy_refused(&self, reason: &'static str) {
        self.proxy_refusals.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Counts a workspace culled for `reason`.
    pub fn culled(&self, reason: &'static str) {
        self.culls.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Sets how many workspaces are running.
    pub fn set_running(&self, count: usize) {
        self.running.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts a pull ahead `planned`, `done` (with its size when known) or `failed`.
    pub fn pre_pull(&self, outcome: &'static str, bytes: Option<u64>) {
        self.pre_pulls.get_or_create(&OutcomeLabels { outcome }).inc();
        if let Some(bytes) = bytes {
            self.pre_pull_bytes.inc_by(bytes);
        }
    }

    /// Sets how many pulls ahead are under way.
    pub fn set_pre_pulls_running(&self, count: usize) {
        self.pre_pulls_running
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets how many placeholders there are.
    pub fn set_placeholders(&self, count: usize) {
        self.placeholders.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// The metrics in the OpenMetrics text format.
    /// Counts a failed reconcile of a Workspace at `step`.
    pub fn reconcile_failed(&self, step: &'static str) {
        self.reconcile_failures.get_or_create(&StepLabels { step }).inc();
    }

    pub fn render(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String never fails");
        text
    }
}
