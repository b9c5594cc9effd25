//! What the workspace benchmarks share: the served manifest, calls to the backend (one
//! connection each, or many over one keep-alive connection), its progress streams, namespaces
//! and the printed percentiles.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client, api::DeleteParams};
use outfit_test_support::http::{Call, loopback};
use serde_json::Value;

/// The manifest served at `/<name>.yaml`: an nginx pod named `name` with an http Ingress. The
/// backend names a user's pods after the manifest and tries only ten names per manifest and user
/// (`<name>-<user>`, then `-1` … `-9`), so one user's many workspaces need several names.
pub fn manifest(name: &str) -> String {
    pod_manifest(name, "")
}

/// [`manifest`] with `spec_lines` (YAML lines indented by two spaces, each ending in a newline)
/// added to the pod's spec.
pub fn pod_manifest(name: &str, spec_lines: &str) -> String {
    pod(name, "", spec_lines)
}

/// [`pod_manifest`] whose container mounts the user's home, as deic-dk's manifests do: a
/// `sciencedata` volume it does not declare, which the backend provides as its
/// `storageStrategy` says (an NFS claim of outfit's, a provisioned claim, an `emptyDir`). Not a
/// pod the admin can create as it is (the volume is undeclared).
pub fn home_manifest(name: &str, spec_lines: &str) -> String {
    pod(
        name,
        ", volumeMounts: [{name: sciencedata, mountPath: /usr/share/nginx/html}]",
        spec_lines,
    )
}

/// The nginx pod `name`, its container's fields after `ports` followed by `container_fields`
/// (`, key: value`), its spec by `spec_lines`.
fn pod(name: &str, container_fields: &str, spec_lines: &str) -> String {
    image_pod(name, "nginx", container_fields, spec_lines)
}

/// [`pod_manifest`] of `image` instead of nginx.
pub fn image_manifest(name: &str, image: &str, spec_lines: &str) -> String {
    image_pod(name, image, "", spec_lines)
}

/// The pod `name` of `image`, its container's fields after `ports` followed by
/// `container_fields`, its spec by `spec_lines`.
fn image_pod(name: &str, image: &str, container_fields: &str, spec_lines: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{sciencedata.dk/ingress-port: "80"}}
spec:
  containers: [{{name: web, image: "{image}", ports: [{{containerPort: 80}}]{container_fields}}}]
{spec_lines}"#
    )
}

/// How many live workspaces one user can have from one manifest (the backend's name attempts).
pub const WORKSPACES_PER_MANIFEST: usize = 10;

/// Deletes namespace `name` and waits until it is gone, its pods with it.
pub async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces.delete(name, &DeleteParams::default()).await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while namespaces.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            bail!("namespace {name} still there 5 minutes after its delete");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// One request on a connection of its own, with `headers`; the status and the JSON answer.
pub async fn call(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let mut request = Call::new(method, path).headers(headers);
    if let Some(body) = body {
        request = request.json(body);
    }
    let answer = request.send(loopback(port), Duration::from_secs(180)).await?;
    Ok((answer.status, answer.json()?))
}

/// One keep-alive HTTP/1.1 connection to the backend, for timing requests in turn.
pub struct KeepAlive {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl KeepAlive {
    /// Connects to 127.0.0.1:`port`.
    pub async fn connect(port: u16) -> Result<Self> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
        tokio::spawn(connection);
        Ok(Self { sender })
    }

    /// Sends one request (a JSON `body` if given) and reads its whole answer: the status, the
    /// body and the time from sending to the last byte.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
    ) -> Result<(u16, Bytes, Duration)> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "x");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let request = request.body(Full::new(body.unwrap_or_default()))?;
        self.sender.ready().await?;
        let started = Instant::now();
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body, started.elapsed()))
    }
}

/// Opens `GET /api/v1/workspaces/{name}/progress` on a connection of its own, with `headers`
/// (the caller's credentials); fails unless it answers 200.
pub async fn open_progress(
    port: u16,
    name: &str,
    headers: &[(&str, &str)],
) -> Result<hyper::Response<Incoming>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
    tokio::spawn(connection);
    let mut request = hyper::Request::get(format!("/api/v1/workspaces/{name}/progress"))
        .header("host", "x")
        .header("accept", "text/event-stream");
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    let response = sender.send_request(request.body(Empty::<Bytes>::new())?).await?;
    if response.status() != 200 {
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        bail!(
            "GET .../progress of {name} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(response)
}

/// Reads a progress stream as its frames arrive, calling `on_event` with each event's name and
/// arrival time, until the final event (`ready`, `failed` or `deleted`), whose name it returns.
pub async fn follow_progress(
    response: &mut hyper::Response<Incoming>,
    mut on_event: impl FnMut(&str, Instant),
) -> Result<String> {
    // Events end with a blank line; a frame may hold part of one or several.
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let frame = response
            .body_mut()
            .frame()
            .await
            .context("the progress stream ended before its final event")??;
        let Ok(data) = frame.into_data() else { continue };
        let now = Instant::now();
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buffer.drain(..end + 2).collect();
            let event = String::from_utf8_lossy(&event);
            // Comments (`: keep-alive`) have no event line.
            let Some(kind) = event.lines().find_map(|l| l.strip_prefix("event: ")) else {
                continue;
            };
            on_event(kind, now);
            if kind != "progress" {
                return Ok(kind.to_owned());
            }
        }
    }
}

/// p50, p99 and max of `samples` (which must not be empty).
pub fn percentiles(samples: &[Duration]) -> [Duration; 3] {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    [at(0.5), at(0.99), sorted[sorted.len() - 1]]
}

/// The `q` quantile (0 to 1) of `samples`, by the nearest rank as [`percentiles`] takes it;
/// zero when there are none.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Prints `label: p50 …, p99 …, max … (n = …)`, or that there were no samples.
pub fn report(label: &str, samples: &[Duration]) {
    if samples.is_empty() {
        println!("{label}: no samples");
        return;
    }
    let [p50, p99, max] = percentiles(samples);
    println!(
        "{label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n = {})",
        ms(p50),
        ms(p99),
        ms(max),
        samples.len()
    );
}
