//! The page at `/`: plain HTML, CSS and JavaScript built into the binary, with nothing to fetch
//! from elsewhere. It calls the native API like any other client. Every answer carries
//! [`SECURITY_HEADERS`]: the page runs only its own script and may not be framed.

use hyper::{Method, StatusCode};

use super::answer::{Answer, Body};

const INDEX: &str = include_str!("../web/index.html");
const SCRIPT: &str = include_str!("../web/app.js");
const STYLE: &str = include_str!("../web/app.css");

/// Sent with every answer: a strict Content-Security-Policy (the page's own script and style
/// only, no frames around it: a page of another site can't overlay it to steal clicks), the same
/// for older browsers, and no guessing of content types.
pub(super) const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

/// The page's file at `path`, if it is one; only GET and HEAD read it.
pub(super) fn file(method: &Method, path: &str) -> Option<Answer> {
    let (content_type, text) = match path {
        "/" | "/index.html" => ("text/html; charset=utf-8", INDEX),
        "/app.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/app.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    if method != Method::GET && method != Method::HEAD {
        return Some(Answer::new(
            StatusCode::METHOD_NOT_ALLOWED,
            Body::Text(format!("{path} takes GET or HEAD, not {method}\n")),
        ));
    }
    Some(Answer::new(
        StatusCode::OK,
        Body::Static {
            content_type,
            bytes: text.as_bytes(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_answers_only_reads() {
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            let answer = file(&method, "/").expect("the page's path");
            assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        }
        assert_eq!(
            file(&Method::GET, "/app.js").map(|a| a.status),
            Some(StatusCode::OK)
        );
        assert_eq!(file(&Method::HEAD, "/").map(|a| a.status), Some(StatusCode::OK));
        assert!(file(&Method::GET, "/nothing").is_none());
    }

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
