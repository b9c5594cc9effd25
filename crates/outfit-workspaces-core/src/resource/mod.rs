//! The `Workspace` resource (`outfit.dev/v1alpha1`, issue 31): the record of a native workspace,
//! kept in the cluster beside its pod and outliving it, so that a workspace can stop and start
//! again with its name, entry, values and cluster, every replica and cluster reads the same
//! record, and an admin can read and change it with kubectl or GitOps.
//!
//! Its CRD is `crd.yaml` beside this file (written by hand so that its CEL rules sit beside the
//! schema they guard); the types here are what the backend reads and writes, and the tests check
//! the two agree.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube_core::{NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::workspace::manifest::Settings;

pub mod finalize;
pub mod reconcile;

#[cfg(test)]
mod tests;

/// The API group.
pub const GROUP: &str = "outfit.dev";
/// The version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion`.
pub const API_VERSION: &str = "outfit.dev/v1alpha1";
/// The kind.
pub const KIND: &str = "Workspace";
/// The resource (plural).
pub const PLURAL: &str = "workspaces";
/// The CRD's name.
pub const CRD_NAME: &str = "workspaces.outfit.dev";
/// The longest Workspace name: its pod's, which leaves room for the longest suffix of the pod's
/// objects (`-ingress`) within a DNS label. The CRD's CEL rule says the same (resource/tests.rs).
pub const MAX_NAME: usize = crate::model::names::MAX_POD_NAME;

/// The CRD as YAML.
pub const CRD_YAML: &str = include_str!("crd.yaml");

/// The CRD as an object, ready to apply.
pub fn crd() -> Value {
    serde_saphyr::from_str(CRD_YAML).expect("resource/crd.yaml is valid YAML (resource/tests.rs)")
}

/// A workspace: who owns it, what it was launched from, and whether it should run.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Workspace {
    /// Its name (the pod's) and namespace (the pod's).
    pub metadata: ObjectMeta,
    /// What the owner asked for.
    pub spec: WorkspaceSpec,
    /// What the backend saw and did, written by the leader only.
    #[serde(default)]
    pub status: Option<WorkspaceStatus>,
}

/// A Workspace's `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    /// The owner's user id; immutable.
    pub owner: String,
    /// The catalogue entry; immutable. Empty for a workspace of deic-dk's `create_pod`, which
    /// names its manifest by [`WorkspaceSpec::manifest_url`] instead.
    pub entry: String,
    /// The user's field values: container name → env var → value.
    #[serde(default, skip_serializing_if = "Settings::is_empty")]
    pub values: Settings,
    /// The cluster it runs on; set once (unset: the default cluster, filled in at launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Whether it should have its pod.
    #[serde(default = "started_by_default")]
    pub started: bool,
    /// deic-dk's `create_pod`: the manifest's URL (whitelisted), in place of a catalogue entry;
    /// immutable. Such a workspace has no stopped state: stopped, it is deleted, as deic-dk's
    /// pod was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_url: Option<String>,
    /// deic-dk's `create_pod`: the address of the silo that asked for it, which its manifest's
    /// pod is given as deic-dk gives it; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silo_ip: Option<String>,
}

impl Default for WorkspaceSpec {
    fn default() -> Self {
        WorkspaceSpec {
            owner: String::new(),
            entry: String::new(),
            values: Settings::new(),
            cluster: None,
            started: true,
            manifest_url: None,
            silo_ip: None,
        }
    }
}

impl WorkspaceSpec {
    /// Whether it records a pod of deic-dk's `create_pod` (no catalogue entry, no stopped state).
    pub fn is_compat(&self) -> bool {
        self.manifest_url.is_some()
    }
}

/// The CRD's default, for objects read without the API server's defaulting (files, tests).
fn started_by_default() -> bool {
    true
}

/// A Workspace's `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    /// Where it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The `metadata.generation` this status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions with reasons (`Ready`, `Valid`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The pod's name while it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Where the user reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// When it was last seen in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<Time>,
    /// When and why it last stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// Where a Workspace stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Recorded; no pod made yet.
    Pending,
    /// Its pod is being made or is starting.
    Starting,
    /// Its pod is ready with its objects.
    Running,
    /// Not started; its pod is going.
    Stopping,
    /// Not started and no pod.
    Stopped,
    /// It cannot run (an invalid spec, a refused launch, a pod that failed); conditions say why.
    Failed,
}

/// When and why a Workspace last stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    /// When.
    pub at: Time,
    /// Why.
    pub reason: StopReason,
}

/// Why a Workspace stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// Its owner (or an admin) stopped it.
    User,
    /// Culled after its idle time.
    Idle,
    /// Culled at the end of its lifetime.
    Lifetime,
    /// Its pod failed.
    Failed,
}

impl StopReason {
    /// Its name as the API, the resource and the metrics say it.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::User => "user",
            StopReason::Idle => "idle",
            StopReason::Lifetime => "lifetime",
            StopReason::Failed => "failed",
        }
    }
}

impl Workspace {
    /// A started Workspace named `name` in `namespace` for `spec`.
    pub fn new(name: &str, namespace: &str, spec: WorkspaceSpec) -> Self {
        Workspace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

/// Written with its `apiVersion` and `kind`, which a create needs and the type itself implies.
impl Serialize for Workspace {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            api_version: &'static str,
            kind: &'static str,
            metadata: &'a ObjectMeta,
            spec: &'a WorkspaceSpec,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: &'a Option<WorkspaceStatus>,
        }
        Wire {
            api_version: API_VERSION,
            kind: KIND,
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

impl Resource for Workspace {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        API_VERSION.into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
