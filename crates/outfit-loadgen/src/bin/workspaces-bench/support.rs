//! What the measurements share: the served manifest, the backend, namespaces, HTTP calls and the
//! printed percentiles.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client, api::DeleteParams};
use outfit_loadgen::harness::Backend;
use outfit_test_support::control_plane::env_value;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::args::Args;

/// The manifest served at `/<name>.yaml`: an nginx pod named `name` with an http Ingress. The
/// backend names a user's pods after the manifest and tries only ten names per manifest and user
/// (`<name>-<user>`, then `-1` … `-9`), so one user's many workspaces need several names.
pub(crate) fn manifest(name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{sciencedata.dk/ingress-port: "80"}}
spec:
  containers: [{{name: web, image: nginx, ports: [{{containerPort: 80}}]}}]
"#
    )
}

/// How many live workspaces one user can have from one manifest (the backend's name attempts).
pub(crate) const WORKSPACES_PER_MANIFEST: usize = 10;

/// Deletes namespace `name` and waits until it is gone, its pods with it.
pub(crate) async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces.delete(name, &DeleteParams::default()).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while namespaces.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            bail!("namespace {name} still there 2 minutes after its delete");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

pub(crate) fn start_backend(args: &Args, namespace: &str, manifests: u16, extra: &str) -> Result<Backend> {
    let pod_cidr = env_value(&args.state_dir, "POD_CIDR")?;
    let settings = format!(
        "namespace: {namespace}\nwhitelistManifestRegex: 'http://127\\.0\\.0\\.1:{manifests}/'\n\
         ingressDomain: pods.bench\npodSubnetCidr: {pod_cidr}\ntimeoutCreate: 2m\n{extra}"
    );
    Backend::start(
        &args.outfit,
        &args.state_dir.join("kubeconfig"),
        &std::env::temp_dir().join(format!("workspaces-bench-{namespace}.yaml")),
        &settings,
        None,
    )
}

pub(crate) async fn post(port: u16, path: &str, body: &Value) -> Result<(u16, Value)> {
    call(port, "POST", path, None, Some(body)).await
}

/// One request on a connection of its own, with `token` as the bearer token if given.
pub(crate) async fn call(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let authorization = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\n{authorization}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(180), tcp.read_to_string(&mut answer)).await??;
    let (head, body) = answer.split_once("\r\n\r\n").context("an HTTP answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("a status")?;
    Ok((status, serde_json::from_str(body)?))
}

/// p50, p99 and max of `samples`.
pub(crate) fn percentiles(samples: &[Duration]) -> [Duration; 3] {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    [at(0.5), at(0.99), sorted[sorted.len() - 1]]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) fn report(label: &str, samples: &[Duration]) {
    let [p50, p99, max] = percentiles(samples);
    println!(
        "{label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n = {})",
        ms(p50),
        ms(p99),
        ms(max),
        samples.len()
    );
}
