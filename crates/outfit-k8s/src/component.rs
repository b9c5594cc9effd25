//! The objects every install of an outfit component shares, built one way for both install
//! paths (`outfit manifests` for the webhook, `outfit manifests --workspaces` for the backend):
//! its labels, ServiceAccount, roles and bindings, Deployment and Service.

use serde_json::{Map, Value, json};

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// One component: the name of its objects and the namespace it runs in.
#[derive(Debug, Clone, Copy)]
pub struct Component<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
}

/// Whether a role (or binding) is namespaced, and where.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// A ClusterRole / ClusterRoleBinding.
    Cluster,
    /// A Role / RoleBinding in this namespace.
    Namespace(&'a str),
}

/// What a component's Deployment runs.
#[derive(Debug, Clone)]
pub struct Workload<'a> {
    pub replicas: u32,
    pub image: &'a str,
    pub args: Vec<String>,
    /// The container's `env`, if any.
    pub env: Option<Value>,
    /// Named container ports; the admin one serves `/livez` and `/readyz`.
    pub ports: [(&'a str, u16); 2],
    pub cpu_request: &'a str,
    /// The container's memory request.
    pub memory_request: &'a str,
    /// The container's memory limit.
    pub memory_limit: &'a str,
    /// The pods' PriorityClass, if any (the webhook's is system-cluster-critical: every pod
    /// creation waits for it).
    pub priority_class: Option<&'a str>,
    /// The one volume, if any, read-only: name, mount path and source (`{"secret": ...}`).
    pub volume: Option<(&'a str, &'a str, Value)>,
}

/// NetworkPolicy peers for the namespaces `names`, by the name label the API server sets on
/// every namespace.
pub fn namespace_peers(names: &[String]) -> Value {
    names
        .iter()
        .map(|name| json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}))
        .collect()
}

/// A Namespace.
pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// outfit's own Namespace, where Pod Security's `restricted` profile is enforced: outfit's pods
/// meet it (non-root, no privilege escalation, every capability dropped, the runtime's seccomp
/// profile), so anything else started there, by mistake or by someone who took a token, is held
/// to it too.
pub fn restricted_namespace(name: &str) -> Value {
    let labels: Map<String, Value> = ["enforce", "audit", "warn"]
        .into_iter()
        .map(|mode| (format!("pod-security.kubernetes.io/{mode}"), json!("restricted")))
        .collect();
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

impl Component<'_> {
    /// The labels on every object and pod.
    pub fn labels(&self) -> Value {
        json!({"app.kubernetes.io/name": self.name, "app.kubernetes.io/version": env!("CARGO_PKG_VERSION")})
    }

    /// The selector of its pods.
    pub fn selector(&self) -> Value {
        json!({"app.kubernetes.io/name": self.name})
    }

    /// `metadata` of an object in `scope`.
    fn metadata(&self, scope: Scope<'_>) -> Value {
        match scope {
            Scope::Cluster => json!({"name": self.name, "labels": self.labels()}),
            Scope::Namespace(namespace) => {
                json!({"name": self.name, "namespace": namespace, "labels": self.labels()})
            }
        }
    }

    /// Its ServiceAccount.
    pub fn service_account(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self.metadata(Scope::Namespace(self.namespace))})
    }

    /// A Role (or ClusterRole) with `rules`.
    pub fn role(&self, scope: Scope<'_>, rules: Value) -> Value {
        let kind = match scope {
            Scope::Cluster => "ClusterRole",
            Scope::Namespace(_) => "Role",
        };
        json!({"apiVersion": RBAC_API, "kind": kind, "metadata": self.metadata(scope), "rules": rules})
    }

    /// The binding of [`Self::role`] in `scope` to its ServiceAccount.
    pub fn binding(&self, scope: Scope<'_>) -> Value {
        let (kind, role) = match scope {
            Scope::Cluster => ("ClusterRoleBinding", "ClusterRole"),
            Scope::Namespace(_) => ("RoleBinding", "Role"),
        };
        json!({
            "apiVersion": RBAC_API, "kind": kind,
            "metadata": self.metadata(scope),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": self.name},
            "subjects": [{"kind": "ServiceAccount", "name": self.name, "namespace": self.namespace}]
        })
    }

    /// Its ValidatingAdmissionPolicy `name`, failing closed (a request the API server can't
    /// check is refused), with the rest of its `spec` (what it matches and checks), and the
    /// binding of the same name that denies what it refuses.
    pub fn admission_policy(&self, name: &str, spec: Value) -> [Value; 2] {
        let mut full = serde_json::Map::from_iter([("failurePolicy".to_owned(), json!("Fail"))]);
        if let Value::Object(rest) = spec {
            full.extend(rest);
        }
        let policy = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": self.labels()},
            "spec": full
        });
        let binding = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": self.labels()},
            "spec": {"policyName": name, "validationActions": ["Deny"]}
        });
        [policy, binding]
    }

    /// Its Service: `port` to the container port named `target`.
    pub fn service(&self, target: &str, port: u16) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": self.metadata(Scope::Namespace(self.namespace)),
            "spec": {"selector": self.selector(),
                     "ports": [{"name": target, "port": port, "targetPort": target, "protocol": "TCP"}]}
        })
    }

    /// Its PodDisruptionBudget for `replicas`: a drain or an eviction never takes its last ready
    /// replica. None with fewer than 2: a budget would hold every drain of that replica's node.
    pub fn disruption_budget(&self, replicas: u32) -> Option<Value> {
        (replicas >= 2).then(|| {
            json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": self.metadata(Scope::Namespace(self.namespace)),
                "spec": {"minAvailable": 1, "selector": {"matchLabels": self.selector()}}
            })
        })
    }

    /// Its NetworkPolicy: its pods admit only what `ports` list, each a container port's name
    /// and the peers that may reach it (NetworkPolicy `from` entries; an empty list admits every
    /// address, for a port the API server calls, whose address is no pod's). Egress is left
    /// open: the API server's address is not a pod either.
    pub fn network_policy(&self, ports: &[(&str, Value)]) -> Value {
        let ingress: Vec<Value> = ports
            .iter()
            .map(|(port, from)| {
                let mut rule = json!({"ports": [{"port": port, "protocol": "TCP"}]});
                if from.as_array().is_some_and(|peers| !peers.is_empty()) {
                    rule["from"] = from.clone();
                }
                rule
            })
            .collect();
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": self.metadata(Scope::Namespace(self.namespace)),
            "spec": {"podSelector": {"matchLabels": self.selector()},
                     "policyTypes": ["Ingress"], "ingress": ingress}
        })
    }

    /// Its Deployment: non-root, read-only, no capabilities, probed on the admin port, its
    /// replicas spread over nodes.
    pub fn deployment(&self, workload: Workload<'_>) -> Value {
        let probe = |path: &str| json!({"httpGet": {"path": path, "port": "admin"}, "periodSeconds": 5, "timeoutSeconds": 2});
        let mut container = Map::new();
        container.insert("name".into(), json!(self.name));
        container.insert("image".into(), json!(workload.image));
        container.insert("args".into(), json!(workload.args));
        if let Some(env) = workload.env {
            container.insert("env".into(), env);
        }
        let ports: Vec<Value> = workload
            .ports
            .iter()
            .map(|(name, port)| json!({"name": name, "containerPort": port}))
            .collect();
        container.insert("ports".into(), json!(ports));
        container.insert("livenessProbe".into(), probe("/livez"));
        container.insert("readinessProbe".into(), probe("/readyz"));
        container.insert(
            "resources".into(),
            json!({"requests": {"cpu": workload.cpu_request, "memory": workload.memory_request}, "limits": {"memory": workload.memory_limit}}),
        );
        container.insert(
            "securityContext".into(),
            json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}),
        );
        let volumes = workload.volume.map(|(volume, mount_path, source)| {
            container.insert(
                "volumeMounts".into(),
                json!([{"name": volume, "mountPath": mount_path, "readOnly": true}]),
            );
            let mut entry = Map::new();
            entry.insert("name".into(), json!(volume));
            if let Value::Object(source) = source {
                entry.extend(source);
            }
            json!([entry])
        });
        let mut pod = Map::new();
        pod.insert("serviceAccountName".into(), json!(self.name));
        if let Some(class) = workload.priority_class {
            pod.insert("priorityClassName".into(), json!(class));
        }
        pod.insert(
            "securityContext".into(),
            json!({"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}),
        );
        // Replicas on different nodes, so that one node's drain or failure takes one of them.
        pod.insert(
            "topologySpreadConstraints".into(),
            json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": self.selector()}}]),
        );
        pod.insert("containers".into(), json!([container]));
        if let Some(volumes) = volumes {
            pod.insert("volumes".into(), volumes);
        }
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": self.metadata(Scope::Namespace(self.namespace)),
            "spec": {
                "replicas": workload.replicas,
                "selector": {"matchLabels": self.selector()},
                "template": {
                    "metadata": {"labels": self.labels()},
                    "spec": pod
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_its_role_and_the_components_account() {
        let component = Component {
            name: "x",
            namespace: "home",
        };
        let binding = component.binding(Scope::Namespace("pods"));
        assert_eq!(binding["kind"], "RoleBinding");
        assert_eq!(binding["metadata"]["namespace"], "pods");
        assert_eq!(binding["roleRef"]["kind"], "Role");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "x", "namespace": "home"}])
        );
        let cluster = component.binding(Scope::Cluster);
        assert_eq!(cluster["roleRef"]["kind"], "ClusterRole");
        assert!(cluster["metadata"].get("namespace").is_none());
    }

    #[test]
    fn a_network_policy_admits_each_port_from_its_peers_or_from_anywhere() {
        let component = Component {
            name: "x",
            namespace: "home",
        };
        let policy = component.network_policy(&[
            ("webhook", json!([])),
            ("admin", namespace_peers(&["monitoring".to_owned()])),
        ]);
        assert_eq!(policy["metadata"]["namespace"], "home");
        assert_eq!(policy["spec"]["podSelector"]["matchLabels"], component.selector());
        let ingress = &policy["spec"]["ingress"];
        assert_eq!(ingress[0]["ports"][0]["port"], "webhook");
        assert!(ingress[0].get("from").is_none(), "{ingress}");
        assert_eq!(
            ingress[1]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "monitoring"
        );
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    }
}
