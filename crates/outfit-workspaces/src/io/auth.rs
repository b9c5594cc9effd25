//! Who calls the native API: a Kubernetes bearer token checked with a TokenReview (any identity
//! the API server accepts: service accounts, OIDC), the identity headers of an authenticating
//! proxy (oauth2-proxy's `X-Forwarded-User` / `X-Forwarded-Groups`), believed only from
//! `trustedProxyCidrs`, or the session of a sign-in with the site's OpenID provider ([`SignIn`],
//! when `oidc` is configured). The identity's user name becomes the owner id its workspaces
//! carry.
//!
//! Reviews are remembered for a minute (refusals for ten seconds), so a page that polls costs the
//! API server one review a minute, not one per request. The memory is bounded in entries and
//! bytes and keyed by a SHA-256 of the token, never the token; tokens longer than
//! [`MAX_TOKEN_BYTES`] are refused before any review, so an anonymous flood of unique tokens costs
//! neither memory that stays nor large TokenReviews.

use std::{
    collections::{HashMap, VecDeque},
    net::IpAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hyper::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::{Api, api::PostParams};
use outfit_workspaces_core::model::{
    config::{Config, Oidc},
    user::{UserId, owner_id},
};

use super::{
    oidc::Provider,
    session::{Session, Sessions, UsedOnce},
    sign_outs::SignOuts,
};

/// The header an authenticating proxy names the user in.
pub const USER_HEADER: &str = "x-forwarded-user";
/// The header an authenticating proxy lists the user's groups in, comma-separated.
pub const GROUPS_HEADER: &str = "x-forwarded-groups";

/// How long an accepted token is believed without asking again.
const ACCEPTED_FOR: Duration = Duration::from_secs(60);
/// How long a refused token stays refused without asking again.
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Reviews remembered at most; the oldest goes first when full.
const REMEMBERED: usize = 10_000;
/// Bytes of remembered reviews at most (keys, identities and bookkeeping, as counted by
/// [`entry_bytes`]).
const REMEMBERED_BYTES: usize = 4 << 20;
/// The longest bearer token reviewed. A service account's token is 1-2 KiB and OIDC ID tokens
/// with many groups a few KiB; anything longer is refused unread.
pub const MAX_TOKEN_BYTES: usize = 8 << 10;

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

/// How a caller was authenticated, as the native API's `GET /me` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// A bearer token, by TokenReview.
    Token,
    /// An authenticating proxy's headers.
    Proxy,
    /// The session of a sign-in with the site's OpenID provider.
    Session,
}

/// Sign-in with the site's OpenID provider: the provider, the cookies, the tickets spent on
/// workspaces' hosts, and the sign-outs every replica honours.
#[derive(Debug)]
pub struct SignIn {
    /// The provider.
    pub provider: Provider,
    /// The sessions' cookies.
    pub sessions: Sessions,
    /// Tickets already used (each is good once).
    pub spent: Mutex<UsedOnce>,
    /// Who signed out when.
    pub sign_outs: SignOuts,
}

impl SignIn {
    /// Sign-in as `oidc` configures it, its sign-outs recorded in `namespace` through `client`.
    pub fn new(oidc: &Oidc, client: kube::Client, namespace: &str) -> Self {
        Self {
            provider: Provider::new(oidc),
            sessions: Sessions::new(oidc),
            spent: Mutex::new(UsedOnce::default()),
            sign_outs: SignOuts::new(client, namespace),
        }
    }

    /// Whether a session or pass of `username` begun at `issued` (Unix milliseconds) was ended
    /// by a sign-out since.
    pub async fn signed_out(&self, username: &str, issued: u64) -> bool {
        self.sign_outs
            .signed_out_at(username)
            .await
            .is_some_and(|at| at >= issued)
    }

    /// The session `headers` carry, if one is valid at `now` and not signed out.
    pub async fn session(&self, headers: &HeaderMap, now: std::time::SystemTime) -> Option<Session> {
        let session = self.sessions.session(headers, now)?;
        (!self.signed_out(&session.username, session.issued).await).then_some(session)
    }
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
    /// The bearer token is longer than any this backend reviews.
    #[error(
        "the bearer token has {bytes} bytes; tokens longer than {MAX_TOKEN_BYTES} bytes are refused unchecked"
    )]
    TokenTooLarge {
        /// The token's length.
        bytes: usize,
    },
    /// A proxy identity header was sent more than once.
    #[error("{0} was sent more than once; an authenticating proxy sends it once")]
    RepeatedHeader(&'static str),
}

/// The identity of `username` in `groups`, with `admin_groups` deciding who is an admin and
/// `fold_case` how an upper-case name is taken ([`owner_id`]).
pub fn identity(
    username: &str,
    groups: Vec<String>,
    admin_groups: &[String],
    fold_case: bool,
) -> Result<Identity, AuthError> {
    let user = owner_id(username, fold_case).map_err(|reason| AuthError::Unmappable {
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

/// A token as the review memory knows it: its SHA-256, so the memory holds no credential and
/// its keys have one size whatever the tokens'.
type TokenKey = [u8; 32];

fn token_key(token: &str) -> TokenKey {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().try_into().expect("SHA-256 has 32 bytes")
}

/// One remembered review.
#[derive(Debug)]
struct Remembered {
    at: Instant,
    answer: Result<Identity, AuthError>,
    bytes: usize,
}

impl Remembered {
    fn expired(&self, now: Instant) -> bool {
        let valid_for = if self.answer.is_ok() {
            ACCEPTED_FOR
        } else {
            REFUSED_FOR
        };
        now.duration_since(self.at) >= valid_for
    }
}

/// The bytes a review takes in memory, roughly: its key twice (map and queue), the strings of the
/// answer, and the bookkeeping around them.
fn entry_bytes(answer: &Result<Identity, AuthError>) -> usize {
    let strings = match answer {
        Ok(identity) => {
            identity.username.len()
                + identity.user.as_str().len()
                + identity.groups.iter().map(|g| g.len() + 24).sum::<usize>()
        }
        Err(error) => error.to_string().len(),
    };
    2 * std::mem::size_of::<TokenKey>() + std::mem::size_of::<Remembered>() + strings + 64
}

/// Reviews remembered, bounded in entries and bytes: expired ones are dropped when room is
/// needed, then the oldest.
#[derive(Debug)]
struct ReviewMemory {
    entries: HashMap<TokenKey, Remembered>,
    /// Insertion order, oldest first; a key whose entry was replaced since appears again later.
    order: VecDeque<(TokenKey, Instant)>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl ReviewMemory {
    fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    fn recall(&mut self, key: &TokenKey, now: Instant) -> Option<Result<Identity, AuthError>> {
        let entry = self.entries.get(key)?;
        if entry.expired(now) {
            self.forget(key);
            return None;
        }
        Some(entry.answer.clone())
    }

    fn remember(&mut self, key: TokenKey, answer: Result<Identity, AuthError>, now: Instant) {
        let bytes = entry_bytes(&answer);
        self.forget(&key);
        if self.entries.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
            self.drop_expired(now);
        }
        while self.entries.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
            let Some((oldest, at)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&oldest).is_some_and(|e| e.at == at) {
                self.forget(&oldest);
            }
        }
        self.bytes += bytes;
        self.order.push_back((key, now));
        self.entries.insert(
            key,
            Remembered {
                at: now,
                answer,
                bytes,
            },
        );
        // A token reviewed again leaves its old place behind: drop those now and then.
        if self.order.len() > 2 * self.entries.len() + 64 {
            self.drop_stale_order();
        }
    }

    fn forget(&mut self, key: &TokenKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.bytes;
        }
    }

    fn drop_expired(&mut self, now: Instant) {
        let mut freed = 0;
        self.entries.retain(|_, entry| {
            let keep = !entry.expired(now);
            if !keep {
                freed += entry.bytes;
            }
            keep
        });
        self.bytes -= freed;
        self.drop_stale_order();
    }

    /// Drops the places of entries forgotten or remembered again since.
    fn drop_stale_order(&mut self) {
        let entries = &self.entries;
        self.order
            .retain(|(key, at)| entries.get(key).is_some_and(|e| e.at == *at));
    }
}

/// The values of a proxy identity header: an error when it was sent more than once, since a
/// proxy that appends rather than replaces would let the client's own copy through.
fn single_header<'a>(
    headers: &'a HeaderMap,
    name: &'static str,
    shown: &'static str,
) -> Result<Option<&'a header::HeaderValue>, AuthError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(AuthError::RepeatedHeader(shown));
    }
    Ok(first)
}

/// The bearer token of `headers`: refused when missing or longer than [`MAX_TOKEN_BYTES`].
fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthError> {
    let value = headers.get(header::AUTHORIZATION).ok_or(AuthError::Missing)?;
    if value.len() > MAX_TOKEN_BYTES + "Bearer ".len() {
        return Err(AuthError::TokenTooLarge { bytes: value.len() });
    }
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(AuthError::Missing)
}

/// The groups an authenticating proxy lists, comma-separated in one header.
fn proxy_groups(value: Option<&header::HeaderValue>) -> Vec<String> {
    value
        .and_then(|v| v.to_str().ok())
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Checks callers: TokenReviews through `client`, proxy headers against the configuration.
#[derive(Clone)]
pub struct Authenticator {
    reviews: Api<TokenReview>,
    config: Arc<Config>,
    remembered: Arc<Mutex<ReviewMemory>>,
    sign_in: Option<Arc<SignIn>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator that reviews tokens through `client`, and reads the sessions of
    /// sign-ins when the configuration has `oidc`.
    pub fn new(client: kube::Client, config: Arc<Config>) -> Self {
        let sign_in = config
            .oidc
            .as_ref()
            .map(|oidc| Arc::new(SignIn::new(oidc, client.clone(), &config.namespace)));
        Self {
            reviews: Api::all(client),
            config,
            remembered: Arc::new(Mutex::new(ReviewMemory::new(REMEMBERED, REMEMBERED_BYTES))),
            sign_in,
        }
    }

    /// Sign-in with the site's OpenID provider, when configured.
    pub fn sign_in(&self) -> Option<&SignIn> {
        self.sign_in.as_deref()
    }

    /// The caller of a request with `headers` from `peer`, and how it was known: a proxy's
    /// headers first, then a bearer token, then a session.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: IpAddr,
    ) -> Result<(Identity, Via), AuthError> {
        if let Some(user) = single_header(headers, USER_HEADER, "X-Forwarded-User")? {
            return self.proxy_identity(user, headers, peer).map(|i| (i, Via::Proxy));
        }
        if !headers.contains_key(header::AUTHORIZATION) {
            let session = match &self.sign_in {
                Some(sign_in) => sign_in.session(headers, std::time::SystemTime::now()).await,
                None => None,
            };
            if let Some(session) = session {
                let config = &self.config;
                let identity = identity(
                    &session.username,
                    session.groups,
                    &config.admin_groups,
                    config.fold_user_case,
                );
                return identity.map(|i| (i, Via::Session));
            }
        }
        let token = bearer_token(headers)?;
        let key = token_key(token);
        if let Some(known) = self.memory().recall(&key, Instant::now()) {
            return known.map(|i| (i, Via::Token));
        }
        let answer = self.review(token).await;
        if !matches!(answer, Err(AuthError::Unavailable(_))) {
            self.memory().remember(key, answer.clone(), Instant::now());
        }
        answer.map(|i| (i, Via::Token))
    }

    /// The identity an authenticating proxy names in `user` and the groups header.
    fn proxy_identity(
        &self,
        user: &header::HeaderValue,
        headers: &HeaderMap,
        peer: IpAddr,
    ) -> Result<Identity, AuthError> {
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
        let groups = proxy_groups(single_header(headers, GROUPS_HEADER, "X-Forwarded-Groups")?);
        identity(
            user.trim(),
            groups,
            &self.config.admin_groups,
            self.config.fold_user_case,
        )
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, ReviewMemory> {
        self.remembered.lock().expect("review memory")
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
            .map_err(|e| {
                tracing::warn!(error = %e, "TokenReview failed");
                AuthError::Unavailable("the API server did not answer the review".to_owned())
            })?;
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
            self.config.fold_user_case,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admins_are_members_of_an_admin_group() {
        let admins = ["ops".to_owned()];
        let alice = identity("alice", vec!["dev".to_owned(), "ops".to_owned()], &admins, false).unwrap();
        assert!(alice.admin);
        let bob = identity("bob", vec!["dev".to_owned()], &admins, false).unwrap();
        assert!(!bob.admin);
        assert!(matches!(
            identity("Not Valid", vec![], &admins, false),
            Err(AuthError::Unmappable { .. })
        ));
    }

    fn refused(n: usize) -> Result<Identity, AuthError> {
        Err(AuthError::Refused(format!("refusal {n}")))
    }

    #[test]
    fn the_review_memory_is_bounded_in_entries() {
        let mut memory = ReviewMemory::new(100, usize::MAX);
        let now = Instant::now();
        for n in 0..10_000 {
            memory.remember(token_key(&format!("token-{n}")), refused(n), now);
        }
        assert_eq!(memory.entries.len(), 100);
        assert!(memory.order.len() <= 100, "{}", memory.order.len());
        // The newest are kept, the oldest went first.
        assert!(memory.recall(&token_key("token-9999"), now).is_some());
        assert!(memory.recall(&token_key("token-0"), now).is_none());
    }

    #[test]
    fn the_review_memory_is_bounded_in_bytes() {
        let mut memory = ReviewMemory::new(usize::MAX, 64 << 10);
        let now = Instant::now();
        let long = "x".repeat(4096);
        for n in 0..1_000 {
            let answer = Err(AuthError::Refused(format!("{long}{n}")));
            memory.remember(token_key(&format!("token-{n}")), answer, now);
        }
        assert!(memory.bytes <= 64 << 10, "{}", memory.bytes);
        let counted: usize = memory.entries.values().map(|e| e.bytes).sum();
        assert_eq!(counted, memory.bytes);
        assert!(memory.entries.len() < 20);
    }

    #[test]
    fn expired_reviews_are_forgotten_before_live_ones() {
        let mut memory = ReviewMemory::new(3, usize::MAX);
        let start = Instant::now();
        let alice = identity("alice", vec![], &[], false);
        memory.remember(token_key("accepted"), alice.clone(), start);
        memory.remember(token_key("refused-1"), refused(1), start);
        memory.remember(token_key("refused-2"), refused(2), start);
        // Refusals expire after ten seconds, acceptances after a minute.
        let later = start + REFUSED_FOR + Duration::from_secs(1);
        memory.remember(token_key("new"), refused(3), later);
        assert_eq!(memory.entries.len(), 2);
        assert_eq!(memory.recall(&token_key("accepted"), later), Some(alice));
        assert!(memory.recall(&token_key("refused-1"), later).is_none());
        assert!(memory.recall(&token_key("new"), later).is_some());
        // Asked for after it expired, an entry is dropped, not kept.
        let much_later = later + ACCEPTED_FOR;
        assert!(memory.recall(&token_key("accepted"), much_later).is_none());
        assert_eq!(memory.entries.len(), 1);
    }

    #[test]
    fn tokens_reviewed_again_and_again_do_not_grow_the_memory() {
        let mut memory = ReviewMemory::new(100, usize::MAX);
        let start = Instant::now();
        for n in 0..10_000u32 {
            let at = start + Duration::from_secs(u64::from(n) * 11);
            memory.remember(token_key(&format!("token-{}", n % 3)), refused(0), at);
        }
        assert_eq!(memory.entries.len(), 3);
        assert!(memory.order.len() <= 2 * 3 + 64 + 1, "{}", memory.order.len());
    }

    #[test]
    fn the_memory_is_keyed_by_a_hash_not_the_token() {
        let token = "t".repeat(MAX_TOKEN_BYTES);
        let key = token_key(&token);
        assert_eq!(key.len(), 32);
        assert_ne!(key, token_key(&"t".repeat(MAX_TOKEN_BYTES - 1)));
        let mut memory = ReviewMemory::new(10, usize::MAX);
        memory.remember(key, refused(0), Instant::now());
        assert!(memory.bytes < 512, "{}", memory.bytes);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn oversized_tokens_are_refused_before_any_review() {
        let huge = format!("Bearer {}", "a".repeat(380 << 10));
        let error = bearer_token(&headers(&[("authorization", &huge)])).unwrap_err();
        assert!(matches!(error, AuthError::TokenTooLarge { .. }), "{error}");
        assert!(error.to_string().contains("8192 bytes"), "{error}");
        let fits = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES));
        assert_eq!(
            bearer_token(&headers(&[("authorization", &fits)])).map(str::len),
            Ok(MAX_TOKEN_BYTES)
        );
        assert_eq!(bearer_token(&headers(&[])), Err(AuthError::Missing));
    }

    #[test]
    fn repeated_proxy_identity_headers_are_refused_not_merged() {
        let twice = headers(&[(GROUPS_HEADER, "dev"), (GROUPS_HEADER, "ops")]);
        assert_eq!(
            single_header(&twice, GROUPS_HEADER, "X-Forwarded-Groups"),
            Err(AuthError::RepeatedHeader("X-Forwarded-Groups"))
        );
        let once = headers(&[(GROUPS_HEADER, "dev, ops")]);
        let value = single_header(&once, GROUPS_HEADER, "X-Forwarded-Groups").unwrap();
        assert_eq!(proxy_groups(value), ["dev", "ops"]);
    }
}
