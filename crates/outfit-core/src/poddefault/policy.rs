//! A validated, compiled PodDefault and the values it adds, each rendered to JSON text once when
//! the policy loads; the names Kubeflow's webhook reads and writes.

use serde_json::{Value, value::RawValue};

use crate::{
    selector::LabelSelector,
    view::{Members, raw_str},
    vocab::{KindInfo, PolicyKind, PolicyRef, Served},
};

/// API group and version of PodDefault.
pub const API_VERSION: &str = "kubeflow.org/v1alpha1";
/// Kind of PodDefault.
pub const KIND: &str = "PodDefault";
/// PodDefault in the kinds table.
pub const POLICY_KIND: PolicyKind = PolicyKind::new(&KindInfo {
    name: KIND,
    group: "kubeflow.org",
    versions: &["v1alpha1"],
    plural: "poddefaults",
    namespaced: true,
    served: Served::Crd,
});
/// Prefix of the annotations Kubeflow's webhook reads and writes on pods.
pub const ANNOTATION_PREFIX: &str = "poddefault.admission.kubeflow.org";
/// A pod with this annotation set to exactly `"true"` is left alone.
pub const EXCLUDE_ANNOTATION: &str = "poddefault.admission.kubeflow.org/exclude";
/// Static (mirror) pods carry this annotation and are left alone.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Kubeflow never sets `command`/`args` on a container with this name.
pub const ISTIO_PROXY_CONTAINER: &str = "istio-proxy";

/// A value a PodDefault adds to pods, with its JSON text rendered once when the policy loads: the
/// webhook's patch copies the text instead of serializing the value for every pod.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rendered {
    pub(crate) value: Value,
    pub(crate) json: Json,
}

impl Rendered {
    pub(crate) fn new(value: Value) -> Self {
        let json = Json::of(&value);
        Self { value, json }
    }
}

/// JSON text, compared as text.
#[derive(Debug, Clone)]
pub(crate) struct Json(pub(crate) Box<RawValue>);

impl Json {
    fn of(value: &Value) -> Self {
        // A Value always serializes.
        Self(serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// An entry of a list the merge identifies by a string key (env by name, volume by name, ...).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Keyed {
    pub(crate) key: String,
    pub(crate) value: Value,
    pub(crate) json: Json,
}

impl Keyed {
    pub(crate) fn new(key: impl Into<String>, value: Value) -> Self {
        let Rendered { value, json } = Rendered::new(value);
        Self {
            key: key.into(),
            value,
            json,
        }
    }
}

/// A volume mount, identified both by volume name and by mount path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mount {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) value: Value,
    pub(crate) json: Json,
}

impl Mount {
    pub(crate) fn new(name: impl Into<String>, path: impl Into<String>, value: Value) -> Self {
        let Rendered { value, json } = Rendered::new(value);
        Self {
            name: name.into(),
            path: path.into(),
            value,
            json,
        }
    }
}

/// A validated, compiled PodDefault.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDefault {
    pub(crate) reference: PolicyRef,
    pub(crate) resource_version: String,
    /// `poddefault.admission.kubeflow.org/poddefault-<name>`, built once.
    pub(crate) marker_annotation: String,
    pub(crate) selector: LabelSelector,
    pub(crate) env: Vec<Keyed>,
    pub(crate) env_from: Vec<Rendered>,
    pub(crate) volumes: Vec<Keyed>,
    pub(crate) volume_mounts: Vec<Mount>,
    pub(crate) annotations: Vec<(String, String)>,
    pub(crate) labels: Vec<(String, String)>,
    /// Keyed by `key` and `effect` (see the deviation table in docs/poddefault.md).
    pub(crate) tolerations: Vec<Keyed>,
    pub(crate) service_account_name: Option<String>,
    pub(crate) automount_service_account_token: Option<bool>,
    pub(crate) image_pull_secrets: Vec<Keyed>,
    pub(crate) init_containers: Vec<Keyed>,
    pub(crate) sidecars: Vec<Keyed>,
    pub(crate) command: Option<Rendered>,
    pub(crate) args: Option<Rendered>,
}

impl PodDefault {
    /// The policy's kind, namespace and name.
    pub fn reference(&self) -> &PolicyRef {
        &self.reference
    }

    /// The PodDefault's name.
    pub fn name(&self) -> &str {
        &self.reference.name
    }

    /// The namespace whose pods it applies to.
    pub fn namespace(&self) -> &str {
        self.reference.namespace.as_deref().unwrap_or_default()
    }

    /// `poddefault.admission.kubeflow.org/poddefault-<name>`: the annotation that records, on a
    /// pod, that this PodDefault was applied to it.
    pub fn marker_annotation(&self) -> &str {
        &self.marker_annotation
    }

    /// Whether a pod's annotations record this version of the PodDefault as applied: its
    /// `poddefault.admission.kubeflow.org/poddefault-<name>` annotation, valued with its
    /// resourceVersion (empty for a PodDefault read from a file).
    pub(crate) fn recorded_in(&self, annotations: &Members<'_>) -> bool {
        annotations
            .get(&self.marker_annotation)
            .and_then(raw_str)
            .is_some_and(|version| version == self.resource_version)
    }

    /// The compiled `spec.selector`.
    pub fn selector(&self) -> &LabelSelector {
        &self.selector
    }
}
