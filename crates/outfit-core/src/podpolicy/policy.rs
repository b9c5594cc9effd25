//! A validated, compiled PodPolicy and Audience, and the names they are served under.

use serde_json::Value;

use super::{
    identity::Owner,
    requesters::{Members, Requesters},
};
use crate::{
    gatekeeper::matching::Wildcard,
    selector::LabelSelector,
    vocab::{KindInfo, PolicyKind, PolicyRef, Served},
};

/// The API group of outfit's own kinds.
pub const GROUP: &str = "outfit.dev";
/// Their group and version.
pub const API_VERSION: &str = "outfit.dev/v1alpha1";
/// PodPolicy in the kinds table: cluster-scoped, since who may have a GPU is a cluster
/// administrator's decision, not a namespace owner's.
pub const POD_POLICY_KIND: PolicyKind = PolicyKind::new(&KindInfo {
    name: "PodPolicy",
    group: GROUP,
    versions: &["v1alpha1"],
    plural: "podpolicies",
    namespaced: false,
    served: Served::Crd,
});
/// Audience in the kinds table: a named list of requesters PodPolicies refer to.
pub const AUDIENCE_KIND: PolicyKind = PolicyKind::new(&KindInfo {
    name: "Audience",
    group: GROUP,
    versions: &["v1alpha1"],
    plural: "audiences",
    namespaced: false,
    served: Served::Crd,
});

/// A compiled PodPolicy.
#[derive(Debug, Clone, PartialEq)]
pub struct PodPolicy {
    pub(crate) reference: PolicyRef,
    pub(crate) namespaces: Vec<Wildcard>,
    pub(crate) excluded_namespaces: Vec<Wildcard>,
    pub(crate) selector: LabelSelector,
    pub(crate) requesters: Requesters,
    pub(crate) owner: Option<Owner>,
    pub(crate) add: Additions,
}

impl PodPolicy {
    /// Its kind and name.
    pub fn reference(&self) -> &PolicyRef {
        &self.reference
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.reference.name
    }

    /// The Audiences its `spec.match.requesters` name (included or excluded).
    pub fn audiences(&self) -> impl Iterator<Item = &str> {
        self.requesters
            .audiences
            .iter()
            .chain(&self.requesters.excluded_audiences)
            .map(String::as_str)
    }
}

/// What a PodPolicy adds. Maps keep the policy's key order; every entry is keyed (by name, or by
/// key for maps) so that two policies, or a policy and the pod, can be compared field by field.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Additions {
    /// The containers of `spec.containers` the container fields go to (`None`: all of them).
    pub(crate) containers: Option<Vec<String>>,
    /// `resources.limits`, resource name to quantity (as a string, as the API server stores it).
    pub(crate) limits: Vec<(String, String)>,
    /// `resources.requests`.
    pub(crate) requests: Vec<(String, String)>,
    pub(crate) env: Vec<(String, Value)>,
    /// By volume name.
    pub(crate) volume_mounts: Vec<(String, Value)>,
    pub(crate) volumes: Vec<(String, Value)>,
    /// Added unless the pod has an equal one; tolerations never conflict.
    pub(crate) tolerations: Vec<Value>,
    pub(crate) node_selector: Vec<(String, String)>,
    pub(crate) runtime_class_name: Option<String>,
    pub(crate) annotations: Vec<(String, String)>,
    pub(crate) labels: Vec<(String, String)>,
}

/// A compiled Audience.
#[derive(Debug, Clone, PartialEq)]
pub struct Audience {
    pub(crate) reference: PolicyRef,
    pub(crate) members: Members,
}

impl Audience {
    /// Its kind and name.
    pub fn reference(&self) -> &PolicyRef {
        &self.reference
    }
}
