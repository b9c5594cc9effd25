//! One request to the backend's native API, bounded in time, and how it ended.

use std::time::{Duration, Instant};

use outfit_test_support::http::{Call, HttpError, loopback};
use serde_json::Value;

/// A request that takes longer than this is a hang, whatever the cluster is doing: the backend's
/// own calls to the API server are bounded well below it.
pub(crate) const HANG: Duration = Duration::from_secs(60);

/// How a request ended.
#[derive(Debug)]
pub(crate) enum Answer {
    /// An HTTP answer with its status and JSON body.
    Status(u16, Value),
    /// An HTTP answer whose body is not JSON (a violation: every answer of the API is).
    NotJson(u16, String),
    /// No answer within [`HANG`].
    Hung,
    /// The connection failed (the backend is not listening: it crashed).
    Transport(String),
}

/// Sends `method path` with `token` and an optional JSON `body` on a new connection.
pub(crate) async fn call(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> (Answer, Duration) {
    let started = Instant::now();
    let authorization = format!("Bearer {token}");
    let headers = [("authorization", authorization.as_str())];
    let mut request = Call::new(method, path).headers(&headers);
    if let Some(body) = body {
        request = request.json(body);
    }
    let answer = match request.send(loopback(port), HANG).await {
        Err(HttpError::Timeout { .. }) => Answer::Hung,
        Err(error) => Answer::Transport(error.to_string()),
        Ok(answer) => match answer.json() {
            Ok(json) => Answer::Status(answer.status, json),
            Err(_) => Answer::NotJson(answer.status, answer.text()),
        },
    };
    (answer, started.elapsed())
}
