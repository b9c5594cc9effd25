//! Sign-in with the site's OpenID provider (issue 42), under `/auth/`: `GET /auth/login?to=/path`
//! sends the browser to the provider with a sealed cookie holding what its answer must match;
//! `GET /auth/callback` takes the answer, checks the state, exchanges the code, checks the ID
//! token and who it names, and sets the session; `POST /auth/logout` ends the session;
//! `GET /auth/workspace?to=<a workspace's URL>` hands the signed-in user's pass to a workspace's
//! host ([`proxy`](super::proxy)) as a ticket. Without `oidc` in the configuration each answers
//! 404.

use std::time::{Duration, SystemTime};

use axum::{
    Extension,
    extract::{OriginalUri, State},
    http::{
        HeaderMap, Method, StatusCode, Uri,
        header::{self, HeaderValue},
    },
    response::{IntoResponse, Response},
};
use openidconnect::CsrfToken;
use outfit_workspaces_core::{policy::sign_in::signed_in, workspace::route::route_of};

use super::{
    answer::{empty, see_other, text},
    extract::{cross_site_refusal, query_value},
    state::{Api, Connection},
};
use crate::io::{
    auth::{SignIn, identity},
    session::{Cleared, Pass, TICKET, TICKET_TIME, Ticket, unix_millis, unix_seconds},
};

/// Where a browser starts signing in.
pub(super) const LOGIN_PATH: &str = "/auth/login";
pub(super) const CALLBACK_PATH: &str = "/auth/callback";
pub(super) const LOGOUT_PATH: &str = "/auth/logout";
/// Where a workspace's host sends a browser for a ticket.
pub(super) const WORKSPACE_PATH: &str = "/auth/workspace";
/// The longest path a sign-in returns to.
const MAX_RETURN_PATH: usize = 2048;

/// A text answer, a line.
fn line(status: StatusCode, message: impl std::fmt::Display) -> Response {
    text(status, format!("{message}\n"))
}

/// A `303 See Other` to `location`, with `cookies` set.
fn redirect<const N: usize>(location: &str, cookies: [HeaderValue; N]) -> Response {
    see_other(location, cookies).unwrap_or_else(|| {
        line(
            StatusCode::BAD_GATEWAY,
            "the sign-in provider's URL is not a valid header",
        )
    })
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

/// Sign-in, when configured; else the 404 that says it is not.
fn configured(api: &Api) -> Result<&SignIn, Response> {
    api.auth.sign_in().ok_or_else(|| {
        let message = "sign-in is not configured here (the backend's oidc setting)";
        line(StatusCode::NOT_FOUND, message)
    })
}

/// No endpoint at the path under `/auth/`.
pub(super) async fn no_endpoint(OriginalUri(uri): OriginalUri) -> Response {
    line(StatusCode::NOT_FOUND, format!("no {} here", uri.path()))
}

/// A method the path does not take; `allowed`, the ones it does.
pub(super) fn not_allowed(path: &str, method: &Method, allowed: &[&str]) -> Response {
    let message = format!("{path} takes {}, not {method}", allowed.join(" or "));
    line(StatusCode::METHOD_NOT_ALLOWED, message)
}

/// `GET /auth/login?to=/path`: the browser sent to the provider, with the sign-in's cookie.
pub(super) async fn login(State(api): State<Api>, uri: Uri) -> Response {
    let sign_in = match configured(&api) {
        Ok(sign_in) => sign_in,
        Err(refused) => return refused,
    };
    let to = return_path(query_value(uri.query(), "to"));
    match sign_in.provider.begin(to, SystemTime::now()).await {
        Ok(begun) => redirect(&begun.url, [sign_in.sessions.sign_in_cookie(&begun.under_way)]),
        Err(error) => {
            tracing::warn!(%error, "sign-in could not begin");
            line(StatusCode::BAD_GATEWAY, error)
        }
    }
}

/// `GET /auth/callback`: the provider's answer.
pub(super) async fn callback(
    State(api): State<Api>,
    Extension(connection): Extension<Connection>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    match configured(&api) {
        Ok(sign_in) => finish_sign_in(&api, sign_in, &connection, &uri, &headers).await,
        Err(refused) => refused,
    }
}

/// `GET /auth/workspace?to=<a workspace's URL>`: a ticket to the workspace's host.
pub(super) async fn workspace(State(api): State<Api>, uri: Uri, headers: HeaderMap) -> Response {
    match configured(&api) {
        Ok(sign_in) => ticket(&api, sign_in, &uri, &headers, SystemTime::now()).await,
        Err(refused) => refused,
    }
}

/// `POST /auth/logout`: the session ends.
pub(super) async fn logout(State(api): State<Api>, method: Method, headers: HeaderMap) -> Response {
    match configured(&api) {
        Ok(sign_in) => sign_out(&api, sign_in, &method, &headers, SystemTime::now()).await,
        Err(refused) => refused,
    }
}

/// A ticket to the workspace's host `to` names, for the session's user; without a session,
/// a sign-in first that comes back here.
async fn ticket(api: &Api, sign_in: &SignIn, uri: &Uri, headers: &HeaderMap, now: SystemTime) -> Response {
    let to = query_value(uri.query(), "to").unwrap_or_default();
    let config = api.backend.config();
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
        return line(
            StatusCode::BAD_REQUEST,
            format!("{to:?} is not a workspace's address here"),
        );
    };
    let Some(session) = sign_in.session(headers, now).await else {
        let back = format!(
            "{WORKSPACE_PATH}?to={}",
            form_urlencoded::byte_serialize(to.as_bytes()).collect::<String>()
        );
        let login: String = form_urlencoded::byte_serialize(back.as_bytes()).collect();
        return redirect(&format!("{LOGIN_PATH}?to={login}"), []);
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
    redirect(
        &format!("{scheme}://{authority}/.outfit/ticket?t={sealed}&to={path}"),
        [],
    )
}

/// Ends the session: its cookie is removed, and the sign-out recorded for every replica, so
/// that every session of the user and every workspace host's pass ends with it.
async fn sign_out(
    api: &Api,
    sign_in: &SignIn,
    method: &Method,
    headers: &HeaderMap,
    now: SystemTime,
) -> Response {
    let config = api.backend.config();
    let allowed = &config.exposure.allowed_origins;
    if let Some((status, error)) = cross_site_refusal(method, headers, allowed) {
        return line(status, error);
    }
    let cleared = sign_in.sessions.cleared(Cleared::Session);
    if let Some(session) = sign_in.sessions.session(headers, now) {
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
            let cookie = [(header::SET_COOKIE, cleared)];
            return (cookie, line(StatusCode::SERVICE_UNAVAILABLE, message)).into_response();
        }
        tracing::info!(user = %session.username, "signed out");
    }
    ([(header::SET_COOKIE, cleared)], empty(StatusCode::NO_CONTENT)).into_response()
}

/// The provider's answer: a session, and back to where the sign-in began; or why not.
async fn finish_sign_in(
    api: &Api,
    sign_in: &SignIn,
    connection: &Connection,
    uri: &Uri,
    headers: &HeaderMap,
) -> Response {
    let now = SystemTime::now();
    let query = uri.query();
    let peer = connection.peer.ip();
    let refused = |status: StatusCode, why: String| {
        tracing::warn!(%peer, %why, "sign-in refused");
        let cookie = [(header::SET_COOKIE, sign_in.sessions.cleared(Cleared::SignIn))];
        let message = format!("Sign-in refused: {why}. Start again at {LOGIN_PATH}.");
        (cookie, line(status, message)).into_response()
    };
    let Some(under_way) = sign_in.sessions.sign_in(headers, now) else {
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
    let config = api.backend.config();
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
    let cleared = sign_in.sessions.cleared(Cleared::SignIn);
    redirect(&under_way.to, [cleared, cookie])
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
