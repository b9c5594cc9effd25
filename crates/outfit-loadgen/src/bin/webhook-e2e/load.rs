//! The closed-loop pod-create load: `--clients` workers, each with its own `kube::Client`, each
//! creating one pod after another, and the figures of one run.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, api::PostParams};

/// How long a run lasts: a discarded warm-up, then the measured window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) warmup: Duration,
    pub(crate) measured: Duration,
}

/// One create: when it was sent (from the run's start), how long it took, and the pod's name if
/// the API server stored it.
struct Sample {
    sent: Duration,
    latency: Duration,
    created: Option<String>,
}

/// The figures of one configuration's run.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Creates sent in the measured window that succeeded.
    pub(crate) creates: u64,
    /// From the end of the warm-up to the last measured create's answer.
    pub(crate) elapsed: Duration,
    /// Latencies of the measured creates (failed ones included), sorted.
    pub(crate) latencies: Vec<Duration>,
    /// Failed creates, warm-up included.
    pub(crate) errors: u64,
    /// Every create sent, warm-up included.
    pub(crate) sent: u64,
    /// The first few errors.
    pub(crate) messages: Vec<String>,
    /// Names of the pods created in the measured window.
    pub(crate) names: Vec<String>,
}

impl Run {
    /// Pod creates per second over the measured window.
    pub(crate) fn throughput(&self) -> f64 {
        if self.elapsed.is_zero() {
            return 0.0;
        }
        self.creates as f64 / self.elapsed.as_secs_f64()
    }

    /// Nearest-rank percentile `p` (0..=100) of the latencies.
    pub(crate) fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }

    /// The largest latency.
    pub(crate) fn max(&self) -> Duration {
        self.latencies.last().copied().unwrap_or_default()
    }
}

/// Runs `clients` workers creating pods `<prefix>-<worker>-<n>` from `template` in `namespace`
/// for `window`, and collects the figures.
pub(crate) async fn run(
    clients: &[Client],
    namespace: &str,
    prefix: &str,
    template: &Pod,
    window: Window,
) -> Result<Run> {
    let start = Instant::now();
    let template = Arc::new(template.clone());
    let mut tasks = Vec::new();
    for (id, client) in clients.iter().enumerate() {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let template = Arc::clone(&template);
        let prefix = format!("{prefix}-{id}");
        let until = window.warmup + window.measured;
        tasks.push(tokio::spawn(async move {
            worker(pods, &prefix, &template, start, until).await
        }));
    }
    let mut samples = Vec::new();
    let mut messages = Vec::new();
    for task in tasks {
        let (worker_samples, worker_messages) = task.await.context("a load worker panicked")?;
        samples.extend(worker_samples);
        messages.extend(worker_messages);
    }
    Ok(summarise(samples, messages, window.warmup))
}

/// One closed-loop client: creates pods back to back until `until` after `start`.
async fn worker(
    pods: Api<Pod>,
    prefix: &str,
    template: &Pod,
    start: Instant,
    until: Duration,
) -> (Vec<Sample>, Vec<String>) {
    let mut samples = Vec::new();
    let mut messages = Vec::new();
    let mut pod = template.clone();
    for n in 0u64.. {
        let sent = start.elapsed();
        if sent >= until {
            break;
        }
        let name = format!("{prefix}-{n}");
        pod.metadata.name = Some(name.clone());
        let outcome = pods.create(&PostParams::default(), &pod).await;
        let latency = start.elapsed() - sent;
        let created = match outcome {
            Ok(_) => Some(name),
            Err(error) => {
                if messages.len() < 5 {
                    messages.push(format!("create {name}: {error}"));
                }
                None
            }
        };
        samples.push(Sample {
            sent,
            latency,
            created,
        });
    }
    (samples, messages)
}

/// The figures of the creates sent after `warmup`; errors counted over the whole run.
fn summarise(samples: Vec<Sample>, messages: Vec<String>, warmup: Duration) -> Run {
    let mut run = Run {
        messages,
        ..Run::default()
    };
    let mut last_answer = warmup;
    for sample in samples {
        run.sent += 1;
        if sample.created.is_none() {
            run.errors += 1;
        }
        if sample.sent < warmup {
            continue;
        }
        last_answer = last_answer.max(sample.sent + sample.latency);
        run.latencies.push(sample.latency);
        if let Some(name) = sample.created {
            run.creates += 1;
            run.names.push(name);
        }
    }
    run.elapsed = last_answer - warmup;
    run.latencies.sort_unstable();
    run.names.sort_unstable();
    run
}
