//! What outfit's own identity may change in its webhook configuration, checked by the API server
//! itself: a ValidatingAdmissionPolicy (GA in Kubernetes 1.30) and its binding, for updates by
//! the webhook's ServiceAccount alone. Its ClusterRole lets it update its configuration (by name)
//! to keep the `rules` and `caBundle` in step ([`crate::registration`]); without this, a stolen
//! token could point the configuration at a server of its own (`clientConfig`), which would then
//! mutate every pod of the cluster into a privileged one: a node. With it, the identity may change
//! only the webhooks' `rules` (which must still send it pod creates) and `clientConfig.caBundle`,
//! nothing else of the object, webhooks and their names included.

use serde_json::{Value, json};

use crate::component::Component;

/// Names of the policy and its binding.
pub const NAME: &str = "outfit-registration-guard";

/// The webhook fields that must stay as they were (each may be absent, then absent still).
const KEPT: [&str; 11] = [
    "clientConfig.url",
    "clientConfig.service",
    "failurePolicy",
    "matchPolicy",
    "namespaceSelector",
    "objectSelector",
    "sideEffects",
    "timeoutSeconds",
    "admissionReviewVersions",
    "reinvocationPolicy",
    "matchConditions",
];

/// CEL: `field` of the webhooks `new` and `old` is the same, present in both or in neither.
fn same(new: &str, old: &str, field: &str) -> String {
    format!(
        "(has({new}.{field}) ? has({old}.{field}) && {new}.{field} == {old}.{field} : !has({old}.{field}))"
    )
}

/// The policy and its binding, for the ServiceAccount of `webhook` and its configuration
/// `configuration`.
pub fn objects(webhook: &Component<'_>, configuration: &str) -> [Value; 2] {
    let user = format!("system:serviceaccount:{}:{}", webhook.namespace, webhook.name);
    let kept: Vec<String> = KEPT.iter().map(|field| same("w", "o", field)).collect();
    let unchanged = format!(
        "object.webhooks.size() == oldObject.webhooks.size() && object.webhooks.all(w, oldObject.webhooks.exists(o, o.name == w.name && {}))",
        kept.join(" && ")
    );
    let annotations = same("object", "oldObject", "metadata.annotations");
    let sees_pods = "object.webhooks.all(w, has(w.rules) && w.rules.exists(r, r.apiGroups.exists(g, g == '' || g == '*') && r.resources.exists(x, x == 'pods' || x == '*') && r.operations.exists(op, op == 'CREATE' || op == '*')))";
    webhook.admission_policy(
        NAME,
        json!({
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["v1"],
                "operations": ["UPDATE"], "resources": ["mutatingwebhookconfigurations"],
                "resourceNames": [configuration]
            }]},
            "matchConditions": [{"name": "by-the-webhook", "expression": format!("request.userInfo.username == '{user}'")}],
            "validations": [
                {"expression": unchanged,
                 "message": "outfit's identity may change only its webhooks' rules and clientConfig.caBundle (never where they call, how they fail, or which webhooks there are)",
                 "reason": "Forbidden"},
                {"expression": annotations,
                 "message": "outfit's identity may not change its webhook configuration's annotations",
                 "reason": "Forbidden"},
                {"expression": sees_pods,
                 "message": "outfit's identity may not stop its webhooks from seeing pod creates",
                 "reason": "Forbidden"},
            ]
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_for_the_webhook_s_account_and_its_configuration_alone() {
        let webhook = Component {
            name: "outfit",
            namespace: "outfit-system",
        };
        let [policy, binding] = objects(&webhook, "outfit");
        let spec = &policy["spec"];
        assert_eq!(
            spec["matchConditions"][0]["expression"],
            "request.userInfo.username == 'system:serviceaccount:outfit-system:outfit'"
        );
        let rule = &spec["matchConstraints"]["resourceRules"][0];
        assert_eq!(rule["resourceNames"], json!(["outfit"]));
        assert_eq!(rule["operations"], json!(["UPDATE"]));
        let unchanged = spec["validations"][0]["expression"].as_str().unwrap();
        for field in KEPT {
            assert!(unchanged.contains(&format!("w.{field} == o.{field}")), "{field}");
        }
        assert!(!unchanged.contains("rules") && !unchanged.contains("caBundle"));
        assert_eq!(spec["failurePolicy"], "Fail");
        assert_eq!(binding["spec"]["policyName"], NAME);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    }
}
