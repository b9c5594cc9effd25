//! The page at `/`: plain HTML, CSS and JavaScript built into the binary, with nothing to fetch
//! from elsewhere. It calls the native API like any other client.

use hyper::StatusCode;

use super::answer::{Answer, Body};

const INDEX: &str = include_str!("../web/index.html");
const SCRIPT: &str = include_str!("../web/app.js");
const STYLE: &str = include_str!("../web/app.css");

/// The page's file at `path`, if it is one.
pub(super) fn file(path: &str) -> Option<Answer> {
    let (content_type, text) = match path {
        "/" | "/index.html" => ("text/html; charset=utf-8", INDEX),
        "/app.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/app.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    Some(Answer {
        status: StatusCode::OK,
        body: Body::Static {
            content_type,
            bytes: text.as_bytes(),
        },
    })
}
