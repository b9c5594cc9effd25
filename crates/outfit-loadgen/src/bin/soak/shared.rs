//! What every task shares: the soak's state, what the tasks count, and what a changing policy
//! should make outfit add over time (the probes' expectations).

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use kube::Client;
use rustls::ClientConfig;
use serde_json::Value;

use crate::args::Args;

/// Counts and samples shared by every task.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) requests: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) probes: AtomicU64,
    pub(crate) violations: AtomicU64,
    /// Violations within a minute of an API server restart.
    pub(crate) violations_after_outage: AtomicU64,
    pub(crate) rotations: AtomicU64,
    pub(crate) rotation_failures: AtomicU64,
    pub(crate) outages: AtomicU64,
    pub(crate) file_changes: AtomicU64,
    pub(crate) cluster_changes: AtomicU64,
    pub(crate) cluster_change_errors: AtomicU64,
    /// The first few failure and violation messages.
    pub(crate) messages: Mutex<Vec<String>>,
    pub(crate) latencies_us: Mutex<Vec<u32>>,
    pub(crate) rotation_lags: Mutex<Vec<Duration>>,
    pub(crate) outage_downtimes: Mutex<Vec<Duration>>,
    /// When kube-apiserver last came back.
    pub(crate) last_restart: Mutex<Option<Instant>>,
}

impl Stats {
    pub(crate) fn note(&self, message: String) {
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        if messages.len() < 30 {
            eprintln!("soak: {message}");
            messages.push(message);
        }
    }

    pub(crate) fn fail(&self, message: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.note(message);
    }
}

/// What a changing policy should make outfit add, over time.
#[derive(Default)]
pub(crate) struct Expectation {
    history: Mutex<Vec<Change>>,
}

struct Change {
    at: Instant,
    /// The env value the policy adds, `None` when the policy is absent; `Unknown` when a change's
    /// outcome is not known (a failed API call), until it is read back.
    value: Expected,
    first_seen: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expected {
    Value(Option<String>),
    Unknown,
}

impl Expectation {
    pub(crate) fn push(&self, value: Expected) {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        history.push(Change {
            at: Instant::now(),
            value,
            first_seen: None,
        });
    }

    pub(crate) fn current(&self) -> Expected {
        let history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        history.last().map_or(Expected::Value(None), |c| c.value.clone())
    }

    /// Whether `seen` at `now` is a value in force at some time within the last `window`, and
    /// marks the first sighting of the latest value.
    pub(crate) fn check(&self, seen: &Option<String>, now: Instant, window: Duration) -> bool {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let since = now.checked_sub(window).unwrap_or(now);
        // The change in force at `since`, and every later one.
        let start = history.iter().rposition(|c| c.at <= since).unwrap_or(0);
        let ok = history.is_empty()
            || history[start..]
                .iter()
                .any(|c| c.value == Expected::Unknown || c.value == Expected::Value(seen.clone()));
        if let Some(last) = history.last_mut()
            && last.first_seen.is_none()
            && last.value == Expected::Value(seen.clone())
        {
            last.first_seen = Some(now);
        }
        ok
    }

    /// Propagation lags of the changes seen, and how many changes were never seen.
    pub(crate) fn lags(&self) -> (Vec<Duration>, usize) {
        let history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let known = history.iter().filter(|c| c.value != Expected::Unknown);
        let (seen, unseen): (Vec<&Change>, Vec<&Change>) = known.partition(|c| c.first_seen.is_some());
        let lags = seen
            .iter()
            .filter_map(|c| c.first_seen.map(|s| s.duration_since(c.at)))
            .collect();
        (lags, unseen.len())
    }
}

/// Everything the tasks share.
pub(crate) struct Soak {
    pub(crate) args: Args,
    pub(crate) stats: Stats,
    pub(crate) file_policy: Expectation,
    pub(crate) cluster_policy: Expectation,
    /// True while kube-apiserver is down (no cluster changes then).
    pub(crate) api_down: AtomicBool,
    pub(crate) webhook: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) tls: Arc<ClientConfig>,
    /// The 200 review bodies split around the request uid's last 12 digits.
    pub(crate) templates: Vec<(Bytes, Bytes)>,
    pub(crate) objects: Vec<Value>,
    /// Whether each review is a CREATE.
    pub(crate) creates: Vec<bool>,
    /// Each review's object as outfit's first answer patched it (`None`: no patch).
    pub(crate) baseline: Mutex<Vec<Option<Value>>>,
    pub(crate) uid: AtomicU64,
    pub(crate) state_dir: PathBuf,
    pub(crate) work: PathBuf,
    pub(crate) client: Client,
    pub(crate) deadline: Instant,
}

pub(crate) const FILE_NS: &str = "soak-file";
pub(crate) const CLUSTER_NS: &str = "soak-cluster";
pub(crate) const ROTATING: &str = "rotating";
pub(crate) const UID_PREFIX: &[u8] = b"\"uid\":\"00000000-0000-4000-8000-";
