//! What the measurements share: the served manifest, the backend, namespaces, HTTP calls and the
//! printed percentiles.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client, api::DeleteParams};
use outfit_loadgen::harness::Backend;
use outfit_test_support::{
    control_plane::env_value,
    http::{Call, loopback},
};
use serde_json::Value;

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

/// One request on a connection of its own, with `token` as the bearer token if given; the
/// status and the JSON answer.
pub(crate) async fn call(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .iter()
        .map(|a| ("authorization", a.as_str()))
        .collect();
    let mut request = Call::new(method, path).headers(&headers);
    if let Some(body) = body {
        request = request.json(body);
    }
    let answer = request.send(loopback(port), Duration::from_secs(180)).await?;
    Ok((answer.status, answer.json()?))
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
