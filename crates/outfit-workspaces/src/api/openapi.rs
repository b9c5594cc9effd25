//! The native API's OpenAPI document, `GET /api/v1/openapi.json`: generated from the types the
//! handlers answer and take (their `utoipa::ToSchema`, in `native.rs`, `error.rs` and the core's
//! `workspace/`), so a field renamed in code is renamed here too; the paths, their parameters and
//! the statuses and reasons each can answer are the table below. Built once, on first request.

use std::sync::LazyLock;

use axum::{
    http::header,
    response::{IntoResponse, Response},
};
use outfit_workspaces_core::workspace::{
    info::WorkspaceInfo, progress::Report, requests::Launch, sharing::Sharing,
};
use utoipa::{
    ToSchema,
    openapi::{
        Components, ContentBuilder, HttpMethod, Info, OpenApi, OpenApiBuilder, Paths, Ref, RefOr, Required,
        Response as Answer, ResponseBuilder, Schema, Server,
        path::{Operation, OperationBuilder, ParameterBuilder, ParameterIn},
        request_body::RequestBodyBuilder,
        schema::{AllOfBuilder, ObjectBuilder, Type},
        security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme},
    },
};

use super::{
    error::Refusal,
    native::{Catalogue, Deleting, Launched, Me, RemovingStorage, Starting, Stopping, Storage, Workspaces},
};

/// What the document says of the API as a whole.
const DESCRIPTION: &str = "The native API of `outfit workspaces`: per-user workspace pods with \
their storage, Services and Ingress. Every caller is authenticated: a Kubernetes bearer token \
(checked with a TokenReview), the X-Forwarded-User / X-Forwarded-Groups headers of an \
authenticating proxy, believed only from trustedProxyCidrs, or the session cookie of a sign-in with \
the site's OpenID provider (oidc; /auth/login begins it). A caller acts on their own workspaces \
only; members of adminGroups may list (`?all=true`), read and delete anyone's. Every error is an \
Error object, `{\"error\", \"reason\"}`: each answer below names the reasons its status comes with. \
Requests that change something (POST, PUT, DELETE) are refused from pages of other origins (403 \
CrossSite) unless allowedOrigins lists them, and a POST must be sent as application/json (415 \
UnsupportedMediaType). Workspace names in paths are DNS-1123 labels (400 otherwise). A path asked \
with a method it does not take is answered 405 MethodNotAllowed with Allow, a path that is none of \
these 404 NotFound. A 429 (the caller past requestsPerUserPerSecond, too many creates under way, or \
the caller's maxStreamsPerUser progress streams) and a 503 (not ready yet, the maxStreamsPerSource \
progress streams of the caller's client address: SourceStreamsFull, the port's maxStreams progress streams: StreamsFull, or every connection of \
the port busy: PortFull) carry Retry-After. This document is generated from the backend's own \
types.";

/// The document as served.
static DOCUMENT: LazyLock<String> =
    LazyLock::new(|| document().to_json().expect("the OpenAPI document serializes"));

/// `GET /api/v1/openapi.json`, answered without credentials.
pub(super) async fn serve() -> Response {
    let content_type = [(header::CONTENT_TYPE, "application/json")];
    (content_type, DOCUMENT.as_str()).into_response()
}

/// A refusal's statuses and the reasons each comes with.
type Refusals = &'static [(u16, &'static [&'static str])];

/// What a caller can be refused before any endpoint runs (`native::Caller`, and the accept loop's
/// `PortFull`): a header repeated, no or a bad credential, a proxy not trusted or a user not
/// mapped, the user past their pace, the backend not ready.
const CALLER: Refusals = &[
    (400, &["BadRequest"]),
    (401, &["Unauthenticated", "TokenTooLarge"]),
    (403, &["Forbidden"]),
    (429, &["TooManyRequests"]),
    (500, &["InternalError"]),
    (503, &["NotReady", "PortFull"]),
];

/// What a request that changes something can be refused besides: a page of another site.
const CHANGE: Refusals = &[(403, &["CrossSite"])];

/// What a POST can be refused besides: a body that is not JSON.
const POST: Refusals = &[(415, &["UnsupportedMediaType"])];

/// What a body can be refused: not JSON of the type, too large, too slow.
const BODY: Refusals = &[
    (400, &["BadRequest"]),
    (408, &["BadRequest"]),
    (413, &["BadRequest"]),
];

/// What a workspace named in the path can be refused: a name that is none, a workspace not the
/// caller's or not there, its cluster not answering or refusing.
const NAMED: Refusals = &[
    (400, &["BadRequest"]),
    (404, &["NotFound"]),
    (500, &["ClusterError"]),
    (503, &["ClusterUnreachable"]),
];

/// What asking for a progress stream can be refused: the caller's streams, their source's or the
/// port's at their cap.
const STREAM: Refusals = &[
    (429, &["TooManyStreams"]),
    (503, &["SourceStreamsFull", "StreamsFull"]),
];

/// What a launch or a start can be refused: everything making a pod can meet.
const MAKE: Refusals = &[
    (400, &["BadRequest", "UnknownCluster"]),
    (403, &["Forbidden", "LimitExceeded", "RefusedByCluster"]),
    (404, &["UnknownManifest", "UnknownSnapshot"]),
    (409, &["Conflict", "InUse", "SnapshotNotReady"]),
    (422, &["BadManifest", "RefusedByCluster"]),
    (429, &["TooManyCreates"]),
    (500, &["ClusterError"]),
    (502, &["ManifestUnavailable"]),
    (503, &["ClusterUnreachable"]),
];

/// One operation of the table: its method and path (under `/api/v1`), its id, what it does, its
/// query flags, request body, answers and refusals.
struct Endpoint {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    description: Option<&'static str>,
    flags: &'static [Flag],
    body: Option<fn() -> RefOr<Schema>>,
    answers: Vec<(u16, &'static str, Body)>,
    refusals: &'static [Refusals],
    /// Answered without credentials.
    open: bool,
}

/// A query flag: its name, whether it is a string (else a boolean) and what it does.
type Flag = (&'static str, bool, &'static str);

/// What an answer's body is.
enum Body {
    /// JSON of this schema.
    Json(fn() -> RefOr<Schema>),
    /// A progress stream (Server-Sent Events).
    Stream,
    /// None.
    Empty,
}

const FOLLOW_DELETE: Flag = (
    "follow",
    false,
    "Answer with the delete's progress stream (200, text/event-stream, as GET .../progress) \
     instead of 202: no window in which a fast delete could finish unseen.",
);
const FOLLOW_POD: Flag = (
    "follow",
    false,
    "Answer with the progress stream of its pod (200, text/event-stream, as GET .../progress) \
     instead of 202.",
);
const USER: Flag = ("user", true, "Another user's id (members of adminGroups only).");

/// The path `/workspaces/{name}`'s `name`.
const NAME: &str = "The workspace (pod) name.";

/// What a progress stream sends.
const STREAM_DESCRIPTION: &str = "One event `progress` (data: a Progress object) whenever the \
workspace's state changes, read from watched pods, storage claims and Events; comments \
(`: keep-alive`) every 15 s; then one final event named `ready`, `failed` or `deleted` (same data) \
and the stream ends. Follows a start until ready or failed, and a delete until deleted.";

/// A schema of the components, by reference.
fn of<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

/// Any JSON object (the document itself).
fn any_object() -> RefOr<Schema> {
    ObjectBuilder::new().into()
}

/// Every operation of the native API.
fn endpoints() -> Vec<Endpoint> {
    let stream = "With follow=true: its pod's progress stream";
    vec![
        Endpoint {
            method: HttpMethod::Get,
            path: "/openapi.json",
            id: "openapi",
            summary: "This description (OpenAPI 3.1), generated from the backend's types",
            description: None,
            flags: &[],
            body: None,
            answers: vec![(200, "OpenAPI 3.1 JSON", Body::Json(any_object))],
            refusals: &[],
            open: true,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/me",
            id: "me",
            summary: "Who the caller is, and the owner id their workspaces carry",
            description: None,
            flags: &[],
            body: None,
            answers: vec![(200, "The caller", Body::Json(of::<Me>))],
            refusals: &[CALLER],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/catalogue",
            id: "catalogue",
            summary: "The manifests the caller may launch, with the env fields each declares",
            description: None,
            flags: &[],
            body: None,
            answers: vec![(200, "The catalogue", Body::Json(of::<Catalogue>))],
            refusals: &[CALLER],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/workspaces",
            id: "listWorkspaces",
            summary: "The caller's workspaces (everyone's for an admin with all=true)",
            description: None,
            flags: &[(
                "all",
                false,
                "Every user's workspaces (admins only: 403 Forbidden otherwise).",
            )],
            body: None,
            answers: vec![(200, "The workspaces", Body::Json(of::<Workspaces>))],
            refusals: &[CALLER],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Post,
            path: "/workspaces",
            id: "launchWorkspace",
            summary: "Launch a catalogue entry; answers once the pod exists (follow its progress \
                      stream for the rest)",
            description: None,
            flags: &[],
            body: Some(of::<Launch>),
            answers: vec![(
                201,
                "Created; `warnings` lists settings that were not applied",
                Body::Json(of::<Launched>),
            )],
            refusals: &[CALLER, CHANGE, POST, BODY, MAKE],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/workspaces/{name}",
            id: "getWorkspace",
            summary: "One workspace",
            description: None,
            flags: &[],
            body: None,
            answers: vec![(200, "The workspace", Body::Json(of::<WorkspaceInfo>))],
            refusals: &[CALLER, NAMED],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Delete,
            path: "/workspaces/{name}",
            id: "deleteWorkspace",
            summary: "Delete a workspace (its Services, Ingress and NetworkPolicy go with it)",
            description: None,
            flags: &[FOLLOW_DELETE],
            body: None,
            answers: vec![
                (202, "Deletion requested", Body::Json(of::<Deleting>)),
                (
                    200,
                    "With follow=true: the delete's progress stream, ending with the event `deleted`",
                    Body::Stream,
                ),
            ],
            refusals: &[CALLER, CHANGE, NAMED, STREAM, &[(409, &["Conflict"])]],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/workspaces/{name}/progress",
            id: "followWorkspace",
            summary: "Live progress as Server-Sent Events",
            description: Some(STREAM_DESCRIPTION),
            flags: &[],
            body: None,
            answers: vec![(200, "The event stream", Body::Stream)],
            refusals: &[CALLER, NAMED, STREAM],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Post,
            path: "/workspaces/{name}/activity",
            id: "recordActivity",
            summary: "The user is active in this workspace: restarts its idle clock (recorded at \
                      most once a minute)",
            description: None,
            flags: &[],
            body: None,
            answers: vec![(204, "Recorded", Body::Empty)],
            refusals: &[CALLER, CHANGE, POST, NAMED],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Post,
            path: "/workspaces/{name}/stop",
            id: "stopWorkspace",
            summary: "Stop a workspace: its pod goes, its record, name, values and storage stay \
                      (409 NotStoppable for one launched through deic-dk's API)",
            description: None,
            flags: &[FOLLOW_POD],
            body: None,
            answers: vec![
                (202, "Stop requested", Body::Json(of::<Stopping>)),
                (200, stream, Body::Stream),
            ],
            refusals: &[
                CALLER,
                CHANGE,
                POST,
                NAMED,
                STREAM,
                &[(409, &["Conflict", "NotStoppable"])],
            ],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Post,
            path: "/workspaces/{name}/start",
            id: "startWorkspace",
            summary: "Start a stopped workspace: a pod of the same name, URL, values and cluster \
                      (403 LimitExceeded past a limit: it stays stopped)",
            description: None,
            flags: &[
                FOLLOW_POD,
                (
                    "snapshot",
                    true,
                    "Make its home from this snapshot of the owner's (GET /api/v1/storage lists \
                     them): the home as it is is saved first (snapshotClassName) and replaced; 409 \
                     InUse while another workspace uses it, 404 UnknownSnapshot for none of \
                     theirs, 409 SnapshotNotReady for one not ready.",
                ),
            ],
            body: None,
            answers: vec![
                (202, "Start requested", Body::Json(of::<Starting>)),
                (200, stream, Body::Stream),
            ],
            refusals: &[CALLER, CHANGE, POST, NAMED, STREAM, MAKE],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/workspaces/{name}/sharing",
            id: "getSharing",
            summary: "Who besides its owner and the admins may open a workspace through the \
                      workspace proxy (proxyDomain)",
            description: None,
            flags: &[],
            body: None,
            answers: vec![(200, "The workspace's sharing", Body::Json(of::<Sharing>))],
            refusals: &[CALLER, NAMED],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Put,
            path: "/workspaces/{name}/sharing",
            id: "shareWorkspace",
            summary: "Set who besides its owner and the admins may open a workspace through the \
                      workspace proxy: named users and groups, every signed-in user \
                      (authenticated) or anyone (public); {} takes every share back. Its owner or \
                      an admin only; workspaces of the native API only",
            description: None,
            flags: &[],
            body: Some(of::<Sharing>),
            answers: vec![(200, "The workspace's sharing", Body::Json(of::<Sharing>))],
            refusals: &[
                CALLER,
                CHANGE,
                BODY,
                NAMED,
                &[(403, &["Forbidden"]), (409, &["Conflict"])],
            ],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Get,
            path: "/storage",
            id: "listStorage",
            summary: "The caller's homes on every cluster (claims outfit made for them): \
                      strategy, class, size, phase, owning workspace; and their snapshots \
                      (snapshotClassName), newest first",
            description: None,
            flags: &[USER],
            body: None,
            answers: vec![(200, "The homes", Body::Json(of::<Storage>))],
            refusals: &[
                CALLER,
                &[(500, &["ClusterError"]), (503, &["ClusterUnreachable"])],
            ],
            open: false,
        },
        Endpoint {
            method: HttpMethod::Delete,
            path: "/storage",
            id: "removeStorage",
            summary: "Removes the caller's homes that outlive workspaces (per-user and nfs); \
                      refused (409 InUse) while the user has any workspace, stopped ones \
                      included; with snapshotClassName each is saved first, and kept (409 \
                      SnapshotNotReady) unless its snapshot turns ready within snapshotTimeout",
            description: None,
            flags: &[USER],
            body: None,
            answers: vec![(202, "Being deleted", Body::Json(of::<RemovingStorage>))],
            refusals: &[
                CALLER,
                CHANGE,
                &[
                    (409, &["InUse", "SnapshotNotReady"]),
                    (500, &["ClusterError"]),
                    (503, &["ClusterUnreachable"]),
                ],
            ],
            open: false,
        },
    ]
}

/// A refusal giving one of `reasons`: an Error whose reason is one of them.
fn refusal(reasons: &[&str]) -> Answer {
    let reason = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(reasons.iter().copied()));
    let schema = AllOfBuilder::new()
        .item(of::<Refusal<'_>>())
        .item(ObjectBuilder::new().property("reason", reason));
    let content = ContentBuilder::new().schema(Some(schema)).build();
    let description = format!("Refused: {}", reasons.join(", "));
    ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build()
}

/// `endpoint` as an operation of the document.
fn operation(endpoint: Endpoint) -> Operation {
    let mut operation = OperationBuilder::new()
        .operation_id(Some(endpoint.id))
        .summary(Some(endpoint.summary))
        .description(endpoint.description);
    if endpoint.path.contains("{name}") {
        let name = ParameterBuilder::new()
            .name("name")
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .description(Some(NAME));
        operation = operation.parameter(name);
    }
    for (flag, string, description) in endpoint.flags {
        let kind = if *string { Type::String } else { Type::Boolean };
        let flag = ParameterBuilder::new()
            .name(*flag)
            .parameter_in(ParameterIn::Query)
            .required(Required::False)
            .schema(Some(ObjectBuilder::new().schema_type(kind)))
            .description(Some(*description));
        operation = operation.parameter(flag);
    }
    if let Some(body) = endpoint.body {
        let content = ContentBuilder::new().schema(Some(body())).build();
        let body = RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content("application/json", content)
            .build();
        operation = operation.request_body(Some(body));
    }
    for (status, description, body) in endpoint.answers {
        let answer = ResponseBuilder::new().description(description);
        let answer = match body {
            Body::Json(schema) => answer.content(
                "application/json",
                ContentBuilder::new().schema(Some(schema())).build(),
            ),
            Body::Stream => {
                let text = ObjectBuilder::new().schema_type(Type::String);
                answer.content(
                    "text/event-stream",
                    ContentBuilder::new().schema(Some(text)).build(),
                )
            }
            Body::Empty => answer,
        };
        operation = operation.response(status.to_string(), answer.build());
    }
    // The reasons of each status, from every group that gives it, in order and once each.
    let mut statuses: Vec<(u16, Vec<&str>)> = Vec::new();
    for (status, reasons) in endpoint.refusals.iter().flat_map(|group| group.iter()) {
        let at = match statuses.iter().position(|(s, _)| s == status) {
            Some(at) => at,
            None => {
                statuses.push((*status, Vec::new()));
                statuses.len() - 1
            }
        };
        for reason in *reasons {
            if !statuses[at].1.contains(reason) {
                statuses[at].1.push(reason);
            }
        }
    }
    statuses.sort_by_key(|(status, _)| *status);
    for (status, reasons) in statuses {
        operation = operation.response(status.to_string(), refusal(&reasons));
    }
    if endpoint.open {
        operation = operation.securities(Some(Vec::<SecurityRequirement>::new()));
    }
    operation.build()
}

/// Every reason a refusal of the native API gives: those of the operations, and the 405's,
/// which answers a method no operation has.
fn every_reason() -> Vec<&'static str> {
    let mut reasons: Vec<&'static str> = vec![];
    let endpoints = endpoints();
    let groups = endpoints.iter().flat_map(|e| e.refusals.iter());
    for (_, given) in groups.flat_map(|group| group.iter()) {
        for reason in *given {
            if !reasons.contains(reason) {
                reasons.push(reason);
            }
        }
    }
    reasons.push("MethodNotAllowed");
    reasons
}

/// The document: the API's description, its paths from [`endpoints`], and the schemas of every
/// type they answer and take.
pub(super) fn document() -> OpenApi {
    let mut paths = Paths::new();
    for endpoint in endpoints() {
        let path = format!("/api/v1{}", endpoint.path);
        let method = endpoint.method.clone();
        paths.add_path_operation(path, vec![method], operation(endpoint));
    }
    let mut schemas = Vec::new();
    // Each answer's type, with every type it names.
    fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
    add::<Refusal<'_>>(&mut schemas);
    add::<Me>(&mut schemas);
    add::<Catalogue>(&mut schemas);
    add::<Workspaces>(&mut schemas);
    add::<Launch>(&mut schemas);
    add::<Launched>(&mut schemas);
    add::<Deleting>(&mut schemas);
    add::<Stopping>(&mut schemas);
    add::<Starting>(&mut schemas);
    add::<Report>(&mut schemas);
    add::<Sharing>(&mut schemas);
    add::<Storage>(&mut schemas);
    add::<RemovingStorage>(&mut schemas);
    let mut components = Components::builder()
        .schemas_from_iter(schemas)
        .security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token the cluster's API server accepts (service account, OIDC), \
                         checked with a TokenReview.",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            "proxy",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Forwarded-User",
                "Set by an authenticating proxy (oauth2-proxy) in trustedProxyCidrs, with \
                 X-Forwarded-Groups (comma-separated).",
            ))),
        )
        .security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "__Host-outfit-session",
                "The sealed session cookie of a sign-in with the site's OpenID provider (oidc), \
                 begun at /auth/login; named outfit-session when the backend is reached over \
                 plain HTTP.",
            ))),
        )
        .build();
    // The Error schema's reason: every reason any answer gives.
    if let Some(RefOr::T(Schema::Object(error))) = components.schemas.get_mut(&*Refusal::name())
        && let Some(RefOr::T(Schema::Object(reason))) = error.properties.get_mut("reason")
    {
        reason.enum_values = Some(every_reason().into_iter().map(Into::into).collect());
    }
    let info = Info::builder()
        .title("outfit workspaces")
        .version("v1")
        .description(Some(DESCRIPTION))
        .build();
    let security =
        ["bearer", "proxy", "session"].map(|scheme| SecurityRequirement::new(scheme, Vec::<String>::new()));
    OpenApiBuilder::new()
        .info(info)
        .servers(Some([Server::new("/")]))
        .security(Some(security))
        .paths(paths)
        .components(Some(components))
        .build()
}

#[cfg(test)]
mod tests;
