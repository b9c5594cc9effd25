//! What a workspace pod asks the backend for by its own declarations, read in one place: an ssh
//! Service (a container declares port 22), an HTTP Service and Ingress (the annotation
//! `sciencedata.dk/ingress-port`), and tokens copied out of it (`sciencedata.dk/copy-token`).
//! A create refuses a manifest whose asks are malformed ([`PodNeeds::read`], from
//! [`manifest::prepare`](super::manifest::prepare)); a start makes what they ask
//! ([`PodNeeds::of`], from [`start::plan`](super::start::plan)). Pure: no I/O.

use k8s_openapi::api::core::v1::Pod;

use crate::model::keys;

/// What a pod's manifest asks the backend to provide once the pod runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodNeeds {
    /// A container declares port 22: the pod gets an ssh NodePort Service.
    pub ssh: bool,
    /// The port of `sciencedata.dk/ingress-port`: the pod gets an HTTP Service and an Ingress.
    pub ingress_port: Option<i32>,
    /// The keys of `sciencedata.dk/copy-token`, in its order: the files `/tmp/<key>` read from
    /// the pod's first container.
    pub token_keys: Vec<String>,
}

/// An ask a create refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NeedsError {
    /// The ingress-port annotation is not a port.
    #[error("annotation {annotation} is {value:?}, not a port number")]
    IngressPort {
        /// The annotation.
        annotation: &'static str,
        /// Its value.
        value: String,
    },
    /// A copy-token key is not a plain file name.
    #[error("annotation {annotation} names token {key:?}, which is not a plain file name")]
    TokenKey {
        /// The annotation.
        annotation: &'static str,
        /// The key.
        key: String,
    },
}

impl PodNeeds {
    /// The pod's asks, or the first malformed one (the ingress port, then the token keys): what a
    /// create checks.
    pub fn read(pod: &Pod) -> Result<Self, NeedsError> {
        Ok(Self {
            ssh: exposes_ssh(pod),
            ingress_port: ingress_port(pod)?,
            token_keys: token_keys(pod)?,
        })
    }

    /// The pod's asks, a malformed one read as no ask (each on its own): what a start makes. A
    /// pod the backend created was checked by [`PodNeeds::read`]; one changed since gets only
    /// what it still asks for properly.
    pub fn of(pod: &Pod) -> Self {
        Self {
            ssh: exposes_ssh(pod),
            ingress_port: ingress_port(pod).ok().flatten(),
            token_keys: token_keys(pod).unwrap_or_default(),
        }
    }
}

/// Whether a container declares port 22 (the pod then gets an ssh NodePort Service).
pub fn exposes_ssh(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .any(|c| c.ports.iter().flatten().any(|p| p.container_port == 22))
}

/// The port of the annotation `sciencedata.dk/ingress-port`, if the pod has one.
pub fn ingress_port(pod: &Pod) -> Result<Option<i32>, NeedsError> {
    let Some(value) = annotation(pod, keys::ANNOTATION_INGRESS_PORT) else {
        return Ok(None);
    };
    value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|p| (1..=65535).contains(p))
        .map(Some)
        .ok_or_else(|| NeedsError::IngressPort {
            annotation: keys::ANNOTATION_INGRESS_PORT,
            value: value.to_owned(),
        })
}

/// The token keys of the annotation `sciencedata.dk/copy-token`. A key is a file name under
/// `/tmp`; anything that could reach elsewhere (`../etc/shadow`) is refused.
pub fn token_keys(pod: &Pod) -> Result<Vec<String>, NeedsError> {
    let Some(value) = annotation(pod, keys::ANNOTATION_COPY_TOKEN) else {
        return Ok(Vec::new());
    };
    value
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|key| {
            let plain = !key.starts_with('.')
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if plain {
                Ok(key.to_owned())
            } else {
                Err(NeedsError::TokenKey {
                    annotation: keys::ANNOTATION_COPY_TOKEN,
                    key: key.to_owned(),
                })
            }
        })
        .collect()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "ws", "annotations": annotations},
            "spec": {"containers": [{"name": "main", "image": "x", "ports": [{"containerPort": 22}]}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_create_refuses_a_malformed_ask_and_a_start_skips_only_that_ask() {
        let malformed_port = pod(json!({keys::ANNOTATION_INGRESS_PORT: "http",
                                        keys::ANNOTATION_COPY_TOKEN: "appendURL"}));
        assert!(matches!(
            PodNeeds::read(&malformed_port),
            Err(NeedsError::IngressPort { .. })
        ));
        let needs = PodNeeds::of(&malformed_port);
        assert_eq!(
            needs,
            PodNeeds {
                ssh: true,
                ingress_port: None,
                token_keys: vec!["appendURL".to_owned()],
            }
        );
        let malformed_key = pod(json!({keys::ANNOTATION_INGRESS_PORT: "8888",
                                       keys::ANNOTATION_COPY_TOKEN: "a, ../etc/shadow"}));
        assert!(matches!(
            PodNeeds::read(&malformed_key),
            Err(NeedsError::TokenKey { .. })
        ));
        let needs = PodNeeds::of(&malformed_key);
        assert_eq!((needs.ingress_port, needs.token_keys), (Some(8888), Vec::new()));
    }
}
