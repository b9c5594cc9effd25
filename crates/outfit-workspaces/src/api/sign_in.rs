//! Sign-in with the site's OpenID provider (issue 42), under `/auth/`: `GET /auth/login?to=/path`
//! sends the browser to the provider with a sealed cookie holding what its answer must match;
//! `GET /auth/callback` takes the answer, checks the state, exchanges the code, checks the ID
//! token and who it names, and sets the session; `POST /auth/logout` ends the session;
//! `GET /auth/workspace?to=<a workspace's URL>` hands the signed-in user's pass to a workspace's
//! host ([`proxy`](super::proxy)) as a ticket. Without `oidc` in the configuration each answers
//! 404.

use std::time::{Duration, SystemTime};

use hyper::{
    Method, Request, StatusCode,
    body::Incoming,
    header::{self, HeaderValue},
};
use openidconnect::CsrfToken;
use outfit_workspaces_core::{policy::sign_in::signed_in, workspace::route::route_of};

use super::{
    answer::{Answer, Body},
    connection::Api,
    reading::cross_site_refusal,
};
use crate::io::{
    auth::{SignIn, identity},
    session::{Cleared, Pass, TICKET, TICKET_TIME, Ticket, unix_millis, unix_seconds},
};

/// Where a browser starts signing in.
pub(super) const LOGIN_PATH: &str = "/auth/login";
const CALLBACK_PATH: &str = "/auth/callback";
const LOGOUT_PATH: &str = "/auth/logout";
/// Where a workspace's host sends a browser for a ticket.
pub(super) const WORKSPACE_PATH: &str = "/auth/workspace";
/// The longest path a sign-in returns to.
const MAX_RETURN_PATH: usize = 2048;

fn text(status: StatusCode, message: impl std::fmt::Display) -> Answer {
    Answer::new(status, Body::Text(format!("{message}\n")))
}

fn redirect(location: &str) -> Answer {
    match HeaderValue::try_from(location) {
        Ok(value) => Answer::new(StatusCode::SEE_OTHER, Body::Empty).with_header(header::LOCATION, value),
        Err(_) => text(
            StatusCode::BAD_GATEWAY,
            "the sign-in provider's URL is not a valid header",
        ),
    }
}

/// The path a sign-in returns to, from the `to` a browser asked for: a path on this host only
/// (`/...`, not `//host` nor `/\host`, which browsers read as another host), `/` otherwise.
pub(super) fn return_path(asked: Option<String>) -> String {
    asked
        .filter(|to| {
            to.starts_with('/')
                && !to.starts_with("//")
                && !to.starts_with("/\\")
                && to.len() <= MAX_RETURN_PATH
                && !to.chars().any(char::is_control)
        })
        .unwrap_or_else(|| "/".to_owned())
}

/// The value of `key` in `query`, decoded.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

impl Api {
    /// Answers a request under `/auth/`; the endpoint's name (for metrics) and the answer.
    pub(super) async fn sign_in(&self, request: Request<Incoming>) -> (&'static str, Answer) {
        let path = request.uri().path();
        let name = match path {
            LOGIN_PATH => "auth_login",
            CALLBACK_PATH => "auth_callback",
            LOGOUT_PATH => "auth_logout",
            WORKSPACE_PATH => "auth_workspace",
            _ => {
                return (
                    "auth_other",
                    text(StatusCode::NOT_FOUND, format!("no {path} here")),
                );
            }
        };
        let Some(sign_in) = self.auth.sign_in() else {
            let message = "sign-in is not configured here (the backend's oidc setting)";
            return (name, text(StatusCode::NOT_FOUND, message));
        };
        let wanted = if path == LOGOUT_PATH {
            Method::POST
        } else {
            Method::GET
        };
        if request.method() != wanted {
            let message = format!("{path} takes {wanted}, not {}", request.method());
            return (name, text(StatusCode::METHOD_NOT_ALLOWED, message));
        }
        let query = request.uri().query();
        let now = SystemTime::now();
        let answer = match path {
            LOGIN_PATH => login(sign_in, return_path(query_value(query, "to")), now).await,
            CALLBACK_PATH => self.callback(sign_in, &request, now).await,
            WORKSPACE_PATH => self.ticket(sign_in, &request, now).await,
            _ => self.logout(sign_in, &request, now).await,
        };
        (name, answer)
    }

    /// A ticket to the workspace's host `to` names, for the session's user; without a session,
    /// a sign-in first that comes back here.
    async fn ticket(&self, sign_in: &SignIn, request: &Request<Incoming>, now: SystemTime) -> Answer {
        let to = query_value(request.uri().query(), "to").unwrap_or_default();
        let config = self.backend.config();
        let domain = config.proxy_domain.as_deref().unwrap_or_default();
        let target = to
            .split_once("://")
            .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
            .map(|(scheme, rest)| {
                let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
                (scheme, authority, path)
            });
        let Some((_, authority, path)) = target.filter(|(_, authority, _)| {
            !domain.is_empty() && !authority.contains('@') && route_of(authority, domain).is_some()
        }) else {
            return text(
                StatusCode::BAD_REQUEST,
                format!("{to:?} is not a workspace's address here"),
            );
        };
        let Some(session) = sign_in.session(request.headers(), now).await else {
            let back = format!(
                "{WORKSPACE_PATH}?to={}",
                form_urlencoded::byte_serialize(to.as_bytes()).collect::<String>()
            );
            let login: String = form_urlencoded::byte_serialize(back.as_bytes()).collect();
            return redirect(&format!("{LOGIN_PATH}?to={login}"));
        };
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(h, _)| h)
            .to_ascii_lowercase();
        let ticket = Ticket {
            pass: Pass {
                username: session.username,
                groups: session.groups,
                host,
                expires: session.expires,
                issued: session.issued,
            },
            expires: unix_seconds(now) + TICKET_TIME.as_secs(),
            nonce: CsrfToken::new_random().secret().clone(),
        };
        let sealed: String =
            form_urlencoded::byte_serialize(sign_in.sessions.seal(TICKET, &ticket).as_bytes()).collect();
        let path: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
        // The backend's own scheme, whatever `to` says: a ticket never travels in clear text
        // from an HTTPS site.
        let scheme = if sign_in.sessions.secure() {
            "https"
        } else {
            "http"
        };
        redirect(&format!(
            "{scheme}://{authority}/.outfit/ticket?t={sealed}&to={path}"
        ))
    }

    /// Ends the session: its cookie is removed, and the sign-out recorded for every replica, so
    /// that every session of the user and every workspace host's pass ends with it.
    async fn logout(&self, sign_in: &SignIn, request: &Request<Incoming>, now: SystemTime) -> Answer {
        let config = self.backend.config();
        let allowed = &config.exposure.allowed_origins;
        if let Some((status, error)) = cross_site_refusal(request.method(), request.headers(), allowed) {
            return text(status, error);
        }
        let cleared = sign_in.sessions.cleared(Cleared::Session);
        if let Some(session) = sign_in.sessions.session(request.headers(), now) {
            let lifetime = config
                .oidc
                .as_ref()
                .map_or(Duration::ZERO, |o| o.session_lifetime);
            if let Err(error) = sign_in
                .sign_outs
                .record(&session.username, unix_millis(now), lifetime)
                .await
            {
                tracing::warn!(user = %session.username, %error, "sign-out not recorded");
                let message = "signed out in this browser, but the sign-out could not be recorded for the workspaces' hosts; try again";
                return text(StatusCode::SERVICE_UNAVAILABLE, message)
                    .with_header(header::SET_COOKIE, cleared);
            }
            tracing::info!(user = %session.username, "signed out");
        }
        Answer::new(StatusCode::NO_CONTENT, Body::Empty).with_header(header::SET_COOKIE, cleared)
    }

    /// The provider's answer: a session, and back to where the sign-in began; or why not.
    async fn callback(&self, sign_in: &SignIn, request: &Request<Incoming>, now: SystemTime) -> Answer {
        let query = request.uri().query();
        let peer = self.peer.ip();
        let refused = |status: StatusCode, why: String| {
            tracing::warn!(%peer, %why, "sign-in refused");
            text(
                status,
                format!("Sign-in refused: {why}. Start again at {LOGIN_PATH}."),
            )
            .with_header(header::SET_COOKIE, sign_in.sessions.cleared(Cleared::SignIn))
        };
        let Some(under_way) = sign_in.sessions.sign_in(request.headers(), now) else {
            let why = "this browser has no sign-in under way (it took too long, or began elsewhere)";
            return refused(StatusCode::BAD_REQUEST, why.to_owned());
        };
        if query_value(query, "state").as_deref() != Some(under_way.state.as_str()) {
            let why = "the provider's answer is not for this browser's sign-in (state)";
            return refused(StatusCode::BAD_REQUEST, why.to_owned());
        }
        if let Some(error) = query_value(query, "error") {
            let detail = query_value(query, "error_description").unwrap_or_default();
            let said: String = format!("{error} {detail}").chars().take(300).collect();
            return refused(
                StatusCode::FORBIDDEN,
                format!("the provider said {:?}", said.trim()),
            );
        }
        let Some(code) = query_value(query, "code") else {
            return refused(
                StatusCode::BAD_REQUEST,
                "the provider's answer has no code".to_owned(),
            );
        };
        let claims = match sign_in.provider.finish(code, &under_way, now).await {
            Ok(claims) => claims,
            Err(error) => return refused(StatusCode::FORBIDDEN, error.to_string()),
        };
        let config = self.backend.config();
        let oidc = config.oidc.as_ref().expect("sign-in is configured");
        let user = match signed_in(&claims, oidc) {
            Ok(user) => user,
            Err(error) => return refused(StatusCode::FORBIDDEN, error.to_string()),
        };
        let groups = user.groups.clone();
        if let Err(error) = identity(
            &user.username,
            groups,
            &config.admin_groups,
            config.fold_user_case,
        ) {
            return refused(StatusCode::FORBIDDEN, error.to_string());
        }
        let session = sign_in.sessions.start(user.username, user.groups, now);
        let cookie = match sign_in.sessions.session_cookie(&session) {
            Ok(cookie) => cookie,
            Err(error) => return refused(StatusCode::FORBIDDEN, error.to_string()),
        };
        tracing::info!(user = %session.username, %peer, "signed in");
        redirect(&under_way.to)
            .with_header(header::SET_COOKIE, sign_in.sessions.cleared(Cleared::SignIn))
            .with_header(header::SET_COOKIE, cookie)
    }
}

/// The browser sent to the provider, with the sign-in's cookie.
async fn login(sign_in: &SignIn, to: String, now: SystemTime) -> Answer {
    match sign_in.provider.begin(to, now).await {
        Ok(begun) => redirect(&begun.url).with_header(
            header::SET_COOKIE,
            sign_in.sessions.sign_in_cookie(&begun.under_way),
        ),
        Err(error) => {
            tracing::warn!(%error, "sign-in could not begin");
            text(StatusCode::BAD_GATEWAY, error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_in_returns_only_to_a_path_of_this_host() {
        assert_eq!(return_path(Some("/ws/alice?x=1".to_owned())), "/ws/alice?x=1");
        for elsewhere in [
            "https://evil.org/",
            "//evil.org/x",
            "/\\evil.org",
            "evil",
            "/a\nb",
            "",
        ] {
            assert_eq!(return_path(Some(elsewhere.to_owned())), "/", "{elsewhere:?}");
        }
        assert_eq!(
            return_path(Some(format!("/{}", "a".repeat(MAX_RETURN_PATH)))),
            "/"
        );
        assert_eq!(return_path(None), "/");
    }
}
