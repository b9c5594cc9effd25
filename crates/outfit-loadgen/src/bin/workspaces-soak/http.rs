//! One request to the backend's native API, bounded in time, and how it ended.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    let answer = match tokio::time::timeout(HANG, exchange(port, method, path, token, body)).await {
        Err(_) => Answer::Hung,
        Ok(Err(error)) => Answer::Transport(format!("{error:#}")),
        Ok(Ok((status, text))) => match serde_json::from_str(&text) {
            Ok(json) => Answer::Status(status, json),
            Err(_) => Answer::NotJson(status, text),
        },
    };
    (answer, started.elapsed())
}

async fn exchange(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> Result<(u16, String)> {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: soak\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").context("no HTTP head")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// The payload of a chunked body.
fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("a chunk without its size line")?;
        let size = usize::from_str_radix(size.trim(), 16).context("a chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("a chunk shorter than its size")?);
        body = rest.get(size + 2..).context("a chunk without its line end")?;
    }
}
