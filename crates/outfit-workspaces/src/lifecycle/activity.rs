//! Workspaces' own activity endpoints: every `activityCheckInterval`, each started workspace whose
//! manifest names a Jupyter-style status URL (`outfit.dev/activity-url`, whose JSON answer has
//! `last_activity`, as Jupyter Server's `/api/status` does) is asked, and a newer activity is
//! recorded on the pod, where culling reads it.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{config::Config, keys},
    policy::culling,
    workspace::progress,
};
use regex::Regex;
use tokio_util::sync::CancellationToken;

use crate::io::{cache::Cache, cluster::Cluster, fetch::Fetcher};

/// How long one status request may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest status answer read.
const MAX_BYTES: usize = 64 * 1024;

/// The `last_activity` of a status answer.
pub fn last_activity(body: &str) -> Option<Timestamp> {
    let status: serde_json::Value = serde_json::from_str(body).ok()?;
    status.get("last_activity")?.as_str()?.parse().ok()
}

/// The activity to record at `now` when a workspace reports `reported` and the pod has `known`:
/// the report, but never later than `now` (a workspace's owner controls what it reports, and a
/// time in the future would keep it from ever being idle), and only when newer than `known`.
pub fn activity_to_record(
    reported: Timestamp,
    known: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    let reported = reported.min(now);
    (known < Some(reported)).then_some(reported)
}

/// The status URL of `pod`, with `{ip}` replaced by its address; `None` until it has one.
pub fn status_url(pod: &Pod, template: &str) -> Option<String> {
    if !template.contains("{ip}") {
        return Some(template.to_owned());
    }
    let ip = pod
        .status
        .as_ref()?
        .pod_ip
        .as_deref()
        .filter(|ip| !ip.is_empty())?;
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_owned()
    };
    Some(template.replace("{ip}", &host))
}

/// Asks workspaces' activity endpoints.
#[derive(Clone)]
pub struct ActivityPoller {
    config: Arc<Config>,
    cluster: Cluster,
    cache: Cache,
    fetcher: Fetcher,
}

impl std::fmt::Debug for ActivityPoller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivityPoller").finish_non_exhaustive()
    }
}

impl ActivityPoller {
    /// A poller of the workspaces in `cache`.
    pub fn new(config: Arc<Config>, cluster: Cluster, cache: Cache) -> Self {
        let any_http = Regex::new("^https?://").expect("a valid regex");
        Self {
            config,
            cluster,
            cache,
            fetcher: Fetcher::new(any_http, TIMEOUT, MAX_BYTES),
        }
    }

    /// Asks every `activityCheckInterval` until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        self.cache.synced().await;
        let mut tick = tokio::time::interval(self.config.activity_check_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let asks = self.cache.pods().into_iter().filter_map(|pod| {
                let lifetimes = culling::lifetimes(&pod, &self.config).ok()?;
                let started = progress::stage(&pod) == progress::Stage::Settled
                    && pod.annotations().contains_key(keys::ANNOTATION_STARTED);
                let url = status_url(&pod, lifetimes.activity_url.as_deref()?)?;
                started.then(|| self.ask(pod, url))
            });
            futures::future::join_all(asks).await;
        }
    }

    async fn ask(&self, pod: Arc<Pod>, url: String) {
        let name = pod.name_any();
        let body = match self.fetcher.fetch(&url).await {
            Ok(body) => body,
            Err(error) => {
                tracing::debug!(pod = name, %error, "activity endpoint not answered");
                return;
            }
        };
        let Some(active) = last_activity(&body) else {
            tracing::debug!(pod = name, url, "activity endpoint answered no last_activity");
            return;
        };
        let Some(active) = activity_to_record(active, culling::last_activity(&pod), Timestamp::now()) else {
            return;
        };
        let mark = BTreeMap::from([(keys::ANNOTATION_LAST_ACTIVITY, Some(active.to_string()))]);
        if let Err(error) = self.cluster.annotate_pod(&pod, mark).await
            && !error.is_gone()
        {
            tracing::warn!(pod = name, %error, "could not record activity");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn jupyter_status_answers_give_the_last_activity() {
        // Jupyter Server's GET /api/status.
        let body = r#"{"connections": 0, "kernels": 1, "last_activity": "2026-01-01T10:00:00.123456Z",
                       "started": "2026-01-01T09:00:00Z"}"#;
        assert_eq!(
            last_activity(body),
            Some("2026-01-01T10:00:00.123456Z".parse().unwrap())
        );
        assert_eq!(last_activity("{}"), None);
        assert_eq!(last_activity("not json"), None);
    }

    #[test]
    fn a_last_activity_in_the_future_is_recorded_as_now() {
        let now: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        let future: Timestamp = "2099-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(activity_to_record(future, None, now), Some(now));
        // Once recorded as now, the same claim records nothing new until time moves on.
        assert_eq!(activity_to_record(future, Some(now), now), None);
        let earlier: Timestamp = "2026-01-01T09:00:00Z".parse().unwrap();
        assert_eq!(activity_to_record(earlier, Some(now), now), None);
        assert_eq!(activity_to_record(now, Some(earlier), now), Some(now));
    }

    #[test]
    fn the_url_gets_the_pods_address() {
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"podIP": "10.244.1.5"}}))
                .unwrap();
        assert_eq!(
            status_url(&pod, "http://{ip}:8888/api/status").as_deref(),
            Some("http://10.244.1.5:8888/api/status")
        );
        let v6: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"podIP": "fd00::5"}}))
                .unwrap();
        assert_eq!(
            status_url(&v6, "http://{ip}/s").as_deref(),
            Some("http://[fd00::5]/s")
        );
        let none: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert_eq!(status_url(&none, "http://{ip}/s"), None);
        assert_eq!(
            status_url(&none, "http://127.0.0.1:1/s").as_deref(),
            Some("http://127.0.0.1:1/s")
        );
    }
}
