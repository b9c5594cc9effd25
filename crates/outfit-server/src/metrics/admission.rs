//! The per-request admission metrics (requests by outcome, latency, in flight), sharded by thread.
//!
//! Every admission updates five counters. Shared atomics would make the server's worker threads
//! pass the same cache lines back and forth on every request; instead each thread writes its own
//! shard (cache-line aligned) and a scrape adds the shards up.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::{MetricType, TypedMetric},
};

use super::outcome::RequestOutcome;

/// Upper bounds of the latency buckets, in microseconds: 25 µs to 2.5 s.
const BUCKETS_MICROS: [u64; 16] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000,
];

/// More shards than worker threads on any machine this is sized for; threads beyond share.
const SHARDS: usize = 16;

/// One thread's counters, on cache lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    requests: [AtomicU64; RequestOutcome::ALL.len()],
    /// Counts per latency bucket (not cumulative); the last cell is +Inf.
    buckets: [AtomicU64; BUCKETS_MICROS.len() + 1],
    sum_nanos: AtomicU64,
    started: AtomicU64,
    finished: AtomicU64,
}

/// The shards, shared by the three exported metrics.
#[derive(Debug)]
pub(super) struct AdmissionCells {
    shards: Box<[Shard]>,
}

impl Default for AdmissionCells {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|index| *index)
}

impl AdmissionCells {
    fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    pub(super) fn started(&self) {
        self.shard().started.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn finished(&self, outcome: RequestOutcome, latency: Option<Duration>) {
        let shard = self.shard();
        shard.finished.fetch_add(1, Ordering::Relaxed);
        shard.requests[outcome.index()].fetch_add(1, Ordering::Relaxed);
        if let Some(elapsed) = latency {
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            let bucket = BUCKETS_MICROS.partition_point(|&upper| upper < micros);
            shard.buckets[bucket].fetch_add(1, Ordering::Relaxed);
            let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
            shard.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    fn sum(&self, cell: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards
            .iter()
            .map(|shard| cell(shard).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Requests started and not yet answered.
    pub(super) fn in_flight(&self) -> i64 {
        let started = self.sum(|s| &s.started);
        let finished = self.sum(|s| &s.finished);
        // Read shard by shard, a finish can be seen before its start: never report below zero.
        i64::try_from(started.saturating_sub(finished)).unwrap_or(i64::MAX)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// `outfit_admission_requests_total{outcome}`.
#[derive(Debug, Clone)]
pub(super) struct Requests(pub(super) Arc<AdmissionCells>);

impl TypedMetric for Requests {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for Requests {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        for outcome in RequestOutcome::ALL {
            let labels = OutcomeLabels {
                outcome: outcome.as_str(),
            };
            let count = self.0.sum(|s| &s.requests[outcome.index()]);
            encoder
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// `outfit_admission_duration_seconds`.
#[derive(Debug, Clone)]
pub(super) struct Latency(pub(super) Arc<AdmissionCells>);

impl TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        // The encoder accumulates the per-bucket counts itself.
        let mut count = 0;
        let mut buckets = Vec::with_capacity(BUCKETS_MICROS.len() + 1);
        for index in 0..=BUCKETS_MICROS.len() {
            let in_bucket = self.0.sum(|s| &s.buckets[index]);
            count += in_bucket;
            let upper = BUCKETS_MICROS
                .get(index)
                .map_or(f64::INFINITY, |&micros| micros as f64 / 1e6);
            buckets.push((upper, in_bucket));
        }
        let sum = self.0.sum(|s| &s.sum_nanos) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// `outfit_admission_in_flight`.
#[derive(Debug, Clone)]
pub(super) struct InFlight(pub(super) Arc<AdmissionCells>);

impl TypedMetric for InFlight {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for InFlight {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.in_flight())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_index_their_own_cells() {
        for (position, outcome) in RequestOutcome::ALL.iter().enumerate() {
            assert_eq!(outcome.index(), position, "{outcome:?}");
        }
    }

    #[test]
    fn shards_written_from_several_threads_add_up() {
        let cells = Arc::new(AdmissionCells::default());
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let cells = cells.clone();
                scope.spawn(move || {
                    for _ in 0..1000 {
                        cells.started();
                        cells.finished(RequestOutcome::Mutated, Some(Duration::from_micros(30)));
                    }
                });
            }
        });
        assert_eq!(cells.sum(|s| &s.requests[RequestOutcome::Mutated.index()]), 4000);
        assert_eq!(cells.sum(|s| &s.buckets[1]), 4000);
        assert_eq!(cells.in_flight(), 0);
        cells.started();
        assert_eq!(cells.in_flight(), 1);
    }
}
