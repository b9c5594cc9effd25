//! The page at `/`: plain HTML, CSS and JavaScript (ES modules, served as they are) built into
//! the binary, with nothing to fetch from elsewhere. It calls the native API like any other
//! client. Every answer carries the security headers (`answer.rs`): the page runs only its own
//! script and may not be framed.

use axum::{
    http::{Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};

use super::answer::text;

const HTML: &str = "text/html; charset=utf-8";
const SCRIPT: &str = "text/javascript; charset=utf-8";
const STYLE: &str = "text/css; charset=utf-8";

/// Every file the page has, by the path it is served at: the HTML, the style sheet and the
/// script's ES modules (app.js imports the others by these paths). `web/test/` and
/// `web/package.json` are node's, for the modules' unit tests, and not served.
const FILES: [(&str, &str, &str); 17] = [
    ("/index.html", HTML, include_str!("../web/index.html")),
    ("/app.css", STYLE, include_str!("../web/app.css")),
    ("/app.js", SCRIPT, include_str!("../web/app.js")),
    ("/api.js", SCRIPT, include_str!("../web/api.js")),
    ("/cards.js", SCRIPT, include_str!("../web/cards.js")),
    ("/dom.js", SCRIPT, include_str!("../web/dom.js")),
    ("/format.js", SCRIPT, include_str!("../web/format.js")),
    ("/launch.js", SCRIPT, include_str!("../web/launch.js")),
    ("/list.js", SCRIPT, include_str!("../web/list.js")),
    ("/progress.js", SCRIPT, include_str!("../web/progress.js")),
    ("/rows.js", SCRIPT, include_str!("../web/rows.js")),
    ("/session.js", SCRIPT, include_str!("../web/session.js")),
    ("/sharing.js", SCRIPT, include_str!("../web/sharing.js")),
    ("/sse.js", SCRIPT, include_str!("../web/sse.js")),
    ("/state.js", SCRIPT, include_str!("../web/state.js")),
    ("/table.js", SCRIPT, include_str!("../web/table.js")),
    ("/tokens.js", SCRIPT, include_str!("../web/tokens.js")),
];

/// The content type and content of the page's file at `path` (`/` is `/index.html`).
pub(super) fn served(path: &str) -> Option<(&'static str, &'static str)> {
    let wanted = if path == "/" { "/index.html" } else { path };
    FILES
        .iter()
        .find(|(file, ..)| *file == wanted)
        .map(|(_, content_type, content)| (*content_type, *content))
}

/// Every path the page's files are served at.
pub(super) fn paths() -> impl Iterator<Item = &'static str> {
    std::iter::once("/").chain(FILES.iter().map(|(path, ..)| *path))
}

/// The page's file at the path (routed only for [`paths`]).
pub(super) async fn file(uri: Uri) -> Response {
    match served(uri.path()) {
        Some((content_type, content)) => ([(header::CONTENT_TYPE, content_type)], content).into_response(),
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

    fn index_html() -> &'static str {
        FILES[0].2
    }

    fn content_type(path: &str) -> Option<&'static str> {
        served(path).map(|(content_type, _)| content_type)
    }

    /// A module missing from FILES would fail the page in the browser only: every `.js` beside
    /// app.js is served as a script, and what the modules import is served.
    #[test]
    fn every_module_of_the_page_is_served_as_a_script() {
        let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/web");
        let mut modules = 0;
        for entry in std::fs::read_dir(&web).expect("src/web") {
            let name = entry.expect("an entry").file_name().into_string().expect("UTF-8");
            if let Some(stem) = name.strip_suffix(".js") {
                modules += 1;
                assert_eq!(content_type(&format!("/{stem}.js")), Some(SCRIPT), "{name}");
            }
        }
        assert_eq!(
            modules,
            FILES.len() - 2,
            "FILES has a module that src/web has not"
        );
        for (path, _, text) in FILES {
            for import in text.split("from \"./").skip(1) {
                let module = &import[..import.find('"').expect("a closing quote")];
                assert!(
                    content_type(&format!("/{module}")).is_some(),
                    "{path} imports {module}"
                );
            }
        }
        assert_eq!(content_type("/"), Some(HTML));
        assert_eq!(content_type("/app.css"), Some(STYLE));
        assert!(index_html().contains(r#"<script type="module" src="app.js">"#));
    }

    #[test]
    fn the_modules_tests_are_not_served() {
        for path in ["/package.json", "/test/sse.test.js", "/test/", "/web/app.js"] {
            assert!(served(path).is_none() && !paths().any(|p| p == path), "{path}");
        }
    }

    #[test]
    fn the_page_may_not_be_framed_nor_run_other_scripts() {
        let policy = SECURITY_HEADERS[0].1;
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(policy.contains("script-src 'self'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert!(SECURITY_HEADERS.contains(&("x-frame-options", "DENY")));
        // The page has no inline script or style the policy would block.
        assert!(!index_html().contains("<script>") && !index_html().contains("style="));
    }
}
