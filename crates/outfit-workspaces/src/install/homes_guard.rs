//! The workspace namespace holds every user's home and snapshot: deleting it deletes them all,
//! with no removal snapshot first (the namespace controller deletes the claims and the
//! VolumeSnapshots, and the backend's finalizer on a Workspace cannot hold a namespace). A
//! ValidatingAdmissionPolicy refuses that delete unless the namespace is first annotated
//! `outfit.dev/delete-homes: "true"`, a second, deliberate step that says what goes with it
//! (issue 46, point 5). The chart also keeps the namespace when it is uninstalled or the
//! backend is turned off (`helm.sh/resource-policy: keep`).

use outfit_k8s::component::Component;
use serde_json::{Value, json};

/// Names of the policy and its binding.
pub const NAME: &str = "outfit-workspaces-homes";
/// The annotation that allows the workspace namespace's deletion.
pub const DELETE_HOMES: &str = "outfit.dev/delete-homes";

/// The policy and its binding, for the namespace `workspaces`.
pub fn objects(backend: &Component<'_>, workspaces: &str) -> [Value; 2] {
    let message = format!(
        "deleting namespace {workspaces} deletes every workspace's home and snapshot in it, with no snapshot first; to do it anyway, annotate it {DELETE_HOMES}=true first"
    );
    backend.admission_policy(
        NAME,
        json!({
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                "resources": ["namespaces"], "resourceNames": [workspaces]
            }]},
            "validations": [{
                "expression": format!("has(oldObject.metadata.annotations) && '{DELETE_HOMES}' in oldObject.metadata.annotations && oldObject.metadata.annotations['{DELETE_HOMES}'] == 'true'"),
                "message": message, "reason": "Forbidden"
            }]
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_workspace_namespace_s_delete_is_guarded_and_the_message_says_how_to_pass() {
        let backend = Component {
            name: "outfit-workspaces",
            namespace: "outfit-system",
        };
        let [policy, binding] = objects(&backend, "sciencedata");
        let rule = &policy["spec"]["matchConstraints"]["resourceRules"][0];
        assert_eq!(rule["operations"], json!(["DELETE"]));
        assert_eq!(rule["resourceNames"], json!(["sciencedata"]));
        let validation = &policy["spec"]["validations"][0];
        assert!(
            validation["expression"]
                .as_str()
                .unwrap()
                .contains("['outfit.dev/delete-homes'] == 'true'")
        );
        let message = validation["message"].as_str().unwrap();
        assert!(
            message.contains("namespace sciencedata") && message.contains("outfit.dev/delete-homes=true"),
            "{message}"
        );
        assert_eq!(binding["spec"]["policyName"], NAME);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    }
}
