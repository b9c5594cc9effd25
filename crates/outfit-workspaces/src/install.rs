//! What a cluster needs to run `outfit workspaces`, ready for `kubectl apply -f -`: its
//! ServiceAccount, the least privilege it needs (a Role in the workspace namespace for exactly the
//! calls [`crate::cluster`] and [`crate::cache`] make, a ClusterRole for the users' volumes and
//! for checking callers' tokens), its configuration, Deployment and Service.

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
}

/// Name of the backend's objects.
pub const NAME: &str = "outfit-workspaces";
/// The API port in the pod.
pub const API_PORT: u16 = 8080;
/// The admin port in the pod.
pub const ADMIN_PORT: u16 = 8081;

fn labels() -> Value {
    json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/version": env!("CARGO_PKG_VERSION")})
}

/// Every object, in apply order.
pub fn objects(options: &InstallOptions) -> Vec<Value> {
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": options.namespace}})];
    if options.workspace_namespace != options.namespace {
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": options.workspace_namespace}}));
    }
    objects.extend(rbac(options));
    objects.push(config_map(options));
    objects.push(deployment(options));
    objects.push(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": options.namespace, "labels": labels()},
        "spec": {"selector": {"app.kubernetes.io/name": NAME},
                 "ports": [{"name": "api", "port": 80, "targetPort": "api", "protocol": "TCP"}]}
    }));
    objects
}

/// The ServiceAccount and what it may do. Only the verbs the backend uses: it never updates
/// (patches instead), never lists Services or Ingresses (it reads them by name).
pub fn rbac(options: &InstallOptions) -> Vec<Value> {
    let rbac_api = "rbac.authorization.k8s.io/v1";
    let subject = json!([{"kind": "ServiceAccount", "name": NAME, "namespace": options.namespace}]);
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": NAME, "namespace": options.namespace, "labels": labels()}}),
        json!({
            "apiVersion": rbac_api, "kind": "Role",
            "metadata": {"name": NAME, "namespace": options.workspace_namespace, "labels": labels()},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
                // Token reads: websocket exec is a GET that newer API servers also check as create.
                {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
                {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "create", "delete"]},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "create", "delete"]},
                // Each workspace's NetworkPolicy, read by name like the Services; `delete` removes
                // one an earlier pod of the same name left before the garbage collector did.
                {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "create", "delete"]},
                // Reading a failed pod's last Warning and watching the workspaces' Events;
                // publishing the backend's own Events.
                {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            ]
        }),
        json!({
            "apiVersion": rbac_api, "kind": "RoleBinding",
            "metadata": {"name": NAME, "namespace": options.workspace_namespace, "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": subject,
        }),
        json!({
            "apiVersion": rbac_api, "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels()},
            "rules": [
                {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "create", "delete"]},
                // Checking the bearer tokens callers of the native API present.
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            ]
        }),
        json!({
            "apiVersion": rbac_api, "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": subject,
        }),
    ]
}

/// A starting configuration: deic-dk's keys with the namespace filled in, and outfit's listen
/// addresses for a pod. Everything else keeps its default (docs/workspaces.md lists them).
fn config_map(options: &InstallOptions) -> Value {
    let config = format!(
        "# outfit workspaces configuration: every key, its default and its BACKEND_* override are in\n\
         # docs/workspaces.md.\n\
         namespace: {ns}\n\
         # Workspaces let in the backend's pods from here (their NetworkPolicy).\n\
         backendNamespace: {backend}\n\
         listen: 0.0.0.0:{API_PORT}\n\
         adminListen: 0.0.0.0:{ADMIN_PORT}\n\
         # Callers the API answers (the frontend's network); loopback alone answers nobody in a pod.\n\
         allowedSourceCidrs: [\"10.0.0.0/8\", \"127.0.0.0/8\"]\n\
         ingressDomain: \"\"\n",
        ns = options.workspace_namespace,
        backend = options.namespace,
    );
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": options.namespace, "labels": labels()},
        "data": {"config.yaml": config}
    })
}

fn deployment(options: &InstallOptions) -> Value {
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": "admin"}, "periodSeconds": 5, "timeoutSeconds": 2});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": options.namespace, "labels": labels()},
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": NAME,
                        "image": options.image,
                        "args": ["workspaces", "--config", "/etc/outfit-workspaces/config.yaml", "--log-format", "json"],
                        // Names this replica in the Events it publishes.
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "ports": [{"name": "api", "containerPort": API_PORT}, {"name": "admin", "containerPort": ADMIN_PORT}],
                        "livenessProbe": probe("/livez"),
                        "readinessProbe": probe("/readyz"),
                        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/outfit-workspaces", "readOnly": true}]
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": NAME}}]
                }
            }
        }
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
        }
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
    }

    #[test]
    fn the_config_map_holds_a_config_the_backend_reads() {
        let map = config_map(&options());
        let dir = std::env::temp_dir().join(format!("outfit-install-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        std::fs::write(&path, map["data"]["config.yaml"].as_str().unwrap()).unwrap();
        let (config, warnings) = crate::Config::load(Some(&path), |_| None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(config.namespace, "sciencedata");
        assert_eq!(config.network.backend_namespace, "outfit-system");
        assert_eq!(config.listen.port(), API_PORT);
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
            ["get", "create", "delete"]
        );
        assert_eq!(verbs(role, "", "events"), ["get", "list", "watch"]);
        assert_eq!(
            verbs(cluster_role, "authentication.k8s.io", "tokenreviews"),
            ["create"]
        );
        // Token reviews are cluster-scoped: a Role could not grant them.
        assert!(verbs(role, "authentication.k8s.io", "tokenreviews").is_empty());
        assert_eq!(
            verbs(cluster_role, "", "persistentvolumes"),
            ["get", "create", "delete"]
        );
    }
}
