//! The Rust side: outfit's engine (`outfit_core::PolicySet`) on the same YAML and objects, called
//! as the criterion bench calls it.

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use outfit_core::{Outcome, PolicySet, Request, document};
use serde_json::Value;

use crate::{baseline::Budget, timing::Timing};

/// Documents per YAML stream handed to outfit: `outfit_core::document::parse_stream` reads YAML
/// with serde-saphyr's default budget, which refuses a stream of more than 1,024 documents
/// ("budget breached: Documents"), so a larger set is read as several streams, as if it were
/// split over files (`--policies DIR`). Gatekeeper gets the one stream.
const DOCUMENTS_PER_STREAM: usize = 1_000;

/// Loads the YAML stream as `outfit mutate --policies` would; any load error is fatal.
pub(crate) fn load(yaml: &str) -> Result<(PolicySet, Duration, usize)> {
    let start = Instant::now();
    let mut documents = Vec::new();
    for (index, stream) in streams(yaml).iter().enumerate() {
        documents.extend(document::parse_stream(
            stream,
            &format!("gatekeeper-compare-{index}"),
        )?);
    }
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    let (set, report) = builder.build();
    let took = start.elapsed();
    if !report.errors.is_empty() {
        let first: Vec<String> = report.errors.iter().take(3).map(|e| e.to_string()).collect();
        bail!(
            "outfit rejected {} mutators: {}",
            report.errors.len(),
            first.join("; ")
        );
    }
    Ok((set, took, report.warnings.len()))
}

/// `yaml` (documents each starting with a `---` line) cut into streams of at most
/// [`DOCUMENTS_PER_STREAM`] documents.
fn streams(yaml: &str) -> Vec<&str> {
    let starts: Vec<usize> = yaml
        .match_indices("---\n")
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || yaml.as_bytes()[i - 1] == b'\n')
        .collect();
    let mut out = Vec::new();
    let mut from = 0;
    for chunk in starts.chunks(DOCUMENTS_PER_STREAM).skip(1) {
        out.push(&yaml[from..chunk[0]]);
        from = chunk[0];
    }
    out.push(&yaml[from..]);
    out
}

/// This thread's CPU time so far, from `/proc/thread-self/schedstat` (std has no CPU clock, and
/// the workspace forbids the `unsafe` a `clock_gettime` call would need). It lags by up to a
/// scheduler tick, which averages out over the dozens of batches a cell times.
fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// The admitted object and whether it changed, or the denial's message; and the timing of that
/// one call (`apply` and the admitted object, as [`bench`] times them; the owned copy returned
/// here is made after the clock stops).
pub(crate) fn mutate(
    set: &PolicySet,
    object: &Value,
    namespace: &str,
) -> (Result<(Value, bool), String>, Timing) {
    let (cpu, start) = (thread_cpu(), Instant::now());
    let outcome = set.apply(&Request::create(object, namespace));
    let admitted = match &outcome {
        Outcome::Admitted(admission) => Ok((admission.object(object), !admission.is_unchanged())),
        Outcome::Denied(denial) => Err(denial.message.clone()),
    };
    let timing = Timing {
        iters: 1,
        per_iter: start.elapsed(),
        cpu: thread_cpu().saturating_sub(cpu),
        copy: None,
    };
    let result = match admitted {
        Ok((Ok(object), changed)) => Ok((object.into_owned(), changed)),
        Ok((Err(e), _)) => Err(format!("patch does not apply: {e}")),
        Err(message) => Err(message),
    };
    (result, timing)
}

/// One admission as timed: `apply`, then the admitted object (the engine's copy when it kept
/// one, else the input with the patch applied; the input itself when nothing changed). Both
/// are dropped inside the clock, as Go's garbage is collected inside its own.
fn admit(set: &PolicySet, object: &Value, namespace: &str) {
    match set.apply(&Request::create(object, namespace)) {
        Outcome::Admitted(admission) => {
            let admitted = admission.object(object).expect("patch applies");
            black_box(&admitted);
        }
        Outcome::Denied(denial) => panic!("denied while timing: {}", denial.message),
    }
}

/// Times admissions of `object` in batches of `budget.batch`, the clock running around each
/// batch, the same loop the Go side runs (it has no copies to make: the input is borrowed).
pub(crate) fn bench(set: &PolicySet, object: &Value, namespace: &str, budget: Budget) -> Timing {
    let min_iters = budget.min_iters.max(1);
    let max_iters = budget.max_iters.max(min_iters);
    let batch = budget.batch.max(1);
    let (mut timed, mut cpu) = (Duration::ZERO, Duration::ZERO);
    let mut iters = 0u64;
    while iters < max_iters && (iters < min_iters || timed < budget.time) {
        let n = batch.min(max_iters - iters);
        let cpu_start = thread_cpu();
        let start = Instant::now();
        for _ in 0..n {
            admit(set, black_box(object), namespace);
        }
        timed += start.elapsed();
        cpu += thread_cpu().saturating_sub(cpu_start);
        iters += n;
    }
    Timing {
        iters,
        per_iter: Duration::from_secs_f64(timed.as_secs_f64() / iters as f64),
        cpu: Duration::from_secs_f64(cpu.as_secs_f64() / iters as f64),
        copy: None,
    }
}

#[cfg(test)]
mod tests {
    use super::streams;

    #[test]
    fn streams_hold_at_most_a_thousand_documents_each() {
        let yaml: String = (0..2_500).map(|i| format!("---\na: {i}\n")).collect();
        let streams = streams(&yaml);
        assert_eq!(streams.len(), 3);
        assert_eq!(streams.concat(), yaml);
        assert!(streams[1].starts_with("---\na: 1000\n"));
        assert_eq!(streams[2].matches("---\n").count(), 500);
    }
}
