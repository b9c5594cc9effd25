//! The sign-in's cookies (issue 42), sealed with AES-256-GCM by the `cookie` crate's private jar
//! (each cookie's name is authenticated with its value, so one can't stand in for the other):
//! the session, which says who signed in and until when, and the sign-in under way, which holds
//! the state, nonce and PKCE verifier between the redirect to the provider and its answer. Both
//! live in the browser, so the backend keeps no memory per sign-in and any replica that holds the
//! key reads them.
//!
//! A workspace's own host (the proxy's) gets a pass of its own: the backend hands it over as a
//! sealed ticket in a redirect, and the host sets it as its own cookie, good on that host only.
//!
//! Over HTTPS the names carry the `__Host-` prefix: browsers then take them only from this very
//! host, over HTTPS, for the whole path, never from a sibling host under the same domain (no
//! cookie tossing by a workspace's host).

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use cookie::{Cookie, CookieJar, Key, SameSite};
use hyper::{HeaderMap, header, header::HeaderValue};
use outfit_workspaces_core::model::config::Oidc;
use serde::{Deserialize, Serialize};

/// How long a sign-in may take, from the redirect to the provider to its answer.
pub const SIGN_IN_TIME: Duration = Duration::from_secs(600);
/// The longest sealed cookie set: browsers keep at most 4,096 bytes of a cookie with its
/// attributes.
const MAX_COOKIE_BYTES: usize = 3_800;

/// Keys used once remembered at most.
pub const USED_REMEMBERED: usize = 10_000;

/// Keys used once (finished sign-ins' states, tickets spent), each until its time is up, so a
/// second use is refused; past [`USED_REMEMBERED`] the oldest go first.
#[derive(Debug, Default)]
pub struct UsedOnce {
    until: HashMap<String, u64>,
    order: VecDeque<String>,
}

impl UsedOnce {
    /// Whether `key` was used and its time is not up at `now`.
    pub fn contains(&self, state: &str, now: u64) -> bool {
        self.until.get(state).is_some_and(|until| *until > now)
    }

    /// `key` used, until `until` (seconds since the epoch).
    pub fn insert(&mut self, state: String, until: u64, now: u64) {
        while self.order.len() >= USED_REMEMBERED
            || self
                .order
                .front()
                .is_some_and(|s| self.until.get(s).is_none_or(|u| *u <= now))
        {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.until.remove(&oldest);
        }
        self.until.insert(state.clone(), until);
        self.order.push_back(state);
    }
}

/// Who signed in, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The user name.
    #[serde(rename = "u")]
    pub username: String,
    /// The groups.
    #[serde(rename = "g")]
    pub groups: Vec<String>,
    /// Seconds since the Unix epoch when the session ends.
    #[serde(rename = "e")]
    pub expires: u64,
    /// Milliseconds since the Unix epoch when the user signed in: a sign-out after it ends it.
    #[serde(rename = "i", default)]
    pub issued: u64,
}

/// A sign-in under way: what the answer from the provider must match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInUnderWay {
    /// The `state` sent to the provider, which it sends back.
    #[serde(rename = "s")]
    pub state: String,
    /// The nonce the ID token must carry.
    #[serde(rename = "n")]
    pub nonce: String,
    /// The PKCE verifier of the challenge sent.
    #[serde(rename = "v")]
    pub verifier: String,
    /// The path to go back to once signed in.
    #[serde(rename = "t")]
    pub to: String,
    /// Seconds since the Unix epoch when it may no longer finish.
    #[serde(rename = "e")]
    pub expires: u64,
}

/// Who may open one workspace's host, and until when: what a ticket carries to that host, and
/// the cookie the host then sets, for that host only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pass {
    /// The user name.
    #[serde(rename = "u")]
    pub username: String,
    /// The groups.
    #[serde(rename = "g")]
    pub groups: Vec<String>,
    /// The workspace's host (`<workspace>.<proxyDomain>`, lower-case, without a port).
    #[serde(rename = "h")]
    pub host: String,
    /// Seconds since the Unix epoch when it ends: the session's end.
    #[serde(rename = "e")]
    pub expires: u64,
    /// When the session it came from began ([`Session::issued`]).
    #[serde(rename = "i", default)]
    pub issued: u64,
}

/// A pass on its way to its workspace's host, in the URL of a redirect: good once, for a minute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// The pass it carries (which ends with the session).
    #[serde(rename = "p")]
    pub pass: Pass,
    /// Seconds since the Unix epoch when it may no longer be used.
    #[serde(rename = "e")]
    pub expires: u64,
    /// Random: what makes it good once.
    #[serde(rename = "n")]
    pub nonce: String,
}

/// The name tickets are sealed under.
pub const TICKET: &str = "outfit-ticket";
/// How long a ticket may take to reach its host.
pub const TICKET_TIME: Duration = Duration::from_secs(60);

/// The session would not fit in a cookie.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the session of {username} takes {bytes} bytes sealed, more than a cookie holds ({MAX_COOKIE_BYTES}): too many or too long groups"
)]
pub struct SessionTooLarge {
    /// Who.
    pub username: String,
    /// Its size.
    pub bytes: usize,
}

/// Seals and opens the sign-in's cookies.
pub struct Sessions {
    key: Key,
    secure: bool,
    lifetime: Duration,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("secure", &self.secure)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// Milliseconds since the Unix epoch at `time`.
pub fn unix_millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Seconds since the Unix epoch at `time`.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Sessions {
    /// The cookies of `oidc`: sealed with a key derived from its cookie key file, or a key of
    /// this process's own when it has none.
    pub fn new(oidc: &Oidc) -> Self {
        let key = match &oidc.cookie_key {
            // The file's material (at least 32 bytes) stretched to the jar's 64-byte key.
            Some(material) => Key::from(ring::digest::digest(&ring::digest::SHA512, material).as_ref()),
            None => Key::generate(),
        };
        Self {
            key,
            secure: oidc.secure(),
            lifetime: oidc.session_lifetime,
        }
    }

    /// Whether the cookies are `Secure` (the backend is reached over HTTPS).
    pub fn secure(&self) -> bool {
        self.secure
    }

    fn name(&self, base: &str) -> &'static str {
        match (self.secure, base) {
            (true, "session") => "__Host-outfit-session",
            (true, "pass") => "__Host-outfit-pass",
            (true, _) => "__Host-outfit-sign-in",
            (false, "session") => "outfit-session",
            (false, "pass") => "outfit-pass",
            (false, _) => "outfit-sign-in",
        }
    }

    /// The Set-Cookie value of a cookie named `name` holding `value` sealed, for `max_age`.
    fn sealed(&self, name: &'static str, value: String, max_age: Duration) -> String {
        let mut jar = CookieJar::new();
        jar.private_mut(&self.key)
            .add(self.attributes(Cookie::new(name, value), max_age));
        let cookie = jar.get(name).expect("the cookie just added");
        cookie.to_string()
    }

    /// `value` as JSON, sealed under `name` (which opening it must give again): for a value that
    /// travels in a URL rather than a cookie.
    pub fn seal<T: Serialize>(&self, name: &'static str, value: &T) -> String {
        let text = serde_json::to_string(value).expect("sealed values serialize");
        let mut jar = CookieJar::new();
        jar.private_mut(&self.key).add(Cookie::new(name, text));
        jar.get(name).expect("the value just added").value().to_owned()
    }

    /// What [`Sessions::seal`] sealed under `name`, if `sealed` is that.
    pub fn open<T: for<'de> Deserialize<'de>>(&self, name: &'static str, sealed: &str) -> Option<T> {
        let jar = CookieJar::new();
        let opened = jar
            .private(&self.key)
            .decrypt(Cookie::new(name, sealed.to_owned()))?;
        serde_json::from_str(opened.value()).ok()
    }

    /// The Set-Cookie header of a pass for a workspace's host, which lasts as long as the session
    /// it came from.
    pub fn pass_cookie(&self, pass: &Pass, now: SystemTime) -> Result<HeaderValue, SessionTooLarge> {
        let value = serde_json::to_string(pass).expect("passes serialize");
        let left = Duration::from_secs(pass.expires.saturating_sub(unix_seconds(now)));
        let set = self.sealed(self.name("pass"), value, left);
        if set.len() > MAX_COOKIE_BYTES {
            return Err(SessionTooLarge {
                username: pass.username.clone(),
                bytes: set.len(),
            });
        }
        Ok(HeaderValue::try_from(set).expect("a sealed cookie is a header value"))
    }

    /// The pass `headers` carry for `host`, if one is valid there at `now`: a pass of another
    /// host opens to nothing.
    pub fn pass(&self, headers: &HeaderMap, host: &str, now: SystemTime) -> Option<Pass> {
        let pass: Pass = serde_json::from_str(&self.opened(headers, self.name("pass"))?).ok()?;
        (pass.host == host && pass.expires > unix_seconds(now)).then_some(pass)
    }

    /// Whether `name` is one of the cookies outfit sets (a workspace's app never sees those).
    pub fn is_own_cookie(&self, name: &str) -> bool {
        ["session", "sign-in", "pass"]
            .iter()
            .any(|base| self.name(base) == name)
    }

    fn attributes(&self, cookie: Cookie<'static>, max_age: Duration) -> Cookie<'static> {
        let mut cookie = cookie;
        cookie.set_path("/");
        cookie.set_http_only(true);
        cookie.set_secure(self.secure);
        // Lax: sent on the provider's redirect back (a top-level GET), never on another site's
        // POST or fetch.
        cookie.set_same_site(SameSite::Lax);
        let seconds = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
        cookie.set_max_age(cookie::time::Duration::seconds(seconds));
        cookie
    }

    /// The value of the cookie named `name` in `headers`, opened: none when missing, forged,
    /// sealed with another key or under another name.
    fn opened(&self, headers: &HeaderMap, name: &'static str) -> Option<String> {
        let jar = CookieJar::new();
        let private = jar.private(&self.key);
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .filter(|cookie| cookie.name() == name)
            .find_map(|cookie| private.decrypt(cookie.into_owned()))
            .map(|cookie| cookie.value().to_owned())
    }

    /// The Set-Cookie header of `session`.
    pub fn session_cookie(&self, session: &Session) -> Result<HeaderValue, SessionTooLarge> {
        let value = serde_json::to_string(session).expect("sessions serialize");
        let set = self.sealed(self.name("session"), value, self.lifetime);
        if set.len() > MAX_COOKIE_BYTES {
            return Err(SessionTooLarge {
                username: session.username.clone(),
                bytes: set.len(),
            });
        }
        Ok(HeaderValue::try_from(set).expect("a sealed cookie is a header value"))
    }

    /// The session `headers` carry, if any is valid at `now`.
    pub fn session(&self, headers: &HeaderMap, now: SystemTime) -> Option<Session> {
        let session: Session = serde_json::from_str(&self.opened(headers, self.name("session"))?).ok()?;
        (session.expires > unix_seconds(now)).then_some(session)
    }

    /// A session for `username` in `groups`, from `now` for the configured lifetime.
    pub fn start(&self, username: String, groups: Vec<String>, now: SystemTime) -> Session {
        Session {
            username,
            groups,
            expires: unix_seconds(now) + self.lifetime.as_secs(),
            issued: unix_millis(now),
        }
    }

    /// The Set-Cookie header of a sign-in under way.
    pub fn sign_in_cookie(&self, under_way: &SignInUnderWay) -> HeaderValue {
        let value = serde_json::to_string(under_way).expect("sign-ins serialize");
        let set = self.sealed(self.name("sign-in"), value, SIGN_IN_TIME);
        HeaderValue::try_from(set).expect("a sealed cookie is a header value")
    }

    /// The sign-in under way `headers` carry, if any is valid at `now`.
    pub fn sign_in(&self, headers: &HeaderMap, now: SystemTime) -> Option<SignInUnderWay> {
        let under_way: SignInUnderWay =
            serde_json::from_str(&self.opened(headers, self.name("sign-in"))?).ok()?;
        (under_way.expires > unix_seconds(now)).then_some(under_way)
    }

    /// The Set-Cookie headers that remove both cookies (a sign-out, or a sign-in finished).
    pub fn cleared(&self, which: Cleared) -> HeaderValue {
        let name = match which {
            Cleared::Session => self.name("session"),
            Cleared::SignIn => self.name("sign-in"),
        };
        let cookie = self.attributes(Cookie::new(name, ""), Duration::ZERO);
        HeaderValue::try_from(cookie.to_string()).expect("a cookie is a header value")
    }
}

/// Which cookie [`Sessions::cleared`] removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleared {
    /// The session: signed out.
    Session,
    /// The sign-in under way: finished.
    SignIn,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Sign-in settings for tests: back to `redirect`, sealed with `key`.
    pub(crate) fn oidc(redirect: &str, key: Option<Vec<u8>>) -> Oidc {
        Oidc {
            issuer_url: "https://login.example.org".to_owned(),
            client_id: "outfit".to_owned(),
            client_secret: "s".to_owned(),
            redirect_url: redirect.to_owned(),
            scopes: vec!["openid".to_owned()],
            username_claim: "preferred_username".to_owned(),
            groups_claim: "groups".to_owned(),
            allowed_groups: Vec::new(),
            allowed_email_domains: Vec::new(),
            session_lifetime: Duration::from_secs(3600),
            cookie_key: key,
        }
    }

    /// The request headers of a browser that was sent `set` (the name and value of Set-Cookie).
    fn sent_back(set: &HeaderValue) -> HeaderMap {
        let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::try_from(format!("other=1; {pair}")).unwrap(),
        );
        headers
    }

    #[test]
    fn a_session_opens_until_it_expires_and_only_with_its_key() {
        let key = Some(vec![9u8; 32]);
        let sessions = Sessions::new(&oidc("https://w.example.org/auth/callback", key.clone()));
        let now = SystemTime::now();
        let session = sessions.start("alice".to_owned(), vec!["staff".to_owned()], now);
        let set = sessions.session_cookie(&session).unwrap();
        let text = set.to_str().unwrap();
        assert!(text.starts_with("__Host-outfit-session="), "{text}");
        for attribute in ["HttpOnly", "Secure", "SameSite=Lax", "Path=/", "Max-Age=3600"] {
            assert!(text.contains(attribute), "{attribute}: {text}");
        }
        assert!(!text.contains("alice") && !text.contains("Domain"), "{text}");
        let headers = sent_back(&set);
        assert_eq!(sessions.session(&headers, now), Some(session.clone()));
        assert_eq!(sessions.session(&headers, now + Duration::from_secs(3600)), None);
        // Another replica with the same key file opens it; a process with its own key does not.
        let replica = Sessions::new(&oidc("https://w.example.org/auth/callback", key));
        assert_eq!(replica.session(&headers, now), Some(session));
        let stranger = Sessions::new(&oidc("https://w.example.org/auth/callback", None));
        assert_eq!(stranger.session(&headers, now), None);
    }

    #[test]
    fn a_forged_or_swapped_cookie_opens_nothing() {
        let sessions = Sessions::new(&oidc("http://127.0.0.1:8080/auth/callback", None));
        let now = SystemTime::now();
        let mut forged = HeaderMap::new();
        let plain = r#"outfit-session={"u":"root","g":["admins"],"e":99999999999}"#;
        forged.insert(header::COOKIE, HeaderValue::from_static(plain));
        assert_eq!(sessions.session(&forged, now), None);
        // A sign-in's sealed value under the session's name fails: the name is authenticated.
        let under_way = SignInUnderWay {
            state: "s".to_owned(),
            nonce: "n".to_owned(),
            verifier: "v".to_owned(),
            to: "/".to_owned(),
            expires: unix_seconds(now) + 60,
        };
        let set = sessions.sign_in_cookie(&under_way);
        assert!(set.to_str().unwrap().starts_with("outfit-sign-in="));
        let swapped = set
            .to_str()
            .unwrap()
            .replacen("outfit-sign-in=", "outfit-session=", 1);
        let swapped = sent_back(&HeaderValue::try_from(swapped).unwrap());
        assert_eq!(sessions.session(&swapped, now), None);
        assert_eq!(sessions.sign_in(&sent_back(&set), now), Some(under_way));
    }

    #[test]
    fn too_many_groups_do_not_fit_and_a_cleared_cookie_expires_at_once() {
        let sessions = Sessions::new(&oidc("https://w.example.org/auth/callback", None));
        let groups = (0..100)
            .map(|i| format!("a-rather-long-group-name-{i}"))
            .collect();
        let session = sessions.start("alice".to_owned(), groups, SystemTime::now());
        assert!(sessions.session_cookie(&session).is_err());
        let cleared = sessions.cleared(Cleared::Session);
        let text = cleared.to_str().unwrap();
        assert!(
            text.starts_with("__Host-outfit-session=;") && text.contains("Max-Age=0"),
            "{text}"
        );
    }

    #[test]
    fn used_keys_are_remembered_until_their_time_and_within_their_cap() {
        let mut states = UsedOnce::default();
        states.insert("a".to_owned(), 100, 10);
        assert!(states.contains("a", 50));
        assert!(!states.contains("a", 100));
        for i in 0..USED_REMEMBERED + 5 {
            states.insert(format!("s{i}"), 1_000, 50);
        }
        assert_eq!(states.until.len(), USED_REMEMBERED);
        assert!(states.contains(&format!("s{}", USED_REMEMBERED + 4), 60));
        assert!(!states.contains("s0", 60), "the oldest made room");
    }
}
