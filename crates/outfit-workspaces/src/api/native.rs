//! The native API under `/api/v1/` (described by `GET /api/v1/openapi.json`), one handler per
//! endpoint: the caller is authenticated first (a Kubernetes token, a trusted proxy's headers or
//! a sign-in's session: the [`Caller`] extractor), then the path's name and the query are read,
//! then the body, then the operation runs as that caller. Every error is a [`Failure`],
//! `{"error": "...", "reason": "..."}` with a status that says what kind it is.

use axum::{
    Extension,
    extract::{FromRequest, FromRequestParts, OriginalUri, Path, Request, State},
    http::{Method, StatusCode, request::Parts},
    response::{IntoResponse, Response},
};
use serde::{Serialize, de::DeserializeOwned};
use utoipa::ToSchema;

use super::{
    answer::{empty, json},
    error::Failure,
    extract::{SYNC_WAIT, canonical, cross_site_refusal, parse, read_body},
    source::Source,
    sse,
    state::{Api, Connection},
    streams::{StreamSlot, StreamsFull},
};
use outfit_workspaces_core::workspace::{
    home::Home,
    info::{ClusterState, WorkspaceInfo},
    requests::Launch,
    sharing::Sharing,
    snapshot::SnapshotView,
};

use crate::{
    backend::RequestError,
    io::{
        auth::{AuthError, Identity, Via},
        catalogue::Item,
    },
};

impl From<RequestError> for Failure {
    fn from(error: RequestError) -> Self {
        Self::of(&error)
    }
}

/// What a native endpoint answers: its own answer, or a refusal.
type Answer = Result<Response, Failure>;

/// Who called, how they were known, and from where: a request from a page of another site is
/// refused first, then the caller is authenticated and takes one of their requests
/// (`requestsPerUserPerSecond`), then the backend must have read the cluster once (before that an
/// empty cache would answer "no such workspace").
pub(super) struct Caller {
    identity: Identity,
    via: Via,
    /// The client's source, whose share of the progress streams the caller's take.
    source: Source,
}

impl FromRequestParts<Api> for Caller {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, Failure> {
        let config = api.backend.config();
        let allowed = &config.exposure.allowed_origins;
        if let Some((status, error)) = cross_site_refusal(&parts.method, &parts.headers, allowed) {
            let reason = if status == StatusCode::FORBIDDEN {
                "CrossSite"
            } else {
                "UnsupportedMediaType"
            };
            return Err(Failure::new(status, reason, error));
        }
        let Some(connection) = parts.extensions.get::<Connection>() else {
            let error = "the request came on no connection the backend knows";
            return Err(Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                error,
            ));
        };
        let peer = canonical(connection.peer.ip());
        let (identity, via) = match api.auth.authenticate(&parts.headers, peer).await {
            Ok(known) => known,
            Err(error) => {
                tracing::debug!(%peer, %error, "caller refused");
                return Err(auth_failure(api, &error));
            }
        };
        let user = identity.user.as_str();
        if let Err(wait) = api.rates.take(user, std::time::Instant::now()) {
            tracing::debug!(user, %peer, "past the user's pace");
            let exposure = &config.exposure;
            let error = format!(
                "you sent more than {} requests a second (requestsPerUserPerSecond, after a burst of requestBurstPerUser {}); wait as Retry-After says",
                exposure.requests_per_user_per_second, exposure.request_burst_per_user
            );
            let mut failure = Failure::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", error);
            failure.retry_after = Some(wait);
            return Err(failure);
        }
        if tokio::time::timeout(SYNC_WAIT, api.backend.synced())
            .await
            .is_err()
        {
            let error = "the backend has not read the cluster yet; try again";
            return Err(Failure::new(StatusCode::SERVICE_UNAVAILABLE, "NotReady", error));
        }
        let proxies = &config.client_address_from_cidrs;
        let source = Source::of_request(connection.peer.ip(), &parts.headers, proxies);
        Ok(Self {
            identity,
            via,
            source,
        })
    }
}

/// The answer to a caller refused; a 401 names where to sign in, when sign-in is configured.
fn auth_failure(api: &Api, error: &AuthError) -> Failure {
    let (status, reason) = match error {
        AuthError::Missing | AuthError::Refused(_) => (StatusCode::UNAUTHORIZED, "Unauthenticated"),
        AuthError::UntrustedProxy { .. } | AuthError::Unmappable { .. } => {
            (StatusCode::FORBIDDEN, "Forbidden")
        }
        AuthError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "NotReady"),
        AuthError::TokenTooLarge { .. } => (StatusCode::UNAUTHORIZED, "TokenTooLarge"),
        AuthError::RepeatedHeader(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
    };
    let mut failure = Failure::new(status, reason, error);
    if status == StatusCode::UNAUTHORIZED && api.auth.sign_in().is_some() {
        failure.sign_in = Some(super::sign_in::LOGIN_PATH);
    }
    failure
}

/// The workspace a path names (`/workspaces/{name}/...`).
pub(super) struct Named(String);

impl<S: Send + Sync> FromRequestParts<S> for Named {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(name)) => Ok(Self(name)),
            Err(error) => Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                error.body_text(),
            )),
        }
    }
}

/// What a request's query says.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Flags {
    /// `all`: every user's (an admin's list).
    all: bool,
    /// `follow`: answer with the progress stream.
    follow: bool,
    /// `user`: whose storage.
    user: Option<String>,
    /// `snapshot`: a start's home made from this snapshot.
    snapshot: Option<String>,
}

impl Flags {
    /// The flags of a query, read with `form_urlencoded` as deic-dk's API reads its query (so
    /// `%XX` escapes are decoded): a flag is set by its name alone or `name=true`.
    fn of(query: &str) -> Self {
        let mut flags = Self::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let set = value.is_empty() || value == "true";
            match key.as_ref() {
                "all" => flags.all |= set,
                "follow" => flags.follow |= set,
                "user" if flags.user.is_none() => flags.user = Some(value.into_owned()),
                "snapshot" if flags.snapshot.is_none() => flags.snapshot = Some(value.into_owned()),
                _ => {}
            }
        }
        flags
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Flags {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(parts.uri.query().unwrap_or_default()))
    }
}

/// A request's body as JSON of `T`: at most `maxBodyBytes`, all of it within `bodyReadTimeout`.
pub(super) struct Body<T>(T);

impl<T: DeserializeOwned> FromRequest<Api> for Body<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, api: &Api) -> Result<Self, Failure> {
        let config = api.backend.config();
        let limit = config.max_body_bytes;
        let deadline = config.exposure.body_read_timeout;
        let bytes = read_body(request.into_body(), limit, deadline)
            .await
            .map_err(|(status, error)| Failure::new(status, "BadRequest", error))?;
        parse(&bytes)
            .map(Self)
            .map_err(|error| Failure::new(StatusCode::BAD_REQUEST, "BadRequest", error))
    }
}

/// The answer to a stream of `caller` past a cap: the caller's (`maxStreamsPerUser`, 429: theirs
/// to close), their source's (`maxStreamsPerSource`, 503: maybe others' streams from the same
/// address) or the port's (`maxStreams`, 503: others' streams, so try again later); each with
/// `Retry-After`.
fn too_many_streams(caller: &Caller, full: StreamsFull) -> Failure {
    match full {
        StreamsFull::User(cap) => Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyStreams",
            format!("you have {cap} progress streams open (maxStreamsPerUser); close one or try again later"),
        ),
        StreamsFull::Source(cap) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "SourceStreamsFull",
            format!(
                "{} holds {cap} progress streams, the most one client address may (maxStreamsPerSource); try again later, or ask without follow",
                caller.source
            ),
        ),
        StreamsFull::Port(cap) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "StreamsFull",
            format!(
                "the API port holds {cap} progress streams, its most (maxStreams); try again later, or ask without follow"
            ),
        ),
    }
}

/// A stream slot of the caller's when `follow` asks for one, taken before anything is done: past
/// the cap, a stop, start or delete asked with `follow` is not made either.
fn slot(api: &Api, caller: &Caller, follow: bool) -> Result<Option<StreamSlot>, Failure> {
    if !follow {
        return Ok(None);
    }
    take_slot(api, caller).map(Some)
}

/// A stream slot of the caller's, from their source.
fn take_slot(api: &Api, caller: &Caller) -> Result<StreamSlot, Failure> {
    let user = caller.identity.user.as_str();
    api.streams
        .take(user, caller.source)
        .map_err(|full| too_many_streams(caller, full))
}

/// No endpoint at the path.
pub(super) async fn no_endpoint(OriginalUri(uri): OriginalUri) -> Failure {
    let path = uri.path();
    Failure::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no endpoint {path}; see /api/v1/openapi.json"),
    )
}

/// A method the path does not take; `allowed`, the ones it does.
pub(super) fn not_allowed(path: &str, method: &Method, allowed: &[&str]) -> Response {
    let error = format!("{path} takes {}, not {method}", allowed.join(" or "));
    Failure::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", error).into_response()
}

// What the endpoints answer, each a type of its own so that `/api/v1/openapi.json`, generated
// from them (`openapi.rs`), cannot drift from the answers.

/// Who the caller is (`GET /me`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Me {
    /// The owner id of the caller's workspaces (service accounts: `name@namespace.serviceaccount`;
    /// others: the user name, lower-cased).
    pub(super) user: String,
    /// The user name as authenticated.
    pub(super) username: String,
    /// The groups as authenticated.
    pub(super) groups: Vec<String>,
    /// Whether the caller is in one of `adminGroups`.
    pub(super) admin: bool,
    /// How the caller was known: a bearer token (TokenReview), an authenticating proxy's
    /// headers, or the session of a sign-in with the site's OpenID provider.
    pub(super) via: Via,
    /// Whether the backend serves workspaces' own hosts (`proxyDomain`): sharing applies then.
    pub(super) proxy: bool,
}

/// The manifests the caller may launch, and the clusters (`GET /catalogue`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Catalogue {
    /// The catalogue's entries the caller may launch, with the env fields each declares.
    pub(super) items: Vec<Item>,
    /// Every cluster a launch may name, the default first.
    pub(super) clusters: Vec<ClusterState>,
}

/// The caller's workspaces (`GET /workspaces`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Workspaces {
    /// The workspaces, the caller's (every user's with `all`).
    pub(super) items: Vec<WorkspaceInfo>,
}

/// A workspace launched (`POST /workspaces`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Launched {
    /// The workspace.
    #[serde(flatten)]
    pub(super) workspace: WorkspaceInfo,
    /// The settings that were not applied, when some were not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) warnings: Vec<String>,
}

/// A delete asked for (`DELETE /workspaces/{name}`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Deleting {
    /// The workspace.
    pub(super) name: String,
    /// Always `true`.
    pub(super) deleting: bool,
}

/// A stop asked for (`POST /workspaces/{name}/stop`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Stopping {
    /// The workspace.
    pub(super) name: String,
    /// Always `true`.
    pub(super) stopping: bool,
}

/// A start asked for (`POST /workspaces/{name}/start`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Starting {
    /// The workspace.
    pub(super) name: String,
    /// Always `true`.
    pub(super) starting: bool,
}

/// The caller's homes and snapshots (`GET /storage`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Storage {
    /// The homes on every cluster (claims outfit made for them).
    pub(super) items: Vec<Home>,
    /// Their snapshots, newest first.
    pub(super) snapshots: Vec<SnapshotView>,
}

/// The homes being removed (`DELETE /storage`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RemovingStorage {
    /// The claims being deleted.
    pub(super) deleting: Vec<String>,
}

pub(super) async fn me(State(api): State<Api>, caller: Caller) -> Response {
    let Caller { identity, via, .. } = caller;
    let me = Me {
        user: identity.user.as_str().to_owned(),
        username: identity.username,
        groups: identity.groups,
        admin: identity.admin,
        via,
        proxy: api.backend.config().proxy_domain.is_some(),
    };
    json(StatusCode::OK, &me)
}

pub(super) async fn catalogue(State(api): State<Api>, caller: Caller) -> Response {
    let backend = &api.backend;
    let items = backend.catalogue(&caller.identity).await;
    let clusters = backend.clusters();
    json(StatusCode::OK, &Catalogue { items, clusters })
}

pub(super) async fn list(State(api): State<Api>, caller: Caller, flags: Flags) -> Answer {
    let items = api.backend.workspaces(&caller.identity, flags.all)?;
    Ok(json(StatusCode::OK, &Workspaces { items }))
}

pub(super) async fn launch(State(api): State<Api>, caller: Caller, Body(launch): Body<Launch>) -> Answer {
    let identity = &caller.identity;
    // Native workspaces' home server is the configured one (`testingHost`).
    let silo = api.backend.config().testing_host;
    let (workspace, warnings) = api.backend.launch(identity, &launch, silo).await?;
    api.metrics.created();
    tracing::info!(user = %identity.user, workspace = workspace.name, manifest = launch.manifest, "launched");
    Ok(json(StatusCode::CREATED, &Launched { workspace, warnings }))
}

pub(super) async fn get(State(api): State<Api>, caller: Caller, Named(name): Named) -> Answer {
    let workspace = api.backend.workspace(&caller.identity, &name).await?;
    Ok(json(StatusCode::OK, &workspace))
}

pub(super) async fn delete(
    State(api): State<Api>,
    Extension(connection): Extension<Connection>,
    caller: Caller,
    Named(name): Named,
    flags: Flags,
) -> Answer {
    let slot = slot(&api, &caller, flags.follow)?;
    let uid = api.backend.remove(&caller.identity, &name).await?;
    Ok(match slot {
        // The delete's own stream: no window in which the pod could go unseen.
        Some(slot) => sse::stream(api.backend.clone(), (name, uid), slot, connection.closing),
        None => json(StatusCode::ACCEPTED, &Deleting { name, deleting: true }),
    })
}

pub(super) async fn stop(
    State(api): State<Api>,
    Extension(connection): Extension<Connection>,
    caller: Caller,
    Named(name): Named,
    flags: Flags,
) -> Answer {
    let slot = slot(&api, &caller, flags.follow)?;
    let uid = api.backend.stop(&caller.identity, &name).await?;
    let stopping = Stopping {
        name: name.clone(),
        stopping: true,
    };
    Ok(accepted(&api, &connection, name, uid, slot, &stopping))
}

pub(super) async fn start(
    State(api): State<Api>,
    Extension(connection): Extension<Connection>,
    caller: Caller,
    Named(name): Named,
    flags: Flags,
) -> Answer {
    let slot = slot(&api, &caller, flags.follow)?;
    let snapshot = flags.snapshot.as_deref();
    let uid = api.backend.start(&caller.identity, &name, snapshot).await?;
    let starting = Starting {
        name: name.clone(),
        starting: true,
    };
    Ok(accepted(&api, &connection, name, uid, slot, &starting))
}

/// The answer to a stop or start of `name`: 202 with `doing`, or when followed (a stream's
/// `slot`), the progress of its pod `uid` (going, or starting) when it has one.
fn accepted(
    api: &Api,
    connection: &Connection,
    name: String,
    uid: Option<String>,
    slot: Option<StreamSlot>,
    doing: &impl Serialize,
) -> Response {
    match (uid, slot) {
        (Some(uid), Some(slot)) => {
            sse::stream(api.backend.clone(), (name, uid), slot, connection.closing.clone())
        }
        _ => json(StatusCode::ACCEPTED, doing),
    }
}

pub(super) async fn progress(
    State(api): State<Api>,
    Extension(connection): Extension<Connection>,
    caller: Caller,
    Named(name): Named,
) -> Answer {
    let slot = take_slot(&api, &caller)?;
    let uid = api.backend.follow(&caller.identity, &name).await?;
    Ok(sse::stream(
        api.backend.clone(),
        (name, uid),
        slot,
        connection.closing,
    ))
}

pub(super) async fn activity(State(api): State<Api>, caller: Caller, Named(name): Named) -> Answer {
    api.backend.activity(&caller.identity, &name).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

pub(super) async fn sharing(State(api): State<Api>, caller: Caller, Named(name): Named) -> Answer {
    // Seen only by whom the workspace is visible to.
    api.backend.workspace(&caller.identity, &name).await?;
    let (_, sharing) = api.backend.sharing(&name).unwrap_or_default();
    Ok(json(StatusCode::OK, &sharing))
}

pub(super) async fn share(
    State(api): State<Api>,
    caller: Caller,
    Named(name): Named,
    Body(sharing): Body<Sharing>,
) -> Answer {
    let shared = api.backend.share(&caller.identity, &name, sharing).await?;
    Ok(json(StatusCode::OK, &shared))
}

pub(super) async fn storage(State(api): State<Api>, caller: Caller, flags: Flags) -> Answer {
    let user = flags.user.as_deref();
    let (homes, snapshots) = api.backend.homes(&caller.identity, user).await?;
    let storage = Storage {
        items: homes,
        snapshots,
    };
    Ok(json(StatusCode::OK, &storage))
}

pub(super) async fn remove_storage(State(api): State<Api>, caller: Caller, flags: Flags) -> Answer {
    let user = flags.user.as_deref();
    let removed = api.backend.remove_homes(&caller.identity, user).await?;
    Ok(json(StatusCode::ACCEPTED, &RemovingStorage { deleting: removed }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(Flags::of(query).all, set, "{query:?}");
        }
        let flags = Flags::of("user=bob&snapshot=s%201&user=eve");
        assert_eq!(flags.user.as_deref(), Some("bob"), "the first user counts");
        assert_eq!(flags.snapshot.as_deref(), Some("s 1"));
    }
}
