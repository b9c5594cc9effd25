//! What the image kubelet saw: every pull and every pod start, and the figures a start-time
//! benchmark reports from them (time to ready, starts that waited, pulls in a start's way).

use std::time::Duration;

use jiff::Timestamp;

/// Who a pod is, as far as pulls are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodKind {
    /// A pull pod (labelled `outfit.dev/pre-pull`).
    PullPod,
    /// A DaemonSet's pod (the anchors' pre-pull).
    DaemonSet,
    /// Anything else: a workspace's pod.
    Workload,
}

impl PodKind {
    /// Whether it is a workspace's pod (the starts that matter).
    pub fn is_workload(self) -> bool {
        self == PodKind::Workload
    }
}

/// A pod that waited for a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    /// `namespace/name`.
    pub pod: String,
    /// Its kind.
    pub kind: PodKind,
}

/// One pull of one image onto one node.
#[derive(Debug, Clone)]
pub struct PullRecord {
    /// The node.
    pub node: String,
    /// The image, normalized as the kubelet lists it (`docker.io/library/nginx:latest`).
    pub image: String,
    /// Its modelled size.
    pub bytes: u64,
    /// When it started.
    pub started: Timestamp,
    /// When it finished (`None`: still running).
    pub finished: Option<Timestamp>,
    /// The kind of the pod that started it.
    pub started_for: PodKind,
    /// Every pod that waited for it, the one that started it first.
    pub waiters: Vec<Waiter>,
}

impl PullRecord {
    /// How long it took, once finished.
    pub fn duration(&self) -> Option<Duration> {
        Some(between(self.started, self.finished?))
    }

    /// Whether it served no workspace: started by a pull pod or a DaemonSet's pod, and waited
    /// for by no workspace's pod.
    pub fn ahead(&self) -> bool {
        !self.started_for.is_workload() && self.waiters.iter().all(|w| !w.kind.is_workload())
    }
}

/// One pod's start on a node of the image kubelet.
#[derive(Debug, Clone)]
pub struct StartRecord {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its node.
    pub node: String,
    /// Its kind.
    pub kind: PodKind,
    /// When the stand-in first saw it bound to the node (the watch's delay after the binding,
    /// milliseconds).
    pub bound: Timestamp,
    /// When it was reported ready (or, for a pod that runs to completion, succeeded); `None`
    /// while it is not.
    pub ready: Option<Timestamp>,
    /// Whether it waited for a pull.
    pub waited_for_pull: bool,
    /// Whether it waits for an image no registry has.
    pub unpullable: bool,
}

impl StartRecord {
    /// From bound to ready, once ready.
    pub fn bound_to_ready(&self) -> Option<Duration> {
        Some(between(self.bound, self.ready?))
    }
}

/// p50, p95 and p99 of some durations (nearest rank), and how many there were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub count: usize,
}

impl Percentiles {
    /// Those of `durations`; `None` when there are none.
    pub fn of(mut durations: Vec<Duration>) -> Option<Self> {
        if durations.is_empty() {
            return None;
        }
        durations.sort();
        let rank = |q: f64| {
            let index = (q * durations.len() as f64).ceil() as usize;
            durations[index.clamp(1, durations.len()) - 1]
        };
        Some(Percentiles {
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            count: durations.len(),
        })
    }
}

/// Every pull and start the image kubelet saw, in the order they began.
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub pulls: Vec<PullRecord>,
    pub starts: Vec<StartRecord>,
}

impl Records {
    /// The starts of workspaces' pods (not pull pods', not DaemonSets').
    pub fn workload_starts(&self) -> impl Iterator<Item = &StartRecord> {
        self.starts.iter().filter(|s| s.kind.is_workload())
    }

    /// The start of the pod `namespace/name` (its latest, should a name be reused).
    pub fn start_of(&self, namespace: &str, name: &str) -> Option<&StartRecord> {
        self.starts
            .iter()
            .rev()
            .find(|s| s.namespace == namespace && s.name == name)
    }

    /// The pulls of `image` (normalized) onto `node`.
    pub fn pulls_of<'a>(&'a self, node: &'a str, image: &'a str) -> impl Iterator<Item = &'a PullRecord> {
        self.pulls
            .iter()
            .filter(move |p| p.node == node && p.image == image)
    }

    /// p50/p95/p99 from bound to ready of the workspaces' pods that turned ready.
    pub fn bound_to_ready(&self) -> Option<Percentiles> {
        Percentiles::of(
            self.workload_starts()
                .filter_map(StartRecord::bound_to_ready)
                .collect(),
        )
    }

    /// The share of workspaces' starts that waited for a pull (`None` without starts).
    pub fn waited_share(&self) -> Option<f64> {
        let (waited, all) = self
            .workload_starts()
            .fold((0, 0), |(w, a), s| (w + usize::from(s.waited_for_pull), a + 1));
        (all > 0).then(|| waited as f64 / all as f64)
    }

    /// The pulls done ahead (see [`PullRecord::ahead`]) that ran while a workspace's pod was
    /// starting on the same node (between its binding and its readiness, or until now if it
    /// never turned ready): the pulls that competed with a start for the node's bandwidth, disk
    /// and CPU.
    pub fn overlapping_pulls(&self) -> usize {
        let now = Timestamp::now();
        self.pulls
            .iter()
            .filter(|pull| pull.ahead())
            .filter(|pull| {
                let pull_end = pull.finished.unwrap_or(now);
                self.workload_starts().any(|start| {
                    start.node == pull.node
                        && start.bound < pull_end
                        && pull.started < start.ready.unwrap_or(now)
                })
            })
            .count()
    }
}

/// `to - from`, zero if `to` is earlier.
fn between(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    fn start(node: &str, (bound, ready): (i64, i64), waited: bool) -> StartRecord {
        StartRecord {
            namespace: "ns".into(),
            name: format!("{node}-{bound}"),
            node: node.into(),
            kind: PodKind::Workload,
            bound: at(bound),
            ready: Some(at(ready)),
            waited_for_pull: waited,
            unpullable: false,
        }
    }

    fn pull(node: &str, (started, finished): (i64, i64), started_for: PodKind) -> PullRecord {
        PullRecord {
            node: node.into(),
            image: "i".into(),
            bytes: 1,
            started: at(started),
            finished: Some(at(finished)),
            started_for,
            waiters: vec![Waiter {
                pod: "ns/p".into(),
                kind: started_for,
            }],
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let ms = |n| Duration::from_millis(n);
        let p = Percentiles::of((1..=100).map(ms).collect()).unwrap();
        assert_eq!((p.p50, p.p95, p.p99, p.count), (ms(50), ms(95), ms(99), 100));
        let one = Percentiles::of(vec![ms(7)]).unwrap();
        assert_eq!((one.p50, one.p99), (ms(7), ms(7)));
        assert_eq!(Percentiles::of(vec![]), None);
    }

    #[test]
    fn only_pulls_ahead_on_the_starting_node_during_the_start_overlap() {
        let records = Records {
            starts: vec![start("a", (1000, 2000), true), start("b", (1000, 2000), false)],
            pulls: vec![
                // Overlaps the start on a.
                pull("a", (1500, 3000), PodKind::PullPod),
                // A DaemonSet's pull on a, before the start.
                pull("a", (0, 900), PodKind::DaemonSet),
                // The workspace's own pull.
                pull("a", (1000, 2000), PodKind::Workload),
                // A DaemonSet's pull on b while a pod starts there.
                pull("b", (1900, 2500), PodKind::DaemonSet),
                // On a node where nothing starts.
                pull("c", (1000, 2000), PodKind::PullPod),
            ],
        };
        assert_eq!(records.overlapping_pulls(), 2);
        assert_eq!(records.waited_share(), Some(0.5));
        assert_eq!(records.bound_to_ready().unwrap().p50, Duration::from_secs(1));
    }
}
