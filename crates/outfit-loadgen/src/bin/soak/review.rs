//! One AdmissionReview over HTTPS, as the API server sends it, and its answer checked and
//! applied with an RFC 6902 applier of the soak's own.

use std::{
    net::SocketAddr,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::shared::Soak;

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub(crate) type Sender = http1::SendRequest<Full<Bytes>>;

/// A new connection, and the leaf certificate the server presented.
pub(crate) async fn connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
) -> Result<(Sender, CertificateDer<'static>)> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = TlsConnector::from(config.clone())
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .cloned()
        .context("no peer certificate")?;
    let (sender, connection) = http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok((sender, leaf))
}

/// Sends one review and returns the decoded `response`, checked for HTTP 200, the uid and
/// `allowed: true`.
pub(crate) async fn review(sender: &mut Sender, body: Bytes, uid: &str) -> Result<Value> {
    sender.ready().await?;
    let request = Request::post("/mutate?timeout=10s")
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(body))?;
    let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .context("no answer within 10 s")??;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    ensure!(status == 200, "HTTP {status}: {}", String::from_utf8_lossy(&body));
    let mut review: Value = serde_json::from_slice(&body).context("answer is not JSON")?;
    let response = review["response"].take();
    ensure!(
        response["uid"] == uid,
        "uid {} answered for {uid}",
        response["uid"]
    );
    ensure!(response["allowed"] == true, "not allowed: {response}");
    Ok(response)
}

/// The object after the answer's patch (`None` when there is none).
pub(crate) fn patched(response: &Value, object: &Value) -> Result<Option<Value>> {
    let Some(patch) = response["patch"].as_str() else {
        return Ok(None);
    };
    ensure!(
        response["patchType"] == "JSONPatch",
        "patchType {}",
        response["patchType"]
    );
    let ops: Value = serde_json::from_slice(&base64_decode(patch)?).context("patch is not JSON")?;
    let mut object = object.clone();
    apply_patch(&mut object, &ops)?;
    Ok(Some(object))
}

fn base64_decode(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => bail!("invalid base64 byte {c}"),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Ok(out)
}

/// RFC 6902 `add`, `remove`, `replace` and `test`: all outfit emits.
fn apply_patch(doc: &mut Value, ops: &Value) -> Result<()> {
    for op in ops.as_array().context("patch is not an array")? {
        let path = op["path"].as_str().context("op without path")?;
        let tokens: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let kind = op["op"].as_str().unwrap_or_default();
        let Some((last, parents)) = tokens.split_last() else {
            ensure!(kind == "replace" || kind == "add", "{kind} of the root");
            *doc = op["value"].clone();
            continue;
        };
        let mut parent = &mut *doc;
        for token in parents {
            parent = match parent {
                Value::Object(map) => map.get_mut(token.as_str()),
                Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                _ => None,
            }
            .with_context(|| format!("{path}: no {token}"))?;
        }
        match (kind, parent) {
            ("add", Value::Object(map)) => {
                map.insert(last.clone(), op["value"].clone());
            }
            ("add", Value::Array(items)) => {
                let at = if last == "-" { items.len() } else { last.parse()? };
                ensure!(at <= items.len(), "{path}: index out of range");
                items.insert(at, op["value"].clone());
            }
            ("remove", Value::Object(map)) => {
                map.shift_remove(last.as_str())
                    .with_context(|| format!("{path}: nothing to remove"))?;
            }
            ("remove", Value::Array(items)) => {
                let at: usize = last.parse()?;
                ensure!(at < items.len(), "{path}: index out of range");
                items.remove(at);
            }
            ("replace", Value::Object(map)) => {
                let slot = map
                    .get_mut(last.as_str())
                    .with_context(|| format!("{path}: nothing to replace"))?;
                *slot = op["value"].clone();
            }
            ("replace", Value::Array(items)) => {
                let slot = items
                    .get_mut(last.parse::<usize>()?)
                    .with_context(|| format!("{path}: index out of range"))?;
                *slot = op["value"].clone();
            }
            ("test", _) => {}
            (kind, _) => bail!("{path}: unsupported op {kind} or parent"),
        }
    }
    Ok(())
}

pub(crate) fn next_body(soak: &Soak, index: usize) -> (Bytes, String) {
    let n = soak.uid.fetch_add(1, Ordering::Relaxed) % 1_000_000_000_000;
    let digits = format!("{n:012}");
    let (prefix, suffix) = &soak.templates[index];
    let mut body = Vec::with_capacity(prefix.len() + 12 + suffix.len());
    body.extend_from_slice(prefix);
    body.extend_from_slice(digits.as_bytes());
    body.extend_from_slice(suffix);
    (Bytes::from(body), format!("00000000-0000-4000-8000-{digits}"))
}
