//! CRD types of Kubeflow's `PodDefault` and Gatekeeper's mutators, mirroring their upstream
//! schemas, used to generate the CustomResourceDefinitions `outfit manifests` installs.
//!
//! Where upstream leaves a field free-form and the engine has a rule for it, the schema states the
//! rule (`scope`, `source`, `operation` enums; required fields), so the API server rejects a typo
//! that Gatekeeper would silently ignore.

use k8s_openapi::{
    api::core::v1::{
        Container, EnvFromSource, EnvVar, LocalObjectReference, Toleration, Volume, VolumeMount,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{CustomResource, CustomResourceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Kubeflow `PodDefault` (`kubeflow.org/v1alpha1`): defaults injected into matching pods.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1alpha1",
    kind = "PodDefault",
    plural = "poddefaults",
    namespaced,
    status = "PodDefaultStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct PodDefaultSpec {
    /// Pods whose labels match get these defaults. `{}` matches every pod of the namespace.
    pub selector: LabelSelector,
    /// Text Kubeflow's UI shows for this PodDefault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
    /// Env vars added to every container of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Env sources appended to every container of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Volumes added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// Volume mounts added to every container of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Annotations added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
    /// Labels added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    /// Tolerations added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Replaces the pod's service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Replaces the pod's `automountServiceAccountToken`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// Image pull secrets added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Init containers appended to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    /// Containers appended to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecars: Option<Vec<Container>>,
    /// Command set on containers that have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Args set on containers that have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
}

/// Kubeflow's PodDefault status: empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct PodDefaultStatus {}

/// One `applyTo` entry: the exact groups, versions and kinds a mutator's location is valid for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct ApplyTo {
    /// API groups (`""` for core).
    #[serde(default)]
    pub groups: Vec<String>,
    /// Versions.
    #[serde(default)]
    pub versions: Vec<String>,
    /// Kinds.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// `CREATE`, `UPDATE` or `*`; absent means both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "operations_schema")]
    pub operations: Option<Vec<String>>,
}

/// A `match.kinds` entry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchKinds {
    /// API groups; empty or `*` matches any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_groups: Option<Vec<String>>,
    /// Kinds; empty or `*` matches any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
}

/// Which objects a mutator applies to; every criterion set must hold.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Match {
    /// `*`, `Cluster` or `Namespaced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "scope_schema")]
    pub scope: Option<String>,
    /// Groups and kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<MatchKinds>>,
    /// Namespaces, with `prefix*`, `*suffix` and `*infix*` globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "namespace_globs_schema")]
    pub namespaces: Option<Vec<String>>,
    /// Namespaces left out, same globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "namespace_globs_schema")]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Selects objects by their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Selects objects by their namespace's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Object name, with globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `All`, `Original` or `Generated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "source_schema")]
    pub source: Option<String>,
}

/// A precondition on part of the location.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathTest {
    /// A prefix of the location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    /// `MustExist` or `MustNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "condition_schema")]
    pub condition: Option<String>,
}

/// Where an assigned value comes from: exactly one of the fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssignField {
    /// Any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value")]
    pub value: Option<serde_json::Value>,
    /// The object's `namespace` or `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_metadata: Option<FromMetadata>,
    /// Gatekeeper's external data providers: outfit rejects mutators that use them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub external_data: Option<serde_json::Value>,
}

/// `parameters.assign.fromMetadata`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct FromMetadata {
    /// `namespace` or `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "metadata_field_schema")]
    pub field: Option<String>,
}

/// Gatekeeper `Assign`: sets a value at a location.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "mutations.gatekeeper.sh",
    version = "v1",
    kind = "Assign",
    plural = "assign",
    status = "MutatorStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AssignSpec {
    /// GVKs the location is valid for.
    #[serde(default)]
    pub apply_to: Vec<ApplyTo>,
    /// Objects to mutate.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Match>,
    /// Path of the field to set, e.g. `spec.containers[name: *].imagePullPolicy`.
    pub location: String,
    /// What to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AssignParameters>,
}

/// `Assign.spec.parameters`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssignParameters {
    /// Preconditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_tests: Option<Vec<PathTest>>,
    /// The value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assign: Option<AssignField>,
}

/// Gatekeeper `AssignMetadata`: adds a label or annotation that is not there yet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "mutations.gatekeeper.sh",
    version = "v1",
    kind = "AssignMetadata",
    plural = "assignmetadata",
    status = "MutatorStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AssignMetadataSpec {
    /// Objects to mutate.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Match>,
    /// `metadata.labels.<key>` or `metadata.annotations.<key>`.
    pub location: String,
    /// What to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AssignMetadataParameters>,
}

/// `AssignMetadata.spec.parameters`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct AssignMetadataParameters {
    /// The value (a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assign: Option<AssignField>,
}

/// Gatekeeper `ModifySet`: adds values to, or removes values from, a list used as a set.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "mutations.gatekeeper.sh",
    version = "v1",
    kind = "ModifySet",
    plural = "modifyset",
    status = "MutatorStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ModifySetSpec {
    /// GVKs the location is valid for.
    #[serde(default)]
    pub apply_to: Vec<ApplyTo>,
    /// Objects to mutate.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Match>,
    /// Path of the list, e.g. `spec.containers[name: *].args`.
    pub location: String,
    /// The values and the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<ModifySetParameters>,
}

/// `ModifySet.spec.parameters`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModifySetParameters {
    /// Preconditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_tests: Option<Vec<PathTest>>,
    /// `merge` (default) or `prune`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "set_operation_schema")]
    pub operation: Option<String>,
    /// The values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<ModifySetValues>,
}

/// `ModifySet.spec.parameters.values`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModifySetValues {
    /// Values added or removed, any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_list")]
    pub from_list: Option<Vec<serde_json::Value>>,
}

/// Gatekeeper `AssignImage` (`v1alpha1`): rewrites parts of an image reference.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "mutations.gatekeeper.sh",
    version = "v1alpha1",
    kind = "AssignImage",
    plural = "assignimage",
    status = "MutatorStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AssignImageSpec {
    /// GVKs the location is valid for.
    #[serde(default)]
    pub apply_to: Vec<ApplyTo>,
    /// Objects to mutate.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Match>,
    /// Path of the image field, e.g. `spec.containers[name: *].image`.
    pub location: String,
    /// The parts to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AssignImageParameters>,
}

/// `AssignImage.spec.parameters`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssignImageParameters {
    /// Preconditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_tests: Option<Vec<PathTest>>,
    /// Registry domain, e.g. `registry.example.com:5000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assign_domain: Option<String>,
    /// Repository path, e.g. `library/nginx`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assign_path: Option<String>,
    /// `:tag` or `@digest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assign_tag: Option<String>,
}

/// Gatekeeper writes per-pod status here; outfit keeps whatever is there.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct MutatorStatus {
    /// Opaque.
    #[serde(flatten)]
    #[schemars(schema_with = "any_object")]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

/// Versions Gatekeeper serves for Assign, AssignMetadata and ModifySet (all the same schema).
const MUTATOR_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha1"];

/// Every CRD outfit reads: PodDefault, the Gatekeeper mutators, then outfit's own.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![PodDefault::crd()];
    crds.extend(gatekeeper());
    crds.extend(crate::podpolicy_crds::all());
    crds
}

/// The Gatekeeper mutator CRDs, serving every version Gatekeeper serves.
pub fn gatekeeper() -> Vec<CustomResourceDefinition> {
    let mut crds: Vec<CustomResourceDefinition> = [Assign::crd(), AssignMetadata::crd(), ModifySet::crd()]
        .into_iter()
        .map(with_mutator_versions)
        .collect();
    crds.push(AssignImage::crd());
    crds
}

/// Copies the single generated version to every version Gatekeeper serves; `v1` stays the
/// storage version.
fn with_mutator_versions(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let template = crd.spec.versions[0].clone();
    crd.spec.versions = MUTATOR_VERSIONS
        .iter()
        .map(|version| {
            let mut v = template.clone();
            v.name = (*version).to_owned();
            v.storage = *version == "v1";
            v
        })
        .collect();
    crd
}

fn enum_schema(values: &[&str]) -> Schema {
    json_schema!({"type": "string", "enum": values})
}

fn operations_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": enum_schema(&["CREATE", "UPDATE", "*"])})
}

fn scope_schema(_: &mut SchemaGenerator) -> Schema {
    enum_schema(&["*", "Cluster", "Namespaced"])
}

fn source_schema(_: &mut SchemaGenerator) -> Schema {
    enum_schema(&["All", "Original", "Generated"])
}

fn condition_schema(_: &mut SchemaGenerator) -> Schema {
    enum_schema(&["MustExist", "MustNotExist"])
}

fn set_operation_schema(_: &mut SchemaGenerator) -> Schema {
    enum_schema(&["merge", "prune"])
}

fn metadata_field_schema(_: &mut SchemaGenerator) -> Schema {
    enum_schema(&["namespace", "name"])
}

fn namespace_globs_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "string", "pattern": "^\\*?[-:a-z0-9]*\\*?$"}})
}

fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"x-kubernetes-preserve-unknown-fields": true})
}

fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn any_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": true}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_the_table_has_its_crd_with_the_same_group_plural_and_versions() {
        let crds = all();
        // Built-in kinds (the filer injector's ConfigMaps and Secrets) have none.
        let kinds: Vec<_> = outfit_core::kinds::all()
            .filter(|kind| kind.info().served == outfit_core::vocab::Served::Crd)
            .collect();
        assert_eq!(kinds.len(), crds.len(), "one CRD per CRD kind of the table");
        for kind in kinds {
            let info = kind.info();
            let crd = crds
                .iter()
                .find(|crd| crd.spec.names.kind == info.name)
                .unwrap_or_else(|| panic!("no CRD for {kind}"));
            assert_eq!(crd.spec.group, info.group, "{kind}");
            assert_eq!(crd.spec.names.plural, info.plural, "{kind}");
            assert_eq!(crd.spec.scope == "Namespaced", info.namespaced, "{kind}");
            let served: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(served, info.versions, "{kind}");
            let storage = crd
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .map(|v| v.name.as_str());
            assert_eq!(
                storage,
                Some(info.versions[0]),
                "{kind}: the table's first version is the stored one"
            );
        }
    }

    #[test]
    fn crds_name_every_policy_kind_with_upstream_groups_and_versions() {
        let summary: Vec<(String, Vec<String>)> = all()
            .iter()
            .map(|crd| {
                let name = crd.metadata.name.clone().unwrap_or_default();
                let versions = crd
                    .spec
                    .versions
                    .iter()
                    .map(|v| format!("{}{}", v.name, if v.storage { "*" } else { "" }))
                    .collect();
                (name, versions)
            })
            .collect();
        let expect = |name: &str, versions: &[&str]| {
            (
                name.to_owned(),
                versions.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            summary,
            vec![
                expect("poddefaults.kubeflow.org", &["v1alpha1*"]),
                expect("assign.mutations.gatekeeper.sh", &["v1*", "v1beta1", "v1alpha1"]),
                expect(
                    "assignmetadata.mutations.gatekeeper.sh",
                    &["v1*", "v1beta1", "v1alpha1"]
                ),
                expect(
                    "modifyset.mutations.gatekeeper.sh",
                    &["v1*", "v1beta1", "v1alpha1"]
                ),
                expect("assignimage.mutations.gatekeeper.sh", &["v1alpha1*"]),
                expect("podpolicies.outfit.dev", &["v1alpha1*"]),
                expect("audiences.outfit.dev", &["v1alpha1*"]),
            ]
        );
    }

    #[test]
    fn schemas_require_what_the_engine_requires_and_keep_free_form_values() {
        let crd = serde_json::to_value(Assign::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["location"]));
        let value = &spec["properties"]["parameters"]["properties"]["assign"]["properties"]["value"];
        assert_eq!(value["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            spec["properties"]["match"]["properties"]["scope"]["enum"],
            serde_json::json!(["*", "Cluster", "Namespaced"])
        );
        let pd = serde_json::to_value(PodDefault::crd()).unwrap();
        let pd_spec = &pd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(pd_spec["required"], serde_json::json!(["selector"]));
        assert_eq!(pd["spec"]["scope"], "Namespaced");
        assert_eq!(crd["spec"]["scope"], "Cluster");
    }
}
