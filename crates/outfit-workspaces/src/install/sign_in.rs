//! Sign-in with the site's OpenID provider and the workspace proxy in an install (issue 42): the
//! config's `oidc` and `proxyDomain`, the client secret (key `client-secret` of the site's own
//! Secret) and the cookie key (a random key in a Secret of the install's, kept across applies
//! when the site names its own) mounted beside the config, and the Ingress that brings the
//! backend's host and every workspace's host (`*.<proxyDomain>`) to the backend.

use outfit_k8s::component::Component;
use serde_json::{Value, json};

use super::access::CONFIG_DIR;

/// The key of the client secret in the site's Secret, and its file beside the config.
pub const CLIENT_SECRET_KEY: &str = "client-secret";
/// The Secret holding the key sessions are sealed with, and its key.
pub const COOKIE_KEY_SECRET: &str = "outfit-workspaces-cookie-key";
pub const COOKIE_KEY: &str = "cookie-key";

/// The key sessions are sealed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CookieKey {
    /// A new random key (base64 of 48 bytes), printed in a Secret of its own
    /// ([`COOKIE_KEY_SECRET`]): applying a newly printed install signs everyone out.
    Generated(String),
    /// Key `cookie-key` of this existing Secret, which the install leaves alone.
    Existing(String),
}

/// Sign-in and the proxy, as installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    /// The provider's issuer URL.
    pub issuer_url: String,
    /// outfit's client id there.
    pub client_id: String,
    /// The site's Secret holding the client secret under [`CLIENT_SECRET_KEY`].
    pub client_secret: String,
    /// `https://<the backend's host>/auth/callback`.
    pub redirect_url: String,
    /// Only members of these groups may sign in; anyone when empty.
    pub allowed_groups: Vec<String>,
    /// The sessions' key.
    pub cookie_key: CookieKey,
    /// The workspace proxy's domain, if it serves workspaces' hosts.
    pub proxy_domain: Option<String>,
    /// The Ingress's class, if any.
    pub ingress_class: Option<String>,
    /// The TLS Secret of the Ingress's hosts (the backend's and `*.<proxyDomain>`), if any.
    pub tls_secret: Option<String>,
}

impl SignIn {
    /// The backend's host, from the redirect URL.
    fn host(&self) -> &str {
        let rest = self
            .redirect_url
            .split_once("://")
            .map_or(self.redirect_url.as_str(), |(_, r)| r);
        rest.split(['/', ':']).next().unwrap_or_default()
    }

    /// The config's keys.
    pub fn config_lines(&self) -> String {
        let groups: Vec<String> = self.allowed_groups.iter().map(|g| format!("{g:?}")).collect();
        let mut lines = format!(
            "# Sign-in with the site's OpenID provider (docs/workspaces/native-api.md, Sign-in).\n\
             oidc:\n  issuerUrl: {:?}\n  clientId: {:?}\n  clientSecretFile: {CONFIG_DIR}/{CLIENT_SECRET_KEY}\n  redirectUrl: {:?}\n  cookieKeyFile: {CONFIG_DIR}/{COOKIE_KEY}\n  allowedGroups: [{}]\n",
            self.issuer_url,
            self.client_id,
            self.redirect_url,
            groups.join(", ")
        );
        if let Some(domain) = &self.proxy_domain {
            lines.push_str(&format!(
                "# The backend serves every workspace's own host under this domain (The workspace proxy).\n\
                 proxyDomain: {domain:?}\n"
            ));
        }
        lines
    }

    /// The projected volume's sources beside the config: the client secret and the cookie key.
    pub fn volume_sources(&self) -> [Value; 2] {
        let cookie_secret = match &self.cookie_key {
            CookieKey::Generated(_) => COOKIE_KEY_SECRET,
            CookieKey::Existing(name) => name.as_str(),
        };
        [
            json!({"secret": {"name": self.client_secret, "items": [{"key": CLIENT_SECRET_KEY, "path": CLIENT_SECRET_KEY}]}}),
            json!({"secret": {"name": cookie_secret, "items": [{"key": COOKIE_KEY, "path": COOKIE_KEY}]}}),
        ]
    }

    /// The objects to print: the cookie key's Secret, when generated, and the Ingress.
    pub fn objects(&self, backend: &Component<'_>) -> Vec<Value> {
        let mut objects = Vec::new();
        if let CookieKey::Generated(key) = &self.cookie_key {
            objects.push(json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": COOKIE_KEY_SECRET, "namespace": backend.namespace, "labels": backend.labels()},
                "stringData": {COOKIE_KEY: key}
            }));
        }
        let mut hosts = vec![self.host().to_owned()];
        if let Some(domain) = &self.proxy_domain {
            hosts.push(format!("*.{domain}"));
        }
        let rules: Vec<Value> = hosts
            .iter()
            .map(|host| {
                json!({"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": backend.name, "port": {"name": "api"}}}}]}})
            })
            .collect();
        let mut spec = json!({"rules": rules});
        if let Some(class) = &self.ingress_class {
            spec["ingressClassName"] = json!(class);
        }
        if let Some(secret) = &self.tls_secret {
            spec["tls"] = json!([{"hosts": hosts, "secretName": secret}]);
        }
        objects.push(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": backend.name, "namespace": backend.namespace, "labels": backend.labels()},
            "spec": spec
        }));
        objects
    }
}
