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
    native, openapi,
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

/// The native API's routes under `/api/v1`: each path, method, endpoint name and handler (two
/// routes of one path are one path's two methods). `/api/v1/openapi.json` documents each one;
/// its test holds the two together. One route a line, as a table reads.
#[rustfmt::skip]
fn native_routes() -> [(&'static str, Method, &'static str, MethodRouter<Api>); 15] {
    [
        ("/openapi.json",               Method::GET,    "v1_openapi",        get(openapi::serve)),
        ("/me",                         Method::GET,    "v1_me",             get(native::me)),
        ("/catalogue",                  Method::GET,    "v1_catalogue",      get(native::catalogue)),
        ("/workspaces",                 Method::GET,    "v1_list",           get(native::list)),
        ("/workspaces",                 Method::POST,   "v1_launch",         post(native::launch)),
        ("/workspaces/{name}",          Method::GET,    "v1_get",            get(native::get)),
        ("/workspaces/{name}",          Method::DELETE, "v1_delete",         delete(native::delete)),
        ("/workspaces/{name}/progress", Method::GET,    "v1_progress",       get(native::progress)),
        ("/workspaces/{name}/activity", Method::POST,   "v1_activity",       post(native::activity)),
        ("/workspaces/{name}/stop",     Method::POST,   "v1_stop",           post(native::stop)),
        ("/workspaces/{name}/start",    Method::POST,   "v1_start",          post(native::start)),
        ("/workspaces/{name}/sharing",  Method::GET,    "v1_sharing",        get(native::sharing)),
        ("/workspaces/{name}/sharing",  Method::PUT,    "v1_share",          put(native::share)),
        ("/storage",                    Method::GET,    "v1_storage",        get(native::storage)),
        ("/storage",                    Method::DELETE, "v1_remove_storage", delete(native::remove_storage)),
    ]
}

/// The backend's router, over `api`.
pub(super) fn router(api: Api) -> Router {
    let native = native_routes()
        .into_iter()
        .fold(Router::new(), |native, (path, _, name, handler)| {
            native.route(path, named(name, handler))
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `/api/v1/openapi.json` documents every route of the native API, and no other.
    #[test]
    fn the_openapi_document_lists_every_native_route() {
        let document = openapi::document().to_json().unwrap();
        let document: serde_json::Value = serde_json::from_str(&document).unwrap();
        let mut documented: Vec<(String, String)> = document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                let methods = item.as_object().unwrap().keys();
                methods.map(|m| (m.to_ascii_uppercase(), path.clone()))
            })
            .collect();
        let mut routed: Vec<(String, String)> = native_routes()
            .into_iter()
            .map(|(path, method, _, _)| (method.to_string(), format!("/api/v1{path}")))
            .collect();
        documented.sort();
        routed.sort();
        assert_eq!(documented, routed);
    }
}
