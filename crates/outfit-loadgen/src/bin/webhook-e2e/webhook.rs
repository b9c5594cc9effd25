//! outfit as the cluster's mutating webhook: its policies, the `outfit serve` process, its
//! registration with kube-apiserver, and the checks that the stored pods carry its mutations.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::{admissionregistration::v1::MutatingWebhookConfiguration, core::v1::Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use outfit_server::SelfSigned;
use outfit_test_support::{free_port, http::Call};
use serde_json::{Value, json};

/// The env variable every policy set adds to the benchmark's pods, with the set's name as value:
/// a probe pod that carries the value shows the API server calls the right outfit.
pub(crate) const MARKER: &str = "OUTFIT_BENCH_POLICY_SET";

/// The Kubeflow PodDefaults of `examples/workspace` (a notebook's opt-in configurations).
const PODDEFAULTS: &str = include_str!("../../../../../examples/workspace/policies/poddefaults.yaml");
/// The Gatekeeper Assign mutators of `examples/gatekeeper-nfs` (an NFS volume in every container).
const ASSIGNS: &str = include_str!("../../../../../examples/gatekeeper-nfs/policies.yaml");

/// Writes the realistic set into `dir`: the examples' four PodDefaults and two Assigns, moved to
/// `namespace`, and the marker PodDefault; with `total` above that, PodDefaults and Assigns that
/// apply to nothing the benchmark creates up to `total` policies. Returns the policy count.
pub(crate) fn write_policies(dir: &Path, namespace: &str, set: &str, total: usize) -> Result<usize> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let poddefaults = PODDEFAULTS.replace("namespace: team-a", &format!("namespace: {namespace}"));
    let assigns = ASSIGNS.replace("\"coder-big-dataset\"", &format!("\"{namespace}\""));
    ensure!(
        poddefaults != PODDEFAULTS && assigns != ASSIGNS,
        "the examples changed: no namespace to move"
    );
    std::fs::write(dir.join("poddefaults.yaml"), poddefaults)?;
    std::fs::write(dir.join("assigns.yaml"), assigns)?;
    let marker = json!({
        "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
        "metadata": {"name": "bench-marker", "namespace": namespace},
        "spec": {"desc": "benchmark marker", "selector": {"matchLabels": {"app": "webhook-e2e"}},
                 "env": [{"name": MARKER, "value": set}]}
    });
    std::fs::write(dir.join("marker.json"), serde_json::to_vec(&marker)?)?;
    let realistic = 7;
    let fillers: Vec<Value> = (0..total.saturating_sub(realistic))
        .map(|i| filler(i, namespace))
        .collect();
    let count = realistic + fillers.len();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": fillers});
    std::fs::write(dir.join("fillers.json"), serde_json::to_vec(&list)?)?;
    Ok(count)
}

/// Filler policy `i`: nine in ten a PodDefault in `namespace` selecting a label the pods do not
/// carry (outfit still evaluates its selector on every pod), one in ten a Gatekeeper Assign for
/// another team's namespace.
fn filler(i: usize, namespace: &str) -> Value {
    if i % 10 == 9 {
        return json!({
            "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign",
            "metadata": {"name": format!("team-{i}-proxy")},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "match": {"scope": "Namespaced", "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
                          "namespaces": [format!("team-{i}")]},
                "location": "spec.containers[name:*].env[name:HTTPS_PROXY]",
                "parameters": {"assign": {"value": {"name": "HTTPS_PROXY", "value": format!("http://proxy-{i}:3128")}}}
            }
        });
    }
    json!({
        "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
        "metadata": {"name": format!("feature-{i}"), "namespace": namespace},
        "spec": {
            "desc": format!("configuration {i}"),
            "selector": {"matchLabels": {format!("feature-{i}"): "true"}},
            "env": [{"name": format!("FEATURE_{i}_ENDPOINT"), "value": format!("https://svc-{i}.{namespace}.svc:8443")}],
            "volumes": [{"name": format!("feature-{i}"), "secret": {"secretName": format!("feature-{i}")}}],
            "volumeMounts": [{"name": format!("feature-{i}"), "mountPath": format!("/var/run/secrets/feature-{i}"), "readOnly": true}]
        }
    })
}

/// The benchmark's pod: one container, labelled so that the realistic set's policies apply to it:
/// all but the s3-mount PodDefault (its sidecar) unless `sidecar`.
pub(crate) fn pod_template(sidecar: bool) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {"app": "webhook-e2e", "access-ml-pipeline": "true",
                                "datasets-nfs": "true", "gpu": "l4"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}
    });
    if sidecar {
        pod["metadata"]["labels"]["s3-mount"] = json!("true");
    }
    Ok(serde_json::from_value(pod)?)
}

/// The benchmark's pod as `outfit mutate --policies <policies>` returns it: what outfit makes of
/// it, to be created with no webhook (the cost of the bigger object without the call).
pub(crate) fn premutated(binary: &Path, policies: &Path, namespace: &str, sidecar: bool) -> Result<Pod> {
    let mut pod = serde_json::to_value(pod_template(sidecar)?)?;
    pod["metadata"]["name"] = json!("template");
    pod["metadata"]["namespace"] = json!(namespace);
    let file = policies.with_extension("pod.json");
    std::fs::write(&file, serde_json::to_vec(&pod)?)?;
    let output = Command::new(binary)
        .args(["mutate", "--policies"])
        .arg(policies)
        .arg("-f")
        .arg(&file)
        .output()
        .context("running outfit mutate")?;
    ensure!(
        output.status.success(),
        "outfit mutate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut mutated: Value = serde_saphyr::from_str(&String::from_utf8(output.stdout)?)
        .context("parsing what outfit mutate printed")?;
    if let Some(metadata) = mutated["metadata"].as_object_mut() {
        metadata.remove("name");
        metadata.remove("namespace");
    }
    Ok(serde_json::from_value(mutated)?)
}

/// What a stored pod lacks of the mutations the realistic set and marker `set` make (the s3-mount
/// sidecar only if `sidecar`); empty when it carries them all.
pub(crate) fn missing_mutations(pod: &Pod, set: &str, sidecar: bool) -> Vec<&'static str> {
    let pod = serde_json::to_value(pod).unwrap_or_default();
    let spec = &pod["spec"];
    let main = &spec["containers"][0];
    let named = |list: &Value, name: &str| {
        list.as_array()
            .is_some_and(|items| items.iter().any(|i| i["name"] == name))
    };
    let env_value = |name: &str| {
        main["env"]
            .as_array()
            .and_then(|env| env.iter().find(|e| e["name"] == name))
            .map(|e| e["value"].clone())
    };
    let mut missing = Vec::new();
    if env_value(MARKER) != Some(json!(set)) {
        missing.push("marker env");
    }
    if env_value("KF_PIPELINES_SA_TOKEN_PATH").is_none() {
        missing.push("PodDefault access-ml-pipeline env");
    }
    if !named(&spec["volumes"], "datasets") {
        missing.push("PodDefault datasets-nfs volume");
    }
    if sidecar && !named(&spec["containers"], "s3-fuse") {
        missing.push("PodDefault s3-mount sidecar");
    }
    if env_value("NVIDIA_DRIVER_CAPABILITIES").is_none() || spec["tolerations"].as_array().is_none() {
        missing.push("PodDefault gpu-access env and tolerations");
    }
    if !named(&spec["volumes"], "nfs-volume") {
        missing.push("Assign add-nfs-mount volume");
    }
    if !named(&main["volumeMounts"], "nfs-volume") {
        missing.push("Assign add-nfs-volume mount");
    }
    missing
}

/// Whether a stored pod carries none of the mutations (the baseline: no webhook called).
pub(crate) fn untouched(pod: &Pod) -> bool {
    missing_mutations(pod, "", true).len() == 7 && pod.spec.as_ref().is_some_and(|s| s.containers.len() == 1)
}

/// A running `outfit serve`; killed when dropped.
pub(crate) struct Outfit {
    child: Child,
    /// `https://127.0.0.1:<port>/mutate`.
    pub(crate) url: String,
    /// The CA its serving certificate chains to.
    pub(crate) ca: PathBuf,
    /// Its stderr.
    pub(crate) log: PathBuf,
}

impl Drop for Outfit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Outfit {
    /// Starts the release `outfit serve --policies <policies>` on loopback with a certificate
    /// from a self-signed CA in `<work>/<name>-certs`, logging to `<work>/<name>.log`, and waits
    /// for its `/readyz`.
    pub(crate) async fn start(outfit: &Path, policies: &Path, work: &Path, name: &str) -> Result<Self> {
        let certs = SelfSigned::ensure(&work.join(format!("{name}-certs")), &[])?;
        let (port, admin) = (free_port(), free_port());
        let log = work.join(format!("{name}.log"));
        let child = Command::new(outfit)
            .arg("serve")
            .arg("--policies")
            .arg(policies)
            .arg("--tls-cert")
            .arg(&certs.cert)
            .arg("--tls-key")
            .arg(&certs.key)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {} serve", outfit.display()))?;
        let mut server = Self {
            child,
            url: format!("https://127.0.0.1:{port}/mutate"),
            ca: certs.ca_cert,
            log,
        };
        server
            .wait_ready(SocketAddr::from(([127, 0, 0, 1], admin)))
            .await?;
        Ok(server)
    }

    async fn wait_ready(&mut self, admin: SocketAddr) -> Result<()> {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "outfit serve exited during start-up ({status}); log: {}",
                    self.log.display()
                );
            }
            if readyz(admin).await.unwrap_or(false) {
                return Ok(());
            }
            ensure!(Instant::now() < until, "outfit serve not ready after 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails if the process has exited.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("outfit serve exited ({status}); log: {}", self.log.display());
        }
        Ok(())
    }
}

async fn readyz(admin: SocketAddr) -> Result<bool> {
    let answer = Call::new("GET", "/readyz")
        .send(admin, Duration::from_secs(5))
        .await?;
    Ok(answer.status == 200)
}

/// Registers `outfit` as the MutatingWebhookConfiguration `name`, as `outfit manifests
/// --webhook-url --ca-file --policies` prints it, narrowed to `namespace` so that nothing else on
/// the cluster ever goes through it. Replaces an existing one of that name.
pub(crate) async fn register(
    client: &Client,
    binary: &Path,
    server: &Outfit,
    policies: &Path,
    name: &str,
    namespace: &str,
) -> Result<()> {
    let output = Command::new(binary)
        .arg("manifests")
        .args(["--webhook-url", &server.url])
        .arg("--ca-file")
        .arg(&server.ca)
        .arg("--policies")
        .arg(policies)
        .output()
        .context("running outfit manifests")?;
    ensure!(
        output.status.success(),
        "outfit manifests failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The stream holds CRDs, RBAC and more besides the configuration; take the configuration by
    // its kind rather than by its place, so a change in what else is printed cannot break this.
    let text = String::from_utf8(output.stdout)?;
    let documents = outfit_core::document::parse_stream(&text, "outfit manifests")
        .context("parsing what outfit manifests printed")?;
    let mut config = documents
        .into_iter()
        .find(|document| document.kind() == "MutatingWebhookConfiguration")
        .map(|document| document.value)
        .context("outfit manifests printed no MutatingWebhookConfiguration")?;
    config["metadata"]["name"] = json!(name);
    config["webhooks"][0]["namespaceSelector"] =
        json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
    let config: MutatingWebhookConfiguration = serde_json::from_value(config)?;
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let _ = api.delete(name, &DeleteParams::default()).await;
    api.create(&PostParams::default(), &config)
        .await
        .context("registering the MutatingWebhookConfiguration")?;
    Ok(())
}

/// Creates probe pods `<prefix>-<n>` until one comes back with marker `set`: kube-apiserver
/// picks up a new webhook configuration within a second or so, and until then creates the pod
/// unmutated (or, while it still calls an outfit that is gone, refuses it).
pub(crate) async fn wait_for_mutation(
    client: &Client,
    namespace: &str,
    prefix: &str,
    set: &str,
    sidecar: bool,
) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut pod = pod_template(sidecar)?;
    let mut last_error = String::new();
    let until = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    loop {
        pod.metadata.name = Some(format!("{prefix}-{n}"));
        n += 1;
        match pods.create(&PostParams::default(), &pod).await {
            Ok(stored) => {
                let missing = missing_mutations(&stored, set, sidecar);
                if missing.is_empty() {
                    return Ok(());
                }
                if !missing.contains(&"marker env") {
                    bail!("the probe pod was mutated, but lacks: {}", missing.join(", "));
                }
            }
            Err(error) => last_error = error.to_string(),
        }
        ensure!(
            Instant::now() < until,
            "no probe pod came back mutated by policy set {set} within 60 s (last error: {last_error})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
