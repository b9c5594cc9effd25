//! What the measurements share beyond outfit_loadgen::workspaces: the backend and its calls.

use anyhow::Result;
use outfit_loadgen::{
    harness::{AdminPort, Backend},
    workspaces::call,
};
use outfit_test_support::control_plane::env_value;
use serde_json::Value;

use crate::args::Args;

pub(crate) fn start_backend(args: &Args, namespace: &str, manifests: u16, extra: &str) -> Result<Backend> {
    let pod_cidr = env_value(&args.cluster.state_dir, "POD_CIDR")?;
    let settings = format!(
        "namespace: {namespace}\nwhitelistManifestRegex: 'http://127\\.0\\.0\\.1:{manifests}/'\n\
         ingressDomain: pods.bench\npodSubnetCidr: {pod_cidr}\ntimeoutCreate: 2m\n{extra}"
    );
    Backend::start(
        &args.cluster.outfit,
        &args.cluster.state_dir.join("kubeconfig"),
        &std::env::temp_dir().join(format!("workspaces-bench-{namespace}.yaml")),
        &settings,
        None,
        AdminPort::Off,
    )
}

pub(crate) async fn post(port: u16, path: &str, body: &Value) -> Result<(u16, Value)> {
    call(port, "POST", path, &[], Some(body)).await
}
