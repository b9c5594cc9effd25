//! Which requests the API server sends to outfit: the MutatingWebhookConfiguration's `rules`,
//! made from the kinds the policies apply to, so that a mutator of Services or Namespaces is
//! called in the cluster as `outfit mutate` applies it on disk.
//!
//! - Pods always (PodDefaults are for pods, and most mutators are).
//! - Gatekeeper `Assign`, `ModifySet`, `AssignImage`: each `applyTo` entry (groups, versions,
//!   kinds); `AssignMetadata`: its `match.kinds` (any version), or everything when it names none.
//! - Kinds are turned into resources (the rules' plural names) from the built-in types; a kind of
//!   a CRD is named with [`ResourceRule`]s given by the user, or refused with its name.
//! - [`Rules::AllResources`] is Gatekeeper's own rule: every CREATE and UPDATE of every kind.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    Resource,
    api::{
        apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet},
        autoscaling::v2::HorizontalPodAutoscaler,
        batch::v1::{CronJob, Job},
        core::v1::{
            ConfigMap, Endpoints, LimitRange, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
            PodTemplate, ReplicationController, ResourceQuota, Secret, Service, ServiceAccount,
        },
        networking::v1::{Ingress, IngressClass, NetworkPolicy},
        policy::v1::PodDisruptionBudget,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
        scheduling::v1::PriorityClass,
        storage::v1::StorageClass,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use outfit_core::{PolicySet, family::Targets};
use serde_json::{Value, json};

/// The rules of the webhook.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Rules {
    /// Pods only: what the PodDefault webhook registers, and enough for policies of pods.
    #[default]
    Pods,
    /// These resources (always with pods).
    Resources(Vec<ResourceRule>),
    /// Every CREATE and UPDATE of every kind (Gatekeeper's rule): every write in the selected
    /// namespaces then waits on outfit, and with failurePolicy Fail an outfit outage blocks them
    /// all.
    AllResources,
}

/// One resource outfit is called for: `group/version/resource`, such as `apps/v1/deployments`
/// (`v1/services` for the core group; `*` for any version).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceRule {
    /// The API group ("" for the core group).
    pub group: String,
    /// The version, or `*`.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
}

impl std::str::FromStr for ResourceRule {
    type Err = String;

    /// `group/version/resource`, or `version/resource` for the core group.
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        let (group, version, resource) = match parts.as_slice() {
            [version, resource] => ("", *version, *resource),
            [group, version, resource] => (*group, *version, *resource),
            _ => {
                return Err(format!(
                    "{text:?}: expected GROUP/VERSION/RESOURCE, or VERSION/RESOURCE for the core group"
                ));
            }
        };
        if version.is_empty() || resource.is_empty() {
            return Err(format!(
                "{text:?}: the version and the resource must not be empty"
            ));
        }
        Ok(Self {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        })
    }
}

/// Kinds some policy applies to whose resource outfit does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the policies apply to {}, whose resource names outfit does not know: name them with --webhook-resource GROUP/VERSION/RESOURCE, or use --all-resources",
    kinds.join(", ")
)]
pub struct UnknownKinds {
    /// `group/kind` of each (`core/Kind` for the core group).
    pub kinds: Vec<String>,
    /// The same kinds as (group, kind), for a caller that can look their resources up (the API
    /// server's discovery).
    pub missing: Vec<(String, String)>,
}

macro_rules! known {
    ($($type:ty),* $(,)?) => {
        &[$((<$type>::GROUP, <$type>::KIND, <$type>::URL_PATH_SEGMENT)),*]
    };
}

/// Built-in kinds: (group, kind, resource).
const KNOWN: &[(&str, &str, &str)] = known![
    Pod,
    Service,
    ConfigMap,
    Secret,
    Namespace,
    ServiceAccount,
    PersistentVolumeClaim,
    PersistentVolume,
    Endpoints,
    LimitRange,
    ResourceQuota,
    Node,
    PodTemplate,
    ReplicationController,
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    Job,
    CronJob,
    HorizontalPodAutoscaler,
    Ingress,
    IngressClass,
    NetworkPolicy,
    PodDisruptionBudget,
    Role,
    RoleBinding,
    ClusterRole,
    ClusterRoleBinding,
    PriorityClass,
    StorageClass,
    CustomResourceDefinition,
];

/// The resource of a built-in `kind` of `group`.
pub fn resource_of(group: &str, kind: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, resource)| *resource)
}

/// The rules for the policies in `set`, plus the resources the user named in `extra`. `None`
/// means every resource: a policy applies to every kind.
pub fn from_policies(set: &PolicySet, extra: &[ResourceRule]) -> Result<Rules, UnknownKinds> {
    from_policies_resolving(set, extra, |_, _| None)
}

/// As [`from_policies`], with `resolve` giving the resource of a kind that is not built in (from
/// the API server's discovery, say) before it counts as unknown.
pub fn from_policies_resolving(
    set: &PolicySet,
    extra: &[ResourceRule],
    resolve: impl Fn(&str, &str) -> Option<String>,
) -> Result<Rules, UnknownKinds> {
    let wanted = match set.targets() {
        Targets::Everything => return Ok(Rules::AllResources),
        Targets::Kinds(kinds) => kinds,
    };
    let mut resources: BTreeSet<ResourceRule> = extra.iter().cloned().collect();
    let mut unknown = BTreeSet::new();
    for want in wanted {
        if want.group == "*" || want.kind == "*" {
            return Ok(Rules::AllResources);
        }
        let resource = resource_of(&want.group, &want.kind)
            .map(str::to_owned)
            .or_else(|| resolve(&want.group, &want.kind));
        match resource {
            Some(resource) => {
                resources.insert(ResourceRule {
                    group: want.group,
                    version: want.version,
                    resource,
                });
            }
            // Named by the user: fine.
            None if extra.iter().any(|r| r.group == want.group) => {}
            None => {
                unknown.insert((want.group, want.kind));
            }
        }
    }
    if !unknown.is_empty() {
        let kinds = unknown
            .iter()
            .map(|(group, kind)| {
                let group = if group.is_empty() { "core" } else { group };
                format!("{group}/{kind}")
            })
            .collect();
        return Err(UnknownKinds {
            kinds,
            missing: unknown.into_iter().collect(),
        });
    }
    resources.retain(|r| !(r.group.is_empty() && r.resource == "pods"));
    Ok(if resources.is_empty() {
        Rules::Pods
    } else {
        Rules::Resources(resources.into_iter().collect())
    })
}

/// The `rules` of the webhook configuration.
pub fn to_json(rules: &Rules) -> Value {
    let operations = json!(["CREATE", "UPDATE"]);
    let pods = json!({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": operations, "scope": "Namespaced"});
    match rules {
        Rules::Pods => json!([pods]),
        Rules::AllResources => json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                                       "operations": operations, "scope": "*"}]),
        Rules::Resources(resources) => {
            // One rule per group and version, resources sorted: a stable, readable list.
            let mut grouped: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
            for r in resources {
                grouped
                    .entry((&r.group, &r.version))
                    .or_default()
                    .push(&r.resource);
            }
            let mut rules = vec![pods];
            for ((group, version), resources) in grouped {
                rules.push(
                    json!({"apiGroups": [group], "apiVersions": [version], "resources": resources,
                                  "operations": operations, "scope": "*"}),
                );
            }
            Value::Array(rules)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(yaml: &str) -> PolicySet {
        let documents = outfit_core::document::parse_stream(yaml, "test").unwrap();
        let mut builder = PolicySet::builder();
        builder.add_all(documents.iter());
        let (set, report) = builder.build();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        set
    }

    fn assign(apply_to: &str) -> String {
        format!(
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {{name: a}}\n\
             spec:\n  applyTo: [{apply_to}]\n  location: spec.x\n  parameters: {{assign: {{value: 1}}}}\n"
        )
    }

    #[test]
    fn pods_only_when_the_policies_are_for_pods() {
        let rules =
            from_policies(&set(&assign("{groups: [''], versions: [v1], kinds: [Pod]}")), &[]).unwrap();
        assert_eq!(rules, Rules::Pods);
        assert_eq!(to_json(&rules)[0]["resources"], json!(["pods"]));
    }

    #[test]
    fn services_and_deployments_get_rules_of_their_own() {
        let yaml = format!(
            "{}---\n{}",
            assign("{groups: [''], versions: [v1], kinds: [Service]}"),
            assign("{groups: [apps], versions: [v1], kinds: [Deployment, StatefulSet]}")
                .replace("name: a", "name: b")
        );
        let rules = from_policies(&set(&yaml), &[]).unwrap();
        let json = to_json(&rules);
        assert_eq!(json[0]["resources"], json!(["pods"]), "pods stay first");
        assert_eq!(json[1]["apiGroups"], json!([""]));
        assert_eq!(json[1]["resources"], json!(["services"]));
        assert_eq!(json[2]["apiGroups"], json!(["apps"]));
        assert_eq!(json[2]["resources"], json!(["deployments", "statefulsets"]));
        assert_eq!(json[2]["scope"], "*");
    }

    #[test]
    fn assign_metadata_without_kinds_means_everything() {
        let yaml = "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: m}\n\
                    spec:\n  location: metadata.labels.team\n  parameters: {assign: {value: a}}\n";
        assert_eq!(from_policies(&set(yaml), &[]).unwrap(), Rules::AllResources);
        let scoped = yaml.replace(
            "spec:\n",
            "spec:\n  match: {kinds: [{apiGroups: [''], kinds: [Namespace]}]}\n",
        );
        let rules = from_policies(&set(&scoped), &[]).unwrap();
        assert_eq!(
            rules,
            Rules::Resources(vec![ResourceRule {
                group: String::new(),
                version: "*".into(),
                resource: "namespaces".into()
            }])
        );
    }

    #[test]
    fn kinds_of_crds_must_be_named() {
        let policies = set(&assign(
            "{groups: [example.com], versions: [v1], kinds: [Widget]}",
        ));
        let error = from_policies(&policies, &[]).unwrap_err();
        assert_eq!(error.kinds, ["example.com/Widget"]);
        assert_eq!(error.missing, [("example.com".to_owned(), "Widget".to_owned())]);
        let resolved = from_policies_resolving(&policies, &[], |group, kind| {
            (group == "example.com" && kind == "Widget").then(|| "widgets".to_owned())
        })
        .unwrap();
        assert_eq!(
            resolved,
            Rules::Resources(vec!["example.com/v1/widgets".parse().unwrap()])
        );
        assert!(error.to_string().contains("--webhook-resource"), "{error}");
        let widgets: ResourceRule = "example.com/v1/widgets".parse().unwrap();
        let rules = from_policies(&policies, std::slice::from_ref(&widgets)).unwrap();
        assert_eq!(rules, Rules::Resources(vec![widgets]));
        assert!("widgets".parse::<ResourceRule>().is_err());
        assert_eq!("v1/services".parse::<ResourceRule>().unwrap().group, "");
    }

    #[test]
    fn all_resources_is_gatekeepers_rule() {
        let json = to_json(&Rules::AllResources);
        assert_eq!(json[0]["resources"], json!(["*"]));
        assert_eq!(json[0]["operations"], json!(["CREATE", "UPDATE"]));
    }
}
