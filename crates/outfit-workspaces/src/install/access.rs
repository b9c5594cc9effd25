//! Who may reach the backend's API (issue 33): deic-dk's API trusts its callers with any user's
//! workspaces, so an install never leaves it open. The printed install makes a random bearer
//! token (a Secret mounted beside the config as `bearerTokenFile`), lets deic-dk's API answer only
//! the frontend's networks (`allowedSourceCidrs`: none but loopback until the site names them),
//! and a NetworkPolicy admits the API port only from the frontend's and the Ingress
//! controller's namespaces, the admin port only from monitoring's. The native API and the page
//! authenticate every caller themselves; they reach the port through the Ingress.

use outfit_k8s::component::{Component, namespace_peers};
use serde_json::{Value, json};

/// The Secret holding deic-dk's API token, and its key.
pub const TOKEN_SECRET: &str = "outfit-workspaces-api-token";
pub const TOKEN_KEY: &str = "token";
/// Where the pod reads its config and token (one projected volume).
pub const CONFIG_DIR: &str = "/etc/outfit-workspaces";

/// deic-dk's API token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiToken {
    /// A new token, printed in a Secret of its own (`TOKEN_SECRET`).
    Generated(String),
    /// The token is key `token` of this existing Secret, which the install leaves alone (so that
    /// applying the install again keeps the frontend's token).
    Existing(String),
    /// No token: any caller in `allowedSourceCidrs` may act for any user (deic-dk's own mode, an
    /// accepted risk).
    Open,
}

/// Who may reach the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub token: ApiToken,
    /// Namespaces of the frontend that calls deic-dk's API (the NetworkPolicy's peers).
    pub frontend_namespaces: Vec<String>,
    /// Networks deic-dk's API answers (`allowedSourceCidrs`), besides loopback.
    pub frontend_cidrs: Vec<String>,
    /// Namespaces of the Ingress controller that brings users to the page and the native API.
    pub ingress_namespaces: Vec<String>,
    /// Namespaces that may read the admin port's metrics.
    pub monitoring_namespaces: Vec<String>,
}

impl Access {
    /// The Secret to print, for a generated token.
    pub fn secret(&self, backend: &Component<'_>) -> Option<Value> {
        let ApiToken::Generated(token) = &self.token else {
            return None;
        };
        Some(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": TOKEN_SECRET, "namespace": backend.namespace, "labels": backend.labels()},
            "stringData": {TOKEN_KEY: token}
        }))
    }

    /// The pod's config volume: the ConfigMap `config_map`, the token beside it, and `more`.
    pub fn config_volume(&self, config_map: &str, more: Vec<Value>) -> Value {
        let mut sources = vec![json!({"configMap": {"name": config_map}})];
        let secret = match &self.token {
            ApiToken::Generated(_) => Some(TOKEN_SECRET),
            ApiToken::Existing(name) => Some(name.as_str()),
            ApiToken::Open => None,
        };
        if let Some(secret) = secret {
            sources
                .push(json!({"secret": {"name": secret, "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}]}}));
        }
        sources.extend(more);
        json!({"projected": {"sources": sources}})
    }

    /// The config's keys for deic-dk's callers: the networks, and the token file unless open.
    pub fn config_lines(&self) -> String {
        let mut cidrs: Vec<String> = self.frontend_cidrs.iter().map(|c| format!("{c:?}")).collect();
        cidrs.push("\"127.0.0.0/8\"".to_owned());
        let mut lines = format!(
            "# Callers deic-dk's API answers (the frontend's networks; --frontend-cidr); loopback alone\n\
             # answers nobody in a pod.\n\
             allowedSourceCidrs: [{}]\n",
            cidrs.join(", ")
        );
        if self.token != ApiToken::Open {
            lines.push_str(&format!(
                "# deic-dk's API callers send this token (the Secret's key {TOKEN_KEY}).\n\
                 bearerTokenFile: {CONFIG_DIR}/{TOKEN_KEY}\n"
            ));
        }
        lines
    }

    /// The NetworkPolicy of the backend's pods: the API port from the frontend's and the Ingress
    /// controller's namespaces, the admin port from monitoring's (and, as for every pod, the
    /// kubelet's probes from the node).
    pub fn network_policy(&self, backend: &Component<'_>, api: &str, admin: &str) -> Value {
        let callers: Vec<String> = self
            .frontend_namespaces
            .iter()
            .chain(&self.ingress_namespaces)
            .cloned()
            .collect();
        // An empty list of peers would admit everyone: a port with no namespace named gets no
        // rule, and so admits no pod (the webhook's policy does the same).
        let ports: Vec<(&str, Value)> = [(api, &callers), (admin, &self.monitoring_namespaces)]
            .into_iter()
            .filter(|(_, names)| !names.is_empty())
            .map(|(port, names)| (port, namespace_peers(names)))
            .collect();
        backend.network_policy(&ports)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(token: ApiToken) -> Access {
        Access {
            token,
            frontend_namespaces: vec!["sciencedata".to_owned()],
            frontend_cidrs: vec!["10.0.0.0/24".to_owned()],
            ingress_namespaces: vec!["ingress-nginx".to_owned()],
            monitoring_namespaces: Vec::new(),
        }
    }

    const BACKEND: Component<'static> = Component {
        name: "outfit-workspaces",
        namespace: "outfit-system",
    };

    #[test]
    fn a_generated_token_is_printed_mounted_and_required() {
        let access = access(ApiToken::Generated("s3cret".to_owned()));
        let secret = access.secret(&BACKEND).unwrap();
        assert_eq!(secret["stringData"][TOKEN_KEY], "s3cret");
        assert_eq!(secret["metadata"]["namespace"], "outfit-system");
        let volume = access.config_volume("outfit-workspaces", Vec::new());
        assert_eq!(volume["projected"]["sources"][1]["secret"]["name"], TOKEN_SECRET);
        let lines = access.config_lines();
        assert!(
            lines.contains("bearerTokenFile: /etc/outfit-workspaces/token"),
            "{lines}"
        );
        assert!(
            lines.contains(r#"allowedSourceCidrs: ["10.0.0.0/24", "127.0.0.0/8"]"#),
            "{lines}"
        );
    }

    #[test]
    fn an_existing_secret_is_mounted_not_printed_and_open_mode_has_no_token() {
        let existing = access(ApiToken::Existing("frontend-token".to_owned()));
        assert!(existing.secret(&BACKEND).is_none());
        let volume = existing.config_volume("outfit-workspaces", Vec::new());
        assert_eq!(
            volume["projected"]["sources"][1]["secret"]["name"],
            "frontend-token"
        );
        let open = access(ApiToken::Open);
        assert!(open.secret(&BACKEND).is_none());
        assert_eq!(
            open.config_volume("c", Vec::new())["projected"]["sources"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert!(!open.config_lines().contains("bearerTokenFile"));
    }

    #[test]
    fn the_network_policy_admits_the_api_from_the_frontend_and_ingress_only() {
        let policy = access(ApiToken::Open).network_policy(&BACKEND, "api", "admin");
        let ingress = &policy["spec"]["ingress"];
        let names: Vec<&str> = ingress[0]["from"]
            .as_array()
            .unwrap()
            .iter()
            .map(|peer| {
                peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(names, ["sciencedata", "ingress-nginx"]);
        // No monitoring named: no rule for the admin port, so no pod reaches it.
        assert_eq!(ingress.as_array().unwrap().len(), 1, "{ingress}");
        let monitored = Access {
            monitoring_namespaces: vec!["monitoring".to_owned()],
            ..access(ApiToken::Open)
        };
        let policy = monitored.network_policy(&BACKEND, "api", "admin");
        assert_eq!(policy["spec"]["ingress"][1]["ports"][0]["port"], "admin");
    }
}
