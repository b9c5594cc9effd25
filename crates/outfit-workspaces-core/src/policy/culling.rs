//! When a workspace is culled: at the end of its lifetime, or after an idle spell, each set per
//! manifest (annotations) or for all (config). Idleness counts from the last activity recorded on
//! the pod (the API's activity endpoint, or the workspace's own Jupyter-style status endpoint),
//! else from its start. Pure: the lifecycle asks, and deletes.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube_core::ResourceExt;

use crate::model::{
    config::{Config, CullAction},
    duration, keys,
};

/// A workspace's limits in time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lifetimes {
    /// Culled this long after it started.
    pub max_lifetime: Option<Duration>,
    /// Culled after this long without activity.
    pub idle_timeout: Option<Duration>,
    /// Where its activity is read (`{ip}` stands for the pod's address).
    pub activity_url: Option<String>,
}

/// Why a workspace is culled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cull {
    /// It reached its maximum lifetime.
    Lifetime {
        /// The lifetime.
        limit: Duration,
    },
    /// It was idle too long.
    Idle {
        /// Its last activity.
        since: Timestamp,
        /// The idle timeout.
        limit: Duration,
    },
}

impl Cull {
    /// The Event reason and metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Lifetime { .. } => "lifetime",
            Self::Idle { .. } => "idle",
        }
    }
}

/// What culling does to `pod` if it has a Workspace: its manifest's `outfit.dev/cull-action`,
/// else the configuration's `cullAction`; an annotation that is neither `stop` nor `delete` is
/// refused (at create, so that culling never meets one).
pub fn action(pod: &Pod, config: &Config) -> Result<CullAction, String> {
    match pod.annotations().get(keys::ANNOTATION_CULL_ACTION) {
        Some(text) => CullAction::parse(text).map_err(|e| format!("{}: {e}", keys::ANNOTATION_CULL_ACTION)),
        None => Ok(config.cull_action),
    }
}

/// How an idle cull's text (its Event and `outfit.dev/culled`) begins.
pub const IDLE_PREFIX: &str = "culled: idle since";

impl std::fmt::Display for Cull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Lifetime { limit } => {
                write!(
                    f,
                    "culled: it reached its maximum lifetime of {}",
                    duration::format(*limit)
                )
            }
            Self::Idle { since, limit } => write!(
                f,
                "{IDLE_PREFIX} {since}, longer than its idle timeout of {}",
                duration::format(*limit)
            ),
        }
    }
}

/// A duration annotation: `0` or `never` turns the config's default off for this manifest.
fn annotation(pod: &Pod, key: &str, default: Option<Duration>) -> Result<Option<Duration>, String> {
    match pod.annotations().get(key).map(|v| v.trim()) {
        None => Ok(default),
        Some("0" | "never" | "") => Ok(None),
        Some(text) => duration::parse(text)
            .map(Some)
            .map_err(|e| format!("annotation {key} is {text:?}: {e}")),
    }
}

/// The limits of `pod`: its manifest's annotations, else the config's.
pub fn lifetimes(pod: &Pod, config: &Config) -> Result<Lifetimes, String> {
    let activity_url = pod
        .annotations()
        .get(keys::ANNOTATION_ACTIVITY_URL)
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty());
    if let Some(url) = &activity_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(format!(
            "annotation {} is {url:?}: expected an http:// or https:// URL",
            keys::ANNOTATION_ACTIVITY_URL
        ));
    }
    Ok(Lifetimes {
        max_lifetime: annotation(pod, keys::ANNOTATION_MAX_LIFETIME, config.max_lifetime)?,
        idle_timeout: annotation(pod, keys::ANNOTATION_IDLE_TIMEOUT, config.idle_timeout)?,
        activity_url,
    })
}

fn timestamp(pod: &Pod, key: &str) -> Option<Timestamp> {
    pod.annotations().get(key)?.parse().ok()
}

/// When the workspace last showed activity: the recorded activity, else its start.
pub fn last_activity(pod: &Pod) -> Option<Timestamp> {
    let started = timestamp(pod, keys::ANNOTATION_STARTED)?;
    Some(timestamp(pod, keys::ANNOTATION_LAST_ACTIVITY).map_or(started, |a| a.max(started)))
}

/// Whether `pod` is due to be culled at `now`. Only started workspaces are: a start in progress
/// is bounded by its create deadline instead.
pub fn due(pod: &Pod, config: &Config, now: Timestamp) -> Option<Cull> {
    let annotations = pod.annotations();
    if pod.metadata.deletion_timestamp.is_some()
        || annotations.contains_key(keys::ANNOTATION_FAILED)
        || annotations.contains_key(keys::ANNOTATION_CULLED)
    {
        return None;
    }
    let started = timestamp(pod, keys::ANNOTATION_STARTED)?;
    // A bad annotation was refused at create; one edited in since falls back to the config's.
    let lifetimes = lifetimes(pod, config).unwrap_or(Lifetimes {
        max_lifetime: config.max_lifetime,
        idle_timeout: config.idle_timeout,
        activity_url: None,
    });
    let since = |t: Timestamp| Duration::from_secs(now.duration_since(t).as_secs().max(0) as u64);
    if let Some(limit) = lifetimes.max_lifetime
        && since(started) >= limit
    {
        return Some(Cull::Lifetime { limit });
    }
    // A mark in the future (recorded before such marks were clamped) counts as now.
    let last = last_activity(pod)?.min(now);
    match lifetimes.idle_timeout {
        Some(limit) if since(last) >= limit => Some(Cull::Idle { since: last, limit }),
        _ => None,
    }
}

/// When `pod` will be culled for its lifetime, if ever.
pub fn expires(pod: &Pod, config: &Config) -> Option<Timestamp> {
    let started = timestamp(pod, keys::ANNOTATION_STARTED)?;
    let limit = lifetimes(pod, config).ok()?.max_lifetime?;
    started
        .checked_add(jiff::SignedDuration::try_from(limit).ok()?)
        .ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(lifetime: &str, idle: &str) -> Config {
        let env = |key: &str| match key {
            "BACKEND_MAXLIFETIME" => Some(lifetime.to_owned()),
            "BACKEND_IDLETIMEOUT" => Some(idle.to_owned()),
            _ => None,
        };
        Config::load(None, env).unwrap().0
    }

    fn pod(annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "ws", "annotations": annotations}})).unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    const STARTED: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn the_lifetime_counts_from_the_start() {
        let config = config("8h", "");
        let pod = pod(json!({keys::ANNOTATION_STARTED: STARTED}));
        assert_eq!(due(&pod, &config, at("2026-01-01T07:59:59Z")), None);
        assert_eq!(
            due(&pod, &config, at("2026-01-01T08:00:00Z")),
            Some(Cull::Lifetime {
                limit: Duration::from_secs(8 * 3600)
            })
        );
        assert_eq!(expires(&pod, &config), Some(at("2026-01-01T08:00:00Z")));
    }

    #[test]
    fn idleness_counts_from_the_last_activity() {
        let config = config("", "30m");
        let pod = pod(json!({keys::ANNOTATION_STARTED: STARTED,
                             keys::ANNOTATION_LAST_ACTIVITY: "2026-01-01T01:00:00Z"}));
        assert_eq!(due(&pod, &config, at("2026-01-01T01:29:00Z")), None);
        let cull = due(&pod, &config, at("2026-01-01T01:30:00Z")).unwrap();
        assert_eq!(cull.reason(), "idle");
        assert!(
            cull.to_string().contains("idle since 2026-01-01T01:00:00Z"),
            "{cull}"
        );
    }

    #[test]
    fn the_manifest_overrides_the_config() {
        let config = config("8h", "30m");
        let never = pod(json!({keys::ANNOTATION_STARTED: STARTED,
                               keys::ANNOTATION_MAX_LIFETIME: "never", keys::ANNOTATION_IDLE_TIMEOUT: "0"}));
        assert_eq!(due(&never, &config, at("2027-01-01T00:00:00Z")), None);
        let short = pod(json!({keys::ANNOTATION_STARTED: STARTED, keys::ANNOTATION_MAX_LIFETIME: "10s"}));
        assert_eq!(
            due(&short, &config, at("2026-01-01T00:00:10Z")).map(|c| c.reason()),
            Some("lifetime")
        );
        let bad = pod(json!({keys::ANNOTATION_MAX_LIFETIME: "soon"}));
        assert!(lifetimes(&bad, &config).unwrap_err().contains("max-lifetime"));
        let url = pod(json!({keys::ANNOTATION_ACTIVITY_URL: "ftp://x"}));
        assert!(lifetimes(&url, &config).is_err());
    }

    #[test]
    fn starts_in_progress_and_deletes_are_not_culled() {
        let config = config("1s", "1s");
        let creating = pod(json!({keys::ANNOTATION_CREATE_DEADLINE: STARTED}));
        assert_eq!(due(&creating, &config, at("2030-01-01T00:00:00Z")), None);
        let failed = pod(json!({keys::ANNOTATION_STARTED: STARTED, keys::ANNOTATION_FAILED: "x"}));
        assert_eq!(due(&failed, &config, at("2030-01-01T00:00:00Z")), None);
        // Culled once: its delete is retried by the lifecycle, never a second cull.
        let culled = pod(json!({keys::ANNOTATION_STARTED: STARTED, keys::ANNOTATION_CULLED: "x"}));
        assert_eq!(due(&culled, &config, at("2030-01-01T00:00:00Z")), None);
    }
}
