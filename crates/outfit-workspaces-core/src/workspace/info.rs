//! What `get_pods` answers for a pod: deic-dk's PodInfo (§1.2 of the reference), read from the
//! pod alone, since outfit keeps tokens and the ssh port on the pod instead of a local cache.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::{
    model::{config::Config, keys},
    policy::culling,
    workspace::{
        objects, pod_needs,
        progress::{self, Report, Stage, Status},
    },
};

/// One pod as the frontend reads it. Every field is always present; `tokens` and `k8s_pod_info`
/// may be `null`, as in deic-dk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodInfo {
    /// The pod's name.
    pub pod_name: String,
    /// The first container's name.
    pub container_name: String,
    /// The first container's image, after the local-registry rewrite.
    pub image_name: String,
    /// `status.podIP`, or "".
    pub pod_ip: String,
    /// `status.hostIP`, or "".
    pub node_ip: String,
    /// The owner's user id.
    pub owner: String,
    /// "H:M:S" since the pod started, not zero-padded.
    pub age: String,
    /// `<Phase>:<start time>`, or `Creating` / `Deleting`.
    pub status: String,
    /// `https://<pod>.<ingressDomain>` when the pod has an Ingress, else "".
    pub url: String,
    /// `ssh://root@<ingressDomain>:<nodePort>` when the pod has an ssh Service, else "".
    pub ssh_url: String,
    /// Token key → value.
    pub tokens: Option<BTreeMap<String, String>>,
    /// `{"sshPort": "<nodePort>"}`.
    pub k8s_pod_info: Option<BTreeMap<String, String>>,
}

/// `pod` as `get_pods` shows it at `now`.
pub fn pod_info(pod: &Pod, config: &Config, now: Timestamp) -> PodInfo {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let first = pod.spec.as_ref().and_then(|s| s.containers.first());
    let status = pod.status.as_ref();
    let started = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    let annotations = pod.metadata.annotations.as_ref();
    let annotation = |key| annotations.and_then(|a| a.get(key)).map(String::as_str);
    let ssh_port = annotation(keys::ANNOTATION_SSH_PORT).filter(|p| !p.is_empty());
    let tokens = annotation(keys::ANNOTATION_TOKENS).and_then(|t| serde_json::from_str(t).ok());
    let has_ingress = matches!(pod_needs::ingress_port(pod), Ok(Some(_)));
    PodInfo {
        container_name: first.map(|c| c.name.clone()).unwrap_or_default(),
        image_name: first.and_then(|c| c.image.clone()).unwrap_or_default(),
        pod_ip: status.and_then(|s| s.pod_ip.clone()).unwrap_or_default(),
        node_ip: status.and_then(|s| s.host_ip.clone()).unwrap_or_default(),
        owner: crate::model::user::owner_of(pod).unwrap_or_default().to_owned(),
        age: started.map_or_else(|| "0:0:0".to_owned(), |t| age(t, now)),
        status: match progress::stage(pod) {
            Stage::Creating => "Creating".to_owned(),
            Stage::Deleting => "Deleting".to_owned(),
            Stage::Settled => format!(
                "{phase}:{}",
                started
                    .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                    .unwrap_or_default()
            ),
        },
        url: if has_ingress {
            objects::app_url(pod, config)
        } else {
            String::new()
        },
        ssh_url: ssh_port
            .map(|p| format!("ssh://root@{}:{p}", config.ingress_domain))
            .unwrap_or_default(),
        tokens,
        k8s_pod_info: ssh_port.map(|p| BTreeMap::from([("sshPort".to_owned(), p.to_owned())])),
        pod_name: name,
    }
}

/// One workspace as the native API answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Workspace))]
pub struct WorkspaceInfo {
    /// The pod's name.
    pub name: String,
    /// The owner's id.
    pub user: String,
    /// The manifest's name.
    pub manifest: String,
    /// Where it stands.
    pub status: Status,
    /// Where a start stands (its first step not finished); null once it is done.
    pub phase: Option<&'static str>,
    /// What is happening, or why it failed.
    pub message: String,
    /// When it was created.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub created: Option<Timestamp>,
    /// How long ago, as `1h2m3s`.
    pub age: String,
    /// `https://<pod>.<ingressDomain>` when it has an Ingress, else "".
    pub url: String,
    /// Token key → value.
    pub tokens: BTreeMap<String, String>,
    /// `ssh://root@<ingressDomain>:<nodePort>`, or "".
    pub ssh_url: String,
    /// When it will be culled for its lifetime.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub expires: Option<Timestamp>,
    /// Its idle timeout, as `30m`.
    pub idle_timeout: Option<String>,
    /// Its last activity recorded.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub last_activity: Option<Timestamp>,
    /// The cluster it runs on.
    pub cluster: ClusterState,
    /// When and why it stopped, while it is stopping or stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stop>,
}

/// When and why a workspace stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stop {
    /// When the stop was asked for.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// Why: `user`, `idle`, `lifetime` or `failed`.
    pub reason: &'static str,
}

/// A workspace with no pod (stopped), as its record gives it: `name` of `user`, launched from
/// `manifest` at `created`, on `cluster`, stopped as `stop` says.
pub fn stopped_workspace(
    name: &str,
    user: &str,
    manifest: &str,
    created: Option<Timestamp>,
    cluster: ClusterState,
    stop: Stop,
    now: Timestamp,
) -> WorkspaceInfo {
    let message = match stop.reason {
        "idle" => "stopped after its idle time; start it to have it again",
        "lifetime" => "stopped at the end of its lifetime; start it to have it again",
        "failed" => "stopped: its start failed; start it to try again",
        _ => "stopped; start it to have it again",
    };
    WorkspaceInfo {
        name: name.to_owned(),
        user: user.to_owned(),
        manifest: manifest.to_owned(),
        status: Status::Stopped,
        phase: None,
        message: message.to_owned(),
        created,
        age: created.map_or_else(String::new, |t| {
            crate::model::duration::format(std::time::Duration::from_secs(
                now.as_second().saturating_sub(t.as_second()).max(0) as u64,
            ))
        }),
        url: String::new(),
        tokens: BTreeMap::new(),
        ssh_url: String::new(),
        expires: None,
        idle_timeout: None,
        last_activity: None,
        cluster,
        stopped: Some(stop),
    }
}

/// A workspace's cluster as the native API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterState {
    /// The cluster's name (`defaultCluster`, or one of `clusters`).
    pub name: String,
    /// Whether its API server answers; when not, the workspace is shown as last seen, with
    /// status `unknown`.
    pub reachable: bool,
    /// Why it can't be reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ClusterState {
    /// The cluster `name`, unreachable for the reason `unreachable` gives, if any.
    pub fn new(name: &str, unreachable: Option<String>) -> Self {
        Self {
            name: name.to_owned(),
            reachable: unreachable.is_none(),
            error: unreachable,
        }
    }
}

/// `pod` as the native API shows it at `now`, with its progress `report`, on `cluster` (where it
/// stands is unknown while that can't be reached).
pub fn workspace(
    pod: &Pod,
    report: &Report,
    config: &Config,
    cluster: ClusterState,
    now: Timestamp,
) -> WorkspaceInfo {
    let info = pod_info(pod, config, now);
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let age = created.map_or_else(String::new, |t| {
        crate::model::duration::format(std::time::Duration::from_secs(
            now.as_second().saturating_sub(t.as_second()).max(0) as u64,
        ))
    });
    let annotations = pod.metadata.annotations.as_ref();
    let lifetimes = culling::lifetimes(pod, config).unwrap_or_default();
    let (status, phase, message) = match &cluster.error {
        None => (report.status, report.phase, report.message.clone()),
        Some(why) => (
            Status::Unknown,
            None,
            format!(
                "cluster {} can't be reached: {why}; shown as last seen",
                cluster.name
            ),
        ),
    };
    WorkspaceInfo {
        user: info.owner,
        manifest: annotations
            .and_then(|a| a.get(keys::ANNOTATION_MANIFEST_NAME))
            .cloned()
            .unwrap_or_default(),
        status,
        phase,
        message,
        created,
        age,
        url: info.url,
        tokens: info.tokens.unwrap_or_default(),
        ssh_url: info.ssh_url,
        expires: culling::expires(pod, config),
        idle_timeout: lifetimes.idle_timeout.map(crate::model::duration::format),
        last_activity: culling::last_activity(pod),
        name: info.pod_name,
        cluster,
        stopped: None,
    }
}

/// deic-dk's age: hours, minutes and seconds, not zero-padded ("0:5:3").
fn age(since: Timestamp, now: Timestamp) -> String {
    let secs = now.as_second().saturating_sub(since.as_second()).max(0);
    format!("{}:{}:{}", secs / 3600, (secs / 60) % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn running_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "jupyter-alice-dtu-dk",
                "annotations": {
                    "outfit.dev/user-id": "alice@dtu.dk",
                    "outfit.dev/create-deadline": "2026-01-09T10:01:30Z",
                    "outfit.dev/started": "true",
                    "outfit.dev/tokens": "{\"appendURL\": \"/?token=abc\"}",
                    "outfit.dev/ssh-port": "30022",
                    "sciencedata.dk/ingress-port": "8888"
                }
            },
            "spec": {"containers": [{"name": "jupyter", "image": "registry/jupyter:1"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.128.0.5", "hostIP": "10.0.1.1",
                       "startTime": "2026-01-09T10:00:00Z"}
        }))
        .unwrap()
    }

    fn config() -> Config {
        let env = |var: &str| (var == "BACKEND_INGRESSDOMAIN").then(|| "pods.example".to_owned());
        Config::load(None, env).unwrap().0
    }

    #[test]
    fn running_pod_reads_as_deic_dk_shows_it() {
        let now: Timestamp = "2026-01-09T10:05:03Z".parse().unwrap();
        let info = pod_info(&running_pod(), &config(), now);
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "pod_name": "jupyter-alice-dtu-dk",
                "container_name": "jupyter",
                "image_name": "registry/jupyter:1",
                "pod_ip": "10.128.0.5",
                "node_ip": "10.0.1.1",
                "owner": "alice@dtu.dk",
                "age": "0:5:3",
                "status": "Running:2026-01-09T10:00:00Z",
                "url": "https://jupyter-alice-dtu-dk.pods.example",
                "ssh_url": "ssh://root@pods.example:30022",
                "tokens": {"appendURL": "/?token=abc"},
                "k8s_pod_info": {"sshPort": "30022"}
            })
        );
    }

    #[test]
    fn creating_and_deleting_override_the_phase() {
        let now: Timestamp = "2026-01-09T12:00:00Z".parse().unwrap();
        let mut pod = running_pod();
        pod.metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove("outfit.dev/started");
        assert_eq!(pod_info(&pod, &config(), now).status, "Creating");
        pod.metadata.deletion_timestamp = Some(Time(now));
        assert_eq!(pod_info(&pod, &config(), now).status, "Deleting");
    }

    #[test]
    fn pending_pod_without_extras_has_nulls_and_empty_strings() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {"outfit.dev/user-id": "bob"}},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let info = pod_info(&pod, &config(), Timestamp::UNIX_EPOCH);
        assert_eq!(info.status, "Pending:");
        assert_eq!(info.age, "0:0:0");
        assert_eq!((info.url.as_str(), info.ssh_url.as_str()), ("", ""));
        let json = serde_json::to_value(&info).unwrap();
        assert!(json["tokens"].is_null() && json["k8s_pod_info"].is_null());
    }

    #[test]
    fn age_counts_hours_past_a_day() {
        let since: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-01-02T01:02:03Z".parse().unwrap();
        assert_eq!(age(since, now), "25:2:3");
    }
}
