//! The page at `/`: plain HTML, CSS and JavaScript built into the binary, with nothing to fetch
//! from elsewhere. It calls the native API like any other client. Every answer carries the
//! security headers (`answer.rs`): the page runs only its own script and may not be framed.

use axum::{
    http::{Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};

use super::answer::text;

const INDEX: &str = include_str!("../web/index.html");
const SCRIPT: &str = include_str!("../web/app.js");
const STYLE: &str = include_str!("../web/app.css");

/// The page's files: path, content type, content.
pub(super) const FILES: [(&str, &str, &str); 4] = [
    ("/", "text/html; charset=utf-8", INDEX),
    ("/index.html", "text/html; charset=utf-8", INDEX),
    ("/app.js", "text/javascript; charset=utf-8", SCRIPT),
    ("/app.css", "text/css; charset=utf-8", STYLE),
];

/// The page's file at the path (routed only for the paths of [`FILES`]).
pub(super) async fn file(uri: Uri) -> Response {
    match FILES.iter().find(|(path, _, _)| *path == uri.path()) {
        Some((_, content_type, content)) => {
            ([(header::CONTENT_TYPE, *content_type)], *content).into_response()
        }
        None => text(StatusCode::NOT_FOUND, format!("no {} here\n", uri.path())),
    }
}

/// A method the page's files do not take (they are read with GET and HEAD only).
pub(super) fn not_allowed(path: &str, method: &Method, allowed: &[&str]) -> Response {
    let message = format!("{path} takes {}, not {method}\n", allowed.join(" or "));
    text(StatusCode::METHOD_NOT_ALLOWED, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::answer::SECURITY_HEADERS;

    #[test]
    fn the_page_may_not_be_framed_nor_run_other_scripts() {
        let policy = SECURITY_HEADERS[0].1;
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(policy.contains("script-src 'self'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert!(SECURITY_HEADERS.contains(&("x-frame-options", "DENY")));
        // The page has no inline script or style the policy would block.
        assert!(!INDEX.contains("<script>") && !INDEX.contains("style="));
    }
}
