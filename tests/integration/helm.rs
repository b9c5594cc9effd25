//! The Helm chart (`charts/outfit`) with real Helm, built from its Go module by
//! `hack/helm/build.sh`: it renders the objects `outfit manifests` prints for the same settings,
//! passes `helm lint`, refuses bad values by name, and installs, upgrades and uninstalls on a
//! real API server.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{
        OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
};

use kube::api::PostParams;
use serde_json::{Value, json};

use crate::{
    control_plane::{ControlPlane, api, create, resource},
    support::{manifests, repo_root},
};

/// Real Helm, with its configuration, cache and data under the test binary's tmp directory.
pub(crate) struct Helm {
    binary: PathBuf,
    home: PathBuf,
}

impl Helm {
    /// Helm, built on first use (a few minutes the first time, cached in ~/.cache/outfit).
    pub(crate) fn get() -> &'static Helm {
        static HELM: OnceLock<Helm> = OnceLock::new();
        HELM.get_or_init(|| {
            let output = Command::new(repo_root().join("hack/helm/build.sh"))
                .output()
                .expect("run hack/helm/build.sh");
            assert!(
                output.status.success(),
                "hack/helm/build.sh failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let binary = String::from_utf8(output.stdout).expect("a path");
            let home =
                PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("helm-{}", std::process::id()));
            std::fs::create_dir_all(&home).expect("helm's home");
            Helm {
                binary: PathBuf::from(binary.trim()),
                home,
            }
        })
    }

    /// Runs `helm ARGS` in the repository, against the cluster of `kubeconfig` if given.
    fn run(&self, args: &[&str], kubeconfig: Option<&Path>) -> Output {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .current_dir(repo_root())
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .env_remove("KUBECONFIG");
        if let Some(kubeconfig) = kubeconfig {
            command.env("KUBECONFIG", kubeconfig);
        }
        command.output().expect("run helm")
    }

    /// Runs `helm ARGS` and returns its stdout, failing the test with helm's stderr otherwise.
    pub(crate) fn ok(&self, args: &[&str], kubeconfig: Option<&Path>) -> String {
        let output = self.run(args, kubeconfig);
        assert!(
            output.status.success(),
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("helm prints UTF-8")
    }

    /// A values file holding `values` (JSON is YAML), for `-f`.
    fn values_file(&self, values: &Value) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = self
            .home
            .join(format!("values-{}.json", NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::write(&path, values.to_string()).expect("write values");
        path
    }

    /// `helm template` of the chart into `namespace` with `values`: the objects, or helm's error.
    fn template(&self, namespace: &str, values: &Value) -> Result<Vec<Value>, String> {
        let values = self.values_file(values);
        let output = self.run(
            &[
                "template",
                "outfit",
                "charts/outfit",
                "--namespace",
                namespace,
                "-f",
                values.to_str().unwrap(),
            ],
            None,
        );
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        let text = String::from_utf8(output.stdout).expect("helm prints UTF-8");
        let documents =
            outfit_core::document::parse_stream(&text, "helm template").expect("helm prints YAML");
        Ok(documents.into_iter().map(|d| d.value).collect())
    }
}

/// The labels and annotation only the chart adds (Helm's conventions, and keeping the CRDs on
/// uninstall): everything else must be what `outfit manifests` prints.
const HELM_ONLY_LABELS: [&str; 2] = ["helm.sh/chart", "app.kubernetes.io/managed-by"];
const HELM_ONLY_ANNOTATIONS: [&str; 1] = ["helm.sh/resource-policy"];

/// Objects by `apiVersion kind namespace/name`, without what only Helm adds.
fn by_identity(objects: Vec<Value>) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for mut object in objects {
        // deic-dk's API token and the sessions' key are new on every print and every first
        // install: compared by shape.
        for key in ["token", "cookie-key"] {
            if object["kind"] == "Secret"
                && let Some(token) = object["stringData"][key].as_str()
            {
                assert!(token.len() >= 32, "a {key} of {} characters", token.len());
                object["stringData"][key] = json!("<random>");
            }
        }
        let metadata = object["metadata"].as_object_mut().expect("metadata");
        for (field, keys) in [
            ("labels", &HELM_ONLY_LABELS[..]),
            ("annotations", &HELM_ONLY_ANNOTATIONS[..]),
        ] {
            if let Some(Value::Object(map)) = metadata.get_mut(field) {
                for key in keys {
                    map.remove(*key);
                }
                if map.is_empty() {
                    metadata.remove(field);
                }
            }
        }
        let key = format!(
            "{} {} {}/{}",
            object["apiVersion"].as_str().unwrap_or(""),
            object["kind"].as_str().unwrap_or(""),
            object["metadata"]["namespace"].as_str().unwrap_or(""),
            object["metadata"]["name"].as_str().unwrap_or("")
        );
        assert!(map.insert(key.clone(), object).is_none(), "{key} rendered twice");
    }
    map
}

/// Where `a` and `b` first differ, as a JSON pointer with both values; None when equal.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|key| {
                let here = format!("{at}/{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => first_difference(x, y, &here),
                    (x, y) => Some(format!("{here}: {x:?} vs {y:?}")),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, &format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}

/// Every difference between what `outfit manifests ARGS` prints and what the chart renders with
/// `values` into `namespace`, object by object. outfit's namespace itself is left out: Helm
/// makes it (`--create-namespace`) and keeps the release there.
fn differences(args: &[&str], namespace: &str, values: &Value) -> Vec<String> {
    let printed: Vec<Value> = manifests(args)
        .into_iter()
        .map(|d| d.value)
        .filter(|o| !(o["kind"] == "Namespace" && o["metadata"]["name"] == namespace))
        .collect();
    let rendered = Helm::get()
        .template(namespace, values)
        .unwrap_or_else(|error| panic!("helm template with {values}: {error}"));
    let (printed, rendered) = (by_identity(printed), by_identity(rendered));
    let keys: BTreeSet<&String> = printed.keys().chain(rendered.keys()).collect();
    keys.into_iter()
        .filter_map(|key| match (printed.get(key), rendered.get(key)) {
            (Some(a), Some(b)) => {
                first_difference(a, b, "").map(|d| format!("{key}: outfit manifests vs chart at {d}"))
            }
            (Some(_), None) => Some(format!(
                "{key}: printed by outfit manifests, not rendered by the chart"
            )),
            (None, _) => Some(format!(
                "{key}: rendered by the chart, not printed by outfit manifests"
            )),
        })
        .collect()
}

// About 45 to 60 s: `helm template` and `outfit manifests` (a debug build) run once per case, and
// each helm run is CPU-bound on two cores shared with the other tests.
#[test]
fn chart_renders_what_outfit_manifests_prints_for_the_same_settings() {
    let ca = std::fs::read_to_string(repo_root().join("tests/fixtures/helm/ca.crt")).expect("the test CA");
    let ca_path = repo_root().join("tests/fixtures/helm/ca.crt");
    let ca_path = ca_path.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>, &str, Value)> = vec![
        ("defaults", vec![], "outfit-system", json!({})),
        (
            "every webhook flag",
            vec![
                "--namespace",
                "platform",
                "--exclude-namespace",
                "legacy,kube-public",
                "--exclude-namespace",
                "batch",
                "--monitoring-namespace",
                "monitoring,prometheus",
                "--image",
                "registry.example/outfit:dev",
                "--replicas",
                "3",
                "--failure-policy",
                "ignore",
                "--timeout-seconds",
                "12",
                "--ca-file",
                ca_path,
                "--without-crds",
                "kubeflow.org",
                "--filer-svm",
                "fld9,fld5_svm,fld9",
                "--webhook-resource",
                "apps/v1/deployments",
                "--webhook-resource",
                "v1/services",
                "--webhook-resource",
                "apps/v1/statefulsets",
                "--webhook-resource",
                "example.com/v1beta1/widgets",
            ],
            "platform",
            json!({
                "image": {"repository": "registry.example/outfit", "tag": "dev"},
                "webhook": {"replicas": 3, "failurePolicy": "Ignore", "timeoutSeconds": 12, "caBundle": ca,
                            "namespaceSelector": {"excluded": ["legacy", "kube-public", "batch"]},
                            "networkPolicy": {"monitoringNamespaces": ["monitoring", "prometheus"]},
                            "filerSvms": ["fld9", "fld5_svm", "fld9"],
                            "rules": {"resources": ["apps/v1/deployments", "v1/services", "apps/v1/statefulsets",
                                                    "example.com/v1beta1/widgets"]}},
                "crds": {"without": ["kubeflow.org"]}
            }),
        ),
        (
            "cert-manager issues the certificate",
            vec!["--cert-manager", "--namespace", "webhooks"],
            "webhooks",
            json!({"certManager": {"enabled": true}}),
        ),
        (
            "the team's certificate, the configuration left as installed",
            vec!["--ca-file", ca_path, "--no-manage-webhook"],
            "outfit-system",
            json!({"webhook": {"caBundle": ca, "manage": false}}),
        ),
        (
            "every kind, no Gatekeeper CRDs",
            vec!["--all-resources", "--without-crds", "mutations.gatekeeper.sh"],
            "outfit-system",
            json!({"webhook": {"rules": {"allResources": true}}, "crds": {"without": ["mutations.gatekeeper.sh"]}}),
        ),
        (
            "the workspace backend",
            vec![
                "--workspaces",
                "--namespace",
                "ws-backend",
                "--workspaces-namespace",
                "users",
                "--replicas",
                "1",
                "--priority-class",
                "workspaces-high",
            ],
            "ws-backend",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "namespace": "users", "replicas": 1,
                                  "priorityClassName": "workspaces-high"}}),
        ),
        (
            "one webhook replica, its risk accepted (and so no PodDisruptionBudget)",
            vec!["--replicas", "1", "--accept-risk", "single-replica"],
            "outfit-system",
            json!({"webhook": {"replicas": 1}, "acceptRisks": ["single-replica"]}),
        ),
        (
            "the workspace backend with the host paths and capabilities its pods may have",
            vec![
                "--workspaces",
                "--allowed-host-path",
                "/dev/dri/,/dev/kfd",
                "--allowed-capability",
                "SYS_ADMIN",
                "--nfs-storage-root",
                "/data/users/",
            ],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "allowedHostPaths": ["/dev/dri/", "/dev/kfd"],
                                  "allowedCapabilities": ["SYS_ADMIN"], "nfsStorageRoot": "/data/users/"}}),
        ),
        (
            "the workspace backend's callers named, its token in an existing Secret, restricted pods",
            vec![
                "--workspaces",
                "--frontend-namespace",
                "portal",
                "--frontend-cidr",
                "10.0.0.0/24,10.1.0.0/24",
                "--ingress-namespace",
                "traefik",
                "--monitoring-namespace",
                "monitoring",
                "--api-token-secret",
                "portal-token",
                "--workspaces-pod-security",
                "restricted",
            ],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "frontendNamespaces": ["portal"],
                                  "frontendCidrs": ["10.0.0.0/24", "10.1.0.0/24"],
                                  "ingressNamespaces": ["traefik"], "monitoringNamespaces": ["monitoring"],
                                  "apiToken": {"existingSecret": "portal-token"}, "podSecurity": "restricted"}}),
        ),
        (
            "the workspace backend's API without a token, its risk accepted",
            vec!["--workspaces", "--accept-risk", "compat-api-without-token"],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true}, "acceptRisks": ["compat-api-without-token"]}),
        ),
        (
            "the workspace backend with a home per user from the default class (no rights on volumes)",
            vec!["--workspaces", "--storage-strategy", "per-user"],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "storageStrategy": "per-user"}}),
        ),
        (
            "the workspace backend with a home per workspace from a class",
            vec![
                "--workspaces",
                "--storage-strategy",
                "per-workspace",
                "--storage-class",
                "fast.ssd",
            ],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "storageStrategy": "per-workspace", "storageClassName": "fast.ssd"}}),
        ),
        (
            "the workspace backend snapshotting homes per user",
            vec![
                "--workspaces",
                "--storage-strategy",
                "per-user",
                "--snapshot-class",
                "csi-snapshots",
                "--snapshots-kept",
                "5",
            ],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "storageStrategy": "per-user",
                                  "snapshotClassName": "csi-snapshots", "snapshotsKept": 5}}),
        ),
        (
            "the workspace backend pulling ahead, with placeholders",
            vec!["--workspaces", "--pre-pull", "--placeholders", "3"],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "prePull": true, "placeholders": 3}}),
        ),
        (
            "sign-in with the site's provider and the workspace proxy",
            vec![
                "--workspaces",
                "--oidc-issuer",
                "https://login.example.org/realms/site",
                "--oidc-client-id",
                "outfit",
                "--oidc-client-secret-secret",
                "outfit-oidc",
                "--oidc-redirect-url",
                "https://workspaces.example.org/auth/callback",
                "--oidc-allowed-group",
                "staff,students",
                "--proxy-domain",
                "ws.example.org",
                "--ingress-class",
                "nginx",
                "--ingress-tls-secret",
                "workspaces-tls",
            ],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "signIn": {
                "issuerUrl": "https://login.example.org/realms/site", "clientId": "outfit",
                "clientSecret": {"existingSecret": "outfit-oidc"},
                "redirectUrl": "https://workspaces.example.org/auth/callback",
                "allowedGroups": ["staff", "students"], "proxyDomain": "ws.example.org",
                "ingress": {"className": "nginx", "tlsSecret": "workspaces-tls"}}}}),
        ),
        (
            "sign-in alone, its cookie key in an existing Secret",
            vec![
                "--workspaces",
                "--oidc-issuer",
                "http://127.0.0.1:5556/",
                "--oidc-client-id",
                "outfit",
                "--oidc-client-secret-secret",
                "outfit-oidc",
                "--oidc-redirect-url",
                "http://localhost:8080/auth/callback",
                "--cookie-key-secret",
                "site-cookie-key",
            ],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "signIn": {
                "issuerUrl": "http://127.0.0.1:5556/", "clientId": "outfit",
                "clientSecret": {"existingSecret": "outfit-oidc"},
                "redirectUrl": "http://localhost:8080/auth/callback",
                "cookieKey": {"existingSecret": "site-cookie-key"}}}}),
        ),
        (
            "the workspace backend without its FlowSchema (clusters before 1.29)",
            vec!["--workspaces", "--without-flow-schema"],
            "outfit-system",
            json!({"webhook": {"enabled": false}, "crds": {"install": false},
                   "workspaces": {"enabled": true, "flowSchema": {"enabled": false}}}),
        ),
    ];
    for (name, args, namespace, values) in cases {
        let differences = differences(&args, namespace, &values);
        assert!(
            differences.is_empty(),
            "{name}: `outfit manifests {}` and the chart with {values} differ (after a change to a kind's CRD, run hack/helm/crds.sh):\n{}",
            args.join(" "),
            differences.join("\n")
        );
    }
}

#[test]
fn chart_renders_the_webhook_and_the_workspace_backend_together_and_its_own_settings() {
    let helm = Helm::get();
    let both = helm
        .template(
            "outfit-system",
            &json!({"workspaces": {"enabled": true},
                    "webhook": {"namespaceSelector": {"excluded": ["legacy"], "matchLabels": {"outfit.dev/enabled": "true"},
                                                      "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]}]},
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": null}},
                    "acceptRisks": ["no-memory-limit"],
                    "crds": {"keep": false}}),
        )
        .expect("helm template");
    let kinds = |name: &str| {
        both.iter()
            .filter(|o| o["metadata"]["name"] == name)
            .map(|o| o["kind"].as_str().unwrap().to_owned())
            .collect::<BTreeSet<_>>()
    };
    assert!(
        kinds("outfit").contains("MutatingWebhookConfiguration"),
        "{both:?}"
    );
    assert!(kinds("outfit-workspaces").contains("Deployment"), "{both:?}");
    let webhook = both
        .iter()
        .find(|o| o["kind"] == "MutatingWebhookConfiguration")
        .unwrap();
    assert_eq!(
        webhook["webhooks"][0]["namespaceSelector"],
        json!({"matchLabels": {"outfit.dev/enabled": "true"},
               "matchExpressions": [
                   {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": ["kube-system", "kube-node-lease", "kube-public", "outfit-system", "legacy"]},
                   {"key": "outfit.dev/ignore", "operator": "NotIn", "values": ["true"]},
                   {"key": "tier", "operator": "NotIn", "values": ["batch"]}]})
    );
    let deployment = both
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "outfit")
        .unwrap();
    // Helm merges maps of values with the defaults: `null` takes the default limit out.
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "1", "memory": "1Gi"}})
    );
    // crds.keep off: the CRDs carry no annotation, and go with the release.
    let crd = both
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .unwrap();
    assert_eq!(crd["metadata"].get("annotations"), None, "{}", crd["metadata"]);
}

#[test]
fn chart_passes_helm_lint_and_refuses_bad_values_by_name() {
    let helm = Helm::get();
    let ca = std::fs::read_to_string(repo_root().join("tests/fixtures/helm/ca.crt")).expect("the test CA");
    let lint = helm.ok(&["lint", "--strict", "charts/outfit"], None);
    assert!(lint.contains("0 chart(s) failed"), "{lint}");
    let everything = helm.values_file(&json!({"workspaces": {"enabled": true}}));
    helm.ok(
        &[
            "lint",
            "--strict",
            "charts/outfit",
            "-f",
            everything.to_str().unwrap(),
        ],
        None,
    );
    // Each risk, accepted by name, renders.
    for values in [
        json!({"webhook": {"replicas": 1}, "acceptRisks": ["single-replica"]}),
        json!({"webhook": {"replicas": 1, "failurePolicy": "Ignore"}}),
        json!({"workspaces": {"enabled": true, "namespace": "outfit-system"}, "acceptRisks": ["workspaces-in-system-namespace"]}),
        json!({"webhook": {"resources": {"limits": null}}, "acceptRisks": ["no-memory-limit"]}),
        json!({"workspaces": {"enabled": true}, "acceptRisks": ["compat-api-without-token"]}),
    ] {
        helm.template("outfit-system", &values)
            .unwrap_or_else(|error| panic!("{values}: {error}"));
    }
    for (values, named) in [
        (json!({"webhook": {"timeoutSeconds": 60}}), "timeoutSeconds"),
        (json!({"webhook": {"failurePolicy": "fail"}}), "failurePolicy"),
        (json!({"webhook": {"replica": 3}}), "replica"),
        (
            json!({"webhook": {"rules": {"resources": ["deployments"]}}}),
            "resources",
        ),
        (
            json!({"webhook": {"rules": {"resources": ["apps//deployments"]}}}),
            "apps//deployments",
        ),
        (
            json!({"webhook": {"rules": {"resources": ["v1/services"], "allResources": true}}}),
            "allResources",
        ),
        (json!({"webhook": {"caBundle": "not a certificate"}}), "caBundle"),
        (json!({"webhook": {"manage": false}}), "webhook.manage"),
        (
            json!({"webhook": {"caBundle": ca}, "certManager": {"enabled": true}}),
            "certManager.enabled",
        ),
        (
            json!({"workspaces": {"namespace": "Not_A_Namespace"}}),
            "namespace",
        ),
        // Issue 42: sign-in half configured is refused naming what is missing or wrong.
        (
            json!({"workspaces": {"enabled": true, "signIn": {"issuerUrl": "https://login.example.org",
                   "clientSecret": {"existingSecret": "s"}, "redirectUrl": "https://w.example.org/auth/callback"}}}),
            "workspaces.signIn.clientId",
        ),
        (
            json!({"workspaces": {"signIn": {"redirectUrl": "https://w.example.org/"}}}),
            "redirectUrl",
        ),
        (
            json!({"webhook": {"networkPolicy": {"monitoringNamespaces": ["Monitoring"]}}}),
            "monitoringNamespaces",
        ),
        // Issue 33: installs that put the cluster at risk, each refused naming the value, the
        // risk and the override.
        (
            json!({"webhook": {"replicas": 1}}),
            "webhook.replicas 1 with webhook.failurePolicy Fail: while that replica is down",
        ),
        (
            json!({"webhook": {"resources": {"limits": null}}}),
            "webhook.resources.limits.memory: unset",
        ),
        (
            json!({"workspaces": {"enabled": true, "namespace": "outfit-system"}}),
            "workspaces.namespace outfit-system: the release's or a system namespace",
        ),
        (
            json!({"workspaces": {"enabled": true, "namespace": "kube-system"}}),
            "acceptRisks: [workspaces-in-system-namespace]",
        ),
        (
            json!({"workspaces": {"enabled": true, "resources": {"limits": null}}}),
            "acceptRisks: [no-memory-limit]",
        ),
        (json!({"acceptRisks": ["everything"]}), "acceptRisks"),
        (
            json!({"workspaces": {"enabled": true, "allowedHostPaths": ["/"]}}),
            "allowedHostPaths",
        ),
        (
            json!({"workspaces": {"enabled": true, "allowedHostPaths": ["/dev/../etc"]}}),
            "allowedHostPaths",
        ),
        (
            json!({"workspaces": {"enabled": true, "allowedCapabilities": ["sys_admin"]}}),
            "allowedCapabilities",
        ),
        (
            json!({"workspaces": {"enabled": true, "allowedHostPaths": ["/dev/dri"], "podSecurity": "baseline"}}),
            "workspaces.podSecurity baseline: that level refuses every pod",
        ),
        (
            json!({"workspaces": {"enabled": true, "podSecurity": "strict"}}),
            "podSecurity",
        ),
        (
            json!({"workspaces": {"enabled": true, "frontendCidrs": ["the frontend"]}}),
            "frontendCidrs",
        ),
    ] {
        let error = helm
            .template("outfit-system", &values)
            .expect_err(&format!("{values} rendered"));
        assert!(
            error.contains(named),
            "{values}: the error names {named}: {error}"
        );
    }
}

/// The object `name` of `kind` as the API server has it, or None when it is not there (404).
async fn get(
    client: &kube::Client,
    namespace: Option<&str>,
    group: &str,
    kind: &str,
    plural: &str,
    name: &str,
) -> Option<Value> {
    let (group, version) = group.rsplit_once('/').unwrap_or(("", group));
    match api(client, namespace, &resource(group, version, kind, plural))
        .get(name)
        .await
    {
        Ok(object) => Some(serde_json::to_value(object).unwrap()),
        Err(kube::Error::Api(status)) if status.code == 404 => None,
        Err(error) => panic!("get {kind} {name}: {error}"),
    }
}

/// A Deployment in outfit-system.
async fn get_deployment(client: &kube::Client, name: &str) -> Option<Value> {
    get(
        client,
        Some("outfit-system"),
        "apps/v1",
        "Deployment",
        "deployments",
        name,
    )
    .await
}

/// The MutatingWebhookConfiguration `outfit`.
async fn get_webhook_configuration(client: &kube::Client) -> Option<Value> {
    let (kind, plural) = ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations");
    get(
        client,
        None,
        "admissionregistration.k8s.io/v1",
        kind,
        plural,
        "outfit",
    )
    .await
}

/// A CustomResourceDefinition.
async fn get_crd(client: &kube::Client, name: &str) -> Option<Value> {
    let (kind, plural) = ("CustomResourceDefinition", "customresourcedefinitions");
    get(client, None, "apiextensions.k8s.io/v1", kind, plural, name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_installs_upgrades_and_uninstalls_on_a_real_cluster() {
    let helm = Helm::get();
    // A cluster of its own: the chart registers a webhook for every pod, with failurePolicy Fail,
    // and its outfit never runs here (no nodes), which would stop the other tests' pods.
    let plane = ControlPlane::start("helm");
    let kubeconfig = plane.kubeconfig();
    let kubeconfig = Some(kubeconfig.as_path());
    let client = plane.admin_client().await;
    let install = |extra: &[&str]| {
        let mut args = vec![
            "upgrade",
            "--install",
            "outfit",
            "charts/outfit",
            "--namespace",
            "outfit-system",
            "--create-namespace",
        ];
        args.extend_from_slice(extra);
        helm.ok(&args, kubeconfig)
    };

    install(&[]);
    let deployment = get_deployment(&client, "outfit")
        .await
        .expect("the Deployment is installed");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let webhook = get_webhook_configuration(&client)
        .await
        .expect("the webhook is registered");
    assert_eq!(webhook["webhooks"][0]["failurePolicy"], "Fail");
    assert_eq!(
        webhook["webhooks"][0]["clientConfig"]["service"]["namespace"],
        "outfit-system"
    );
    for crd in [
        "poddefaults.kubeflow.org",
        "podpolicies.outfit.dev",
        "assign.mutations.gatekeeper.sh",
    ] {
        get_crd(&client, crd)
            .await
            .unwrap_or_else(|| panic!("CRD {crd} installed"));
    }
    // The API server takes the NetworkPolicy as rendered (the admin port then admits no pod).
    let policy = get(
        &client,
        Some("outfit-system"),
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "networkpolicies",
        "outfit",
    )
    .await
    .expect("the NetworkPolicy is installed");
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"ports": [{"port": "webhook", "protocol": "TCP"}]}])
    );
    let status = helm.ok(
        &["status", "outfit", "--namespace", "outfit-system", "-o", "json"],
        kubeconfig,
    );
    let status: Value = serde_json::from_str(&status).expect("helm status -o json");
    assert_eq!(status["info"]["status"], "deployed", "{status}");

    // A policy made while the release is installed.
    let poddefaults = resource("kubeflow.org", "v1alpha1", "PodDefault", "poddefaults");
    crate::control_plane::pod_namespace(&client, "team-a", json!({})).await;
    let poddefault = json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
        "metadata": {"name": "gpu", "namespace": "team-a"},
        "spec": {"desc": "GPU", "selector": {"matchLabels": {"gpu": "true"}},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}});
    create(&client, Some("team-a"), &poddefaults, poddefault)
        .await
        .expect("create a PodDefault");

    // outfit's controller owns the rules once it runs (written here as it writes them: a PUT
    // under its own field manager): an upgrade keeps them, neither resetting them to pods nor
    // failing on the field's other owner under server-side apply.
    let configurations = resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    );
    let services = json!({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"],
                          "operations": ["CREATE", "UPDATE"], "scope": "*"});
    let mut configuration = api(&client, None, &configurations)
        .get("outfit")
        .await
        .expect("get the webhook configuration");
    configuration.data["webhooks"][0]["rules"]
        .as_array_mut()
        .expect("rules")
        .push(services.clone());
    let as_outfit = PostParams {
        field_manager: Some("outfit".to_owned()),
        ..PostParams::default()
    };
    api(&client, None, &configurations)
        .replace("outfit", &as_outfit, &configuration)
        .await
        .expect("outfit's controller writes the rules");

    // Upgrade: new settings reach the objects, and the workspace backend comes in.
    install(&[
        "--set",
        "webhook.replicas=3,webhook.failurePolicy=Ignore,webhook.timeoutSeconds=10,workspaces.enabled=true",
    ]);
    let deployment = get_deployment(&client, "outfit").await.unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    let webhook = get_webhook_configuration(&client).await.unwrap();
    assert_eq!(webhook["webhooks"][0]["failurePolicy"], "Ignore");
    assert_eq!(webhook["webhooks"][0]["timeoutSeconds"], 10);
    let rules = webhook["webhooks"][0]["rules"].as_array().expect("rules");
    assert!(
        rules.contains(&services),
        "the upgrade kept outfit's rules: {rules:?}"
    );
    get_deployment(&client, "outfit-workspaces")
        .await
        .expect("the workspace backend is installed by the upgrade");
    get(&client, None, "v1", "Namespace", "namespaces", "sciencedata-dev")
        .await
        .expect("the workspace namespace is made");
    get_crd(&client, "workspaces.outfit.dev")
        .await
        .expect("the Workspace CRD comes with the backend");
    // And goes when it is turned off again (Helm deletes what the chart no longer renders), but
    // for the Workspace CRD, which crds.keep keeps: deleting it would delete every Workspace.
    install(&["--set", "webhook.replicas=3,webhook.failurePolicy=Ignore"]);
    assert_eq!(get_deployment(&client, "outfit-workspaces").await, None);
    get_crd(&client, "workspaces.outfit.dev")
        .await
        .expect("the Workspace CRD is kept");
    let history = helm.ok(
        &["history", "outfit", "--namespace", "outfit-system", "-o", "json"],
        kubeconfig,
    );
    let history: Value = serde_json::from_str(&history).expect("helm history -o json");
    assert_eq!(history.as_array().map(Vec::len), Some(3), "{history}");

    // Uninstall: outfit's objects go; the CRDs, and so the policies, stay (crds.keep).
    helm.ok(
        &["uninstall", "outfit", "--namespace", "outfit-system"],
        kubeconfig,
    );
    for (namespace, group, kind, plural) in [
        (Some("outfit-system"), "apps/v1", "Deployment", "deployments"),
        (Some("outfit-system"), "v1", "Service", "services"),
        (Some("outfit-system"), "v1", "ServiceAccount", "serviceaccounts"),
        (
            Some("outfit-system"),
            "networking.k8s.io/v1",
            "NetworkPolicy",
            "networkpolicies",
        ),
        (
            None,
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
        ),
        (
            None,
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ] {
        assert_eq!(
            get(&client, namespace, group, kind, plural, "outfit").await,
            None,
            "{kind} outfit is uninstalled"
        );
    }
    get_crd(&client, "poddefaults.kubeflow.org")
        .await
        .expect("the PodDefault CRD is kept");
    get(
        &client,
        Some("team-a"),
        "kubeflow.org/v1alpha1",
        "PodDefault",
        "poddefaults",
        "gpu",
    )
    .await
    .expect("the PodDefault is kept");
}
