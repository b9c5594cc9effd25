//! deic-dk's HTTP API (§1.2 of the reference) over the [`Backend`]: who may call is checked
//! first (source network, then the optional bearer token), then the route and method, then the
//! body (capped, JSON), then the operation. Every answer is JSON with the endpoint's compatible
//! fields; a failure adds `error`, saying what was wrong.

use std::net::IpAddr;

use axum::{
    Extension,
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::Response,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    answer::{json, text},
    extract::{SYNC_WAIT, canonical, constant_time_eq, parse, query_value, read_body},
    state::{Api, Connection},
};
use outfit_workspaces_core::workspace::requests::CreateRequest;

use crate::backend::RequestError;

/// The endpoints, each with the method it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /get_pods`
    GetPods,
    /// `POST /create_pod`
    CreatePod,
    /// `POST /watch_create_pod`
    WatchCreatePod,
    /// `POST /delete_pod`
    DeletePod,
    /// `POST /watch_delete_pod`
    WatchDeletePod,
    /// `POST /delete_all_user`
    DeleteAllUser,
    /// `GET /get_podip_owner?ip=`
    GetPodipOwner,
}

impl Route {
    /// Every route, in deic-dk's order.
    pub(super) const ALL: [Self; 7] = [
        Self::GetPods,
        Self::CreatePod,
        Self::WatchCreatePod,
        Self::DeletePod,
        Self::WatchDeletePod,
        Self::DeleteAllUser,
        Self::GetPodipOwner,
    ];

    /// The route of `path`.
    pub fn of(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|route| route.path() == path)
    }

    /// Its path.
    pub(super) fn path(self) -> &'static str {
        match self {
            Self::GetPods => "/get_pods",
            Self::CreatePod => "/create_pod",
            Self::WatchCreatePod => "/watch_create_pod",
            Self::DeletePod => "/delete_pod",
            Self::WatchDeletePod => "/watch_delete_pod",
            Self::DeleteAllUser => "/delete_all_user",
            Self::GetPodipOwner => "/get_podip_owner",
        }
    }

    /// The endpoint's name, for metrics and logs.
    pub fn name(self) -> &'static str {
        &self.path()[1..]
    }

    /// The method it takes.
    pub(super) fn method(self) -> Method {
        if self == Self::GetPodipOwner {
            Method::GET
        } else {
            Method::POST
        }
    }

    /// The compatible answer of a failure, before `error` is added.
    pub(super) fn failure_body(self) -> Value {
        match self {
            Self::GetPods | Self::GetPodipOwner => json!({}),
            Self::CreatePod => json!({"pod_name": ""}),
            Self::WatchCreatePod => json!({"ready": false}),
            Self::DeletePod => json!({"requested": false}),
            Self::WatchDeletePod => json!({"deleted": true}),
            Self::DeleteAllUser => json!({"deleted": false}),
        }
    }
}

/// A failure of `route`: its compatible answer with `error` added.
fn failure(route: Option<Route>, status: StatusCode, error: impl std::fmt::Display) -> Response {
    let mut body = route.map_or_else(|| json!({}), Route::failure_body);
    body["error"] = Value::String(error.to_string());
    json(status, &body)
}

#[derive(Deserialize)]
struct UserRequest {
    user_id: String,
}

#[derive(Deserialize)]
struct PodRequest {
    user_id: String,
    pod_name: String,
}

/// Who may call, checked before the route is looked up: the source network, then the optional
/// bearer token (a layer over every path of deic-dk's API, its unknown ones too).
pub(super) async fn guard(
    State(api): State<Api>,
    Extension(connection): Extension<Connection>,
    request: Request,
    next: Next,
) -> Response {
    let config = api.backend.config();
    let peer = canonical(connection.peer.ip());
    if !config.allowed_source_cidrs.iter().any(|c| c.contains(peer)) {
        let error = format!("{peer} is not in allowedSourceCidrs");
        return failure(None, StatusCode::FORBIDDEN, error);
    }
    if let Some(token) = &config.bearer_token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            let error = "missing or wrong bearer token";
            return failure(None, StatusCode::UNAUTHORIZED, error);
        }
    }
    next.run(request).await
}

/// No endpoint at the path.
pub(super) async fn no_endpoint(request: Request) -> Response {
    let error = format!("no endpoint {}", request.uri().path());
    failure(None, StatusCode::NOT_FOUND, error)
}

/// A method `route` does not take.
pub(super) fn not_allowed(route: Option<Route>, method: &Method) -> Response {
    let Some(route) = route else {
        return failure(
            None,
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not taken here"),
        );
    };
    let error = format!("{} takes {}, not {method}", route.name(), route.method());
    failure(Some(route), StatusCode::METHOD_NOT_ALLOWED, error)
}

/// Answers a request to `route`, once the guard let its caller in.
pub(super) async fn answer(api: Api, connection: Connection, route: Route, request: Request) -> Response {
    // Before the first complete read an empty cache would answer "no such pod".
    if tokio::time::timeout(SYNC_WAIT, api.backend.synced())
        .await
        .is_err()
    {
        let error = "the backend has not read the cluster yet; try again";
        return failure(Some(route), StatusCode::SERVICE_UNAVAILABLE, error);
    }
    if route == Route::GetPodipOwner {
        return podip_owner(&api, request.uri().query()).await;
    }
    let silo_ip = silo_ip(&api, &connection, &request);
    let config = api.backend.config();
    let limit = config.max_body_bytes;
    let body = match read_body(request.into_body(), limit, config.exposure.body_read_timeout).await {
        Ok(body) => body,
        Err((status, error)) => return failure(Some(route), status, error),
    };
    match operate(&api, route, &body, silo_ip).await {
        Ok(answer) => answer,
        Err(error) => failure(Some(route), StatusCode::BAD_REQUEST, error),
    }
}

/// Runs the operation of `route` on a JSON `body`.
async fn operate(api: &Api, route: Route, body: &[u8], silo_ip: IpAddr) -> Result<Response, String> {
    let backend = &api.backend;
    let ok = |body: Value| Ok(json(StatusCode::OK, &body));
    match route {
        Route::GetPods => {
            let request: UserRequest = parse(body)?;
            // An empty list is `[]` (deic-dk sends `null`).
            ok(json!(backend.get_pods(&request.user_id).map_err(text_of)?))
        }
        Route::CreatePod => {
            let request: CreateRequest = parse(body)?;
            match backend.create_pod(&request, silo_ip).await {
                Ok((pod_name, warnings)) => {
                    api.metrics.created();
                    let mut answer = json!({"pod_name": pod_name});
                    if !warnings.is_empty() {
                        answer["warnings"] = json!(warnings);
                    }
                    ok(answer)
                }
                Err(error @ RequestError::TooManyCreates(_)) => Ok(create_refused(&error)),
                Err(error) => {
                    let phase = error.phase().map(|p| p.as_str()).unwrap_or("request");
                    tracing::warn!(user = request.user_id, url = request.yaml_url, phase, %error, "create refused");
                    Err(format!("{phase}: {}", error.public_message()))
                }
            }
        }
        Route::WatchCreatePod => {
            let request: PodRequest = parse(body)?;
            let outcome = backend
                .watch_create(&request.user_id, &request.pod_name)
                .await
                .map_err(text_of)?;
            let mut answer = json!({"ready": outcome.ready});
            if let Some(reason) = outcome.reason {
                answer["reason"] = Value::String(reason);
            }
            ok(answer)
        }
        Route::DeletePod => {
            let request: PodRequest = parse(body)?;
            backend
                .delete_pod(&request.user_id, &request.pod_name)
                .await
                .map_err(text_of)?;
            ok(json!({"requested": true}))
        }
        Route::WatchDeletePod => {
            let request: PodRequest = parse(body)?;
            let deleted = backend
                .watch_delete(&request.user_id, &request.pod_name)
                .await
                .map_err(text_of)?;
            ok(json!({"deleted": deleted}))
        }
        Route::DeleteAllUser => {
            let request: UserRequest = parse(body)?;
            let deleted = backend.delete_all_user(&request.user_id).await.map_err(text_of)?;
            ok(json!({"deleted": deleted}))
        }
        Route::GetPodipOwner => Err("get_podip_owner takes no body".to_owned()),
    }
}

/// `get_podip_owner` answers text: the owner, or nothing when no pod has the address.
async fn podip_owner(api: &Api, query: Option<&str>) -> Response {
    let ip = query_value(query, "ip");
    let Some(ip) = ip.as_deref().filter(|ip| !ip.is_empty()) else {
        return text(StatusCode::BAD_REQUEST, "missing query parameter ip");
    };
    match api.backend.podip_owner(ip).await {
        Ok(owner) => text(StatusCode::OK, owner.unwrap_or_default()),
        Err(error) => text(StatusCode::BAD_REQUEST, error.to_string()),
    }
}

/// The silo a request is from: the first `X-Forwarded-For` address, else the peer; loopback
/// stands for `testingHost` (deic-dk's rule).
fn silo_ip(api: &Api, connection: &Connection, request: &Request) -> IpAddr {
    let forwarded = request
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    let ip = canonical(forwarded.unwrap_or(connection.peer.ip()));
    if ip.is_loopback() {
        api.backend.config().testing_host
    } else {
        ip
    }
}

/// `create_pod`'s answer when too many creates are under way: not the request's fault, so 429
/// (which the encoder gives a Retry-After), not deic-dk's 400.
pub(super) fn create_refused(error: &RequestError) -> Response {
    failure(
        Some(Route::CreatePod),
        StatusCode::TOO_MANY_REQUESTS,
        error.public_message(),
    )
}

fn text_of(error: RequestError) -> String {
    error.public_message()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_deic_dks() {
        for (path, name) in [
            ("/get_pods", "get_pods"),
            ("/create_pod", "create_pod"),
            ("/watch_create_pod", "watch_create_pod"),
            ("/delete_pod", "delete_pod"),
            ("/watch_delete_pod", "watch_delete_pod"),
            ("/delete_all_user", "delete_all_user"),
            ("/get_podip_owner", "get_podip_owner"),
        ] {
            assert_eq!(Route::of(path).map(Route::name), Some(name));
        }
        assert_eq!(Route::of("/clean_all_unused"), None);
        assert_eq!(Route::GetPodipOwner.method(), Method::GET);
        assert_eq!(Route::CreatePod.method(), Method::POST);
    }

    #[tokio::test]
    async fn failures_keep_the_compatible_field_and_add_an_error() {
        let cases = [
            (Route::CreatePod, json!({"pod_name": "", "error": "x"})),
            (Route::WatchCreatePod, json!({"ready": false, "error": "x"})),
            (Route::DeletePod, json!({"requested": false, "error": "x"})),
            // No leak: a failed watch_delete_pod still says deleted.
            (Route::WatchDeletePod, json!({"deleted": true, "error": "x"})),
            (Route::DeleteAllUser, json!({"deleted": false, "error": "x"})),
            (Route::GetPods, json!({"error": "x"})),
        ];
        for (route, expected) in cases {
            let response = failure(Some(route), StatusCode::BAD_REQUEST, "x");
            let bytes = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(body, expected, "{route:?}");
        }
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let ip = |query| query_value(Some(query), "ip");
        assert_eq!(ip("ip=fe80%3A%3A1").as_deref(), Some("fe80::1"));
        assert_eq!(ip("ip=10.244.1.5").as_deref(), Some("10.244.1.5"));
        // A malformed escape is kept as written, never an error or a panic.
        assert_eq!(ip("ip=bad%zz%").as_deref(), Some("bad%zz%"));
        assert_eq!(ip("ip=%zz").as_deref(), Some("%zz"));
        // `%2B` is a plus; a bare `+` is a space, as in any form-encoded query.
        assert_eq!(ip("ip=a%2Bb").as_deref(), Some("a+b"));
        assert_eq!(ip("ip=a+b").as_deref(), Some("a b"));
        // The first `ip` counts; other keys, and keys that merely start with `ip`, don't.
        assert_eq!(ip("x=1&ip=10.0.0.1&ip=10.0.0.2").as_deref(), Some("10.0.0.1"));
        assert_eq!(ip("ipx=10.0.0.9&ip=10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(ip("ip=").as_deref(), Some(""));
        assert_eq!(ip("x=1"), None);
        assert_eq!(ip(""), None);
    }

    #[test]
    fn mapped_addresses_are_read_as_ipv4() {
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(canonical(mapped), "127.0.0.1".parse::<IpAddr>().unwrap());
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
