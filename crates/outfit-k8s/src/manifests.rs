//! What a cluster needs to run outfit, ready for `kubectl apply -f -`: the CRDs, least-privilege
//! RBAC, the Deployment and Service, and the MutatingWebhookConfiguration with safe defaults.
//!
//! By default nothing else is needed: outfit mints its CA and serving certificate into a Secret
//! on first start and keeps the webhook configuration's `caBundle` and `rules` in step
//! ([`crate::registration`]); or cert-manager issues the certificate and injects the CA
//! ([`Certificates::CertManager`]), or the team brings both ([`Certificates::Provided`]).

use std::fmt;

use base64::{Engine, prelude::BASE64_STANDARD};
use k8s_openapi::api::core::v1::Namespace;
use kube::Resource;
use outfit_core::{
    family::Table,
    vocab::{Names, Served},
};
use serde_json::{Value, json};

pub use crate::names::{ADMIN_PORT, LEASE, NAME, TLS_SECRET, WEBHOOK_PORT, service_dns_names};
use crate::{
    cert_manager,
    component::{self, Component, Scope, Workload},
    crds, exemptions, registration_guard,
    rules::{self, Rules},
};

/// What the API server does with a pod when outfit cannot be reached or does not answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Reject the request: no pod is ever created without its policies, but an outfit outage
    /// blocks pod creation in every selected namespace.
    Fail,
    /// Admit the request unmutated: pods keep being created during an outage, without the
    /// secrets, mounts or tolerations the policies would have added.
    Ignore,
}

impl fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        })
    }
}

/// Where outfit's serving certificate comes from in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Certificates {
    /// outfit creates a CA and a serving certificate in the Secret [`TLS_SECRET`] on first start,
    /// renews and rotates them, and writes the CA into `caBundle` (`serve --tls-secret`).
    #[default]
    Managed,
    /// cert-manager issues them (a self-signed root, a CA Issuer, the serving Certificate into
    /// [`TLS_SECRET`]) and its CA injector fills `caBundle` (`cert-manager.io/inject-ca-from`);
    /// outfit reloads the mounted files.
    CertManager,
    /// The team creates [`TLS_SECRET`] and gives the CA to `outfit manifests --ca-file`.
    Provided,
}

/// Choices that shape the manifests.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// Namespace outfit runs in; never sent to the webhook.
    pub namespace: String,
    /// Container image of outfit.
    pub image: String,
    /// Webhook replicas.
    pub replicas: u32,
    /// The webhook's failure policy.
    pub failure_policy: FailurePolicy,
    /// Namespaces never sent to the webhook besides the system ones and `namespace`
    /// ([`exemptions`]).
    pub excluded_namespaces: Vec<String>,
    /// How long the API server waits for an answer (1 to 30 seconds).
    pub timeout_seconds: u32,
    /// Namespaces whose pods may reach the admin port (`/metrics`, `/livez`, `/readyz`): a
    /// Prometheus' namespace. With none, no pod may ([`network_policy`]).
    pub monitoring_namespaces: Vec<String>,
    /// PEM CA bundle the API server trusts for outfit's serving certificate.
    pub ca_bundle_pem: Option<String>,
    /// The kinds table: its kinds' CRDs are installed, and read by the ClusterRole.
    pub families: Table,
    /// API groups whose CRDs another project installs (`kubeflow.org` beside Kubeflow,
    /// `mutations.gatekeeper.sh` beside Gatekeeper): left out.
    pub without_crds: Vec<String>,
    /// The names of the objects of the [`Names::Listed`] kinds outfit may read: the filer
    /// injector's `<svm>-conn-secret` Secrets of the SVMs it is given
    /// (`outfit_core::filer::secret_names`). RBAC grants get, list and watch on these names
    /// alone, in every namespace; with none, no Secret is readable (outfit then mounts the SVMs
    /// unchecked, as the kubelet finds a missing Secret). Re-run `outfit manifests` when SVMs are
    /// added.
    pub listed_names: Vec<String>,
    /// The requests the API server sends to outfit (the rules the configuration starts with; with
    /// `manage_webhook`, outfit keeps them in step with the policies it serves).
    pub rules: Rules,
    /// Where the serving certificate comes from.
    pub certificates: Certificates,
    /// outfit keeps the webhook configuration's `rules` (and, with its own certificate,
    /// `caBundle`) in step, one replica writing (a Lease elects it); off, the configuration is
    /// left as installed (`serve --no-manage-webhook`).
    pub manage_webhook: bool,
}

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            namespace: "outfit-system".to_owned(),
            // The one place the image is named: `outfit manifests --workspaces` defaults to it too,
            // and hack/image/build.sh tags the image it builds with what the binary prints here.
            image: format!("ghcr.io/outfit-dev/outfit:{}", env!("CARGO_PKG_VERSION")),
            replicas: 2,
            failure_policy: FailurePolicy::Fail,
            excluded_namespaces: Vec::new(),
            timeout_seconds: 5,
            monitoring_namespaces: Vec::new(),
            ca_bundle_pem: None,
            families: outfit_core::kinds::FAMILIES,
            without_crds: Vec::new(),
            listed_names: Vec::new(),
            rules: Rules::Pods,
            certificates: Certificates::Managed,
            manage_webhook: true,
        }
    }
}

/// Every object of an in-cluster install, in apply order.
pub fn install(options: &InstallOptions) -> Vec<Value> {
    let webhook = component_of(options);
    let mut objects = crds::of(options.families, &options.without_crds);
    objects.push(component::restricted_namespace(&options.namespace));
    objects.extend(rbac(options));
    objects.extend(namespace_rbac(options));
    if options.manage_webhook {
        // What that identity may change in its configuration, held by the API server.
        objects.extend(registration_guard::objects(&webhook, NAME));
    }
    if options.certificates == Certificates::CertManager {
        objects.extend(cert_manager::objects(&options.namespace));
    }
    objects.push(deployment(options));
    objects.push(webhook.service("webhook", 443));
    objects.extend(webhook.disruption_budget(options.replicas));
    objects.push(network_policy(options));
    objects.push(critical_pods_quota(options));
    let service = json!({"namespace": options.namespace, "name": NAME, "path": "/mutate", "port": 443});
    let mut configuration = webhook_configuration(options, json!({"service": service}));
    if options.certificates == Certificates::CertManager {
        configuration["metadata"]["annotations"] =
            json!({"cert-manager.io/inject-ca-from": format!("{}/{TLS_SECRET}", options.namespace)});
    }
    objects.push(configuration);
    objects
}

/// What outfit may do in its own namespace: hold the Lease that elects the writer (only that
/// one, by name; `create` cannot be limited by name, as the object does not exist yet), and, with
/// its own certificate, read and rotate the Secret that holds it.
fn namespace_rbac(options: &InstallOptions) -> Vec<Value> {
    let mut rules = Vec::new();
    if options.manage_webhook {
        rules.push(
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                          "resourceNames": [LEASE], "verbs": ["get", "update"]}),
        );
        rules.push(
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}),
        );
    }
    if options.certificates == Certificates::Managed {
        rules.push(
            json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": [TLS_SECRET],
                          "verbs": ["get", "list", "watch", "update"]}),
        );
        rules.push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}));
    }
    if rules.is_empty() {
        return Vec::new();
    }
    let webhook = component_of(options);
    let scope = Scope::Namespace(&options.namespace);
    vec![webhook.role(scope, json!(rules)), webhook.binding(scope)]
}

/// A MutatingWebhookConfiguration that sends requests to outfit running outside the cluster at
/// `url` (`https://127.0.0.1:8443/mutate` for a local control plane).
pub fn local_webhook(options: &InstallOptions, url: &str) -> Vec<Value> {
    let mut objects = crds::of(options.families, &options.without_crds);
    objects.push(webhook_configuration(options, json!({"url": url})));
    objects
}

/// The webhook as an installed component.
fn component_of(options: &InstallOptions) -> Component<'_> {
    Component {
        name: NAME,
        namespace: &options.namespace,
    }
}

/// Read-only access to the policy kinds and namespaces, and, when outfit manages its
/// registration, to its own webhook configuration alone (by name) to keep it in step.
/// Read access to every CRD kind of the kinds table, a rule per group, as the watches read them;
/// the built-in kinds a family reads (ConfigMaps, Secrets) get exactly what is watched, on the
/// names watched (RBAC authorizes a list or watch by `resourceNames` when it carries the matching
/// `metadata.name` field selector): never every object of the kind, since RBAC has no
/// metadata-only read and a grant to list Secrets would be one to read every Secret's values.
fn rbac(options: &InstallOptions) -> Vec<Value> {
    let read = json!(["get", "list", "watch"]);
    let mut by_group: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut built_in = Vec::new();
    for kind in outfit_core::kinds::of(options.families) {
        let info = kind.info();
        match &info.served {
            Served::Crd => match by_group.iter_mut().find(|(group, _)| *group == info.group) {
                Some((_, plurals)) => plurals.push(info.plural),
                None => by_group.push((info.group, vec![info.plural])),
            },
            Served::BuiltIn {
                names: Names::Exactly(names),
                ..
            } => built_in.push(json!({"apiGroups": [info.group], "resources": [info.plural],
                                      "verbs": ["list", "watch"], "resourceNames": names})),
            // An empty `resourceNames` would grant every name: no names, no rule.
            Served::BuiltIn {
                names: Names::Listed(_),
                ..
            } if options.listed_names.is_empty() => {}
            Served::BuiltIn {
                names: Names::Listed(_),
                ..
            } => built_in.push(json!({"apiGroups": [info.group], "resources": [info.plural],
                                      "verbs": read, "resourceNames": options.listed_names})),
        }
    }
    let mut rules: Vec<Value> = by_group
        .into_iter()
        .map(|(group, plurals)| json!({"apiGroups": [group], "resources": plurals, "verbs": read}))
        .collect();
    rules.push(
        json!({"apiGroups": [Namespace::group(&())], "resources": [Namespace::plural(&())], "verbs": read}),
    );
    rules.extend(built_in);
    if options.manage_webhook {
        // list and watch by name work with the `metadata.name` field selector the controller sends.
        rules.push(json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
                          "resourceNames": [NAME], "verbs": ["get", "list", "watch", "update"]}));
    }
    let webhook = component_of(options);
    vec![
        webhook.service_account(),
        webhook.role(Scope::Cluster, json!(rules)),
        webhook.binding(Scope::Cluster),
    ]
}

/// The container's arguments: its certificate, and whether it manages its registration.
fn serve_args(options: &InstallOptions) -> Vec<String> {
    let mut args: Vec<String> = [
        "serve",
        "--from-cluster",
        "--listen",
        &format!("0.0.0.0:{WEBHOOK_PORT}"),
        "--admin-listen",
        &format!("0.0.0.0:{ADMIN_PORT}"),
    ]
    .map(str::to_owned)
    .into();
    match options.certificates {
        Certificates::Managed => {
            args.extend(["--tls-secret".to_owned(), TLS_SECRET.to_owned()]);
            for name in service_dns_names(&options.namespace) {
                args.extend(["--dns-name".to_owned(), name]);
            }
        }
        Certificates::CertManager | Certificates::Provided => args.extend(
            [
                "--tls-cert",
                "/etc/outfit/tls/tls.crt",
                "--tls-key",
                "/etc/outfit/tls/tls.key",
            ]
            .map(str::to_owned),
        ),
    }
    if !options.manage_webhook {
        args.push("--no-manage-webhook".to_owned());
    }
    args.extend(["--log-format", "json"].map(str::to_owned));
    args
}

/// What may reach the webhook's pods: the webhook port from any address, the admin port only
/// from the monitoring namespaces. The API server calls the webhook port, and its address is no
/// pod's (it runs on the control plane's hosts, or outside the cluster in a managed one), so no
/// peer can name it: a `from` would cut the API server off and fail every admission. The admin
/// port serves `/metrics`; with no monitoring namespace it admits no pod at all. The kubelet's
/// probes of `/livez` and `/readyz` still reach it: NetworkPolicy always allows traffic from the
/// node a pod runs on.
fn network_policy(options: &InstallOptions) -> Value {
    let mut ports = vec![("webhook", json!([]))];
    if !options.monitoring_namespaces.is_empty() {
        ports.push((
            "admin",
            component::namespace_peers(&options.monitoring_namespaces),
        ));
    }
    component_of(options).network_policy(&ports)
}

/// The webhook's PriorityClass: every pod creation waits on it.
const CRITICAL: &str = "system-cluster-critical";

/// A quota that admits the webhook's `system-cluster-critical` pods outside kube-system where the
/// API server limits the critical priority classes to namespaces with such a quota (the Priority
/// admission plugin's `limitedResources`, as some managed clusters configure it; Gatekeeper ships
/// the same). Elsewhere it changes nothing: 100 pods is far above any rollout's.
fn critical_pods_quota(options: &InstallOptions) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "outfit-critical-pods", "namespace": options.namespace, "labels": component_of(options).labels()},
        "spec": {
            "hard": {"pods": "100"},
            "scopeSelector": {"matchExpressions": [
                {"operator": "In", "scopeName": "PriorityClass", "values": [CRITICAL]}
            ]}
        }
    })
}

fn deployment(options: &InstallOptions) -> Value {
    // A certificate outfit does not manage is read from the Secret, mounted.
    let volume = (options.certificates != Certificates::Managed).then(|| {
        (
            "tls",
            "/etc/outfit/tls",
            json!({"secret": {"secretName": TLS_SECRET}}),
        )
    });
    component_of(options).deployment(Workload {
        replicas: options.replicas,
        image: &options.image,
        args: serve_args(options),
        // The namespace of the Lease and the certificate's Secret.
        env: Some(json!([{"name": "OUTFIT_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}])),
        ports: [("webhook", WEBHOOK_PORT), ("admin", ADMIN_PORT)],
        cpu_request: "100m",
        // Request equal to the limit: under memory pressure the kubelet evicts first the pods
        // using more than they requested, and every pod create waits on this one.
        memory_request: "256Mi",
        memory_limit: "256Mi",
        priority_class: Some(CRITICAL),
        volume,
    })
}

/// The webhook registration. The cluster's own traffic never waits on it ([`exemptions`]): the
/// system namespaces and outfit's own (so outfit can never block its own recovery or the control
/// plane's pods), nodes' requests, the cluster's bookkeeping, and what is labelled to opt out.
fn webhook_configuration(options: &InstallOptions, client_config: Value) -> Value {
    let mut client_config = client_config;
    if let Some(pem) = &options.ca_bundle_pem {
        client_config["caBundle"] = json!(BASE64_STANDARD.encode(pem.as_bytes()));
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": component_of(options).labels()},
        "webhooks": [{
            "name": "mutate.outfit.dev",
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config,
            "rules": rules::to_json(&options.rules),
            "namespaceSelector": exemptions::namespace_selector(&options.namespace, &options.excluded_namespaces),
            "matchConditions": exemptions::match_conditions(),
            "failurePolicy": options.failure_policy.to_string(),
            "sideEffects": "None",
            "reinvocationPolicy": "IfNeeded",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": options.timeout_seconds.clamp(1, 30)
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_has_safe_webhook_defaults() {
        let options = InstallOptions {
            ca_bundle_pem: Some("CA".into()),
            ..InstallOptions::default()
        };
        let objects = install(&options);
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "CustomResourceDefinition").count(),
            7
        );
        let webhook = &objects
            .iter()
            .find(|o| o["kind"] == "MutatingWebhookConfiguration")
            .unwrap()["webhooks"][0];
        assert_eq!(webhook["sideEffects"], "None");
        assert_eq!(webhook["reinvocationPolicy"], "IfNeeded");
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["timeoutSeconds"], 5);
        assert_eq!(webhook["clientConfig"]["caBundle"], "Q0E=");
        assert_eq!(
            webhook["namespaceSelector"],
            exemptions::namespace_selector("outfit-system", &[])
        );
        assert_eq!(webhook["matchConditions"], exemptions::match_conditions());
        // outfit's namespace holds its pods to Pod Security's restricted profile, which they
        // meet; its critical pods are admitted by a quota where the API server wants one; and
        // its memory is requested as much as its limit.
        let namespace = objects.iter().find(|o| o["kind"] == "Namespace").unwrap();
        assert_eq!(
            namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
            "restricted"
        );
        let quota = objects.iter().find(|o| o["kind"] == "ResourceQuota").unwrap();
        assert_eq!(
            quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"],
            json!(["system-cluster-critical"])
        );
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        let resources = &pod["containers"][0]["resources"];
        assert_eq!(resources["requests"]["memory"], resources["limits"]["memory"]);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        let container = &pod["containers"][0]["securityContext"];
        assert_eq!(container["allowPrivilegeEscalation"], false);
        assert_eq!(container["capabilities"]["drop"], json!(["ALL"]));
        let role = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
        for rule in role["rules"].as_array().unwrap() {
            let verbs = rule["verbs"].as_array().unwrap();
            let writes = !verbs
                .iter()
                .all(|v| ["get", "list", "watch"].contains(&v.as_str().unwrap()));
            // The one object outfit writes cluster-wide: its own webhook configuration, by name.
            assert!(
                !writes
                    || *rule
                        == json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
                                  "resourceNames": ["outfit"], "verbs": ["get", "list", "watch", "update"]}),
                "outfit only reads, but its configuration: {rule}"
            );
        }
        // The filer injector's inputs: list and watch only, and ConfigMaps by name.
        let rules = role["rules"].as_array().unwrap();
        let built_in = |plural: &str| rules.iter().find(|r| r["resources"] == json!([plural])).unwrap();
        assert_eq!(
            built_in("configmaps"),
            &json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"],
                    "resourceNames": ["existing-shares", "filers-list", "filer-sidecar-injector-json"]})
        );
        // Secrets: none readable unless SVMs are named, and then their Secrets alone.
        assert!(
            rules.iter().all(|r| r["resources"] != json!(["secrets"])),
            "{role}"
        );
        let with_svms = install(&InstallOptions {
            listed_names: outfit_core::filer::secret_names(["fld5_svm", "fld7svm"]),
            ..InstallOptions::default()
        });
        let role = with_svms.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
        let secrets: Vec<&Value> = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["resources"] == json!(["secrets"]))
            .collect();
        assert_eq!(
            secrets,
            [
                &json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"],
                     "resourceNames": ["fld5-svm-conn-secret", "fld7svm-conn-secret"]})
            ]
        );
    }

    /// The one-command install: no CA given, outfit mints its certificate into its Secret and
    /// holds a Lease, and RBAC grants exactly those objects by name in its namespace.
    #[test]
    fn by_default_outfit_manages_its_certificate_and_registration_with_rights_by_name() {
        let objects = install(&InstallOptions::default());
        let webhook = objects
            .iter()
            .find(|o| o["kind"] == "MutatingWebhookConfiguration")
            .unwrap();
        assert_eq!(webhook["webhooks"][0]["clientConfig"].get("caBundle"), None);
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            args.windows(2).any(|w| w == ["--tls-secret", "outfit-tls"]),
            "{args:?}"
        );
        assert!(
            args.windows(2)
                .any(|w| w == ["--dns-name", "outfit.outfit-system.svc"]),
            "{args:?}"
        );
        assert!(!args.contains(&"--tls-cert"), "{args:?}");
        assert_eq!(container.get("volumeMounts"), None);
        assert_eq!(
            container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        let role = objects.iter().find(|o| o["kind"] == "Role").unwrap();
        assert_eq!(role["metadata"]["namespace"], "outfit-system");
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["outfit"], "verbs": ["get", "update"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["outfit-tls"], "verbs": ["get", "list", "watch", "update"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
            ])
        );
        assert!(objects.iter().any(|o| o["kind"] == "RoleBinding"));
    }

    /// `--cert-manager`: cert-manager issues the certificate through a CA and injects it; outfit
    /// mounts the Secret, may not touch Secrets, and still keeps the rules in step.
    #[test]
    fn with_cert_manager_the_ca_is_injected_and_the_secret_mounted() {
        let objects = install(&InstallOptions {
            certificates: Certificates::CertManager,
            ..InstallOptions::default()
        });
        let webhook = objects
            .iter()
            .find(|o| o["kind"] == "MutatingWebhookConfiguration")
            .unwrap();
        assert_eq!(
            webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "outfit-system/outfit-tls"
        );
        let serving = objects
            .iter()
            .find(|o| o["kind"] == "Certificate" && o["metadata"]["name"] == "outfit-tls")
            .unwrap();
        assert_eq!(serving["spec"]["secretName"], "outfit-tls");
        assert_eq!(serving["spec"]["issuerRef"]["name"], "outfit-ca");
        assert_eq!(
            serving["spec"]["dnsNames"],
            json!([
                "outfit.outfit-system.svc",
                "outfit.outfit-system.svc.cluster.local"
            ])
        );
        assert_eq!(objects.iter().filter(|o| o["kind"] == "Issuer").count(), 2);
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["secret"]["secretName"], "outfit-tls");
        let args = pod["containers"][0]["args"].to_string();
        assert!(
            args.contains("--tls-cert") && !args.contains("--tls-secret"),
            "{args}"
        );
        let role = objects.iter().find(|o| o["kind"] == "Role").unwrap();
        assert!(
            role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["resources"] == json!(["leases"])),
            "{role}"
        );

        let unmanaged = install(&InstallOptions {
            certificates: Certificates::CertManager,
            manage_webhook: false,
            ..InstallOptions::default()
        });
        assert!(unmanaged.iter().all(|o| o["kind"] != "Role"));
        let cluster_role = unmanaged.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
        assert!(!cluster_role.to_string().contains("mutatingwebhookconfigurations"));
        assert!(
            unmanaged
                .iter()
                .any(|o| o["kind"] == "Deployment" && o.to_string().contains("--no-manage-webhook"))
        );
    }

    #[test]
    fn local_mode_points_at_a_url_and_crds_can_be_left_out() {
        let options = InstallOptions {
            failure_policy: FailurePolicy::Ignore,
            without_crds: vec!["kubeflow.org".to_owned()],
            ..InstallOptions::default()
        };
        let objects = local_webhook(&options, "https://127.0.0.1:8443/mutate");
        assert_eq!(objects.len(), 7);
        assert!(
            objects
                .iter()
                .all(|o| o["metadata"]["name"] != "poddefaults.kubeflow.org")
        );
        let webhook = &objects[6]["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"],
            json!({"url": "https://127.0.0.1:8443/mutate"})
        );
        assert_eq!(webhook["failurePolicy"], "Ignore");
    }

    /// The API server (no pod) reaches the webhook port from wherever it runs; the admin port
    /// admits the monitoring namespaces only, and no pod when none is given.
    #[test]
    fn the_network_policy_opens_the_webhook_port_to_any_address_and_the_admin_port_to_monitoring_only() {
        let policy_of = |objects: Vec<Value>| {
            objects
                .into_iter()
                .find(|o| o["kind"] == "NetworkPolicy")
                .expect("a NetworkPolicy")
        };
        let closed = policy_of(install(&InstallOptions::default()));
        assert_eq!(closed["apiVersion"], "networking.k8s.io/v1");
        assert_eq!(closed["metadata"]["namespace"], "outfit-system");
        assert_eq!(
            closed["spec"],
            json!({"podSelector": {"matchLabels": {"app.kubernetes.io/name": "outfit"}},
                   "policyTypes": ["Ingress"],
                   "ingress": [{"ports": [{"port": "webhook", "protocol": "TCP"}]}]})
        );
        let monitored = policy_of(install(&InstallOptions {
            monitoring_namespaces: vec!["monitoring".to_owned(), "prometheus".to_owned()],
            ..InstallOptions::default()
        }));
        assert_eq!(
            monitored["spec"]["ingress"],
            json!([
                {"ports": [{"port": "webhook", "protocol": "TCP"}]},
                {"ports": [{"port": "admin", "protocol": "TCP"}],
                 "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
                          {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prometheus"}}}]}
            ])
        );
        // The ports it names are the Deployment's.
        let objects = install(&InstallOptions::default());
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let names: Vec<&Value> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["name"])
            .collect();
        assert_eq!(names, [&json!("webhook"), &json!("admin")]);
    }
}
