//! `oidc` (issue 42): sign-in with the site's OpenID provider, built in. A mapping in the file,
//! JSON text in the environment; absent, nobody signs in through outfit (the proxy-header and
//! Kubernetes-token ways stay either way).

use std::{path::PathBuf, time::Duration};

use crate::model::duration;

/// The sign-in settings as the file gives them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OidcGiven {
    issuer_url: String,
    client_id: String,
    client_secret_file: PathBuf,
    redirect_url: String,
    #[serde(default = "default_scopes")]
    scopes: Vec<String>,
    #[serde(default = "default_username_claim")]
    username_claim: String,
    #[serde(default = "default_groups_claim")]
    groups_claim: String,
    #[serde(default)]
    allowed_groups: Vec<String>,
    #[serde(default)]
    allowed_email_domains: Vec<String>,
    #[serde(default = "default_session_lifetime", deserialize_with = "duration::positive")]
    session_lifetime: Duration,
    #[serde(default)]
    cookie_key_file: Option<PathBuf>,
}

fn default_scopes() -> Vec<String> {
    ["openid", "profile", "email"].map(str::to_owned).to_vec()
}

fn default_username_claim() -> String {
    "preferred_username".to_owned()
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

fn default_session_lifetime() -> Duration {
    Duration::from_secs(12 * 3600)
}

/// The fewest bytes of key material a cookie key file holds: the key that seals sessions is
/// derived from it, and a short one could be guessed.
pub const MIN_COOKIE_KEY_BYTES: usize = 32;

/// Sign-in with an OpenID provider, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct Oidc {
    /// The provider's issuer (its discovery document is at
    /// `<issuer>/.well-known/openid-configuration`), as configured.
    pub issuer_url: String,
    /// outfit's client id at the provider.
    pub client_id: String,
    /// outfit's client secret, read from `clientSecretFile`.
    pub client_secret: String,
    /// Where the provider sends the browser back: `https://<the backend's host>/auth/callback`,
    /// as browsers reach it. Its scheme also says whether cookies are `Secure`.
    pub redirect_url: String,
    /// The scopes asked for; `openid` always among them.
    pub scopes: Vec<String>,
    /// The ID token's claim that names the user (`preferred_username`, `email`, `sub`...).
    pub username_claim: String,
    /// The ID token's claim that lists the user's groups (a list of strings); missing: no groups.
    pub groups_claim: String,
    /// Only members of one of these may sign in; anyone the provider signs in when empty.
    pub allowed_groups: Vec<String>,
    /// Only users whose verified `email` is in one of these domains (lower-case, no `@`) may sign
    /// in; any when empty.
    pub allowed_email_domains: Vec<String>,
    /// How long a sign-in lasts.
    pub session_lifetime: Duration,
    /// The key material sessions are sealed with, from `cookieKeyFile`: shared by replicas and
    /// kept across restarts. Without it each process makes its own, and a restart signs
    /// everyone out.
    pub cookie_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Neither the client secret nor the cookie key goes to a log.
        f.debug_struct("Oidc")
            .field("issuer_url", &self.issuer_url)
            .field("client_id", &self.client_id)
            .field("redirect_url", &self.redirect_url)
            .field("scopes", &self.scopes)
            .field("username_claim", &self.username_claim)
            .field("groups_claim", &self.groups_claim)
            .field("allowed_groups", &self.allowed_groups)
            .field("allowed_email_domains", &self.allowed_email_domains)
            .field("session_lifetime", &self.session_lifetime)
            .finish_non_exhaustive()
    }
}

impl Oidc {
    /// `redirectUrl`'s authority: its host and port, as written.
    fn authority(&self) -> &str {
        let rest = self.redirect_url.split_once("://").map_or("", |(_, rest)| rest);
        rest.split('/').next().unwrap_or_default()
    }

    /// The host browsers reach the backend at: `redirectUrl`'s, lower-case, without a port.
    pub fn host(&self) -> String {
        let authority = self.authority();
        authority
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
    }

    /// Whether the browser reaches the backend over HTTPS (its cookies are then `Secure`).
    pub fn secure(&self) -> bool {
        self.redirect_url.starts_with("https://")
    }

    /// The port browsers reach the backend at when `redirectUrl` names one. The backend serves
    /// the workspaces' hosts (`proxyDomain`) on the same listener, behind the same route, so
    /// their links carry the same port.
    pub fn port(&self) -> Option<u16> {
        // `[::1]` alone has colons but no port: what follows the last one is then no number.
        let (_, port) = self.authority().rsplit_once(':')?;
        port.parse().ok()
    }

    /// Settings for tests: sign-in at `login.example.org`, back at `redirect_url`.
    #[cfg(test)]
    pub(crate) fn example(redirect_url: &str) -> Oidc {
        Oidc {
            issuer_url: "https://login.example.org".to_owned(),
            client_id: "outfit".to_owned(),
            client_secret: "s".to_owned(),
            redirect_url: redirect_url.to_owned(),
            scopes: vec!["openid".to_owned()],
            username_claim: "preferred_username".to_owned(),
            groups_claim: "groups".to_owned(),
            allowed_groups: Vec::new(),
            allowed_email_domains: Vec::new(),
            session_lifetime: std::time::Duration::from_secs(3600),
            cookie_key: None,
        }
    }
}

/// `text` as an http(s) URL with a host: what follows the scheme, or what is wrong.
fn url_rest<'a>(field: &str, text: &'a str) -> Result<&'a str, String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| format!("{field}: {text:?} is not an http(s) URL"))?;
    if rest.is_empty() || rest.starts_with('/') || text.contains(['#', ' ']) {
        return Err(format!("{field}: {text:?} is not an http(s) URL with a host"));
    }
    Ok(rest)
}

fn read_file(field: &str, path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{field}: reading {}: {e}", path.display()))
}

impl OidcGiven {
    /// The settings checked, the secret and key files read; the error names the field at fault.
    pub(super) fn check(self) -> Result<Oidc, String> {
        url_rest("issuerUrl", &self.issuer_url)?;
        let callback = url_rest("redirectUrl", &self.redirect_url)?;
        if !callback.ends_with("/auth/callback") {
            return Err(format!(
                "redirectUrl: {:?} must end in outfit's /auth/callback, without a query",
                self.redirect_url
            ));
        }
        if self.client_id.trim().is_empty() {
            return Err("clientId: empty".to_owned());
        }
        let secret = read_file("clientSecretFile", &self.client_secret_file)?;
        let client_secret = String::from_utf8(secret)
            .map_err(|_| "clientSecretFile: not UTF-8 text".to_owned())?
            .trim()
            .to_owned();
        if client_secret.is_empty() {
            let path = self.client_secret_file.display();
            return Err(format!("clientSecretFile: {path} is empty"));
        }
        if !self.scopes.iter().any(|s| s == "openid") {
            return Err(format!(
                "scopes: {:?} lacks openid, without which no ID token comes",
                self.scopes
            ));
        }
        for (field, claim) in [
            ("usernameClaim", &self.username_claim),
            ("groupsClaim", &self.groups_claim),
        ] {
            if claim.trim().is_empty() {
                return Err(format!("{field}: empty"));
            }
        }
        let cookie_key = match &self.cookie_key_file {
            None => None,
            Some(path) => {
                let key = read_file("cookieKeyFile", path)?;
                if key.len() < MIN_COOKIE_KEY_BYTES {
                    return Err(format!(
                        "cookieKeyFile: {} holds {} bytes; at least {MIN_COOKIE_KEY_BYTES} are needed",
                        path.display(),
                        key.len()
                    ));
                }
                Some(key)
            }
        };
        Ok(Oidc {
            issuer_url: self.issuer_url,
            client_id: self.client_id,
            client_secret,
            redirect_url: self.redirect_url,
            scopes: self.scopes,
            username_claim: self.username_claim,
            groups_claim: self.groups_claim,
            allowed_groups: self.allowed_groups,
            allowed_email_domains: self
                .allowed_email_domains
                .iter()
                .map(|d| d.trim_start_matches('@').to_ascii_lowercase())
                .collect(),
            session_lifetime: self.session_lifetime,
            cookie_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of the test's files, removed when dropped.
    struct Folder(PathBuf);

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl std::ops::Deref for Folder {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    /// The settings with `extra` over the required fields, and the folder their files are in
    /// (one per call: the tests run at once).
    fn given(extra: serde_json::Value, secret: &str) -> (Result<Oidc, String>, Folder) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("outfit-oidc-config-{}-{next}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = Folder(dir);
        let secret_file = dir.join(format!("secret-{}", secret.len()));
        std::fs::write(&secret_file, secret).unwrap();
        let mut value = serde_json::json!({
            "issuerUrl": "https://login.example.org/realms/site",
            "clientId": "outfit",
            "clientSecretFile": secret_file,
            "redirectUrl": "https://workspaces.example.org/auth/callback",
        });
        value
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let given: OidcGiven = serde_json::from_value(value).unwrap();
        (given.check(), dir)
    }

    #[test]
    fn defaults_read_the_common_claims_and_the_secret_from_its_file() {
        let (oidc, _) = given(serde_json::json!({}), "s3cret\n");
        let oidc = oidc.unwrap();
        assert_eq!(oidc.client_secret, "s3cret");
        assert_eq!(oidc.scopes, ["openid", "profile", "email"]);
        assert_eq!(oidc.username_claim, "preferred_username");
        assert_eq!(oidc.groups_claim, "groups");
        assert_eq!(oidc.session_lifetime, Duration::from_secs(43_200));
        assert!(oidc.secure());
        assert!(!format!("{oidc:?}").contains("s3cret"));
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (serde_json::json!({"issuerUrl": "login.example.org"}), "issuerUrl"),
            (
                serde_json::json!({"redirectUrl": "https://w.example.org/"}),
                "redirectUrl",
            ),
            (serde_json::json!({"clientId": " "}), "clientId"),
            (serde_json::json!({"scopes": ["profile"]}), "scopes"),
            (serde_json::json!({"groupsClaim": ""}), "groupsClaim"),
            (
                serde_json::json!({"cookieKeyFile": "/nonexistent/key"}),
                "cookieKeyFile",
            ),
        ];
        for (extra, field) in cases {
            let (result, _) = given(extra.clone(), "secret");
            let error = result.expect_err(&extra.to_string());
            assert!(error.starts_with(field), "{extra}: {error}");
        }
        let (empty, _) = given(serde_json::json!({}), " \n");
        assert!(empty.unwrap_err().starts_with("clientSecretFile"));
    }

    #[test]
    fn a_short_cookie_key_is_refused() {
        let (_, dir) = given(serde_json::json!({}), "s");
        let key = dir.join("short-key");
        std::fs::write(&key, [7u8; 16]).unwrap();
        let (result, _) = given(serde_json::json!({"cookieKeyFile": key}), "s");
        assert!(result.unwrap_err().contains("at least 32"));
    }
}
