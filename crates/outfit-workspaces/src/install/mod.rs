//! What a cluster needs to run `outfit workspaces`, ready for `kubectl apply -f -`: the
//! `Workspace` resource's CRD, its ServiceAccount, the least privilege it needs (a Role in the
//! workspace namespace for exactly the calls [`crate::io::cluster`] and [`crate::io::cache`] make,
//! a ClusterRole for the users' volumes and for checking callers' tokens), its configuration,
//! Deployment (replicas spread over nodes), Service and PodDisruptionBudget, and its own share of
//! the API server (API Priority and Fairness: a FlowSchema and a priority level); and the
//! ValidatingAdmissionPolicy that holds what its identity creates to what a workspace needs
//! ([`guard`]), with the workspace namespace's Pod Security level; the one that refuses to delete
//! that namespace, and every home in it, unless asked twice ([`homes_guard`]); and who may reach
//! its API ([`access`]: deic-dk's API token, the NetworkPolicy).

pub mod access;
pub mod guard;
pub mod homes_guard;
pub mod sign_in;

use outfit_k8s::component::{self, Component, Scope, Workload};
use outfit_workspaces_core::{model, model::config::StorageStrategy, resource, workspace::placeholder};
use serde_json::{Value, json};

/// Choices that shape the manifests.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The namespace the backend runs in.
    pub namespace: String,
    /// The namespace of the workspace pods (the config's `namespace`).
    pub workspace_namespace: String,
    /// outfit's container image (the CLI defaults to the one `outfit manifests` names, which
    /// hack/image/build.sh builds).
    pub image: String,
    /// Replicas; every bit of state is in the cluster, so two answer alike.
    pub replicas: u32,
    /// Whether to print the FlowSchema and priority level (`flowcontrol.apiserver.k8s.io/v1`,
    /// Kubernetes 1.29 and later).
    pub flow_schema: bool,
    /// The backend pods' PriorityClass, if any.
    pub priority_class: Option<String>,
    /// What the pods and PersistentVolumes the backend creates may hold ([`guard`]).
    pub allowed: guard::Allowed,
    /// The Pod Security level the workspace namespace enforces ([`guard::pod_security`]).
    pub pod_security: guard::PodSecurity,
    /// Who may reach the API and admin ports ([`access`]).
    pub access: access::Access,
    /// Where homes live (the config's `storageStrategy`): PersistentVolume rights only for `nfs`.
    pub storage_strategy: StorageStrategy,
    /// The config's `storageClassName`: for `per-user`, empty leaves it to the cluster's default.
    pub storage_class: String,
    /// The config's `snapshotClassName` and `snapshotsKept`: homes snapshotted with that class,
    /// and rights on VolumeSnapshots; `None`: no snapshots, no rights.
    pub snapshots: Option<(String, usize)>,
    /// The config's `prePull.enabled`: the catalogue's images pulled ahead onto the nodes.
    pub pre_pull: bool,
    /// The config's `placeholders.count`: pods holding room for that many launches.
    pub placeholders: usize,
    /// Sign-in with the site's OpenID provider and the workspace proxy ([`sign_in`]), if any.
    pub sign_in: Option<sign_in::SignIn>,
}

/// Name of the backend's objects.
pub const NAME: &str = model::keys::APP_NAME;
/// The API port in the pod.
pub const API_PORT: u16 = 8080;
/// The admin port in the pod.
pub const ADMIN_PORT: u16 = 8081;

/// The backend as an installed component.
fn component_of(options: &InstallOptions) -> Component<'_> {
    Component {
        name: NAME,
        namespace: &options.namespace,
    }
}

/// Every object, in apply order: the `Workspace` CRD first (cluster-scoped, needing nothing).
pub fn objects(options: &InstallOptions) -> Vec<Value> {
    let backend = component_of(options);
    let mut objects = vec![resource::crd(), placeholder_class(&backend)];
    // outfit's namespace enforces Pod Security's `restricted`, the workspaces' their own level,
    // unless the workspaces run in outfit's (an accepted risk), where their manifests decide.
    if options.workspace_namespace == options.namespace {
        objects.push(component::namespace(&options.namespace));
    } else {
        objects.push(component::restricted_namespace(&options.namespace));
        objects.push(guard::workspace_namespace(
            &options.workspace_namespace,
            options.pod_security,
        ));
    }
    objects.extend(rbac(options));
    objects.extend(guard::objects(&backend, &options.allowed));
    objects.extend(homes_guard::objects(&backend, &options.workspace_namespace));
    if options.flow_schema {
        objects.extend(flow_control(options));
    }
    objects.extend(options.access.secret(&backend));
    objects.push(config_map(options));
    objects.push(deployment(options));
    objects.push(backend.service("api", 80));
    objects.extend(options.sign_in.iter().flat_map(|s| s.objects(&backend)));
    objects.push(options.access.network_policy(&backend, "api", "admin"));
    objects.extend(backend.disruption_budget(options.replicas));
    objects
}

/// The PriorityClass of placeholder pods (`placeholders`, issue 35): below every workspace's (0),
/// so the scheduler preempts a placeholder for a launch; never preempting anything itself.
fn placeholder_class(backend: &Component<'_>) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": placeholder::PRIORITY_CLASS, "labels": backend.labels()},
        "value": placeholder::PRIORITY,
        "globalDefault": false,
        "preemptionPolicy": "Never",
        "description": "outfit workspaces' placeholders: capacity held for launches, preempted by them"
    })
}

/// The ServiceAccount and what it may do. Only the verbs the backend uses: it never updates
/// (patches instead), and lists Services, Ingresses and NetworkPolicies only for the leader's
/// sweep of those whose pod is gone (once a minute; requests read them by name).
pub fn rbac(options: &InstallOptions) -> Vec<Value> {
    let backend = component_of(options);
    let pods = Scope::Namespace(&options.workspace_namespace);
    let mut namespace_rules = json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
        // Token reads: websocket exec is a GET that newer API servers also check as create.
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "create", "delete"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "create", "delete"]},
        // Each workspace's NetworkPolicy, read by name like the Services; `delete` removes
        // one an earlier pod of the same name left before the garbage collector did.
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "create", "delete"]},
        // Reading a failed pod's last Warning and watching the workspaces' Events;
        // publishing the backend's own Events.
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        // The election of the replica that runs the lifecycle, and the per-user Leases a
        // user's creates take turns on across replicas (named by a hash of the user, so not
        // narrowed to names): create, get and update to take, renew and release one;
        // list and delete for the leader's sweep of those no create used for long.
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update", "list", "delete"]},
        // The Workspaces: watched by every replica, made by a launch, started and stopped
        // (patched), deleted with their workspace; their status written by the leader.
        {"apiGroups": ["outfit.dev"], "resources": ["workspaces"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
        {"apiGroups": ["outfit.dev"], "resources": ["workspaces/status"], "verbs": ["patch"]},
    ]);
    if options.snapshots.is_some()
        && let Value::Array(rules) = &mut namespace_rules
    {
        // Snapshots of homes: taken on every stop and before a home is removed, watched to list
        // them for their owner, the oldest past snapshotsKept deleted.
        rules.push(json!({"apiGroups": ["snapshot.storage.k8s.io"], "resources": ["volumesnapshots"], "verbs": ["get", "list", "watch", "create", "delete"]}));
    }
    vec![
        backend.service_account(),
        backend.role(pods, namespace_rules),
        backend.binding(pods),
        backend.role(
            Scope::Cluster,
            Value::Array(cluster_rules(options.storage_strategy)),
        ),
        backend.binding(Scope::Cluster),
    ]
}

/// The ClusterRole's rules: token reviews, and PersistentVolumes only where the storage strategy
/// writes them (`nfs`): a dynamically provisioned home needs none, so a stolen token gets none.
fn cluster_rules(strategy: StorageStrategy) -> Vec<Value> {
    let mut rules = Vec::new();
    if strategy.writes_volumes() {
        rules.push(json!({"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "create", "delete"]}));
    }
    // Checking the bearer tokens callers of the native API present.
    rules.push(
        json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}),
    );
    // The images each node holds, read only: a launch prefers the nodes that hold its images
    // (imagePlacement), and the pulls ahead go to nodes short of them (prePull).
    rules.push(json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}));
    rules
}

/// The backend's own priority level, and the FlowSchema that puts its ServiceAccount's requests
/// there. Without them they fall in the `service-accounts` schema, whose `workload-low` level
/// every ServiceAccount shares: on a loaded API server it refused three of four of the backend's
/// requests with 429 (BENCHMARKS.md, "Workspace backend at scale"). Its creates are bounded by
/// `maxCreatesInFlight`, so a share of its own takes little from the others.
pub fn flow_control(options: &InstallOptions) -> Vec<Value> {
    let labels = component_of(options).labels();
    let flowcontrol = "flowcontrol.apiserver.k8s.io/v1";
    vec![
        json!({
            "apiVersion": flowcontrol, "kind": "PriorityLevelConfiguration",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {"type": "Limited", "limited": {
                // workload-low, every other ServiceAccount's, has 100; global-default 20.
                "nominalConcurrencyShares": 30,
                "lendablePercent": 50,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}
            }}
        }),
        json!({
            "apiVersion": flowcontrol, "kind": "FlowSchema",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {
                "priorityLevelConfiguration": {"name": NAME},
                // Before `service-accounts` (9000), after the system's own (up to 900).
                "matchingPrecedence": 1000,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{
                    "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": NAME, "namespace": options.namespace}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
                }]
            }
        }),
    ]
}

/// The config lines of `prePull` and `placeholders` (issue 35), when asked for.
fn start_ahead(options: &InstallOptions) -> String {
    let mut lines = String::new();
    if options.pre_pull {
        lines.push_str(
            "# The catalogue's images are pulled ahead onto the nodes (docs/workspaces/internals.md, \
             Start time).\n\
             prePull: {enabled: true}\n",
        );
    }
    if options.placeholders > 0 {
        lines.push_str(&format!(
            "# Pods holding room for this many launches, preempted by them.\n\
             placeholders: {{count: {}}}\n",
            options.placeholders
        ));
    }
    lines
}

/// A starting configuration: deic-dk's keys with the namespace filled in, and outfit's listen
/// addresses for a pod. Everything else keeps its default (docs/workspaces/configuration.md lists them).
fn config_map(options: &InstallOptions) -> Value {
    let config = format!(
        "# outfit workspaces configuration: every key, its default and its BACKEND_* override are in\n\
         # docs/workspaces/configuration.md.\n\
         namespace: {ns}\n\
         # Workspaces let in the backend's pods from here (their NetworkPolicy).\n\
         backendNamespace: {backend}\n\
         listen: 0.0.0.0:{API_PORT}\n\
         adminListen: 0.0.0.0:{ADMIN_PORT}\n\
         {access}\
         ingressDomain: \"\"\n\
         # Where homes live: nfs (a volume on the silo), per-user, per-workspace (claims of the class), ephemeral.\n\
         storageStrategy: {strategy}\n\
         storageClassName: {class:?}\n{snapshots}{ahead}{sign_in}",
        ns = options.workspace_namespace,
        backend = options.namespace,
        access = options.access.config_lines(),
        strategy = options.storage_strategy.name(),
        class = options.storage_class,
        snapshots = options
            .snapshots
            .as_ref()
            .map_or_else(String::new, |(class, kept)| format!(
                "# Homes are snapshotted with this VolumeSnapshotClass on every stop and before removal.\n\
             snapshotClassName: {class:?}\n\
             snapshotsKept: {kept}\n"
            )),
        ahead = start_ahead(options),
        sign_in = options
            .sign_in
            .as_ref()
            .map(sign_in::SignIn::config_lines)
            .unwrap_or_default(),
    );
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": options.namespace, "labels": component_of(options).labels()},
        "data": {"config.yaml": config}
    })
}

fn deployment(options: &InstallOptions) -> Value {
    component_of(options).deployment(Workload {
        replicas: options.replicas,
        image: &options.image,
        args: [
            "workspaces",
            "--config",
            &format!("{}/config.yaml", access::CONFIG_DIR),
            "--log-format",
            "json",
        ]
        .map(str::to_owned)
        .to_vec(),
        // Names this replica in the Events it publishes.
        env: Some(json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])),
        ports: [("api", API_PORT), ("admin", ADMIN_PORT)],
        cpu_request: "50m",
        memory_request: "64Mi",
        // The watch caches grow with the workspaces, and launches in flight and progress streams
        // take more: 124 MiB at 4,000, 374 MiB at 10,000 after 1,900 launches queued, 573 MiB
        // at the peak of that queue (BENCHMARKS.md, "Workspace backend at scale").
        memory_limit: "512Mi",
        priority_class: options.priority_class.as_deref(),
        volume: Some((
            "config",
            access::CONFIG_DIR,
            options.access.config_volume(
                NAME,
                options
                    .sign_in
                    .iter()
                    .flat_map(sign_in::SignIn::volume_sources)
                    .collect(),
            ),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> InstallOptions {
        InstallOptions {
            namespace: "outfit-system".to_owned(),
            workspace_namespace: "sciencedata".to_owned(),
            image: "outfit:test".to_owned(),
            replicas: 2,
            flow_schema: true,
            priority_class: None,
            allowed: guard::Allowed {
                nfs_storage_root: "/tank/storage".to_owned(),
                ..guard::Allowed::default()
            },
            pod_security: guard::PodSecurity::Baseline,
            storage_strategy: StorageStrategy::Nfs,
            storage_class: "nfs".to_owned(),
            snapshots: None,
            pre_pull: false,
            placeholders: 0,
            access: access::Access {
                token: access::ApiToken::Generated("s3cret".to_owned()),
                frontend_namespaces: vec!["portal".to_owned()],
                frontend_cidrs: Vec::new(),
                ingress_namespaces: vec!["ingress-nginx".to_owned()],
                monitoring_namespaces: Vec::new(),
            },
            sign_in: None,
        }
    }

    /// The one object of `kind` in `objects`.
    fn the<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
        objects.iter().find(|o| o["kind"] == kind).unwrap()
    }

    #[test]
    fn the_flow_schema_gives_the_backends_account_its_own_priority_level() {
        let printed = objects(&options());
        let (schema, level) = (
            the(&printed, "FlowSchema"),
            the(&printed, "PriorityLevelConfiguration"),
        );
        assert_eq!(
            schema["spec"]["priorityLevelConfiguration"]["name"],
            level["metadata"]["name"]
        );
        let subject = &schema["spec"]["rules"][0]["subjects"][0]["serviceAccount"];
        let account = the(&printed, "ServiceAccount");
        assert_eq!(subject["name"], account["metadata"]["name"]);
        assert_eq!(subject["namespace"], account["metadata"]["namespace"]);
        let before_service_accounts = schema["spec"]["matchingPrecedence"].as_u64().unwrap();
        assert!(before_service_accounts < 9000);
        // Left out for clusters before Kubernetes 1.29.
        let without = objects(&InstallOptions {
            flow_schema: false,
            ..options()
        });
        assert!(
            !without
                .iter()
                .any(|o| o["apiVersion"].as_str().unwrap().starts_with("flowcontrol"))
        );
    }

    #[test]
    fn the_role_lives_where_the_pods_are_and_binds_the_backends_account() {
        let objects = objects(&options());
        let find = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        assert_eq!(find("Role")["metadata"]["namespace"], "sciencedata");
        assert_eq!(find("RoleBinding")["subjects"][0]["namespace"], "outfit-system");
        assert_eq!(find("Deployment")["metadata"]["namespace"], "outfit-system");
        let kinds: Vec<_> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "Namespace").count(), 2);
        // outfit's namespace is restricted; the workspaces' enforces its own level.
        let enforced = |name: &str| {
            let namespace = objects
                .iter()
                .find(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == name)
                .unwrap();
            namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].clone()
        };
        assert_eq!(enforced("outfit-system"), "restricted");
        assert_eq!(enforced("sciencedata"), "baseline");
    }

    #[test]
    fn the_workspace_crd_comes_first_as_the_resource_defines_it() {
        let printed = objects(&options());
        assert_eq!(printed[0], resource::crd());
        assert_eq!(printed[0]["metadata"]["name"], resource::CRD_NAME);
        let crds = printed.iter().filter(|o| o["kind"] == "CustomResourceDefinition");
        assert_eq!(crds.count(), 1);
    }

    #[test]
    fn replicas_are_spread_kept_by_a_budget_when_there_are_two_and_take_the_priority_given() {
        let printed = objects(&options());
        let budget = the(&printed, "PodDisruptionBudget");
        assert_eq!(budget["spec"]["minAvailable"], 1);
        assert_eq!(budget["metadata"]["namespace"], "outfit-system");
        let pod = &the(&printed, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(
            pod["topologySpreadConstraints"][0]["topologyKey"],
            "kubernetes.io/hostname"
        );
        assert!(pod.get("priorityClassName").is_none());
        let single = objects(&InstallOptions {
            replicas: 1,
            priority_class: Some("workspaces-high".to_owned()),
            ..options()
        });
        assert!(!single.iter().any(|o| o["kind"] == "PodDisruptionBudget"));
        let pod = &the(&single, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(pod["priorityClassName"], "workspaces-high");
    }

    #[test]
    fn the_config_map_holds_a_config_the_backend_reads() {
        let printed = objects(&options());
        let map = the(&printed, "ConfigMap");
        let dir = std::env::temp_dir().join(format!("outfit-install-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The pod's config directory as the Deployment mounts it: the ConfigMap and the Secret's
        // token side by side.
        let secret = the(&printed, "Secret");
        let token = secret["stringData"][access::TOKEN_KEY].as_str().unwrap();
        std::fs::write(dir.join(access::TOKEN_KEY), token).unwrap();
        let text = map["data"]["config.yaml"].as_str().unwrap();
        let text = text.replace(access::CONFIG_DIR, dir.to_str().unwrap());
        let path = dir.join("config.yaml");
        std::fs::write(&path, text).unwrap();
        let (config, warnings) = crate::Config::load(Some(&path), |_| None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(config.namespace, "sciencedata");
        assert_eq!(config.network.backend_namespace, "outfit-system");
        assert_eq!(config.listen.port(), API_PORT);
        // deic-dk's API takes the Secret's token, and only from loopback until the frontend's
        // networks are named.
        assert_eq!(config.bearer_token.as_deref(), Some("s3cret"));
        let cidrs: Vec<String> = config
            .allowed_source_cidrs
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(cidrs, ["127.0.0.0/8"]);
        let pod = &the(&printed, "Deployment")["spec"]["template"]["spec"];
        let sources = &pod["volumes"][0]["projected"]["sources"];
        assert_eq!(sources[0]["configMap"]["name"], map["metadata"]["name"]);
        assert_eq!(sources[1]["secret"]["name"], secret["metadata"]["name"]);
        assert_eq!(
            pod["containers"][0]["volumeMounts"][0]["mountPath"],
            access::CONFIG_DIR
        );
        assert!(printed.iter().any(|o| o["kind"] == "NetworkPolicy"));
    }

    /// The verbs of `resource` in `group` that `role` grants.
    fn verbs(role: &Value, group: &str, resource: &str) -> Vec<String> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| {
                rule["apiGroups"].as_array().unwrap().iter().any(|g| g == group)
                    && rule["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|r| r == resource)
            })
            .flat_map(|rule| rule["verbs"].as_array().unwrap().clone())
            .map(|verb| verb.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_roles_grant_network_policies_event_watches_and_token_reviews() {
        let objects = objects(&options());
        let find = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        let (role, cluster_role) = (find("Role"), find("ClusterRole"));
        assert_eq!(
            verbs(role, "networking.k8s.io", "networkpolicies"),
            ["get", "list", "create", "delete"]
        );
        // Listed (never watched) by the leader's sweep of what gone pods left.
        for (group, resource) in [("", "services"), ("networking.k8s.io", "ingresses")] {
            assert_eq!(verbs(role, group, resource), ["get", "list", "create", "delete"]);
        }
        assert_eq!(verbs(role, "", "events"), ["get", "list", "watch"]);
        // Leases: taken, renewed and released; listed and deleted by the sweep. Never watched.
        assert_eq!(
            verbs(role, "coordination.k8s.io", "leases"),
            ["create", "get", "update", "list", "delete"]
        );
        // Workspaces: never updated (patched), their status patched only, nothing cluster-wide.
        assert_eq!(
            verbs(role, "outfit.dev", "workspaces"),
            ["get", "list", "watch", "create", "patch", "delete"]
        );
        assert_eq!(verbs(role, "outfit.dev", "workspaces/status"), ["patch"]);
        assert!(verbs(cluster_role, "outfit.dev", "workspaces").is_empty());
        assert_eq!(
            verbs(cluster_role, "authentication.k8s.io", "tokenreviews"),
            ["create"]
        );
        // Token reviews are cluster-scoped: a Role could not grant them.
        assert!(verbs(role, "authentication.k8s.io", "tokenreviews").is_empty());
        // Nodes are read for their images, never written.
        assert_eq!(verbs(cluster_role, "", "nodes"), ["list", "watch"]);
        assert_eq!(
            verbs(cluster_role, "", "persistentvolumes"),
            ["get", "create", "delete"]
        );
    }

    #[test]
    fn a_provisioned_home_gives_no_rights_on_volumes_and_says_its_strategy() {
        let options = InstallOptions {
            storage_strategy: StorageStrategy::PerUser,
            storage_class: String::new(),
            snapshots: None,
            ..options()
        };
        let printed = objects(&options);
        let cluster_role = the(&printed, "ClusterRole");
        assert!(verbs(cluster_role, "", "persistentvolumes").is_empty());
        assert_eq!(
            verbs(cluster_role, "authentication.k8s.io", "tokenreviews"),
            ["create"]
        );
        let config = the(&printed, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .unwrap();
        assert!(config.contains("storageStrategy: per-user\n"), "{config}");
        assert!(config.contains("storageClassName: \"\"\n"), "{config}");
        assert!(!config.contains("snapshotClassName"), "{config}");
        let role = the(&printed, "Role");
        assert!(verbs(role, "snapshot.storage.k8s.io", "volumesnapshots").is_empty());
    }

    #[test]
    fn snapshots_give_rights_on_volume_snapshots_only_and_are_configured() {
        let options = InstallOptions {
            storage_strategy: StorageStrategy::PerUser,
            storage_class: String::new(),
            snapshots: Some(("csi-snapshots".to_owned(), 5)),
            ..options()
        };
        let printed = objects(&options);
        let role = the(&printed, "Role");
        // Never patched: taken, read, watched for their owners' lists, pruned.
        assert_eq!(
            verbs(role, "snapshot.storage.k8s.io", "volumesnapshots"),
            ["get", "list", "watch", "create", "delete"]
        );
        assert!(verbs(role, "snapshot.storage.k8s.io", "volumesnapshotcontents").is_empty());
        let cluster_role = the(&printed, "ClusterRole");
        assert!(verbs(cluster_role, "snapshot.storage.k8s.io", "volumesnapshots").is_empty());
        let config = the(&printed, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .unwrap();
        assert!(
            config.contains("snapshotClassName: \"csi-snapshots\"\nsnapshotsKept: 5\n"),
            "{config}"
        );
    }

    #[test]
    fn pulls_ahead_and_placeholders_are_configured_when_asked_for() {
        let config_of = |options: &InstallOptions| {
            the(&objects(options), "ConfigMap")["data"]["config.yaml"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let plain = config_of(&options());
        assert!(
            !plain.contains("prePull") && !plain.contains("placeholders"),
            "{plain}"
        );
        let ahead = config_of(&InstallOptions {
            pre_pull: true,
            placeholders: 3,
            ..options()
        });
        assert!(ahead.contains("\nprePull: {enabled: true}\n"), "{ahead}");
        assert!(ahead.contains("\nplaceholders: {count: 3}\n"), "{ahead}");
        // And the backend reads those lines.
        let dir = std::env::temp_dir().join(format!("outfit-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        let lines: Vec<&str> = ahead
            .lines()
            .filter(|l| l.starts_with("prePull:") || l.starts_with("placeholders:"))
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let (config, _) = model::config::Config::load(Some(&path), |_| None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(config.pre_pull.enabled);
        assert_eq!(config.placeholders.count, 3);
    }

    #[test]
    fn sign_in_and_the_proxy_are_configured_mounted_and_routed() {
        let printed = objects(&InstallOptions {
            sign_in: Some(sign_in::SignIn {
                issuer_url: "https://login.example.org/realms/site".to_owned(),
                client_id: "outfit".to_owned(),
                client_secret: "outfit-oidc".to_owned(),
                redirect_url: "https://workspaces.example.org/auth/callback".to_owned(),
                allowed_groups: vec!["staff".to_owned()],
                cookie_key: sign_in::CookieKey::Generated(
                    "a-random-key-of-forty-eight-bytes-in-base64-xxxxxx".to_owned(),
                ),
                proxy_domain: Some("ws.example.org".to_owned()),
                ingress_class: Some("nginx".to_owned()),
                tls_secret: Some("workspaces-tls".to_owned()),
            }),
            ..options()
        });
        // The config the backend reads, with the files the Deployment mounts beside it.
        let dir = std::env::temp_dir().join(format!("outfit-install-sign-in-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(access::TOKEN_KEY), "s3cret").unwrap();
        std::fs::write(dir.join(sign_in::CLIENT_SECRET_KEY), "the client secret").unwrap();
        let key = printed
            .iter()
            .find(|o| o["metadata"]["name"] == sign_in::COOKIE_KEY_SECRET)
            .unwrap()["stringData"][sign_in::COOKIE_KEY]
            .as_str()
            .unwrap();
        std::fs::write(dir.join(sign_in::COOKIE_KEY), key).unwrap();
        let text = the(&printed, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .unwrap();
        let path = dir.join("config.yaml");
        std::fs::write(&path, text.replace(access::CONFIG_DIR, dir.to_str().unwrap())).unwrap();
        let (config, _) = crate::Config::load(Some(&path), |_| None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let oidc = config.oidc.expect("oidc configured");
        assert_eq!(oidc.client_secret, "the client secret");
        assert_eq!(oidc.allowed_groups, ["staff"]);
        assert!(oidc.cookie_key.is_some());
        assert_eq!(config.proxy_domain.as_deref(), Some("ws.example.org"));
        let sources =
            &the(&printed, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"];
        let secrets: Vec<&str> = sources
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["secret"]["name"].as_str())
            .collect();
        assert_eq!(
            secrets,
            [access::TOKEN_SECRET, "outfit-oidc", sign_in::COOKIE_KEY_SECRET]
        );
        // One route for the backend's host and every workspace's.
        let ingress = &the(&printed, "Ingress")["spec"];
        let hosts: Vec<&str> = ingress["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap())
            .collect();
        assert_eq!(hosts, ["workspaces.example.org", "*.ws.example.org"]);
        assert_eq!(ingress["ingressClassName"], "nginx");
        assert_eq!(ingress["tls"][0]["secretName"], "workspaces-tls");
        assert_eq!(
            ingress["rules"][1]["http"]["paths"][0]["backend"]["service"]["name"],
            NAME
        );
    }
}
