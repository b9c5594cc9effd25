//! CRD types of outfit's own kinds, `PodPolicy` and `Audience` (`outfit.dev/v1alpha1`), for the
//! CustomResourceDefinitions `outfit manifests` installs. Both are cluster-scoped: who may have a
//! GPU is the cluster administrator's decision. `outfit-core/src/podpolicy` reads the objects and
//! checks what a schema cannot (globs, quantities, label keys).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{EnvVar, Toleration, Volume, VolumeMount},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::LabelSelector},
};
use kube::{CustomResource, CustomResourceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// `PodPolicy`: what to add to the pods of the requesters it matches.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "outfit.dev",
    version = "v1alpha1",
    kind = "PodPolicy",
    plural = "podpolicies"
)]
pub struct PodPolicySpec {
    /// Which pods, and whose; absent matches every pod of every requester.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<PodPolicyMatch>,
    /// What to add to the pods it matches.
    pub add: PodPolicyAdditions,
}

/// `PodPolicy.spec.match`: every criterion set must hold.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodPolicyMatch {
    /// Namespaces, with `prefix*`, `*suffix` and `*infix*` globs as in Gatekeeper; empty: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "namespace_globs_schema")]
    pub namespaces: Option<Vec<String>>,
    /// Namespaces left out, same globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "namespace_globs_schema")]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Selects pods by their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Who the pod is for (the request's user, or the owner a provisioner names); absent or
    /// empty: everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requesters: Option<Requesters>,
    /// Where the pod records its owner, and which requesters may name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

/// Users, groups and service accounts; `*` in a name matches any run of characters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identities {
    /// Usernames as the API server authenticates them (`request.userInfo.username`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<String>>,
    /// Groups (`request.userInfo.groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
    /// Service accounts as `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "service_accounts_schema")]
    pub service_accounts: Option<Vec<String>>,
}

/// `PodPolicy.spec.match.requesters`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct Requesters {
    /// Users, groups and service accounts included.
    #[serde(flatten)]
    pub include: Identities,
    /// Audiences whose members are included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
    /// Left out even when included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<ExcludedRequesters>,
}

/// `PodPolicy.spec.match.requesters.exclude`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct ExcludedRequesters {
    /// Users, groups and service accounts left out.
    #[serde(flatten)]
    pub identities: Identities,
    /// Audiences whose members are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
}

/// `PodPolicy.spec.match.owner`: set exactly one of `label` and `annotation`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct Owner {
    /// The label holding the owner's username.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The annotation holding the owner's username.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
    /// The requesters trusted to name an owner (a provisioner's service account).
    pub provisioners: Identities,
}

/// `PodPolicy.spec.add`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodPolicyAdditions {
    /// The containers the container fields go to, by name; absent or `*`: every container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<String>>,
    /// Limits and requests set on the containers, per resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Env vars added to the containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Volume mounts added to the containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Volumes added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// Tolerations added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Node selector entries added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// The pod's runtime class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    /// Annotations added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `PodPolicy.spec.add.resources`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct Resources {
    /// Limits, e.g. `nvidia.com/gpu: 1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// `Audience`: a named list of requesters; every PodPolicy naming it follows a change to it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "outfit.dev",
    version = "v1alpha1",
    kind = "Audience",
    plural = "audiences"
)]
pub struct AudienceSpec {
    /// Its members.
    #[serde(flatten)]
    pub members: Identities,
    /// Left out even when listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Identities>,
}

/// outfit's own CRDs.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![PodPolicy::crd(), Audience::crd()]
}

/// Gatekeeper's namespace globs, as `crds.rs` states them for its mutators (not imported from
/// there: `crds` lists these CRDs, so the import would run both ways).
fn namespace_globs_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "string", "pattern": "^\\*?[-:a-z0-9]*\\*?$"}})
}

fn service_accounts_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "string", "pattern": "^[^/\\s]+/[^/\\s]+$"}})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn outfit_kinds_are_cluster_scoped_with_structural_schemas() {
        for crd in all() {
            let crd = serde_json::to_value(crd).unwrap();
            assert_eq!(crd["spec"]["scope"], "Cluster", "{}", crd["metadata"]["name"]);
        }
        let policy = serde_json::to_value(PodPolicy::crd()).unwrap();
        let spec = &policy["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], json!(["add"]));
        let requesters = &spec["properties"]["match"]["properties"]["requesters"]["properties"];
        for field in ["users", "groups", "serviceAccounts", "audiences", "exclude"] {
            assert!(
                requesters.get(field).is_some(),
                "requesters.{field}: {requesters}"
            );
        }
        let limits = &spec["properties"]["add"]["properties"]["resources"]["properties"]["limits"];
        assert_eq!(
            limits["additionalProperties"]["x-kubernetes-int-or-string"], true,
            "{limits}"
        );
        let audience = serde_json::to_value(Audience::crd()).unwrap();
        let members =
            &audience["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        for field in ["users", "groups", "serviceAccounts", "exclude"] {
            assert!(members.get(field).is_some(), "{field}: {members}");
        }
    }
}
