//! The native API under `/api/v1/` (described by `GET /api/v1/openapi.json`): the caller is
//! authenticated first (a Kubernetes token, or a trusted proxy's headers), then the route and
//! method are read, then the body, then the operation runs as that caller. Every error is
//! `{"error": "...", "reason": "..."}` with a status that says what kind it is.

use hyper::{Method, Request, StatusCode, body::Incoming};
use serde::Serialize;
use serde_json::json;

use super::{
    answer::{Answer, Body},
    connection::Api,
    reading::{SYNC_WAIT, canonical, cross_site_refusal, parse, read_body},
    sse,
    streams::{StreamSlot, StreamsFull},
};
use outfit_workspaces_core::workspace::{requests::Launch, sharing::Sharing};

use crate::{
    backend::RequestError,
    io::auth::{AuthError, Identity, Via},
};

/// The OpenAPI description of this API.
const OPENAPI: &str = include_str!("openapi.json");

/// The native endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    OpenApi,
    Me,
    Catalogue,
    List,
    Launch,
    Get(String),
    Delete(String),
    Stop(String),
    Start(String),
    Progress(String),
    Activity(String),
    Sharing(String),
    Share(String),
    Storage,
    RemoveStorage,
}

impl Endpoint {
    /// The endpoint of `method` on `path` (under `/api/v1`), or why there is none.
    fn of(method: &Method, path: &str) -> Result<Self, (StatusCode, String)> {
        let rest = path.trim_start_matches("/api/v1").trim_matches('/');
        let segments: Vec<&str> = rest.split('/').collect();
        let (endpoint, allowed): (Option<Self>, &[Method]) = match (segments.as_slice(), method) {
            (["openapi.json"], &Method::GET) => (Some(Self::OpenApi), &[]),
            (["me"], &Method::GET) => (Some(Self::Me), &[]),
            (["catalogue"], &Method::GET) => (Some(Self::Catalogue), &[]),
            (["workspaces"], &Method::GET) => (Some(Self::List), &[]),
            (["workspaces"], &Method::POST) => (Some(Self::Launch), &[]),
            (["workspaces", name], &Method::GET) => (Some(Self::Get((*name).to_owned())), &[]),
            (["workspaces", name], &Method::DELETE) => (Some(Self::Delete((*name).to_owned())), &[]),
            (["workspaces", name, "progress"], &Method::GET) => {
                (Some(Self::Progress((*name).to_owned())), &[])
            }
            (["workspaces", name, "activity"], &Method::POST) => {
                (Some(Self::Activity((*name).to_owned())), &[])
            }
            (["workspaces", name, "stop"], &Method::POST) => (Some(Self::Stop((*name).to_owned())), &[]),
            (["workspaces", name, "start"], &Method::POST) => (Some(Self::Start((*name).to_owned())), &[]),
            (["workspaces", name, "sharing"], &Method::GET) => (Some(Self::Sharing((*name).to_owned())), &[]),
            (["workspaces", name, "sharing"], &Method::PUT) => (Some(Self::Share((*name).to_owned())), &[]),
            (["storage"], &Method::GET) => (Some(Self::Storage), &[]),
            (["storage"], &Method::DELETE) => (Some(Self::RemoveStorage), &[]),
            (["storage"], _) => (None, &[Method::GET, Method::DELETE]),
            (["openapi.json" | "me" | "catalogue"], _) => (None, &[Method::GET]),
            (["workspaces"], _) => (None, &[Method::GET, Method::POST]),
            (["workspaces", _], _) => (None, &[Method::GET, Method::DELETE]),
            (["workspaces", _, "progress"], _) => (None, &[Method::GET]),
            (["workspaces", _, "activity" | "stop" | "start"], _) => (None, &[Method::POST]),
            (["workspaces", _, "sharing"], _) => (None, &[Method::GET, Method::PUT]),
            _ => {
                return Err((
                    StatusCode::NOT_FOUND,
                    format!("no endpoint {path}; see /api/v1/openapi.json"),
                ));
            }
        };
        endpoint.ok_or_else(|| {
            let allowed: Vec<&str> = allowed.iter().map(Method::as_str).collect();
            (
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{path} takes {}, not {method}", allowed.join(" or ")),
            )
        })
    }

    /// The endpoint's name, for metrics and logs.
    fn name(&self) -> &'static str {
        match self {
            Self::OpenApi => "v1_openapi",
            Self::Me => "v1_me",
            Self::Catalogue => "v1_catalogue",
            Self::List => "v1_list",
            Self::Launch => "v1_launch",
            Self::Get(_) => "v1_get",
            Self::Delete(_) => "v1_delete",
            Self::Stop(_) => "v1_stop",
            Self::Start(_) => "v1_start",
            Self::Progress(_) => "v1_progress",
            Self::Activity(_) => "v1_activity",
            Self::Sharing(_) => "v1_sharing",
            Self::Share(_) => "v1_share",
            Self::Storage => "v1_storage",
            Self::RemoveStorage => "v1_remove_storage",
        }
    }
}

/// A failure as the native API answers it.
fn failure(status: StatusCode, reason: &str, error: impl std::fmt::Display) -> Answer {
    Answer::json(status, json!({"error": error.to_string(), "reason": reason}))
}

fn ok(status: StatusCode, body: impl Serialize) -> Answer {
    Answer::json(status, serde_json::to_value(body).expect("answers serialize"))
}

/// The status and reason of a failed operation.
pub(super) fn request_failure(error: &RequestError) -> Answer {
    let (status, reason) = match error {
        RequestError::User(_)
        | RequestError::Name(_)
        | RequestError::BadAddress(_)
        | RequestError::BadSharing(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        RequestError::Fetch(_) => (StatusCode::BAD_GATEWAY, "ManifestUnavailable"),
        RequestError::Manifest(_) | RequestError::Annotation(_) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "BadManifest")
        }
        RequestError::NoSuchPod { .. } => (StatusCode::NOT_FOUND, "NotFound"),
        RequestError::UnknownManifest(_) => (StatusCode::NOT_FOUND, "UnknownManifest"),
        RequestError::NamesTaken { .. } | RequestError::AlreadyDeleting(_) | RequestError::Busy(_) => {
            (StatusCode::CONFLICT, "Conflict")
        }
        RequestError::NotStoppable(_) => (StatusCode::CONFLICT, "NotStoppable"),
        RequestError::InUse(_) => (StatusCode::CONFLICT, "InUse"),
        RequestError::UnknownSnapshot(_) => (StatusCode::NOT_FOUND, "UnknownSnapshot"),
        RequestError::SnapshotNotReady(_) => (StatusCode::CONFLICT, "SnapshotNotReady"),
        RequestError::TooManyCreates(_) => (StatusCode::TOO_MANY_REQUESTS, "TooManyCreates"),
        RequestError::Forbidden(_) => (StatusCode::FORBIDDEN, "Forbidden"),
        RequestError::Limit(_) => (StatusCode::FORBIDDEN, "LimitExceeded"),
        RequestError::Refused { reason, .. } => refusal_status(reason),
        RequestError::WrongCluster(_) => (StatusCode::BAD_REQUEST, "UnknownCluster"),
        RequestError::Unreachable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "ClusterUnreachable"),
        // The API server's verdict on what the workspace asked for (a quota passed, a policy's
        // refusal, an invalid object): the caller's to act on, with the API server's status.
        RequestError::Cluster(refused) if refused.is_forbidden() => {
            (StatusCode::FORBIDDEN, "RefusedByCluster")
        }
        RequestError::Cluster(refused) if refused.is_invalid() => {
            (StatusCode::UNPROCESSABLE_ENTITY, "RefusedByCluster")
        }
        RequestError::Storage(_) | RequestError::StorageRefused(_) | RequestError::Cluster(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "ClusterError")
        }
    };
    let message = match error {
        // The catalogue's manifest URL may be internal: the log names it, the caller is told why.
        RequestError::Fetch(fetch) => {
            tracing::warn!(error = %fetch, "catalogue manifest unavailable");
            format!(
                "the catalogue's manifest could not be fetched: {}",
                fetch.reason()
            )
        }
        other => other.public_message(),
    };
    failure(status, reason, message)
}

/// The status and reason of the controller's refusal of a start, by the reason it wrote
/// (`RequestError::condition_reason`): what the error it met answers when a request meets it.
fn refusal_status(reason: &str) -> (StatusCode, &'static str) {
    match reason {
        "UnknownEntry" => (StatusCode::NOT_FOUND, "UnknownManifest"),
        "LimitExceeded" => (StatusCode::FORBIDDEN, "LimitExceeded"),
        "WrongCluster" => (StatusCode::BAD_REQUEST, "UnknownCluster"),
        "InvalidOwner" => (StatusCode::BAD_REQUEST, "BadRequest"),
        "BadManifest" => (StatusCode::UNPROCESSABLE_ENTITY, "BadManifest"),
        "UnknownSnapshot" => (StatusCode::NOT_FOUND, "UnknownSnapshot"),
        "SnapshotNotReady" => (StatusCode::CONFLICT, "SnapshotNotReady"),
        "RefusedByCluster" => (StatusCode::FORBIDDEN, "RefusedByCluster"),
        "InvalidForCluster" => (StatusCode::UNPROCESSABLE_ENTITY, "RefusedByCluster"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "ClusterError"),
    }
}

/// The value of `key` in a query, if any: `user` (an admin's choice of whose storage),
/// `snapshot` (a start's home made from one).
fn query_value(query: &str, key: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, value)| value.into_owned())
}

/// What a request's query says.
struct Query {
    /// `all`: every user's (an admin's list).
    all: bool,
    /// `follow`: answer with the progress stream.
    follow: bool,
    /// `user`: whose storage.
    user: Option<String>,
    /// `snapshot`: a start's home made from this snapshot.
    snapshot: Option<String>,
}

/// The answer to a stream past a cap: the caller's (`maxStreamsPerUser`, 429: theirs to close)
/// or the port's (`maxStreams`, 503: others' streams, so try again later); both with `Retry-After`.
fn too_many_streams(full: StreamsFull) -> Answer {
    match full {
        StreamsFull::User(cap) => failure(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyStreams",
            format!("you have {cap} progress streams open (maxStreamsPerUser); close one or try again later"),
        ),
        StreamsFull::Port(cap) => failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "StreamsFull",
            format!(
                "the API port holds {cap} progress streams, its most (maxStreams); try again later, or ask without follow"
            ),
        ),
    }
}

/// Whether the query string sets the flag `name`: `name` or `name=true`, read with
/// `form_urlencoded` as deic-dk's API reads its query (so `%XX` escapes are decoded).
fn flag(query: &str, name: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .any(|(key, value)| key == name && (value.is_empty() || value == "true"))
}

/// Who called, and how they were known.
#[derive(Clone, Copy)]
struct Caller<'a> {
    identity: &'a Identity,
    via: Via,
}

impl Api {
    /// The answer to a caller refused; a 401 names where to sign in, when sign-in is configured.
    fn auth_failure(&self, error: &AuthError) -> Answer {
        let (status, reason) = match error {
            AuthError::Missing | AuthError::Refused(_) => (StatusCode::UNAUTHORIZED, "Unauthenticated"),
            AuthError::UntrustedProxy { .. } | AuthError::Unmappable { .. } => {
                (StatusCode::FORBIDDEN, "Forbidden")
            }
            AuthError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "NotReady"),
            AuthError::TokenTooLarge { .. } => (StatusCode::UNAUTHORIZED, "TokenTooLarge"),
            AuthError::RepeatedHeader(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        };
        let mut answer = failure(status, reason, error);
        if let (StatusCode::UNAUTHORIZED, Some(_), Body::Json(body)) =
            (status, self.auth.sign_in(), &mut answer.body)
        {
            body["signIn"] = json!(super::sign_in::LOGIN_PATH);
        }
        answer
    }
}

impl Api {
    /// Answers a request under `/api/v1/`.
    pub(super) async fn native(&self, request: Request<Incoming>) -> (&'static str, Answer) {
        let endpoint = match Endpoint::of(request.method(), request.uri().path()) {
            Ok(endpoint) => endpoint,
            Err((status, error)) => {
                let reason = if status == StatusCode::NOT_FOUND {
                    "NotFound"
                } else {
                    "MethodNotAllowed"
                };
                return ("v1_other", failure(status, reason, error));
            }
        };
        let name = endpoint.name();
        if endpoint == Endpoint::OpenApi {
            let answer = Answer::new(
                StatusCode::OK,
                Body::Static {
                    content_type: "application/json",
                    bytes: OPENAPI.as_bytes(),
                },
            );
            return (name, answer);
        }
        let config = self.backend.config();
        let refusal = cross_site_refusal(
            request.method(),
            request.headers(),
            &config.exposure.allowed_origins,
        );
        if let Some((status, error)) = refusal {
            let reason = if status == StatusCode::FORBIDDEN {
                "CrossSite"
            } else {
                "UnsupportedMediaType"
            };
            return (name, failure(status, reason, error));
        }
        let peer = canonical(self.peer.ip());
        let (identity, via) = match self.auth.authenticate(request.headers(), peer).await {
            Ok(known) => known,
            Err(error) => {
                tracing::debug!(%peer, %error, "caller refused");
                return (name, self.auth_failure(&error));
            }
        };
        // Before the first complete read an empty cache would answer "no such workspace".
        if tokio::time::timeout(SYNC_WAIT, self.backend.synced())
            .await
            .is_err()
        {
            let error = "the backend has not read the cluster yet; try again";
            return (name, failure(StatusCode::SERVICE_UNAVAILABLE, "NotReady", error));
        }
        let query = request.uri().query().unwrap_or_default();
        let query = Query {
            all: flag(query, "all"),
            follow: flag(query, "follow"),
            user: query_value(query, "user"),
            snapshot: query_value(query, "snapshot"),
        };
        let body = if matches!(endpoint, Endpoint::Launch | Endpoint::Share(_)) {
            match read_body(
                request.into_body(),
                config.max_body_bytes,
                config.exposure.body_read_timeout,
            )
            .await
            {
                Ok(body) => Some(body),
                Err((status, error)) => return (name, failure(status, "BadRequest", error)),
            }
        } else {
            None
        };
        let caller = Caller {
            identity: &identity,
            via,
        };
        let answer = match self.operate(endpoint, caller, query, body.as_deref()).await {
            Ok(answer) => answer,
            Err(error) => request_failure(&error),
        };
        (name, answer)
    }

    async fn operate(
        &self,
        endpoint: Endpoint,
        caller: Caller<'_>,
        query: Query,
        body: Option<&[u8]>,
    ) -> Result<Answer, RequestError> {
        let identity = caller.identity;
        let Query {
            all,
            follow,
            user,
            snapshot,
        } = query;
        let backend = &self.backend;
        // A stream's slot is taken before anything is done: past the cap, a stop or delete
        // asked with `follow` is not made either.
        let streams = matches!(endpoint, Endpoint::Progress(_))
            || (follow
                && matches!(
                    endpoint,
                    Endpoint::Delete(_) | Endpoint::Stop(_) | Endpoint::Start(_)
                ));
        let slot = if streams {
            match self.streams.take(identity.user.as_str()) {
                Ok(slot) => Some(slot),
                Err(full) => return Ok(too_many_streams(full)),
            }
        } else {
            None
        };
        Ok(match endpoint {
            Endpoint::OpenApi => unreachable!("answered before authentication"),
            Endpoint::Me => ok(
                StatusCode::OK,
                json!({"user": identity.user.as_str(), "username": identity.username,
                       "groups": identity.groups, "admin": identity.admin,
                       "via": caller.via.as_str(),
                       "proxy": backend.config().proxy_domain.is_some()}),
            ),
            Endpoint::Catalogue => ok(
                StatusCode::OK,
                json!({"items": backend.catalogue(identity).await, "clusters": backend.clusters()}),
            ),
            Endpoint::List => ok(
                StatusCode::OK,
                json!({"items": backend.workspaces(identity, all)?}),
            ),
            Endpoint::Sharing(name) => {
                // Seen only by whom the workspace is visible to.
                backend.workspace(identity, &name).await?;
                let (_, sharing) = backend.sharing(&name).unwrap_or_default();
                ok(StatusCode::OK, sharing)
            }
            Endpoint::Share(name) => {
                let sharing: Sharing = match parse(body.unwrap_or_default()) {
                    Ok(sharing) => sharing,
                    Err(error) => return Ok(failure(StatusCode::BAD_REQUEST, "BadRequest", error)),
                };
                ok(StatusCode::OK, backend.share(identity, &name, sharing).await?)
            }
            Endpoint::Launch => {
                let launch: Launch = match parse(body.unwrap_or_default()) {
                    Ok(launch) => launch,
                    Err(error) => return Ok(failure(StatusCode::BAD_REQUEST, "BadRequest", error)),
                };
                // Native workspaces' home server is the configured one (`testingHost`).
                let silo = backend.config().testing_host;
                let (workspace, warnings) = backend.launch(identity, &launch, silo).await?;
                self.metrics.created();
                let mut answer = serde_json::to_value(&workspace).expect("workspaces serialize");
                if !warnings.is_empty() {
                    answer["warnings"] = json!(warnings);
                }
                tracing::info!(user = %identity.user, workspace = workspace.name, manifest = launch.manifest, "launched");
                ok(StatusCode::CREATED, answer)
            }
            Endpoint::Get(name) => ok(StatusCode::OK, backend.workspace(identity, &name).await?),
            Endpoint::Delete(name) => {
                let uid = backend.remove(identity, &name).await?;
                if let Some(slot) = slot {
                    // The delete's own stream: no window in which the pod could go unseen.
                    let stream = sse::stream(backend.clone(), (name, uid), slot, self.shutdown.clone());
                    Answer::new(StatusCode::OK, Body::Events(stream))
                } else {
                    ok(StatusCode::ACCEPTED, json!({"name": name, "deleting": true}))
                }
            }
            Endpoint::Stop(name) => {
                let uid = backend.stop(identity, &name).await?;
                self.accepted(name, uid, slot, "stopping")
            }
            Endpoint::Start(name) => {
                let uid = backend.start(identity, &name, snapshot.as_deref()).await?;
                self.accepted(name, uid, slot, "starting")
            }
            Endpoint::Progress(name) => {
                let uid = backend.follow(identity, &name).await?;
                let slot = slot.expect("a progress stream takes a slot");
                let stream = sse::stream(backend.clone(), (name, uid), slot, self.shutdown.clone());
                Answer::new(StatusCode::OK, Body::Events(stream))
            }
            Endpoint::Storage => {
                let (homes, snapshots) = backend.homes(identity, user.as_deref()).await?;
                ok(StatusCode::OK, json!({"items": homes, "snapshots": snapshots}))
            }
            Endpoint::RemoveStorage => {
                let removed = backend.remove_homes(identity, user.as_deref()).await?;
                ok(StatusCode::ACCEPTED, json!({"deleting": removed}))
            }
            Endpoint::Activity(name) => {
                backend.activity(identity, &name).await?;
                Answer::new(StatusCode::NO_CONTENT, Body::Empty)
            }
        })
    }
}

impl Api {
    /// The answer to a stop or start of `name` (`doing`): 202, or when followed (a stream's
    /// `slot`), the progress of its pod `uid` (going, or starting) when it has one.
    fn accepted(&self, name: String, uid: Option<String>, slot: Option<StreamSlot>, doing: &str) -> Answer {
        match (uid, slot) {
            (Some(uid), Some(slot)) => Answer::new(
                StatusCode::OK,
                Body::Events(sse::stream(
                    self.backend.clone(),
                    (name, uid),
                    slot,
                    self.shutdown.clone(),
                )),
            ),
            _ => ok(StatusCode::ACCEPTED, json!({"name": name, doing: true})),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// A start's refusal, written by the controller to the status and read back by the request,
    /// answers what the error the controller met answers when a request meets it.
    #[test]
    fn a_refusal_read_back_answers_as_the_error_it_was() {
        let errors = [
            RequestError::UnknownManifest("web".into()),
            RequestError::WrongCluster("east".into()),
            RequestError::UnknownSnapshot("s".into()),
            RequestError::SnapshotNotReady("s".into()),
            RequestError::User(
                outfit_workspaces_core::model::user::UserId::parse("no spaces allowed").unwrap_err(),
            ),
            RequestError::StorageRefused("the home could not grow".into()),
        ];
        for error in errors {
            let message = error.public_message();
            let read_back = RequestError::refused(error.condition_reason(), &message);
            let (met, refused) = (request_failure(&error), request_failure(&read_back));
            assert_eq!(met.status, refused.status, "{error:?}");
            let (Body::Json(met), Body::Json(refused)) = (met.body, refused.body) else {
                panic!("JSON answers");
            };
            assert_eq!(met, refused, "{error:?}");
        }
    }

    #[test]
    fn paths_and_methods_pick_the_endpoint() {
        let of = |method: Method, path: &str| Endpoint::of(&method, path);
        assert_eq!(of(Method::GET, "/api/v1/workspaces"), Ok(Endpoint::List));
        assert_eq!(of(Method::POST, "/api/v1/workspaces/"), Ok(Endpoint::Launch));
        assert_eq!(
            of(Method::GET, "/api/v1/workspaces/ws-1"),
            Ok(Endpoint::Get("ws-1".into()))
        );
        assert_eq!(
            of(Method::DELETE, "/api/v1/workspaces/ws-1"),
            Ok(Endpoint::Delete("ws-1".into()))
        );
        assert_eq!(
            of(Method::GET, "/api/v1/workspaces/ws-1/progress"),
            Ok(Endpoint::Progress("ws-1".into()))
        );
        assert_eq!(
            of(Method::POST, "/api/v1/workspaces/ws-1/stop"),
            Ok(Endpoint::Stop("ws-1".into()))
        );
        assert_eq!(
            of(Method::POST, "/api/v1/workspaces/ws-1/start"),
            Ok(Endpoint::Start("ws-1".into()))
        );
        assert_eq!(
            of(Method::GET, "/api/v1/workspaces/ws-1/start").unwrap_err().0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        let (status, error) = of(Method::PUT, "/api/v1/workspaces/ws-1").unwrap_err();
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert!(error.contains("GET or DELETE"), "{error}");
        assert_eq!(
            of(Method::GET, "/api/v1/nothing").unwrap_err().0,
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn a_flag_is_set_by_its_name_alone_or_true() {
        for (query, set) in [
            ("all", true),
            ("all=true", true),
            ("follow&all", true),
            ("follow=true&all=true", true),
            ("al%6C=true", true),
            ("all=false", false),
            ("all=1", false),
            ("allx", false),
            ("xall=true", false),
            ("", false),
        ] {
            assert_eq!(flag(query, "all"), set, "{query:?}");
        }
    }

    #[test]
    fn the_api_server_s_refusals_keep_their_status_and_failures_are_500() {
        use crate::io::fake::api_error;
        let answer = |error| request_failure(&RequestError::Cluster(error));
        let reason = |answer: &Answer| match &answer.body {
            super::super::answer::Body::Json(body) => body["reason"].as_str().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        let quota = answer(api_error(
            403,
            "Forbidden",
            "creating PersistentVolumeClaim ws/home-alice",
        ));
        assert_eq!(quota.status, StatusCode::FORBIDDEN);
        assert_eq!(reason(&quota), "RefusedByCluster");
        let invalid = answer(api_error(422, "Invalid", "creating Pod ws/x"));
        assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(reason(&invalid), "RefusedByCluster");
        let failed = answer(api_error(500, "InternalError", "creating Pod ws/x"));
        assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(reason(&failed), "ClusterError");
    }

    #[test]
    fn the_openapi_description_is_json_and_names_every_path() {
        let spec: Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        assert_eq!(spec["openapi"].as_str().map(|v| &v[..2]), Some("3."));
        for path in [
            "/api/v1/me",
            "/api/v1/catalogue",
            "/api/v1/workspaces",
            "/api/v1/workspaces/{name}",
            "/api/v1/workspaces/{name}/progress",
            "/api/v1/workspaces/{name}/activity",
            "/api/v1/workspaces/{name}/stop",
            "/api/v1/workspaces/{name}/start",
            "/api/v1/workspaces/{name}/sharing",
        ] {
            assert!(spec["paths"].get(path).is_some(), "{path} missing");
        }
    }
}
