//! Every route of the backend's own HTTP, in one place (the workspaces' hosts, which the proxy
//! serves, are told apart before routing): the page, the native API under `/api/v1`, sign-in
//! under `/auth/`, and deic-dk's API, which answers every other path behind its guard. Each route
//! names its endpoint for the metrics; a method a path does not take is answered in its API's
//! words; request ids and tracing are tower layers over all of it. A body's cap and deadline are
//! its extractor's (`extract::read_body`): tower-http's body timeout restarts at every frame,
//! which a client sending a byte now and then passes, and its limit would answer in no API's words.

use axum::{
    Extension, Router,
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::{self, Next},
    response::Response,
    routing::{MethodRouter, any, delete, get, post, put},
};
use tower::ServiceBuilder;
use tower_http::{ServiceBuilderExt, request_id::MakeRequestUuid, trace::TraceLayer};

use super::{
    compat::{self, Route},
    native,
    sign_in::{self, CALLBACK_PATH, LOGIN_PATH, LOGOUT_PATH, WORKSPACE_PATH},
    state::{Api, Connection},
    web,
};

/// The endpoint an answer is from, for the metrics: set on the answer by its route.
#[derive(Debug, Clone, Copy)]
pub(super) struct Endpoint(pub(super) &'static str);

/// Which API a path is of: each answers a method it does not take, and counts what no route
/// names, its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Page,
    Native,
    SignIn,
    Compat,
}

impl Family {
    pub(super) fn of(path: &str) -> Self {
        if path == "/api/v1" || path.starts_with("/api/v1/") {
            Self::Native
        } else if path.starts_with("/auth/") {
            Self::SignIn
        } else if web::served(path).is_some() {
            Self::Page
        } else {
            Self::Compat
        }
    }

    /// The endpoint of an answer no route named (a method not taken, a refusal before routing).
    pub(super) fn endpoint(self, path: &str) -> &'static str {
        match self {
            Self::Page => "page",
            Self::Native => "v1_other",
            Self::SignIn => "auth_other",
            Self::Compat => Route::of(path).map_or("other", Route::name),
        }
    }
}

/// `methods` (one method's handler), its answers counted as `name`'s.
fn named(name: &'static str, methods: MethodRouter<Api>) -> MethodRouter<Api> {
    methods.route_layer(middleware::map_response(
        move |mut response: Response| async move {
            response.extensions_mut().insert(Endpoint(name));
            response
        },
    ))
}

/// The backend's router, over `api`.
pub(super) fn router(api: Api) -> Router {
    let native = Router::new()
        .route("/openapi.json", named("v1_openapi", get(native::openapi)))
        .route("/me", named("v1_me", get(native::me)))
        .route("/catalogue", named("v1_catalogue", get(native::catalogue)))
        .route(
            "/workspaces",
            named("v1_list", get(native::list)).merge(named("v1_launch", post(native::launch))),
        )
        .route(
            "/workspaces/{name}",
            named("v1_get", get(native::get)).merge(named("v1_delete", delete(native::delete))),
        )
        .route(
            "/workspaces/{name}/progress",
            named("v1_progress", get(native::progress)),
        )
        .route(
            "/workspaces/{name}/activity",
            named("v1_activity", post(native::activity)),
        )
        .route("/workspaces/{name}/stop", named("v1_stop", post(native::stop)))
        .route("/workspaces/{name}/start", named("v1_start", post(native::start)))
        .route(
            "/workspaces/{name}/sharing",
            named("v1_sharing", get(native::sharing)).merge(named("v1_share", put(native::share))),
        )
        .route(
            "/storage",
            named("v1_storage", get(native::storage))
                .merge(named("v1_remove_storage", delete(native::remove_storage))),
        )
        .fallback(native::no_endpoint);
    let sign_in = Router::new()
        .route(LOGIN_PATH, named("auth_login", get(sign_in::login)))
        .route(CALLBACK_PATH, named("auth_callback", get(sign_in::callback)))
        .route(LOGOUT_PATH, named("auth_logout", post(sign_in::logout)))
        .route(WORKSPACE_PATH, named("auth_workspace", get(sign_in::workspace)))
        .route("/auth/{*rest}", any(sign_in::no_endpoint));
    let page = web::paths().fold(Router::new(), |page, path| {
        page.route(path, named("page", get(web::file)))
    });
    let compat = Route::ALL
        .into_iter()
        .fold(Router::new(), |compat, route| {
            let answer =
                move |State(api): State<Api>,
                      Extension(connection): Extension<Connection>,
                      request: Request| { compat::answer(api, connection, route, request) };
            let methods = if route.method() == Method::GET {
                get(answer)
            } else {
                post(answer)
            };
            compat.route(route.path(), named(route.name(), methods))
        })
        .fallback(compat::no_endpoint)
        .layer(middleware::from_fn_with_state(api.clone(), compat::guard));
    Router::new()
        .nest("/api/v1", native)
        .merge(sign_in)
        .merge(page)
        .merge(compat)
        .layer(middleware::from_fn(method_not_allowed))
        .layer(
            ServiceBuilder::new()
                .set_x_request_id(MakeRequestUuid)
                .layer(TraceLayer::new_for_http())
                .propagate_x_request_id(),
        )
        .with_state(api)
}

/// A method a path does not take, answered in its API's words with the methods it does (from
/// the router's `Allow`).
async fn method_not_allowed(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED
        || response.headers().contains_key(header::CONTENT_TYPE)
    {
        return response;
    }
    let family = Family::of(&path);
    let allow = response.headers().get(header::ALLOW).cloned();
    let allowed: Vec<&str> = allow
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        // HEAD is GET's, said for the page's files only, as before.
        .filter(|m| !m.is_empty() && (family == Family::Page || *m != Method::HEAD.as_str()))
        .collect();
    let mut answer = match family {
        Family::Page => web::not_allowed(&path, &method, &allowed),
        Family::Native => native::not_allowed(&path, &method, &allowed),
        Family::SignIn => sign_in::not_allowed(&path, &method, &allowed),
        Family::Compat => compat::not_allowed(Route::of(&path), &method),
    };
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
}
