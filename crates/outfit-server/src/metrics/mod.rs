//! Prometheus metrics, served in text format on the admin port.
//!
//! The admission path only touches atomics of its own thread (the `admission` submodule);
//! prometheus-client's own `Histogram` would take a mutex on every observation.

mod admission;
mod connections;
mod outcome;

use std::{sync::Arc, time::Duration};

use outfit_core::PolicySet;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

pub use self::outcome::RequestOutcome;
use self::{
    admission::{AdmissionCells, InFlight, Latency, Requests},
    connections::{Cap, Connections, Figure},
};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpdateLabels {
    field: &'static str,
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RotationLabels {
    what: &'static str,
}

/// Whether a reload succeeded, the `result` label of the reload counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    /// The new policies or certificate are serving.
    Success,
    /// The new input was rejected; the previous one keeps serving.
    Error,
}

impl From<outfit_http::tls::ReloadOutcome> for ReloadResult {
    fn from(outcome: outfit_http::tls::ReloadOutcome) -> Self {
        match outcome {
            outfit_http::tls::ReloadOutcome::Success => Self::Success,
            outfit_http::tls::ReloadOutcome::Error => Self::Error,
        }
    }
}

impl ReloadResult {
    fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
        }
    }
}

/// Every metric outfit exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    admission: Arc<AdmissionCells>,
    patches_too_large: Counter,
    policies: Family<KindLabels, Gauge>,
    kinds_installed: Family<KindLabels, Gauge>,
    connection_cap: Cap,
    policy_reloads: Family<ResultLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
    leader: Gauge,
    configuration_updates: Family<UpdateLabels, Counter>,
    configuration_errors: Counter,
    certificate_rotations: Family<RotationLabels, Counter>,
}

impl Metrics {
    /// Registers every metric under the `outfit_` prefix.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("outfit");
        let admission = Arc::new(AdmissionCells::default());
        registry.register(
            "admission_requests",
            "Admission requests by outcome",
            Requests(admission.clone()),
        );
        registry.register(
            "admission_duration_seconds",
            "Time from request headers to response, admission requests on /mutate",
            Latency(admission.clone()),
        );
        registry.register(
            "admission_in_flight",
            "Requests on /mutate whose headers arrived and whose answer is not yet written",
            InFlight(admission.clone()),
        );
        // Rare (a hostile or broken object), so a plain shared counter: no per-thread shard.
        let patches_too_large = Counter::default();
        registry.register(
            "admission_patches_too_large",
            "Reviews refused because their patch would pass --max-patch-bytes (also counted as denied)",
            patches_too_large.clone(),
        );
        let connection_cap = Cap::default();
        registry.register(
            "connections_open",
            "Connections open on the webhook port",
            Connections(connection_cap.clone(), Figure::Open),
        );
        registry.register(
            "connections_evicted",
            "Idle connections closed to make room at --max-connections",
            Connections(connection_cap.clone(), Figure::Evicted),
        );
        registry.register(
            "connections_refused",
            "New connections refused at --max-connections because every open one was busy",
            Connections(connection_cap.clone(), Figure::Refused),
        );
        let policies = Family::<KindLabels, Gauge>::default();
        registry.register("policies", "Policies serving, by kind", policies.clone());
        let kinds_installed = Family::<KindLabels, Gauge>::default();
        registry.register(
            "policy_kind_installed",
            "With --from-cluster: 1 when the API server serves the kind's CRD, 0 when it is not installed (its policies are then read once it is)",
            kinds_installed.clone(),
        );
        let policy_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "policy_reloads",
            "Policy reloads by result (error: the last good set kept serving)",
            policy_reloads.clone(),
        );
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "tls_reloads",
            "Serving certificate reloads by result (error: the previous certificate kept serving)",
            tls_reloads.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "webhook_leader",
            "1 while this replica holds the Lease and so writes the webhook configuration and rotates the certificate",
            leader.clone(),
        );
        let configuration_updates = Family::<UpdateLabels, Counter>::default();
        registry.register(
            "webhook_configuration_updates",
            "Writes of the webhook configuration by field and reason (policies, certificate, restored: someone else changed it, startup)",
            configuration_updates.clone(),
        );
        let configuration_errors = Counter::default();
        registry.register(
            "webhook_configuration_errors",
            "Failed reads or writes of the webhook configuration (retried)",
            configuration_errors.clone(),
        );
        let certificate_rotations = Family::<RotationLabels, Counter>::default();
        registry.register(
            "certificate_rotations",
            "Changes to the certificate Secret by what: ca (a new CA joined the bundle), leaf (a new serving certificate), prune (expired CAs left the bundle)",
            certificate_rotations.clone(),
        );
        for result in [ReloadResult::Success, ReloadResult::Error] {
            let labels = ResultLabels {
                result: result.as_str(),
            };
            let _ = policy_reloads.get_or_create(&labels);
            let _ = tls_reloads.get_or_create(&labels);
        }
        Arc::new(Self {
            registry,
            admission,
            patches_too_large,
            policies,
            kinds_installed,
            connection_cap,
            policy_reloads,
            tls_reloads,
            leader,
            configuration_updates,
            configuration_errors,
            certificate_rotations,
        })
    }

    /// Records whether this replica holds the Lease.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts a write of the webhook configuration's `field` (`rules`, `caBundle`) for `reason`.
    pub fn configuration_updated(&self, field: &'static str, reason: &'static str) {
        self.configuration_updates
            .get_or_create(&UpdateLabels { field, reason })
            .inc();
    }

    /// Counts a failed read or write of the webhook configuration.
    pub fn configuration_error(&self) {
        self.configuration_errors.inc();
    }

    /// Counts a change to the certificate Secret (`ca`, `leaf`, `prune`).
    pub fn certificate_rotated(&self, what: &'static str) {
        self.certificate_rotations
            .get_or_create(&RotationLabels { what })
            .inc();
    }

    /// Counts one answered request and, for admission decisions, its latency.
    pub fn observe_request(&self, outcome: RequestOutcome, elapsed: Duration) {
        let decided = matches!(
            outcome,
            RequestOutcome::Allowed | RequestOutcome::Mutated | RequestOutcome::Denied
        );
        self.admission.finished(outcome, decided.then_some(elapsed));
    }

    /// Counts a review refused because its patch would pass the bound.
    pub fn patch_too_large(&self) {
        self.patches_too_large.inc();
    }

    /// Counts a request whose headers arrived; [`observe_request`](Self::observe_request) ends it.
    pub fn request_started(&self) {
        self.admission.started();
    }

    /// Requests started and not yet answered.
    pub fn in_flight(&self) -> i64 {
        self.admission.in_flight()
    }

    /// Records the policies now serving.
    pub fn set_policies(&self, set: &PolicySet) {
        for &kind in set.kinds() {
            let count = i64::try_from(set.count(kind)).unwrap_or(i64::MAX);
            self.policies
                .get_or_create(&KindLabels { kind: kind.as_str() })
                .set(count);
        }
    }

    /// Reports the figures of the webhook's connection cap from now on.
    pub fn watch_connections(&self, limit: Arc<outfit_http::limit::ConnectionLimit>) {
        let _ = self.connection_cap.set(limit);
    }

    /// Records which kinds' CRDs the API server does not serve, by `kind` name.
    pub fn set_absent_kinds(&self, absent: &[String]) {
        for kind in outfit_core::kinds::all() {
            let installed = !absent.iter().any(|a| a == kind.as_str());
            self.kinds_installed
                .get_or_create(&KindLabels { kind: kind.as_str() })
                .set(i64::from(installed));
        }
    }

    /// Counts a policy reload.
    pub fn policy_reload(&self, result: ReloadResult) {
        self.policy_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Counts a certificate reload.
    pub fn tls_reload(&self, result: ReloadResult) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
