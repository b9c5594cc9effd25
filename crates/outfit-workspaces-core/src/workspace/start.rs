//! What a workspace pod needs once it is ready, decided in one place from the pod and the
//! configuration: its NetworkPolicy, its ssh Service, its HTTP Service and Ingress, the tokens to
//! read, and the marks that record the start. Pure: the lifecycle applies a [`StartPlan`] in one
//! I/O step, and the backend makes the NetworkPolicy at create from [`isolation`] too.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::{
    api::{
        core::v1::{Pod, Service},
        networking::v1::{Ingress, NetworkPolicy},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};

use crate::{
    model::{config::Config, keys},
    workspace::{network_policy::network_policy, objects, pod_needs::PodNeeds},
};

/// The tokens a start reads: each key's file `/tmp/<key>` in `container`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRead {
    /// The pod's first container, where the tokens are.
    pub container: String,
    /// The copy-token annotation's keys, in its order.
    pub keys: Vec<String>,
}

/// What a ready pod needs made, each object owned by the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct StartPlan {
    /// The pod, as the objects' owner.
    pub owner: OwnerReference,
    /// Made at create too; made again unless this process's create made it (the backend
    /// restarted in between, or another replica made the pod). `None` when
    /// `networkPolicy` is off.
    pub network_policy: Option<NetworkPolicy>,
    /// The NodePort Service of a pod that exposes ssh; its port is marked on the pod.
    pub ssh_service: Option<Service>,
    /// The Service and Ingress of a pod with an ingress port (none when the workspace proxy
    /// serves it).
    pub http: Option<(Service, Ingress)>,
    /// The tokens to read; `None` when the manifest asks for none.
    pub tokens: Option<TokenRead>,
}

/// A pod no start can be planned for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The pod has no uid, so nothing can be owned by it.
    #[error("the pod has no uid")]
    NoUid,
}

/// The NetworkPolicy `pod` gets and its owner, unless `networkPolicy` is off or the pod has no
/// uid yet.
pub fn isolation(pod: &Pod, config: &Config) -> Option<(NetworkPolicy, OwnerReference)> {
    if !config.network.enabled {
        return None;
    }
    let owner = objects::owned_by(pod)?;
    Some((network_policy(pod, &owner, &config.network), owner))
}

/// What `pod`, now ready, needs.
pub fn plan(pod: &Pod, config: &Config) -> Result<StartPlan, PlanError> {
    let owner = objects::owned_by(pod).ok_or(PlanError::NoUid)?;
    let needs = PodNeeds::of(pod);
    let ssh_service = needs.ssh.then(|| objects::ssh_service(pod, &owner));
    let http = needs
        .ingress_port
        .filter(|_| !objects::proxied(pod, config))
        .map(|port| {
            (
                objects::http_service(pod, &owner, port),
                objects::ingress(pod, &owner, port, config),
            )
        });
    let keys = needs.token_keys;
    let container = pod.spec.as_ref().and_then(|s| s.containers.first());
    let tokens = match container {
        Some(container) if !keys.is_empty() => Some(TokenRead {
            container: container.name.clone(),
            keys,
        }),
        _ => None,
    };
    Ok(StartPlan {
        network_policy: isolation(pod, config).map(|(policy, _)| policy),
        owner,
        ssh_service,
        http,
        tokens,
    })
}

impl StartPlan {
    /// The annotations that record the start at `now`: the ssh Service's node port (when there is
    /// an ssh Service; `None` clears it), the tokens read (when any), and the `started` mark.
    pub fn marks(
        &self,
        ssh_node_port: Option<i32>,
        tokens: &BTreeMap<String, String>,
        now: Timestamp,
    ) -> BTreeMap<&'static str, Option<String>> {
        let mut marks = BTreeMap::new();
        if self.ssh_service.is_some() {
            marks.insert(keys::ANNOTATION_SSH_PORT, ssh_node_port.map(|p| p.to_string()));
        }
        if !tokens.is_empty() {
            let json = serde_json::to_string(tokens).expect("a map of strings serializes");
            marks.insert(keys::ANNOTATION_TOKENS, Some(json));
        }
        marks.insert(keys::ANNOTATION_STARTED, Some(now.to_string()));
        marks
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(network_policy: bool) -> Config {
        let env = move |var: &str| match var {
            "BACKEND_NETWORKPOLICY" => Some(network_policy.to_string()),
            "BACKEND_INGRESSDOMAIN" => Some("ws.example".to_owned()),
            _ => None,
        };
        Config::load(None, env).unwrap().0
    }

    fn pod(annotations: serde_json::Value, ports: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "ws", "uid": "u1", "annotations": annotations,
                         "labels": {"user": "alice", "domain": "dtu.dk", "podName": "ws"}},
            "spec": {"containers": [{"name": "main", "image": "x", "ports": ports},
                                    {"name": "helper", "image": "y"}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_plain_pod_needs_only_its_network_policy() {
        let plan = plan(&pod(json!({}), json!([])), &config(true)).unwrap();
        assert_eq!(plan.owner.uid, "u1");
        let policy = plan.network_policy.expect("a policy");
        assert_eq!(policy.metadata.owner_references, Some(vec![plan.owner.clone()]));
        assert_eq!((plan.ssh_service, plan.http, plan.tokens), (None, None, None));
    }

    #[test]
    fn no_network_policy_is_planned_when_it_is_off() {
        assert_eq!(
            plan(&pod(json!({}), json!([])), &config(false))
                .unwrap()
                .network_policy,
            None
        );
        assert_eq!(isolation(&pod(json!({}), json!([])), &config(false)), None);
    }

    #[test]
    fn ssh_ingress_and_tokens_are_planned_from_the_pod() {
        let annotations = json!({keys::ANNOTATION_INGRESS_PORT: "8888",
                                 keys::ANNOTATION_COPY_TOKEN: "appendURL, other"});
        let plan = plan(&pod(annotations, json!([{"containerPort": 22}])), &config(true)).unwrap();
        let ssh = plan.ssh_service.expect("an ssh Service");
        assert_eq!(ssh.spec.unwrap().type_.as_deref(), Some("NodePort"));
        let (service, ingress) = plan.http.expect("a Service and an Ingress");
        let port = &service.spec.unwrap().ports.unwrap()[0];
        assert_eq!(port.port, 8888);
        assert_eq!(ingress.metadata.owner_references, Some(vec![plan.owner.clone()]));
        let tokens = plan.tokens.expect("tokens");
        assert_eq!(tokens.container, "main", "the first container holds the tokens");
        assert_eq!(tokens.keys, ["appendURL", "other"]);
    }

    #[test]
    fn a_pod_without_a_uid_has_no_plan() {
        let mut pod = pod(json!({}), json!([]));
        pod.metadata.uid = None;
        assert_eq!(plan(&pod, &config(true)), Err(PlanError::NoUid));
    }

    #[test]
    fn the_marks_record_the_port_the_tokens_and_the_start() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let ssh = plan(&pod(json!({}), json!([{"containerPort": 22}])), &config(true)).unwrap();
        let tokens = BTreeMap::from([("appendURL".to_owned(), "?token=x".to_owned())]);
        let marks = ssh.marks(Some(30022), &tokens, now);
        assert_eq!(marks[keys::ANNOTATION_SSH_PORT].as_deref(), Some("30022"));
        assert_eq!(
            marks[keys::ANNOTATION_TOKENS].as_deref(),
            Some(r#"{"appendURL":"?token=x"}"#)
        );
        assert_eq!(
            marks[keys::ANNOTATION_STARTED].as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        // No ssh Service: no port mark; no tokens read: no tokens mark.
        let plain = plan(&pod(json!({}), json!([])), &config(true)).unwrap();
        let marks = plain.marks(None, &BTreeMap::new(), now);
        assert_eq!(
            marks.keys().copied().collect::<Vec<_>>(),
            [keys::ANNOTATION_STARTED]
        );
    }
}
