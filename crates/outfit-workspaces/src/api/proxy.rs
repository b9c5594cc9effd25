//! The workspace proxy (issue 42, with `proxyDomain`): the backend serves each workspace's host
//! itself, `<workspace>.<proxyDomain>` and `<port>-<workspace>.<proxyDomain>`, to the signed-in
//! users who may open it, and sends their requests straight to the pod's address from the watch
//! cache, WebSocket upgrades and streams included.
//!
//! A browser without this host's pass goes to the backend's `/auth/workspace` (signing in there
//! first if it must), which sends it back with a ticket: good once, for a minute, sealed, naming
//! this host. The host trades it at `/.outfit/ticket` for its own cookie (host-only, `__Host-`
//! over HTTPS), so no workspace's host holds or reads another's, nor the backend's session. On
//! every request the pass's user must still be the workspace's owner, an admin, or one its
//! owner shares it with (`outfit.dev/sharing`: users, groups, every signed-in user; a public
//! workspace needs no pass at all); anyone else gets 403 and nothing of the workspace. The app sees the user in `X-Forwarded-User` and
//! `X-Forwarded-Groups`, set here and never taken from the client, and never sees outfit's own
//! cookies.

use std::{net::SocketAddr, time::SystemTime};

use http_body_util::Either;
use hyper::{
    Method, Request, Response, StatusCode,
    body::Incoming,
    header::{self, HeaderValue},
};
use outfit_workspaces_core::{
    model::user::owner_of,
    workspace::{
        route::{HostRoute, Unroutable, upstream},
        sharing::{Level, Sharing},
    },
};

use super::{
    answer::{ResponseBody, own, see_other, text},
    extract::query_value,
    proxy_headers::{Forwarded, prepare_headers, strip_answer_headers, upgrade_asked},
    sign_in::{WORKSPACE_PATH, return_path},
    source::Source,
    state::Api,
    streams::StreamsFull,
    workspace_page::{self, START_PATH},
};
use crate::io::{
    auth::{Identity, SignIn, identity},
    session::{TICKET, Ticket, unix_seconds},
    upstream::{TUNNEL_IDLE, tunnel},
};

/// Where a workspace's host takes a ticket.
const TICKET_PATH: &str = "/.outfit/ticket";

/// A line of text.
fn page(status: StatusCode, message: impl std::fmt::Display) -> Response<ResponseBody> {
    own(text(status, format!("{message}\n")))
}

/// The page that refuses a tunnel from `source` past the cap that is `full`: the user's (429:
/// theirs to close), or their source's or the port's (503: maybe others', so try again later).
fn tunnels_full(full: StreamsFull, source: Source) -> Response<ResponseBody> {
    match full {
        StreamsFull::User(cap) => page(
            StatusCode::TOO_MANY_REQUESTS,
            format!("you hold {cap} streams and WebSockets open, the most one user may (maxStreamsPerUser)"),
        ),
        StreamsFull::Source(cap) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{source} holds {cap} streams and WebSockets open, the most one client address may (maxStreamsPerSource)"
            ),
        ),
        StreamsFull::Port(cap) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{cap} streams and WebSockets are open, the most this port holds (maxStreams)"),
        ),
    }
}

/// A `303 See Other` to `location`, with `cookie` set if any.
fn redirect(location: &str, cookie: Option<HeaderValue>) -> Response<ResponseBody> {
    see_other(location, cookie).map_or_else(|| page(StatusCode::BAD_REQUEST, "a bad address"), own)
}

impl Api {
    /// Answers a request for a workspace's `host` (as the client named it, without its port),
    /// which names `route`: a ticket taken, or the caller known, let in, and passed on.
    pub(super) async fn proxy(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        host: String,
        route: HostRoute,
    ) -> (&'static str, Response<ResponseBody>) {
        tracing::debug!(method = %request.method(), path = request.uri().path(), %peer, host, "proxied");
        let Some(sign_in) = self.auth.sign_in() else {
            return (
                "proxy",
                page(StatusCode::NOT_FOUND, "no workspaces are served here"),
            );
        };
        let now = SystemTime::now();
        if request.uri().path() == TICKET_PATH {
            return ("proxy_ticket", self.take_ticket(sign_in, &request, &host, now));
        }
        let sharing = self.backend.sharing(&route.workspace);
        let public = sharing.as_ref().is_some_and(|(_, s)| s.level == Level::Public);
        let caller = match self.caller(sign_in, &request, &host, public, now).await {
            Ok(caller) => caller,
            Err(answer) => return ("proxy", answer),
        };
        let pod = self.backend.pod(&route.workspace);
        let owner = pod
            .as_deref()
            .and_then(owner_of)
            .map(str::to_owned)
            .or_else(|| sharing.as_ref().map(|(o, _)| o.clone()));
        let shared = sharing.map(|(_, s)| s).unwrap_or_default();
        let opening = (caller.as_ref(), peer);
        if let Err(refusal) = self.may_open(opening, owner.as_deref(), &shared, &route.workspace) {
            return ("proxy", refusal);
        }
        let secure = sign_in.sessions.secure();
        let authority = match request_port(&request) {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        let (ip, port) = match pod.as_deref().map(|pod| upstream(pod, route.port)) {
            Some(Ok(address)) => address,
            Some(Err(error @ (Unroutable::NoPort | Unroutable::UndeclaredPort(_)))) => {
                return ("proxy", page(StatusCode::NOT_FOUND, error));
            }
            // Stopped (no pod), starting or stopping: the page that says so, or starts it.
            Some(Err(Unroutable::NotRunning)) | None => {
                let origin = format!("{}://{authority}", if secure { "https" } else { "http" });
                let page = match &caller {
                    Some(identity) => {
                        self.not_running(&request, identity, &route.workspace, &origin)
                            .await
                    }
                    None => page(StatusCode::SERVICE_UNAVAILABLE, "the workspace is not running"),
                };
                return ("proxy_page", page);
            }
        };
        let proxies = &self.backend.config().client_address_from_cidrs;
        let source = Source::of_request(peer.ip(), request.headers(), proxies);
        let to = Forwarded {
            host,
            ip,
            port,
            secure,
            user: caller.as_ref().map(|i| (i.username.clone(), i.groups.clone())),
            // An anonymous visitor of a public workspace holds streams of its source's.
            slot_holder: caller
                .as_ref()
                .map_or_else(|| format!("public:{source}"), |i| i.user.to_string()),
            source,
            authority,
        };
        ("proxy", self.forward(request, peer, sign_in, to).await)
    }

    /// Who calls on `host`: the user of its pass (unless they signed out since); `None`, without
    /// one, for a `public`
    /// workspace; else the answer that sends the browser to the backend for a ticket.
    async fn caller(
        &self,
        sign_in: &SignIn,
        request: &Request<Incoming>,
        host: &str,
        public: bool,
        now: SystemTime,
    ) -> Result<Option<Identity>, Response<ResponseBody>> {
        let pass = match sign_in.sessions.pass(request.headers(), host, now) {
            Some(pass) if !sign_in.signed_out(&pass.username, pass.issued).await => Some(pass),
            _ => None,
        };
        let Some(pass) = pass else {
            return match public {
                true => Ok(None),
                false => Err(self.to_backend_for_a_ticket(request, host)),
            };
        };
        let config = self.backend.config();
        identity(
            &pass.username,
            pass.groups,
            &config.admin_groups,
            config.fold_user_case,
        )
        .map(Some)
        .map_err(|error| page(StatusCode::FORBIDDEN, error))
    }

    /// Whether `caller` (`None`: not signed in) from `peer` may open the workspace `name` of
    /// `owner` (`None`: no such workspace), shared as `shared`: the owner, an admin, or whom the
    /// sharing names; else the refusal, counted and logged.
    fn may_open(
        &self,
        (caller, peer): (Option<&Identity>, SocketAddr),
        owner: Option<&str>,
        shared: &Sharing,
        name: &str,
    ) -> Result<(), Response<ResponseBody>> {
        let Some(owner) = owner else {
            self.metrics.proxy_refused("unknown");
            return Err(page(
                StatusCode::NOT_FOUND,
                format!("there is no workspace {name} here"),
            ));
        };
        let signed_in = caller.map(|i| (i.user.as_str(), i.groups.as_slice()));
        let own = caller.is_some_and(|i| i.admin || i.user.as_str() == owner);
        if own || shared.lets_in(signed_in) {
            return Ok(());
        }
        self.metrics.proxy_refused("forbidden");
        let who = caller.map_or("", |i| i.username.as_str());
        tracing::warn!(user = who, workspace = name, %peer, "workspace refused to a user it is not shared with");
        Err(page(
            StatusCode::FORBIDDEN,
            format!("{who} may not open this workspace"),
        ))
    }

    /// The page of a workspace that does not run (or 404, when `identity` has none of that
    /// name); a `POST` of its button from the page's own `origin` starts it.
    async fn not_running(
        &self,
        request: &Request<Incoming>,
        identity: &Identity,
        name: &str,
        origin: &str,
    ) -> Response<ResponseBody> {
        let view = match self.backend.workspace(identity, name).await {
            Ok(view) => view,
            Err(_) => {
                self.metrics.proxy_refused("unknown");
                return page(
                    StatusCode::NOT_FOUND,
                    format!("there is no workspace {name} you may open here"),
                );
            }
        };
        if request.uri().path() != START_PATH || request.method() != Method::POST {
            return workspace_page::page(name, view.status, "");
        }
        let same_origin = request
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .is_some_and(|o| o.eq_ignore_ascii_case(origin));
        if !same_origin {
            return page(
                StatusCode::FORBIDDEN,
                "a workspace is started from its own page only",
            );
        }
        match self.backend.start(identity, name, None).await {
            Ok(_) => {
                tracing::info!(user = %identity.user, workspace = name, "workspace started from its host");
                redirect("/", None)
            }
            Err(error) => workspace_page::page(name, view.status, &error.public_message()),
        }
    }

    /// The browser sent to the backend for a ticket to `host`, back to the same address after.
    fn to_backend_for_a_ticket(&self, request: &Request<Incoming>, host: &str) -> Response<ResponseBody> {
        let config = self.backend.config();
        let oidc = config.oidc.as_ref().expect("a proxy domain needs oidc");
        let backend = oidc.redirect_url.trim_end_matches("/auth/callback");
        let scheme = if oidc.secure() { "https" } else { "http" };
        let port = request_port(request).map(|p| format!(":{p}")).unwrap_or_default();
        let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
        let back = format!("{scheme}://{host}{port}{path}");
        let to: String = form_urlencoded::byte_serialize(back.as_bytes()).collect();
        redirect(&format!("{backend}{WORKSPACE_PATH}?to={to}"), None)
    }

    /// A ticket traded for this host's pass, and back to the path it was for.
    fn take_ticket(
        &self,
        sign_in: &SignIn,
        request: &Request<Incoming>,
        host: &str,
        now: SystemTime,
    ) -> Response<ResponseBody> {
        let value = |key: &str| query_value(request.uri().query(), key);
        let ticket: Option<Ticket> = value("t").and_then(|t| sign_in.sessions.open(TICKET, &t));
        let now_seconds = unix_seconds(now);
        let Some(ticket) = ticket.filter(|t| t.pass.host == host && t.expires > now_seconds) else {
            self.metrics.proxy_refused("ticket");
            let message =
                "this sign-in link is not for this workspace, or has expired: open the workspace again";
            return page(StatusCode::FORBIDDEN, message);
        };
        {
            let mut spent = sign_in.spent.lock().expect("spent tickets");
            if spent.contains(&ticket.nonce, now_seconds) {
                self.metrics.proxy_refused("ticket");
                let message = "this sign-in link was used already: open the workspace again";
                return page(StatusCode::FORBIDDEN, message);
            }
            spent.insert(ticket.nonce.clone(), ticket.expires, now_seconds);
        }
        match sign_in.sessions.pass_cookie(&ticket.pass, now) {
            Ok(cookie) => redirect(&return_path(value("to")), Some(cookie)),
            Err(error) => page(StatusCode::FORBIDDEN, error),
        }
    }

    /// `request` passed to the pod, its answer passed back; an upgrade (a WebSocket) joined to the
    /// pod's once both sides switched.
    async fn forward(
        &self,
        mut request: Request<Incoming>,
        peer: SocketAddr,
        sign_in: &SignIn,
        to: Forwarded,
    ) -> Response<ResponseBody> {
        let upgrade = upgrade_asked(request.headers());
        // A tunnel (a WebSocket) outlives its connection's place under the port's cap: it holds a
        // stream slot of its user's and its source's instead, so no user holds more than
        // maxStreamsPerUser open, nor one client address more than maxStreamsPerSource.
        let slot = match upgrade {
            Some(_) => match self.streams.take(&to.slot_holder, to.source) {
                Ok(slot) => Some(slot),
                Err(full) => return tunnels_full(full, to.source),
            },
            None => None,
        };
        let client_side = upgrade.is_some().then(|| hyper::upgrade::on(&mut request));
        prepare_headers(request.headers_mut(), &sign_in.sessions, &to, peer.ip(), upgrade);
        let mut response = match self.upstreams.send(to.ip, to.port, request).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(%error, host = %to.host, "workspace unreachable");
                return page(StatusCode::BAD_GATEWAY, error);
            }
        };
        if response.status() == StatusCode::SWITCHING_PROTOCOLS
            && let Some(client_side) = client_side
        {
            let pod_side = hyper::upgrade::on(&mut response);
            tokio::spawn(async move {
                let (Ok(client), Ok(pod)) = tokio::join!(client_side, pod_side) else {
                    return;
                };
                let client = hyper_util::rt::TokioIo::new(client);
                let pod = hyper_util::rt::TokioIo::new(pod);
                tunnel(client, pod, TUNNEL_IDLE).await;
                drop(slot);
            });
        }
        let (mut parts, body) = response.into_parts();
        strip_answer_headers(
            &mut parts.headers,
            &sign_in.sessions,
            parts.status == StatusCode::SWITCHING_PROTOCOLS,
        );
        Response::from_parts(parts, Either::Right(body))
    }
}

/// The port the client named in its host, if any.
fn request_port(request: &Request<Incoming>) -> Option<u16> {
    let host = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            request
                .headers()
                .get(header::HOST)?
                .to_str()
                .ok()
                .map(str::to_owned)
        })?;
    host.rsplit_once(':')?.1.parse().ok()
}
