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
use serde_json::{Map, Value, json};

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

/// A Pod Security Standards level, enforced on the workspace namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PodSecurity {
    Privileged,
    Baseline,
    Restricted,
}

impl PodSecurity {
    /// Its name, as the namespace label and `--workspaces-pod-security` take it.
    pub fn name(self) -> &'static str {
        match self {
            PodSecurity::Privileged => "privileged",
            PodSecurity::Baseline => "baseline",
            PodSecurity::Restricted => "restricted",
        }
    }

    /// The level named `name`.
    pub fn parse(name: &str) -> Result<PodSecurity, String> {
        [
            PodSecurity::Privileged,
            PodSecurity::Baseline,
            PodSecurity::Restricted,
        ]
        .into_iter()
        .find(|level| level.name() == name)
        .ok_or_else(|| "privileged, baseline or restricted".to_owned())
    }
}

/// The capabilities Pod Security's `baseline` lets a container add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The level the workspace namespace enforces: `requested`, or by default `baseline` (no
/// privileged container, host namespace, port or path; workspaces run as their images say, root
/// included), `privileged` where the install allows a host path or a capability `baseline`
/// refuses, since the namespace label would refuse every pod that uses them; the guard above
/// still holds those pods to what is listed. A stricter level that would refuse what is allowed
/// is an error.
pub fn pod_security(requested: Option<PodSecurity>, allowed: &Allowed) -> Result<PodSecurity, String> {
    // The strictest level that admits everything allowed, and what stops a stricter one.
    let beyond = |permitted: &[&str]| {
        allowed.host_paths.first().or_else(|| {
            allowed
                .capabilities
                .iter()
                .find(|c| !permitted.contains(&c.as_str()))
        })
    };
    let (admits, stopper) = match (beyond(BASELINE_CAPABILITIES), beyond(&["NET_BIND_SERVICE"])) {
        (Some(what), _) => (PodSecurity::Privileged, Some(what)),
        (None, Some(what)) => (PodSecurity::Baseline, Some(what)),
        (None, None) => (PodSecurity::Restricted, None),
    };
    match (requested, stopper) {
        (None, _) => Ok(admits.min(PodSecurity::Baseline)),
        (Some(level), Some(what)) if level > admits => Err(format!(
            "Pod Security's {} level refuses every pod using {what}, which the install allows; \
             choose {} or leave --workspaces-pod-security out (the guard still holds pods to what is allowed)",
            level.name(),
            admits.name()
        )),
        (Some(level), _) => Ok(level),
    }
}

/// The workspace namespace, `level` enforced; audited and warned at `baseline` at least, so that
/// a privileged namespace still shows what goes past it.
pub fn workspace_namespace(name: &str, level: PodSecurity) -> Value {
    let shown = level.max(PodSecurity::Baseline);
    let labels: Map<String, Value> = [("enforce", level), ("audit", shown), ("warn", shown)]
        .into_iter()
        .map(|(mode, level)| (format!("pod-security.kubernetes.io/{mode}"), json!(level.name())))
        .collect();
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// `items` as a CEL list of strings.
fn cel_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("'{item}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The policy and its binding, for the ServiceAccount of `backend`.
pub fn objects(backend: &Component<'_>, allowed: &Allowed) -> [Value; 2] {
    let user = format!("system:serviceaccount:{}:{}", backend.namespace, backend.name);
    let host_paths = cel_list(&allowed.host_paths);
    let capabilities = cel_list(&allowed.capabilities);
    let root = allowed.nfs_storage_root.trim_end_matches('/');
    let pod = "request.resource.resource != 'pods'";
    let host_path_allowed = format!(
        "(!v.hostPath.path.split('/').exists(s, s == '..' || s == '.') && {host_paths}.exists(p, v.hostPath.path == p || v.hostPath.path.startsWith(p + '/')))"
    );
    // The refusal names the paths refused, what is allowed, and the policies that changed the
    // pod (outfit's record, `outfit.dev/mutated-by`): a path a PodPolicy added is the policy's
    // doing, not the user's.
    let listed = if allowed.host_paths.is_empty() {
        "none".to_owned()
    } else {
        allowed.host_paths.join(", ")
    };
    // outfit_core::record::ANNOTATION, which the webhook writes (this crate does not link it).
    let record = "outfit.dev/mutated-by";
    let host_path_message = format!(
        "'the workspace backend may not mount the host path ' + object.spec.volumes.filter(v, has(v.hostPath) && !{host_path_allowed}).map(v, v.hostPath.path).join(', ') \
         + ' (the host paths the install allows: {listed})' \
         + (has(object.metadata.annotations) && '{record}' in object.metadata.annotations ? '; the pod was changed by ' + object.metadata.annotations['{record}'] : '')"
    );
    let validations = json!([
        {"expression": format!("{pod} || variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged)"),
         "message": "the workspace backend may not create privileged containers", "reason": "Forbidden"},
        {"expression": format!("{pod} || ((!has(object.spec.hostNetwork) || !object.spec.hostNetwork) && (!has(object.spec.hostPID) || !object.spec.hostPID) && (!has(object.spec.hostIPC) || !object.spec.hostIPC))"),
         "message": "the workspace backend may not create pods in the host's network, PID or IPC namespace", "reason": "Forbidden"},
        {"expression": format!("{pod} || variables.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))"),
         "message": "the workspace backend may not create pods with host ports", "reason": "Forbidden"},
        {"expression": format!("{pod} || variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(a, a in {capabilities}))"),
         "messageExpression": format!("'the workspace backend may add only the capabilities the install allows: ' + {capabilities}.join(', ')"), "reason": "Forbidden"},
        {"expression": format!("{pod} || !has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || {host_path_allowed})"),
         "messageExpression": host_path_message, "reason": "Forbidden"},
        {"expression": format!("request.resource.resource != 'persistentvolumes' || (has(object.spec.nfs) && object.spec.nfs.path.startsWith('{root}/') && !object.spec.nfs.path.split('/').exists(s, s == '..' || s == '.'))"),
         "message": format!("the workspace backend may create only NFS PersistentVolumes under {root}"), "reason": "Forbidden"},
    ]);
    backend.admission_policy(
        NAME,
        json!({
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["pods", "persistentvolumes"]
            }]},
            "matchConditions": [{"name": "by-the-workspace-backend", "expression": format!("request.userInfo.username == '{user}'")}],
            "variables": [{"name": "containers", "expression":
                "request.resource.resource != 'pods' ? [] : object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"}],
            "validations": validations
        }),
    )
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

    #[test]
    fn the_workspace_namespace_enforces_baseline_unless_what_is_allowed_needs_less() {
        let none = Allowed::default();
        assert_eq!(pod_security(None, &none), Ok(PodSecurity::Baseline));
        assert_eq!(
            pod_security(Some(PodSecurity::Restricted), &none),
            Ok(PodSecurity::Restricted)
        );
        let device = Allowed {
            host_paths: vec!["/dev/dri".to_owned()],
            ..Allowed::default()
        };
        // baseline refuses every hostPath volume: the guard alone holds them to the list.
        assert_eq!(pod_security(None, &device), Ok(PodSecurity::Privileged));
        let error = pod_security(Some(PodSecurity::Baseline), &device).unwrap_err();
        assert!(
            error.contains("/dev/dri") && error.contains("privileged"),
            "{error}"
        );
        let chown = Allowed {
            capabilities: vec!["CHOWN".to_owned()],
            ..Allowed::default()
        };
        assert_eq!(pod_security(None, &chown), Ok(PodSecurity::Baseline));
        assert!(pod_security(Some(PodSecurity::Restricted), &chown).is_err());
        let namespace = workspace_namespace("pods", PodSecurity::Privileged);
        let labels = &namespace["metadata"]["labels"];
        assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
        assert_eq!(labels["pod-security.kubernetes.io/warn"], "baseline");
        assert_eq!(PodSecurity::parse("restricted"), Ok(PodSecurity::Restricted));
        assert!(PodSecurity::parse("strict").is_err());
    }
}
