//! What the backend's identity may create, checked by the API server itself (issue 33): a
//! ValidatingAdmissionPolicy (GA in Kubernetes 1.30) and its binding, for requests by the
//! backend's ServiceAccount alone. Its Role lets it create any pod in the workspace namespace and
//! any PersistentVolume, so without this a stolen backend token is a node: a privileged pod, the
//! host's namespaces or ports, a hostPath volume or PersistentVolume of `/`. With it, the pods it
//! makes hold none of these, save the host paths and capabilities an admin lists (seed 000's GPU
//! device path, say), and its PersistentVolumes are NFS under `nfsStorageRoot`, as the storage it
//! writes. The API server checks the pod as stored, after every mutating webhook, so what
//! outfit's own policies add is held to the same rules.

use outfit_k8s::component::Component;
use serde_json::{Value, json};

/// Names of the policy and its binding.
pub const NAME: &str = "outfit-workspaces-guard";

/// What the backend's pods and volumes may hold beyond the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed {
    /// Host paths a pod may mount (each itself or below it), e.g. `/dev/dri`.
    pub host_paths: Vec<String>,
    /// Capabilities a container may add, e.g. `SYS_ADMIN`.
    pub capabilities: Vec<String>,
    /// The NFS path the PersistentVolumes are under (the config's `nfsStorageRoot`).
    pub nfs_storage_root: String,
}

/// Why a host path or capability can't be listed: it would not stay one literal in the rules.
pub fn check_host_path(path: &str) -> Result<String, String> {
    let plain = path.starts_with('/')
        && !path.contains(['\'', '\\', '"'])
        && !path.split('/').any(|segment| segment == ".." || segment == ".");
    let trimmed = path.trim_end_matches('/');
    if plain && !trimmed.is_empty() {
        Ok(trimmed.to_owned())
    } else {
        Err("an absolute path below / without '.' or '..' segments or quotes".to_owned())
    }
}

/// A capability's name as the rules take it: upper-case letters, digits and `_`.
pub fn check_capability(name: &str) -> Result<String, String> {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if plain {
        Ok(name.to_owned())
    } else {
        Err("a capability's name, such as SYS_ADMIN".to_owned())
    }
}

/// `items` as a CEL list of strings.
fn cel_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("'{item}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The policy and its binding, for the ServiceAccount of `backend`.
pub fn objects(backend: &Component<'_>, allowed: &Allowed) -> [Value; 2] {
    let user = format!("system:serviceaccount:{}:{}", backend.namespace, backend.name);
    let labels = backend.labels();
    let host_paths = cel_list(&allowed.host_paths);
    let capabilities = cel_list(&allowed.capabilities);
    let root = allowed.nfs_storage_root.trim_end_matches('/');
    let pod = "request.resource.resource != 'pods'";
    let validations = json!([
        {"expression": format!("{pod} || variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged)"),
         "message": "the workspace backend may not create privileged containers", "reason": "Forbidden"},
        {"expression": format!("{pod} || ((!has(object.spec.hostNetwork) || !object.spec.hostNetwork) && (!has(object.spec.hostPID) || !object.spec.hostPID) && (!has(object.spec.hostIPC) || !object.spec.hostIPC))"),
         "message": "the workspace backend may not create pods in the host's network, PID or IPC namespace", "reason": "Forbidden"},
        {"expression": format!("{pod} || variables.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))"),
         "message": "the workspace backend may not create pods with host ports", "reason": "Forbidden"},
        {"expression": format!("{pod} || variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(a, a in {capabilities}))"),
         "messageExpression": format!("'the workspace backend may add only the capabilities the install allows: ' + {capabilities}.join(', ')"), "reason": "Forbidden"},
        {"expression": format!("{pod} || !has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || (!v.hostPath.path.split('/').exists(s, s == '..' || s == '.') && {host_paths}.exists(p, v.hostPath.path == p || v.hostPath.path.startsWith(p + '/'))))"),
         "messageExpression": format!("'the workspace backend may mount only the host paths the install allows: ' + {host_paths}.join(', ')"), "reason": "Forbidden"},
        {"expression": format!("request.resource.resource != 'persistentvolumes' || (has(object.spec.nfs) && object.spec.nfs.path.startsWith('{root}/') && !object.spec.nfs.path.split('/').exists(s, s == '..' || s == '.'))"),
         "message": format!("the workspace backend may create only NFS PersistentVolumes under {root}"), "reason": "Forbidden"},
    ]);
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NAME, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["pods", "persistentvolumes"]
            }]},
            "matchConditions": [{"name": "by-the-workspace-backend", "expression": format!("request.userInfo.username == '{user}'")}],
            "variables": [{"name": "containers", "expression":
                "request.resource.resource != 'pods' ? [] : object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"}],
            "validations": validations
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NAME, "labels": labels},
        "spec": {"policyName": NAME, "validationActions": ["Deny"]}
    });
    [policy, binding]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_capabilities_are_checked_before_they_become_rules() {
        assert_eq!(check_host_path("/dev/dri/"), Ok("/dev/dri".to_owned()));
        for bad in [
            "dev/dri",
            "/",
            "//",
            "/dev/../etc",
            "/dev/./dri",
            "/dev/dri'",
            "/a\\b",
        ] {
            assert!(check_host_path(bad).is_err(), "{bad}");
        }
        assert_eq!(check_capability("SYS_ADMIN"), Ok("SYS_ADMIN".to_owned()));
        assert!(check_capability("sys_admin").is_err());
        assert!(check_capability("").is_err());
    }

    #[test]
    fn the_policy_is_for_the_backend_s_account_alone_and_lists_what_is_allowed() {
        let allowed = Allowed {
            host_paths: vec!["/dev/dri".to_owned()],
            capabilities: vec!["SYS_ADMIN".to_owned()],
            nfs_storage_root: "/tank/storage/".to_owned(),
        };
        let backend = Component {
            name: "outfit-workspaces",
            namespace: "outfit-system",
        };
        let [policy, binding] = objects(&backend, &allowed);
        assert_eq!(
            policy["spec"]["matchConditions"][0]["expression"],
            "request.userInfo.username == 'system:serviceaccount:outfit-system:outfit-workspaces'"
        );
        let text = policy["spec"]["validations"].to_string();
        assert!(text.contains("['/dev/dri'].exists("), "{text}");
        assert!(text.contains("a in ['SYS_ADMIN']"), "{text}");
        assert!(text.contains("startsWith('/tank/storage/')"), "{text}");
        assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    }
}
