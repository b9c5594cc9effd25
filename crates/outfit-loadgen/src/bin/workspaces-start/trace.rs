//! The catalogue and the launch trace, on plain data: which images the entries run and how big
//! they are, and when which entry is launched by whom.

use std::time::Duration;

use outfit_loadgen::workspaces::image_manifest;
use outfit_test_support::kubelet::ModelConfig;
use serde_json::{Value, json};

use crate::args::Args;

/// The label and taint key of the image kubelet's nodes, which every catalogue entry selects and
/// tolerates.
pub(crate) const POOL: &str = "outfit.bench/start";

/// Modelled image sizes in GB, entry by entry (cycled past six): the most launched is neither
/// the smallest nor the largest.
const SIZES_GB: [f64; 6] = [1.5, 3.0, 0.6, 2.2, 0.3, 1.0];

/// The trace's fraction at which the nodes are added.
pub(crate) const NODES_ADDED_AT: f64 = 0.4;
/// The trace's fraction at which the last entry (a new image) begins to be launched.
pub(crate) const NEW_IMAGE_AT: f64 = 0.6;

/// Catalogue entry `i`'s name.
pub(crate) fn entry(i: usize) -> String {
    format!("e{i}")
}

/// The label of the cluster's real node (`hack/control-plane/real-node.sh`).
const REAL_NODE: &str = "outfit.dev/node";

/// The image entry `name` runs: the image kubelet's name, or on the real node the one in its
/// registry.
pub(crate) fn image(name: &str, real: bool) -> String {
    if real {
        format!("registry.outfit.test/outfit-bench/{name}:1")
    } else {
        format!("outfit-bench/{name}:1")
    }
}

/// Where the arm's pods go, as a pod spec's `nodeSelector` and `tolerations`: the pool's nodes
/// (selected and tolerated), or the real node. One value for the catalogue's manifests, the
/// planner's `prePull` and the DaemonSet (JSON is YAML's flow style, so it is written as it is).
pub(crate) fn placement(real: bool) -> Value {
    if real {
        json!({"nodeSelector": {REAL_NODE: "real"}, "tolerations": []})
    } else {
        json!({"nodeSelector": {POOL: "yes"},
               "tolerations": [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}]})
    }
}

/// Entry `i`'s modelled size in bytes.
pub(crate) fn size(args: &Args, i: usize) -> u64 {
    (SIZES_GB[i % SIZES_GB.len()] * 1e9 * args.size_scale) as u64
}

/// The manifest served for entry `name`: its image, on the arm's nodes.
pub(crate) fn manifest(name: &str, real: bool) -> String {
    let placement = placement(real);
    let spec_lines = format!(
        "  nodeSelector: {}\n  tolerations: {}\n",
        placement["nodeSelector"], placement["tolerations"]
    );
    image_manifest(name, &image(name, real), &spec_lines)
}

/// The image kubelet's model for an arm: `prefix`'s nodes of [`POOL`], the args' bandwidth and
/// latency, the entries' sizes; every node holds the pause image only.
pub(crate) fn model(args: &Args, prefix: &str) -> ModelConfig {
    let mut config = ModelConfig::new(prefix, POOL);
    config.nodes = args.nodes;
    config.bandwidth = args.bandwidth * 1_000_000;
    config.latency = Duration::from_millis(args.latency_ms);
    config.sizes = (0..args.entries)
        .map(|i| (image(&entry(i), false), size(args, i)))
        .collect();
    config
}

/// One launch of the trace.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// From the trace's start.
    pub(crate) at: Duration,
    pub(crate) user: String,
    /// The entry's index.
    pub(crate) entry: usize,
}

/// A small deterministic generator (xorshift64*), so that every arm sees the same trace.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The trace: `launches` arrivals over `seconds` whose rate rises linearly from 0 (a morning
/// ramp: launch `k` at `seconds * sqrt((k + 0.5) / launches)`), each of an entry drawn with
/// Zipf-like weights (entry `i`: `1 / (i + 1)`); the last entry (a new image, in the catalogue
/// from the start) only from [`NEW_IMAGE_AT`], then weighted as the second most popular.
pub(crate) fn trace(args: &Args) -> Vec<Launch> {
    let mut rng = Rng(args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let newest = args.entries - 1;
    (0..args.launches)
        .map(|k| {
            let fraction = ((k as f64 + 0.5) / args.launches as f64).sqrt();
            let weights: Vec<f64> = (0..args.entries)
                .map(|i| match i {
                    _ if i == newest && args.entries > 1 && fraction < NEW_IMAGE_AT => 0.0,
                    _ if i == newest && args.entries > 1 => 0.5,
                    _ => 1.0 / (i as f64 + 1.0),
                })
                .collect();
            let mut draw = rng.next() * weights.iter().sum::<f64>();
            let entry = weights
                .iter()
                .position(|w| {
                    draw -= w;
                    draw < 0.0
                })
                .unwrap_or(0);
            Launch {
                at: Duration::from_secs_f64(args.seconds * fraction),
                user: format!("u{}@start.example", k % args.users.max(1)),
                entry,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn the_ramp_rises_and_the_new_image_comes_late() {
        let args = Args::parse_from(["workspaces-start", "--state-dir", "/nowhere"]);
        let launches = trace(&args);
        assert_eq!(launches.len(), 60);
        let gaps: Vec<Duration> = launches.windows(2).map(|w| w[1].at - w[0].at).collect();
        assert!(gaps.first() > gaps.last(), "arrivals come closer and closer");
        let newest = args.entries - 1;
        let first_new = launches
            .iter()
            .find(|l| l.entry == newest)
            .expect("the new image launched");
        assert!(first_new.at.as_secs_f64() >= args.seconds * NEW_IMAGE_AT);
        assert!(
            launches.iter().filter(|l| l.entry == 0).count()
                > launches.iter().filter(|l| l.entry == 4).count()
        );
        assert_eq!(
            trace(&args).iter().map(|l| l.entry).collect::<Vec<_>>(),
            launches.iter().map(|l| l.entry).collect::<Vec<_>>()
        );
    }
}
