//! `outfit manifests --workspaces`' flags for sign-in with the site's OpenID provider and the
//! workspace proxy (issue 42): what `install::sign_in::SignIn` prints.

use clap::Args;
use outfit_workspaces::install::sign_in::{CookieKey, SignIn};

/// Sign-in and the workspace proxy.
#[derive(Debug, Args)]
pub(crate) struct SignInArgs {
    /// With --workspaces: sign users in with this OpenID provider (its issuer URL; the config's
    /// `oidc`). Needs --oidc-client-id, --oidc-client-secret-secret and --oidc-redirect-url.
    #[arg(long, value_name = "URL", value_parser = http_url, requires_all = ["workspaces", "oidc_client_id", "oidc_client_secret_secret", "oidc_redirect_url"])]
    oidc_issuer: Option<String>,

    /// With --oidc-issuer: outfit's client id at the provider.
    #[arg(long, value_name = "ID", requires = "oidc_issuer")]
    oidc_client_id: Option<String>,

    /// With --oidc-issuer: the Secret in --namespace whose key `client-secret` holds outfit's
    /// client secret (the site makes it; the install mounts it beside the config).
    #[arg(long, value_name = "SECRET", value_parser = secret_name, requires = "oidc_issuer")]
    oidc_client_secret_secret: Option<String>,

    /// With --oidc-issuer: where the provider sends browsers back,
    /// `https://<the backend's host>/auth/callback`; the printed Ingress routes that host.
    #[arg(long, value_name = "URL", value_parser = redirect_url, requires = "oidc_issuer")]
    oidc_redirect_url: Option<String>,

    /// With --oidc-issuer: only members of this group may sign in (`allowedGroups`).
    /// Repeatable, or comma-separated.
    #[arg(
        long = "oidc-allowed-group",
        value_name = "GROUP",
        value_delimiter = ',',
        requires = "oidc_issuer"
    )]
    oidc_allowed_groups: Vec<String>,

    /// With --oidc-issuer: the key sessions are sealed with is key `cookie-key` of this existing
    /// Secret in --namespace (kept when the install is applied again). By default the install
    /// prints a Secret with a new random key, and applying a newly printed install signs
    /// everyone out.
    #[arg(long, value_name = "SECRET", value_parser = secret_name, requires = "oidc_issuer")]
    cookie_key_secret: Option<String>,

    /// With --oidc-issuer: the backend serves every workspace's own host under this domain, to
    /// its owner and whom it is shared with (`proxyDomain`); the printed Ingress routes
    /// `*.<DOMAIN>` to it.
    #[arg(long, value_name = "DOMAIN", value_parser = domain, requires = "oidc_issuer")]
    proxy_domain: Option<String>,

    /// With --oidc-issuer: the printed Ingress's `ingressClassName`.
    #[arg(long, value_name = "CLASS", requires = "oidc_issuer")]
    ingress_class: Option<String>,

    /// With --oidc-issuer: the TLS Secret of the printed Ingress's hosts (the backend's and
    /// `*.<proxy domain>`: a wildcard certificate).
    #[arg(long, value_name = "SECRET", value_parser = secret_name, requires = "oidc_issuer")]
    ingress_tls_secret: Option<String>,
}

impl SignInArgs {
    /// What the flags install, if sign-in is asked for; `new_key` makes a cookie key when the
    /// site names no Secret of its own.
    pub(crate) fn sign_in(&self, new_key: impl FnOnce() -> String) -> Option<SignIn> {
        let issuer_url = self.oidc_issuer.clone()?;
        Some(SignIn {
            issuer_url,
            client_id: self.oidc_client_id.clone().unwrap_or_default(),
            client_secret: self.oidc_client_secret_secret.clone().unwrap_or_default(),
            redirect_url: self.oidc_redirect_url.clone().unwrap_or_default(),
            allowed_groups: self.oidc_allowed_groups.clone(),
            cookie_key: match &self.cookie_key_secret {
                Some(secret) => CookieKey::Existing(secret.clone()),
                None => CookieKey::Generated(new_key()),
            },
            proxy_domain: self.proxy_domain.clone(),
            ingress_class: self.ingress_class.clone(),
            tls_secret: self.ingress_tls_secret.clone(),
        })
    }
}

/// A Secret's name here: a DNS label, as a pod's name is.
fn secret_name(name: &str) -> Result<String, String> {
    outfit_workspaces_core::model::names::check_pod_name(name)
        .map(|()| name.to_owned())
        .map_err(|_| "a Secret's name here is 1 to 63 lower-case letters, digits and '-'".to_owned())
}

fn http_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or("an http(s) URL")?;
    if rest.is_empty() || rest.starts_with('/') || text.contains([' ', '"', '#']) {
        return Err("an http(s) URL with a host".to_owned());
    }
    Ok(text.to_owned())
}

fn redirect_url(text: &str) -> Result<String, String> {
    let url = http_url(text)?;
    if !url.ends_with("/auth/callback") {
        return Err("the backend's https://<host>/auth/callback".to_owned());
    }
    Ok(url)
}

fn domain(text: &str) -> Result<String, String> {
    let domain = text.trim_start_matches('.').to_ascii_lowercase();
    let valid = domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if valid {
        Ok(domain)
    } else {
        Err("a DNS domain such as ws.example.org".to_owned())
    }
}
