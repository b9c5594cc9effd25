//! Who calls the native API: a Kubernetes bearer token checked with a TokenReview (any identity
//! the API server accepts: service accounts, OIDC), or the identity headers of an authenticating
//! proxy (oauth2-proxy's `X-Forwarded-User` / `X-Forwarded-Groups`), believed only from
//! `trustedProxyCidrs`. The identity's user name becomes the owner id its workspaces carry.
//!
//! Reviews are remembered for a minute (refusals for ten seconds), so a page that polls costs the
//! API server one review a minute, not one per request.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hyper::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::{Api, api::PostParams};

use crate::{config::Config, user::UserId};

/// The header an authenticating proxy names the user in.
pub const USER_HEADER: &str = "x-forwarded-user";
/// The header an authenticating proxy lists the user's groups in, comma-separated.
pub const GROUPS_HEADER: &str = "x-forwarded-groups";

/// How long an accepted token is believed without asking again.
const ACCEPTED_FOR: Duration = Duration::from_secs(60);
/// How long a refused token stays refused without asking again.
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Reviews remembered at most; the memory is emptied when full.
const REMEMBERED: usize = 10_000;

/// A caller, authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name as authenticated (`system:serviceaccount:ns:name`, an OIDC name...).
    pub username: String,
    /// The groups as authenticated.
    pub groups: Vec<String>,
    /// The owner id of the caller's workspaces.
    pub user: UserId,
    /// Whether the caller is in one of `adminGroups`.
    pub admin: bool,
}

/// Why a caller was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credentials.
    #[error(
        "no credentials: send Authorization: Bearer <Kubernetes token>, or come through the authenticating proxy"
    )]
    Missing,
    /// Proxy headers from an address that is not a trusted proxy.
    #[error("{header} is believed only from trustedProxyCidrs, and {peer} is not in them")]
    UntrustedProxy {
        /// The header.
        header: &'static str,
        /// The caller's address.
        peer: IpAddr,
    },
    /// The API server did not accept the token.
    #[error("the token was not accepted: {0}")]
    Refused(String),
    /// The identity can't own workspaces.
    #[error("user {username:?} can't own workspaces: {reason}")]
    Unmappable {
        /// The user name.
        username: String,
        /// Why.
        reason: String,
    },
    /// The TokenReview could not be made.
    #[error("the token could not be checked (TokenReview failed: {0}); try again")]
    Unavailable(String),
}

/// The owner id of the user `username`: service account `system:serviceaccount:<ns>:<name>`
/// owns as `<name>@<ns>.serviceaccount`; any other name owns as itself, lower-cased (owner ids are
/// lower-case; identity providers differ in case for the same address). A non-service-account
/// name in `.serviceaccount` is refused, so no one can take a service account's workspaces.
pub fn owner_id(username: &str) -> Result<UserId, String> {
    let mapped = match username.strip_prefix("system:serviceaccount:") {
        Some(rest) => {
            let (namespace, name) = rest.split_once(':').ok_or_else(|| {
                "a service account name is system:serviceaccount:<namespace>:<name>".to_owned()
            })?;
            format!("{name}@{namespace}.serviceaccount")
        }
        None if username.to_ascii_lowercase().ends_with(".serviceaccount") => {
            return Err("names ending in .serviceaccount stand for service accounts".to_owned());
        }
        None => username.to_ascii_lowercase(),
    };
    UserId::parse(&mapped).map_err(|e| e.reason.to_owned())
}

/// The identity of `username` in `groups`, with `admin_groups` deciding who is an admin.
pub fn identity(username: &str, groups: Vec<String>, admin_groups: &[String]) -> Result<Identity, AuthError> {
    let user = owner_id(username).map_err(|reason| AuthError::Unmappable {
        username: username.to_owned(),
        reason,
    })?;
    let admin = groups.iter().any(|g| admin_groups.contains(g));
    Ok(Identity {
        username: username.to_owned(),
        groups,
        user,
        admin,
    })
}

/// Reviews remembered: token → when, and the answer.
type Reviews = HashMap<String, (Instant, Result<Identity, AuthError>)>;

/// Checks callers: TokenReviews through `client`, proxy headers against the configuration.
#[derive(Clone)]
pub struct Authenticator {
    reviews: Api<TokenReview>,
    config: Arc<Config>,
    remembered: Arc<Mutex<Reviews>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator that reviews tokens through `client`.
    pub fn new(client: kube::Client, config: Arc<Config>) -> Self {
        Self {
            reviews: Api::all(client),
            config,
            remembered: Arc::default(),
        }
    }

    /// The caller of a request with `headers` from `peer`.
    pub async fn authenticate(&self, headers: &HeaderMap, peer: IpAddr) -> Result<Identity, AuthError> {
        if let Some(user) = headers.get(USER_HEADER) {
            if !self.config.trusted_proxy_cidrs.iter().any(|c| c.contains(peer)) {
                return Err(AuthError::UntrustedProxy {
                    header: "X-Forwarded-User",
                    peer,
                });
            }
            let user = user.to_str().map_err(|_| AuthError::Unmappable {
                username: String::from_utf8_lossy(user.as_bytes()).into_owned(),
                reason: "not ASCII".to_owned(),
            })?;
            let groups = headers
                .get_all(GROUPS_HEADER)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(str::to_owned)
                .collect();
            return identity(user.trim(), groups, &self.config.admin_groups);
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Missing)?;
        if let Some(known) = self.recall(token) {
            return known;
        }
        let answer = self.review(token).await;
        if !matches!(answer, Err(AuthError::Unavailable(_))) {
            self.remember(token, answer.clone());
        }
        answer
    }

    fn recall(&self, token: &str) -> Option<Result<Identity, AuthError>> {
        let remembered = self.remembered.lock().expect("review memory");
        let (at, answer) = remembered.get(token)?;
        let valid_for = if answer.is_ok() { ACCEPTED_FOR } else { REFUSED_FOR };
        (at.elapsed() < valid_for).then(|| answer.clone())
    }

    fn remember(&self, token: &str, answer: Result<Identity, AuthError>) {
        let mut remembered = self.remembered.lock().expect("review memory");
        if remembered.len() >= REMEMBERED {
            remembered.clear();
        }
        remembered.insert(token.to_owned(), (Instant::now(), answer));
    }

    async fn review(&self, token: &str) -> Result<Identity, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = self
            .reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Unavailable(e.to_string()))?;
        let status = reviewed.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            let why = status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "unknown or expired".to_owned());
            return Err(AuthError::Refused(why));
        }
        let user = status.user.unwrap_or_default();
        let username = user.username.unwrap_or_default();
        identity(
            &username,
            user.groups.unwrap_or_default(),
            &self.config.admin_groups,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_accounts_own_as_name_at_namespace() {
        assert_eq!(
            owner_id("system:serviceaccount:team-a:alice").unwrap().as_str(),
            "alice@team-a.serviceaccount"
        );
        assert!(owner_id("system:serviceaccount:team-a").is_err());
    }

    #[test]
    fn other_names_own_as_themselves_lower_cased() {
        assert_eq!(
            owner_id("Alice@Example.com").unwrap().as_str(),
            "alice@example.com"
        );
        assert_eq!(owner_id("bob").unwrap().as_str(), "bob");
        // No one may pass as a service account.
        assert!(owner_id("alice@team-a.serviceaccount").is_err());
        // Names no owner id can hold are refused, not bent into one.
        assert!(owner_id("oidc:alice").is_err());
        assert!(owner_id("a b").is_err());
    }

    #[test]
    fn admins_are_members_of_an_admin_group() {
        let admins = ["ops".to_owned()];
        let alice = identity("alice", vec!["dev".to_owned(), "ops".to_owned()], &admins).unwrap();
        assert!(alice.admin);
        let bob = identity("bob", vec!["dev".to_owned()], &admins).unwrap();
        assert!(!bob.admin);
        assert!(matches!(
            identity("Not Valid", vec![], &admins),
            Err(AuthError::Unmappable { .. })
        ));
    }
}
