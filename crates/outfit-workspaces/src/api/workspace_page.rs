//! The page a workspace's host shows while the workspace does not run (issue 42): stopped, with a
//! button that starts it; starting or stopping, reloading itself every two seconds until the
//! workspace answers. Plain HTML with its own style, no script: a form posts to the host itself.

use axum::body::Body;
use http_body_util::Either;
use hyper::{
    Response, StatusCode,
    header::{self, HeaderValue},
};
use outfit_workspaces_core::workspace::progress::Status;

use super::answer::ResponseBody;

/// Where the page's button posts.
pub(super) const START_PATH: &str = "/.outfit/start";

/// Only this page's own style and its form to this host; never framed.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Text for HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page for the workspace `name` in `status`, with `message` (why a start was refused, or
/// the workspace's own).
pub(super) fn page(name: &str, status: Status, message: &str) -> Response<ResponseBody> {
    let name = escaped(name);
    let (title, refresh, action) = match status {
        Status::Stopped => (
            format!("{name} is stopped"),
            "",
            format!(
                "<form method=\"post\" action=\"{START_PATH}\"><button type=\"submit\">Start {name}</button></form>"
            ),
        ),
        Status::Failed | Status::Deleting | Status::Deleted => (format!("{name} is gone"), "", String::new()),
        _ => (
            format!("{name} is starting"),
            "<meta http-equiv=\"refresh\" content=\"2\">",
            "<p>This page reloads itself until it answers.</p>".to_owned(),
        ),
    };
    let message = match message {
        "" => String::new(),
        text => format!("<p class=\"message\">{}</p>", escaped(text)),
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}<title>{title}</title>\
         <style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:15vh auto;padding:0 1em;color:#1f2328}}\
         button{{font:inherit;padding:.5em 1.2em;border-radius:6px;border:0;background:#0b57d0;color:#fff;cursor:pointer}}\
         .message{{color:#b42318}}</style></head>\
         <body><h1>{title}</h1>{message}{action}</body></html>\n"
    );
    let mut response = Response::new(Either::Left(Body::from(html)));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::RETRY_AFTER, HeaderValue::from(2));
    response
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn text(response: Response<ResponseBody>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_stopped_workspace_offers_its_start_and_a_starting_one_reloads() {
        let stopped = text(page("web-alice", Status::Stopped, "")).await;
        assert!(
            stopped.contains("action=\"/.outfit/start\"") && !stopped.contains("refresh"),
            "{stopped}"
        );
        let starting = text(page("web-alice", Status::Creating, "")).await;
        assert!(
            starting.contains("http-equiv=\"refresh\"") && !starting.contains("<form"),
            "{starting}"
        );
        let hostile = text(page("web", Status::Stopped, "<script>alert(1)</script>")).await;
        assert!(
            hostile.contains("&lt;script&gt;") && !hostile.contains("<script>"),
            "{hostile}"
        );
    }
}
