//! The HTTP side of the backend. A request for a workspace's host (with `proxyDomain`) goes to
//! the workspace proxy ([`proxy`]); every other goes through the router ([`routes`]): the page
//! ([`web`]), sign-in with the site's OpenID provider ([`sign_in`]: `/auth/...`), the native API
//! ([`native`]: `/api/v1/...`, callers authenticated one by one) or deic-dk's API ([`compat`]:
//! everything else, callers trusted by network and a shared token). [`Served`] is the API on one
//! connection, as the accept loop calls it: it tells the two apart, gives the request its
//! connection, and counts the answer.

mod answer;
mod compat;
mod error;
mod extract;
mod native;
mod openapi;
mod proxy;
mod proxy_headers;
mod rate;
mod routes;
mod sign_in;
mod source;
mod sse;
mod state;
mod streams;
mod web;
mod workspace_page;

use std::{future::Future, net::SocketAddr};

use axum::{Router, body::Body};
use hyper::{Request, Response, body::Incoming, header};
use outfit_workspaces_core::workspace::route::{HostRoute, route_of};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower_http::normalize_path::NormalizePath;

pub use self::{
    answer::ResponseBody,
    compat::Route,
    rate::UserRates,
    state::Api,
    streams::{StreamCaps, StreamSlots},
};
use self::{
    answer::own,
    routes::{Endpoint, Family},
    state::Connection,
};

/// The API as served on one connection: the shared [`Api`], its router, and the connection.
#[derive(Clone)]
pub struct Served {
    api: Api,
    router: NormalizePath<Router>,
    connection: Connection,
}

impl Api {
    /// The router of this API, made once and shared by every connection ([`Api::served`]).
    pub fn router(&self) -> NormalizePath<Router> {
        // `/api/v1/workspaces/` is `/api/v1/workspaces`, as clients write either.
        NormalizePath::trim_trailing_slash(routes::router(self.clone()))
    }

    /// The API on a connection from `peer`, answered by `router`; its progress streams end at
    /// `closing`.
    pub fn served(
        &self,
        router: NormalizePath<Router>,
        peer: SocketAddr,
        closing: CancellationToken,
    ) -> Served {
        Served {
            api: self.clone(),
            router,
            connection: Connection { peer, closing },
        }
    }

    /// The workspace's host (lower-case, without its port) and route `request` is for, when the
    /// backend serves workspaces' hosts (`proxyDomain`) and it names one.
    fn workspace_host(&self, request: &Request<Incoming>) -> Option<(String, HostRoute)> {
        let domain = self.backend.config().proxy_domain.clone()?;
        let host = request
            .uri()
            .authority()
            .map(|a| a.as_str())
            .or_else(|| request.headers().get(header::HOST)?.to_str().ok())?;
        let route = route_of(host, &domain)?;
        let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
        Some((name.trim_end_matches('.').to_ascii_lowercase(), route))
    }
}

impl Served {
    /// The router's answer to `request`, and its endpoint's name.
    async fn routed(&self, mut request: Request<Incoming>) -> (&'static str, Response<ResponseBody>) {
        let path = request.uri().path().to_owned();
        request.extensions_mut().insert(self.connection.clone());
        let response = match self.router.clone().oneshot(request.map(Body::new)).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let endpoint = response
            .extensions()
            .get::<Endpoint>()
            .map_or_else(|| Family::of(&path).endpoint(&path), |named| named.0);
        (endpoint, own(response))
    }
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served")
            .field("peer", &self.connection.peer)
            .finish_non_exhaustive()
    }
}

impl outfit_http::accept::Handler for Served {
    type Body = ResponseBody;

    fn call(&self, request: Request<Incoming>) -> impl Future<Output = Response<ResponseBody>> + Send {
        let this = self.clone();
        async move {
            let started = std::time::Instant::now();
            let (endpoint, response) = match this.api.workspace_host(&request) {
                Some((host, route)) => {
                    let peer = this.connection.peer;
                    this.api.proxy(request, peer, host, route).await
                }
                None => this.routed(request).await,
            };
            let status = response.status();
            this.api.metrics.request(endpoint, status, started.elapsed());
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::{
        http::{HeaderMap, StatusCode},
        response::IntoResponse,
    };

    use super::*;
    use crate::api::answer::finish;
    use crate::backend::RequestError;

    #[test]
    fn too_many_creates_is_a_429_with_retry_after_on_both_apis() {
        let error = RequestError::TooManyCreates(256);
        assert!(error.to_string().contains("maxCreatesInFlight"), "{error}");
        let native = error::Failure::of(&error).into_response();
        let compat = compat::create_refused(&error);
        for answer in [native, compat] {
            let (mut parts, _) = answer.into_parts();
            assert_eq!(parts.status, StatusCode::TOO_MANY_REQUESTS);
            finish(parts.status, &mut parts.headers);
            assert_eq!(parts.headers[header::RETRY_AFTER], "1");
        }
        // Other answers tell no one to come back.
        let mut plain = HeaderMap::new();
        finish(StatusCode::OK, &mut plain);
        assert!(plain.get(header::RETRY_AFTER).is_none());
    }
}
