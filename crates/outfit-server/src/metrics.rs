//! Prometheus metrics, served in text format on the admin port.
//!
//! The admission path only touches atomics: counters are resolved per label set once, here, and the
//! latency histogram is our own lock-free one (prometheus-client's `Histogram` takes a mutex on
//! every observation).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use outfit_core::{PolicyKind, PolicySet};
use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet, text::encode},
    metrics::{MetricType, TypedMetric, counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// How an admission request ended, the `outcome` label of `outfit_admission_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Allowed without a patch.
    Allowed,
    /// Allowed with a patch.
    Mutated,
    /// Denied (`allowed: false`).
    Denied,
    /// HTTP 400: not JSON, or not an `admission.k8s.io/v1` AdmissionReview.
    BadRequest,
    /// HTTP 413: the body is over the limit.
    TooLarge,
    /// HTTP 408: the body did not arrive in time.
    Timeout,
    /// HTTP 404 or 405: another path or method.
    NotFound,
}

impl RequestOutcome {
    const ALL: [RequestOutcome; 7] = [
        Self::Allowed,
        Self::Mutated,
        Self::Denied,
        Self::BadRequest,
        Self::TooLarge,
        Self::Timeout,
        Self::NotFound,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Mutated => "mutated",
            Self::Denied => "denied",
            Self::BadRequest => "bad_request",
            Self::TooLarge => "too_large",
            Self::Timeout => "timeout",
            Self::NotFound => "not_found",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// Whether a reload succeeded, the `result` label of the reload counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    /// The new policies or certificate are serving.
    Success,
    /// The new input was rejected; the previous one keeps serving.
    Error,
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
    requests: [Counter; RequestOutcome::ALL.len()],
    latency: LatencyHistogram,
    in_flight: Gauge,
    policies: Family<KindLabels, Gauge>,
    policy_reloads: Family<ResultLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
}

impl Metrics {
    /// Registers every metric under the `outfit_` prefix.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("outfit");
        let requests_family = Family::<OutcomeLabels, Counter>::default();
        let requests = RequestOutcome::ALL.map(|outcome| {
            requests_family
                .get_or_create(&OutcomeLabels {
                    outcome: outcome.as_str(),
                })
                .clone()
        });
        registry.register(
            "admission_requests",
            "Admission requests by outcome",
            requests_family,
        );
        let latency = LatencyHistogram::default();
        registry.register(
            "admission_duration_seconds",
            "Time from request headers to response, admission requests on /mutate",
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "admission_in_flight",
            "Requests on /mutate whose headers arrived and whose answer is not yet written",
            in_flight.clone(),
        );
        let policies = Family::<KindLabels, Gauge>::default();
        registry.register("policies", "Policies serving, by kind", policies.clone());
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
        for result in [ReloadResult::Success, ReloadResult::Error] {
            let labels = ResultLabels {
                result: result.as_str(),
            };
            let _ = policy_reloads.get_or_create(&labels);
            let _ = tls_reloads.get_or_create(&labels);
        }
        Arc::new(Self {
            registry,
            requests,
            latency,
            in_flight,
            policies,
            policy_reloads,
            tls_reloads,
        })
    }

    /// Counts one answered request and, for admission decisions, its latency.
    pub fn observe_request(&self, outcome: RequestOutcome, elapsed: Duration) {
        self.in_flight.dec();
        let index = RequestOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or_default();
        self.requests[index].inc();
        if matches!(
            outcome,
            RequestOutcome::Allowed | RequestOutcome::Mutated | RequestOutcome::Denied
        ) {
            self.latency.observe(elapsed);
        }
    }

    /// Counts a request whose headers arrived; [`observe_request`](Self::observe_request) ends it.
    pub fn request_started(&self) {
        self.in_flight.inc();
    }

    /// Requests started and not yet answered.
    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Records the policies now serving.
    pub fn set_policies(&self, set: &PolicySet) {
        for kind in PolicyKind::ALL {
            let count = i64::try_from(set.count(*kind)).unwrap_or(i64::MAX);
            self.policies
                .get_or_create(&KindLabels { kind: kind.as_str() })
                .set(count);
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

/// Upper bounds of the latency buckets, in microseconds: 25 µs to 1 s.
const BUCKETS_MICROS: [u64; 16] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000,
];

/// A fixed-bucket histogram of durations updated with relaxed atomics only.
#[derive(Debug, Clone, Default)]
struct LatencyHistogram {
    inner: Arc<HistogramCells>,
}

#[derive(Debug, Default)]
struct HistogramCells {
    /// Counts per bucket (not cumulative); the last cell is +Inf.
    buckets: [AtomicU64; BUCKETS_MICROS.len() + 1],
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    fn observe(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_MICROS.partition_point(|&upper| upper < micros);
        self.inner.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        // The encoder accumulates the per-bucket counts itself.
        let mut count = 0;
        let mut buckets = Vec::with_capacity(BUCKETS_MICROS.len() + 1);
        for (index, cell) in self.inner.buckets.iter().enumerate() {
            let in_bucket = cell.load(Ordering::Relaxed);
            count += in_bucket;
            let upper = BUCKETS_MICROS
                .get(index)
                .map_or(f64::INFINITY, |&micros| micros as f64 / 1e6);
            buckets.push((upper, in_bucket));
        }
        let sum = self.inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
