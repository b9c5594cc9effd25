//! The users: launches and deletes in a loop through the native API, every answer judged.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::{
    http::{Answer, call},
    outages::Outages,
    replicas::Replicas,
};

/// How long to wait between tries after an error, as a user (or a page) would.
const RETRY: Duration = Duration::from_secs(1);

/// One user of the soak.
pub(crate) struct User {
    /// When the soak started, for the times in violations.
    pub(crate) started: Instant,
    pub(crate) index: usize,
    pub(crate) token: String,
    /// The replicas: each request goes to the next, in turn.
    pub(crate) replicas: Arc<Replicas>,
    pub(crate) deadline: Instant,
    pub(crate) ready_wait: Duration,
    pub(crate) grace: Duration,
    pub(crate) outages: Arc<Outages>,
    pub(crate) tally: Arc<Tally>,
    /// How many requests this user sent (picks the replica of the next).
    pub(crate) sent: AtomicUsize,
}

/// Counts of every request by what it was and how it ended, and the violations seen.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// (request, outcome) → count.
    outcomes: BTreeMap<(&'static str, String), u64>,
    violations: Vec<String>,
    launched: u64,
    ready: u64,
    /// Launches whose start failed (cleanly: the workspace says why).
    failed: u64,
    /// Launches of the brief workspace, culled after their lifetime.
    culled: u64,
    deleted: u64,
    /// Each user's token, for the cleanup.
    tokens: Vec<String>,
    /// The slowest answer of each request kind.
    slowest: BTreeMap<&'static str, Duration>,
}

impl Tally {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The users' tokens.
    pub(crate) fn tokens(&self) -> Vec<String> {
        self.lock().tokens.clone()
    }

    /// Prints the counts and violations; whether there was none.
    /// Records a violation found outside a request (the limit and cull checks).
    pub(crate) fn violation(&self, why: String) {
        self.lock().violations.push(why);
    }

    pub(crate) fn report(&self, elapsed: Duration, downtimes: &[Duration]) -> bool {
        let counts = self.lock();
        println!(
            "workspaces soak: {:.1} min, {} outages ({} s down in all)",
            elapsed.as_secs_f64() / 60.0,
            downtimes.len(),
            downtimes.iter().map(Duration::as_secs_f64).sum::<f64>().round()
        );
        println!(
            "launched {} (ready {}, failed cleanly {}, brief ones culled {}), deleted {}",
            counts.launched, counts.ready, counts.failed, counts.culled, counts.deleted
        );
        for ((request, outcome), count) in &counts.outcomes {
            println!("  {request:<8} {outcome:<40} {count}");
        }
        for (request, slowest) in &counts.slowest {
            println!("  slowest {request}: {:.2} s", slowest.as_secs_f64());
        }
        if counts.violations.is_empty() {
            println!("violations: none");
        } else {
            println!("VIOLATIONS: {}", counts.violations.len());
            for violation in counts.violations.iter().take(50) {
                println!("  {violation}");
            }
        }
        counts.violations.is_empty()
    }
}

impl User {
    /// Sends one request and judges its answer: returns the status and body of an HTTP answer.
    async fn request(
        &self,
        kind: &'static str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Option<(u16, Value)> {
        let replica = self.sent.fetch_add(1, Ordering::Relaxed) % self.replicas.ports.len();
        let sent = Instant::now();
        let (answer, took) = call(self.replicas.ports[replica], method, path, &self.token, body).await;
        let expected = self.outages.overlaps(sent, Instant::now(), self.grace);
        // A replica killed before or while it answers: the connection fails (the user tries again,
        // on the next replica).
        let replica_down = self.replicas.down[replica].overlaps(sent, Instant::now(), REPLICA_GRACE);
        let (outcome, violation, result) = judge(kind, &answer, expected, replica_down);
        let mut counts = self.tally.lock();
        *counts.outcomes.entry((kind, outcome)).or_default() += 1;
        let slowest = counts.slowest.entry(kind).or_default();
        *slowest = (*slowest).max(took);
        if let Some(why) = violation {
            counts.violations.push(format!(
                "t={:.0}s user {} {method} {path}: {why} ({:.1} s)",
                sent.duration_since(self.started).as_secs_f64(),
                self.index,
                took.as_secs_f64()
            ));
        }
        result
    }

    async fn launch(&self, manifest: &str) -> Option<String> {
        let body = json!({"manifest": manifest});
        match self
            .request("launch", "POST", "/api/v1/workspaces", Some(&body))
            .await
        {
            Some((201, workspace)) => {
                self.tally.lock().launched += 1;
                workspace["name"].as_str().map(str::to_owned)
            }
            _ => None,
        }
    }

    /// Polls the workspace until it is ready, failed or gone, or `ready_wait` passed: an accepted
    /// create must end ready or cleanly failed (with the reason shown), whichever replica
    /// accepted it and whichever was killed meanwhile. Whether it turned ready.
    async fn await_ready(&self, name: &str) -> bool {
        let until = Instant::now() + self.ready_wait;
        let path = format!("/api/v1/workspaces/{name}");
        while Instant::now() < until {
            if let Some((status, workspace)) = self.request("get", "GET", &path, None).await {
                match (status, workspace["status"].as_str()) {
                    (200, Some("ready")) => {
                        self.tally.lock().ready += 1;
                        return true;
                    }
                    (200, Some("failed")) => {
                        self.tally.lock().failed += 1;
                        return false;
                    }
                    (200, Some("deleted")) | (404, _) => {
                        self.unfinished(name, "gone before it turned ready or failed");
                        return false;
                    }
                    _ => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.unfinished(name, "neither ready nor failed within --ready-wait");
        false
    }

    /// Polls the brief workspace until the leader has culled it: stopped for its lifetime
    /// (`cullAction`'s default since issue 31: its record stays until the user deletes it), or
    /// gone (`cullAction: delete`); or until `ready_wait` passed.
    async fn await_culled(&self, name: &str) {
        let until = Instant::now() + self.ready_wait;
        let path = format!("/api/v1/workspaces/{name}");
        while Instant::now() < until {
            let culled = |status: u16, workspace: &serde_json::Value| {
                let stopped_for_lifetime =
                    workspace["status"] == "stopped" && workspace["stopped"]["reason"] == "lifetime";
                status == 404 || workspace["status"] == "deleted" || stopped_for_lifetime
            };
            if let Some((status, workspace)) = self.request("get", "GET", &path, None).await
                && culled(status, &workspace)
            {
                self.tally.lock().culled += 1;
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.unfinished(name, "not culled within --ready-wait after its lifetime");
    }

    fn unfinished(&self, name: &str, why: &str) {
        let at = self.started.elapsed().as_secs_f64();
        self.tally
            .violation(format!("t={at:.0}s user {} workspace {name}: {why}", self.index));
    }

    /// Deletes the workspace, retrying until it is answered 2xx or 404; whether it was.
    async fn delete(&self, name: &str, until: Instant) -> bool {
        let path = format!("/api/v1/workspaces/{name}");
        while Instant::now() < until {
            // 404: gone already (an earlier try went through before its answer was lost).
            if let Some((200..300 | 404, _)) = self.request("delete", "DELETE", &path, None).await {
                self.tally.lock().deleted += 1;
                return true;
            }
            tokio::time::sleep(RETRY).await;
        }
        false
    }
}

/// How long after a replica listens again a failed connection to it is still its kill's.
const REPLICA_GRACE: Duration = Duration::from_secs(1);

/// Names an answer's outcome; says why it is a violation, if it is; gives the HTTP answer.
fn judge(
    kind: &str,
    answer: &Answer,
    expected: bool,
    replica_down: bool,
) -> (String, Option<String>, Option<(u16, Value)>) {
    match answer {
        Answer::Hung | Answer::Transport(_) if replica_down => ("replica killed".into(), None, None),
        Answer::Hung => (
            "hung".into(),
            Some(format!("no answer within {:?}", crate::http::HANG)),
            None,
        ),
        Answer::Transport(error) => (
            "connection failed".into(),
            Some(format!("the backend did not answer: {error}")),
            None,
        ),
        Answer::NotJson(status, text) => (
            format!("{status} not JSON"),
            Some(format!("{status} with a body that is not JSON: {text:.200}")),
            None,
        ),
        Answer::Status(status, body) if (200..300).contains(status) => {
            (status.to_string(), None, Some((*status, body.clone())))
        }
        // A workspace deleted meanwhile (by an earlier try whose answer was lost, or its start
        // failed) is not found; a launch never is.
        Answer::Status(404, body) if kind != "launch" => (
            format!("404 {}", body["reason"].as_str().unwrap_or("?")),
            None,
            Some((404, body.clone())),
        ),
        // Two replicas' caches may trail each other by moments: one that has not yet seen the
        // user's last workspace go refuses the next launch, as a user over the limit is refused.
        // The limit check on the cluster is what must never fail.
        Answer::Status(status, body)
            if kind == "launch" && body["reason"].as_str() == Some("LimitExceeded") =>
        {
            (
                format!("{status} LimitExceeded"),
                None,
                Some((*status, body.clone())),
            )
        }
        Answer::Status(status, body) => {
            let reason = body["reason"].as_str().unwrap_or("?");
            let outcome = format!("{status} {reason}{}", if expected { " (outage)" } else { "" });
            let violation = if body["error"].as_str().is_none_or(str::is_empty) || reason == "?" {
                Some(format!("{status} without an error and a reason: {body}"))
            } else if !expected {
                Some(format!("{status} {reason} outside an outage: {}", body["error"]))
            } else {
                None
            };
            (outcome, violation, Some((*status, body.clone())))
        }
    }
}

/// Launches and deletes until the deadline; returns the names of the workspaces it launched and
/// could not delete (the cleanup deletes them).
pub(crate) async fn user_loop(user: User) -> Vec<String> {
    user.tally.lock().tokens.push(user.token.clone());
    let mut live = Vec::new();
    let mut iteration = 0u64;
    while Instant::now() < user.deadline {
        iteration += 1;
        // Every fourth launch is of the brief workspace, left for the leader to cull.
        let brief = iteration.is_multiple_of(4);
        let Some(name) = user.launch(if brief { "brief" } else { "web" }).await else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        if brief {
            if user.await_ready(&name).await {
                user.await_culled(&name).await;
            }
        } else if !iteration.is_multiple_of(3) {
            user.await_ready(&name).await;
        }
        // A delete is retried past the deadline, but not for ever.
        if !user
            .delete(&name, user.deadline.max(Instant::now()) + Duration::from_secs(60))
            .await
        {
            live.push(name);
        }
    }
    live
}

/// Deletes every workspace each token's user still has, through the API; returns how many.
pub(crate) async fn delete_everything(
    replicas: &Arc<Replicas>,
    tokens: &[String],
    outages: &Arc<Outages>,
) -> Result<usize> {
    let mut deleted = 0;
    for (index, token) in tokens.iter().enumerate() {
        let user = User {
            started: Instant::now(),
            index,
            token: token.clone(),
            replicas: replicas.clone(),
            deadline: Instant::now(),
            ready_wait: Duration::ZERO,
            grace: Duration::ZERO,
            outages: outages.clone(),
            tally: Arc::default(),
            sent: AtomicUsize::new(0),
        };
        let Some((200, list)) = user.request("list", "GET", "/api/v1/workspaces", None).await else {
            bail!("user {index}: GET /api/v1/workspaces failed");
        };
        let names: Vec<String> = list
            .as_array()
            .or_else(|| list["workspaces"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|w| w["name"].as_str().map(str::to_owned))
            .collect();
        for name in names {
            if !user.delete(&name, Instant::now() + Duration::from_secs(60)).await {
                bail!("user {index}: workspace {name} could not be deleted within 60 s");
            }
            deleted += 1;
        }
    }
    Ok(deleted)
}
