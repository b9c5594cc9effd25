//! What this process wrote itself and its watches may not show yet, kept in each cluster's
//! cache so that the backend and the lifecycle of one cluster share it:
//!
//! - the pods its creates made, so that the next create of the user picks a free name even
//!   while the pod watch lags (each name the cache does not show yet would cost a create
//!   answered 409);
//! - the pods whose NetworkPolicy a create makes or made, so that the lifecycle does not make it
//!   a second time when the pod turns ready (a create answered 409 and a GET); a pod can turn
//!   ready while its create is still making the policy, so the lifecycle waits for that to end.
//!   A restarted process, or another replica's lifecycle, finds no record and makes sure of the
//!   policy as before.
//!
//! Both are bounded: entries go when they are used or when they are old.

use std::{collections::HashMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::{sync::watch, time::Instant};

/// How long a made pod counts as holding its name when the cache still does not show it: past
/// this the watch would have shown it (or its delete), so the record is stale.
const MADE_KEPT: Duration = Duration::from_secs(60);
/// How long a pod's made NetworkPolicy is remembered when no lifecycle finishes the pod (it was
/// deleted or failed first): longer than a create may reasonably wait to be ready; a forgotten
/// record costs only the second create it saves.
const ISOLATED_KEPT: Duration = Duration::from_secs(2 * 60 * 60);
/// The records are swept of old entries once they hold this many.
const SWEEP_PAST: usize = 1024;
/// How long the lifecycle waits for a create still making a pod's NetworkPolicy before it makes
/// sure itself (the create's request is stuck; a second create is harmless).
const MAKING_WAIT: Duration = Duration::from_secs(30);

/// The record (cheap to clone: clones share it).
#[derive(Clone, Default)]
pub struct OwnWrites {
    inner: Arc<std::sync::Mutex<Records>>,
    /// Moves whenever a NetworkPolicy being made is made or not.
    settled: Arc<watch::Sender<u64>>,
}

/// Where a create stands with a pod's NetworkPolicy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// Its create request is under way.
    Making,
    /// Made.
    Made,
}

#[derive(Default)]
struct Records {
    /// Pod name → the pod a create made, and when.
    made: HashMap<String, (Arc<Pod>, Instant)>,
    /// Pod uid → how far a create got with its NetworkPolicy, and since when.
    isolated: HashMap<String, (Isolation, Instant)>,
}

impl OwnWrites {
    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        // A panic while the lock was held leaves plain maps behind; they stay usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A create made `pod`.
    pub fn made(&self, pod: &Pod) {
        let made = (Arc::new(pod.clone()), Instant::now());
        insert_swept(&mut self.records().made, pod.name_any(), made, MADE_KEPT);
    }

    /// The pod a create made as `name` within [`MADE_KEPT`], for when the cache does not show
    /// one of that name.
    pub fn made_pod(&self, name: &str) -> Option<Arc<Pod>> {
        let mut records = self.records();
        match records.made.get(name) {
            Some((pod, at)) if at.elapsed() < MADE_KEPT => Some(pod.clone()),
            Some(_) => {
                records.made.remove(name);
                None
            }
            None => None,
        }
    }

    /// The pod watch saw the pod `name` with `uid` made or deleted: the record of the make of
    /// that very pod is not needed any more (the cache holds the name while the pod exists). A
    /// pod made and deleted before anyone asked for its name would otherwise hold the name for
    /// [`MADE_KEPT`]: the two-replica soak, whose users delete and relaunch within seconds, ran
    /// out of names that way.
    pub fn shown(&self, name: &str, uid: Option<&str>) {
        let mut records = self.records();
        if records
            .made
            .get(name)
            .is_some_and(|(pod, _)| pod.uid().as_deref() == uid)
        {
            records.made.remove(name);
        }
    }

    /// A create is making the NetworkPolicy of the pod with `uid`.
    pub fn isolating(&self, uid: &str) {
        self.isolation(uid, Isolation::Making);
    }

    /// The create making the NetworkPolicy of the pod with `uid` made it (`made`), or failed.
    pub fn isolated(&self, uid: &str, made: bool) {
        if made {
            self.isolation(uid, Isolation::Made);
        } else {
            self.records().isolated.remove(uid);
        }
        self.settled.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn isolation(&self, uid: &str, isolation: Isolation) {
        let entry = (isolation, Instant::now());
        insert_swept(&mut self.records().isolated, uid.to_owned(), entry, ISOLATED_KEPT);
    }

    /// Whether a create of this process made the NetworkPolicy of the pod with `uid`, waiting
    /// (up to [`MAKING_WAIT`]) while one is making it. The record is used up (a second start of
    /// the same pod makes sure again).
    pub async fn take_isolated(&self, uid: &str) -> bool {
        let mut settled = self.settled.subscribe();
        let deadline = Instant::now() + MAKING_WAIT;
        loop {
            settled.borrow_and_update();
            let state = self.records().isolated.get(uid).copied();
            match state {
                Some((Isolation::Making, _)) => {}
                Some((Isolation::Made, at)) => {
                    self.records().isolated.remove(uid);
                    return at.elapsed() < ISOLATED_KEPT;
                }
                None => return false,
            }
            // The sender lives in `self`: it never closes while this waits.
            if tokio::time::timeout_at(deadline, settled.changed())
                .await
                .is_err()
            {
                return false;
            }
        }
    }
}

/// Inserts `entry` at `key`, first sweeping `records` of entries older than `kept` once it holds
/// [`SWEEP_PAST`].
fn insert_swept<V>(
    records: &mut HashMap<String, (V, Instant)>,
    key: String,
    entry: (V, Instant),
    kept: Duration,
) {
    if records.len() >= SWEEP_PAST {
        let now = entry.1;
        records.retain(|_, (_, at)| now.duration_since(*at) < kept);
    }
    records.insert(key, entry);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "uid": uid}})).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_made_pod_holds_its_name_until_shown_or_old() {
        let writes = OwnWrites::default();
        writes.made(&pod("ws", "u1"));
        assert_eq!(writes.made_pod("ws").and_then(|p| p.uid()).as_deref(), Some("u1"));
        assert!(writes.made_pod("other").is_none());
        writes.shown("ws", Some("u0"));
        assert!(
            writes.made_pod("ws").is_some(),
            "another pod of the name was seen"
        );
        writes.shown("ws", Some("u1"));
        assert!(writes.made_pod("ws").is_none(), "the watch saw it");
        writes.made(&pod("ws", "u2"));
        tokio::time::advance(MADE_KEPT).await;
        assert!(writes.made_pod("ws").is_none(), "a stale record holds no name");
    }

    #[tokio::test(start_paused = true)]
    async fn an_isolation_is_told_once() {
        let writes = OwnWrites::default();
        assert!(!writes.take_isolated("u1").await, "nothing made by this process");
        writes.isolating("u1");
        writes.isolated("u1", true);
        assert!(writes.take_isolated("u1").await);
        assert!(!writes.take_isolated("u1").await, "used up");
        writes.isolated("u2", true);
        tokio::time::advance(ISOLATED_KEPT).await;
        assert!(!writes.take_isolated("u2").await, "forgotten when old");
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_waits_for_an_isolation_being_made() {
        let writes = OwnWrites::default();
        for made in [true, false] {
            writes.isolating("u1");
            let asked = tokio::spawn({
                let writes = writes.clone();
                async move { writes.take_isolated("u1").await }
            });
            tokio::task::yield_now().await;
            writes.isolated("u1", made);
            assert_eq!(asked.await.unwrap(), made);
        }
        // A create stuck making it: the start makes sure itself after a while.
        writes.isolating("u2");
        assert!(!writes.take_isolated("u2").await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_records_are_swept_of_old_entries() {
        let writes = OwnWrites::default();
        for i in 0..SWEEP_PAST {
            writes.made(&pod(&format!("ws-{i}"), "u"));
            writes.isolated(&format!("u{i}"), true);
        }
        tokio::time::advance(ISOLATED_KEPT).await;
        writes.made(&pod("new", "u"));
        writes.isolated("new", true);
        let records = writes.records();
        assert_eq!((records.made.len(), records.isolated.len()), (1, 1));
    }
}
