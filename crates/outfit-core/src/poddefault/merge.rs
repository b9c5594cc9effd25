//! Kubeflow's merge of PodDefaults into a pod, as two steps: [`plan`] checks every conflict
//! against the untouched pod and lists what to add, then [`Plan::into_ops`] turns the additions
//! into RFC 6902 operations. The pod itself is never copied on this path.
//!
//! Rules (Kubeflow `main.go`, `safeToApplyPodDefaultsOnPod` and the `merge*` functions):
//! - keyed lists (env, volumes, volume mounts, tolerations, pull secrets, init containers, sidecars)
//!   skip an entry equal to the one already there and conflict on a different one, against the pod
//!   and against earlier PodDefaults alike; any conflict denies the whole pod;
//! - `envFrom` has no identity and never conflicts;
//! - `serviceAccountName` and `automountServiceAccountToken`: the last PodDefault that sets them wins;
//! - `command` and `args`: set only where the container has none, first PodDefault wins, never on a
//!   container named `istio-proxy`;
//! - env, mounts, envFrom, command and args go to the pod's own `spec.containers` only: not to init
//!   containers and not to the sidecars PodDefaults inject (nor, unlike Kubeflow, to those sidecars
//!   when the webhook is invoked again and finds them in `spec.containers`).

use std::fmt;

use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
use serde_json::{Map, Value};

use super::{ISTIO_PROXY_CONTAINER, Keyed, PodDefault};
use crate::semantic;

/// One conflict between a PodDefault and the pod, or an earlier PodDefault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The PodDefault whose entry could not be merged.
    pub policy: String,
    /// Where in the pod, e.g. `spec.containers[name: main].env[name: FOO]`.
    pub field: String,
    /// The two values that differ.
    pub detail: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "poddefault {}: {}: {}", self.policy, self.field, self.detail)
    }
}

/// Why PodDefaults could not be merged into a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeError {
    /// The pod itself has a field of the wrong shape.
    Malformed(String),
    /// Entries that conflict.
    Conflicts(Vec<Conflict>),
}

/// What one regular container receives.
#[derive(Debug, Default)]
struct ContainerPlan<'p> {
    env: Vec<&'p Value>,
    mounts: Vec<&'p Value>,
    env_from: Vec<&'p Value>,
    command: Option<&'p Value>,
    args: Option<&'p Value>,
}

/// The additions to make to one pod, checked free of conflicts.
#[derive(Debug)]
pub(crate) struct Plan<'p> {
    volumes: Vec<&'p Value>,
    tolerations: Vec<&'p Value>,
    image_pull_secrets: Vec<&'p Value>,
    init_containers: Vec<&'p Value>,
    sidecars: Vec<&'p Value>,
    annotations: Vec<(&'p str, &'p str)>,
    labels: Vec<(&'p str, &'p str)>,
    service_account_name: Option<&'p str>,
    automount_service_account_token: Option<bool>,
    containers: Vec<ContainerPlan<'p>>,
    markers: Vec<(&'p str, &'p str)>,
}

/// Checks `pod_defaults` (in application order) against `pod` and lists what to add.
pub(crate) fn plan<'p>(pod: &Value, pod_defaults: &[&'p PodDefault]) -> Result<Plan<'p>, MergeError> {
    let empty = Map::new();
    let spec = object_at(pod.get("spec"), "spec")?.unwrap_or(&empty);
    let metadata = object_at(pod.get("metadata"), "metadata")?.unwrap_or(&empty);
    let mut conflicts = Vec::new();
    let mut cx = Checker {
        conflicts: &mut conflicts,
    };

    let by_toleration = |v: &Value, identity: &str| {
        let field = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or_default();
        identity
            .split_once(':')
            .is_some_and(|(key, effect)| field("key") == key && field("effect") == effect)
    };

    let volumes = cx.keyed(
        list_at(spec, "volumes", "spec")?,
        pod_defaults,
        |pd| &pd.volumes,
        by_name,
        "spec.volumes",
        "name",
    );
    let tolerations = cx.keyed(
        list_at(spec, "tolerations", "spec")?,
        pod_defaults,
        |pd| &pd.tolerations,
        by_toleration,
        "spec.tolerations",
        "key:effect",
    );
    let image_pull_secrets = cx.keyed(
        list_at(spec, "imagePullSecrets", "spec")?,
        pod_defaults,
        |pd| &pd.image_pull_secrets,
        by_name,
        "spec.imagePullSecrets",
        "name",
    );
    let init_containers = cx.keyed(
        list_at(spec, "initContainers", "spec")?,
        pod_defaults,
        |pd| &pd.init_containers,
        by_name,
        "spec.initContainers",
        "name",
    );
    let containers = list_at(spec, "containers", "spec")?;
    let sidecars = cx.keyed(
        containers,
        pod_defaults,
        |pd| &pd.sidecars,
        by_name,
        "spec.containers",
        "name",
    );
    let annotations = cx.string_map(
        object_at(metadata.get("annotations"), "metadata.annotations")?,
        pod_defaults,
        |pd| &pd.annotations,
        "metadata.annotations",
    );
    let labels = cx.string_map(
        object_at(metadata.get("labels"), "metadata.labels")?,
        pod_defaults,
        |pd| &pd.labels,
        "metadata.labels",
    );

    let mut container_plans = Vec::with_capacity(containers.len());
    for (index, container) in containers.iter().enumerate() {
        let Value::Object(container) = container else {
            return Err(MergeError::Malformed(format!(
                "spec.containers[{index}] is not an object"
            )));
        };
        // A container that is one of these PodDefaults' sidecars (already injected, seen again on
        // reinvocation) gets nothing, exactly as when it was first injected.
        let name = container.get("name").and_then(Value::as_str).unwrap_or_default();
        let is_sidecar = pod_defaults
            .iter()
            .flat_map(|pd| &pd.sidecars)
            .any(|sidecar| sidecar.key == name && semantic::equal(&sidecar.value, &containers[index]));
        container_plans.push(if is_sidecar {
            ContainerPlan::default()
        } else {
            cx.container(container, index, pod_defaults)?
        });
    }

    if !conflicts.is_empty() {
        return Err(MergeError::Conflicts(conflicts));
    }
    Ok(Plan {
        volumes,
        tolerations,
        image_pull_secrets,
        init_containers,
        sidecars,
        annotations,
        labels,
        service_account_name: pod_defaults
            .iter()
            .rev()
            .find_map(|pd| pd.service_account_name.as_deref()),
        automount_service_account_token: pod_defaults
            .iter()
            .rev()
            .find_map(|pd| pd.automount_service_account_token),
        containers: container_plans,
        markers: pod_defaults
            .iter()
            .map(|pd| (pd.marker_annotation.as_str(), pd.resource_version.as_str()))
            .collect(),
    })
}

struct Checker<'c> {
    conflicts: &'c mut Vec<Conflict>,
}

impl Checker<'_> {
    /// Merges one keyed list: each PodDefault entry is skipped when an equal entry with its key is
    /// already in the pod or was added by an earlier PodDefault, a conflict when a different one is,
    /// and added otherwise.
    fn keyed<'p>(
        &mut self,
        existing: &[Value],
        pod_defaults: &[&'p PodDefault],
        entries: impl Fn(&'p PodDefault) -> &'p Vec<Keyed>,
        has_key: impl Fn(&Value, &str) -> bool,
        field: &str,
        key_name: &str,
    ) -> Vec<&'p Value> {
        let mut added: Vec<&'p Keyed> = Vec::new();
        for pd in pod_defaults {
            for entry in entries(pd) {
                let found = existing
                    .iter()
                    .find(|v| has_key(v, &entry.key))
                    .or_else(|| added.iter().find(|a| a.key == entry.key).map(|a| &a.value));
                match found {
                    None => added.push(entry),
                    Some(found) if semantic::equal(found, &entry.value) => {}
                    Some(found) => self.conflict(
                        pd,
                        format!("{field}[{key_name}: {}]", entry.key),
                        &entry.value,
                        found,
                    ),
                }
            }
        }
        added.into_iter().map(|k| &k.value).collect()
    }

    fn string_map<'p>(
        &mut self,
        existing: Option<&Map<String, Value>>,
        pod_defaults: &[&'p PodDefault],
        entries: impl Fn(&'p PodDefault) -> &'p Vec<(String, String)>,
        field: &str,
    ) -> Vec<(&'p str, &'p str)> {
        let mut added: Vec<(&'p str, &'p str)> = Vec::new();
        for pd in pod_defaults {
            for (key, value) in entries(pd) {
                let found = match existing.and_then(|m| m.get(key)) {
                    Some(found) => Some(found.clone()),
                    None => added
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| Value::String((*v).to_owned())),
                };
                match found {
                    None => added.push((key, value)),
                    Some(Value::String(found)) if found == *value => {}
                    Some(found) => {
                        self.conflict(
                            pd,
                            format!("{field}[{key}]"),
                            &Value::String(value.clone()),
                            &found,
                        );
                    }
                }
            }
        }
        added
    }

    fn container<'p>(
        &mut self,
        container: &Map<String, Value>,
        index: usize,
        pod_defaults: &[&'p PodDefault],
    ) -> Result<ContainerPlan<'p>, MergeError> {
        let name = container.get("name").and_then(Value::as_str).unwrap_or_default();
        let at = format!("spec.containers[{index}]");
        let field = |f: &str| format!("spec.containers[name: {name}].{f}");
        let env = self.keyed(
            list_at(container, "env", &at)?,
            pod_defaults,
            |pd| &pd.env,
            by_name,
            &field("env"),
            "name",
        );
        let mounts = self.mounts(
            list_at(container, "volumeMounts", &at)?,
            pod_defaults,
            &field("volumeMounts"),
        );

        // Kubeflow appends envFrom with no check at all, so re-applying duplicates it; outfit skips
        // a source the container already has (see the README's deviation table).
        let existing_env_from = list_at(container, "envFrom", &at)?;
        let mut env_from: Vec<&'p Value> = Vec::new();
        for source in pod_defaults.iter().flat_map(|pd| &pd.env_from) {
            let present = existing_env_from
                .iter()
                .chain(env_from.iter().copied())
                .any(|v| semantic::equal(v, source));
            if !present {
                env_from.push(source);
            }
        }

        let (mut command, mut args) = (None, None);
        if name != ISTIO_PROXY_CONTAINER {
            let unset = |f: &str| container.get(f).is_none_or(Value::is_null);
            if unset("command") {
                command = pod_defaults.iter().find_map(|pd| pd.command.as_ref());
            }
            if unset("args") {
                args = pod_defaults.iter().find_map(|pd| pd.args.as_ref());
            }
        }
        Ok(ContainerPlan {
            env,
            mounts,
            env_from,
            command,
            args,
        })
    }

    /// Volume mounts are identified twice, by volume name and by mount path (Kubeflow keeps two
    /// maps); a mount conflicts when either identity holds a different mount.
    fn mounts<'p>(
        &mut self,
        existing: &[Value],
        pod_defaults: &[&'p PodDefault],
        field: &str,
    ) -> Vec<&'p Value> {
        let mut added: Vec<&'p super::Mount> = Vec::new();
        let str_field = |v: &Value, f: &str, want: &str| v.get(f).and_then(Value::as_str) == Some(want);
        for pd in pod_defaults {
            for mount in &pd.volume_mounts {
                let same_name = existing
                    .iter()
                    .find(|v| str_field(v, "name", &mount.name))
                    .or_else(|| added.iter().find(|m| m.name == mount.name).map(|m| &m.value));
                let same_path = existing
                    .iter()
                    .find(|v| str_field(v, "mountPath", &mount.path))
                    .or_else(|| added.iter().find(|m| m.path == mount.path).map(|m| &m.value));
                let mut ok = true;
                if let Some(found) = same_name.filter(|found| !semantic::equal(found, &mount.value)) {
                    self.conflict(pd, format!("{field}[name: {}]", mount.name), &mount.value, found);
                    ok = false;
                }
                if let Some(found) = same_path.filter(|found| !semantic::equal(found, &mount.value)) {
                    self.conflict(
                        pd,
                        format!("{field}[mountPath: {}]", mount.path),
                        &mount.value,
                        found,
                    );
                    ok = false;
                }
                if ok && same_name.is_none() {
                    added.push(mount);
                }
            }
        }
        added.into_iter().map(|m| &m.value).collect()
    }

    fn conflict(&mut self, pd: &PodDefault, field: String, wanted: &Value, found: &Value) {
        self.conflicts.push(Conflict {
            policy: pd.name().to_owned(),
            field,
            detail: format!("{} does not match existing {}", compact(wanted), compact(found)),
        });
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Whether a pod's list entry has this `name`.
fn by_name(value: &Value, name: &str) -> bool {
    value.get("name").and_then(Value::as_str) == Some(name)
}

fn object_at<'v>(value: Option<&'v Value>, path: &str) -> Result<Option<&'v Map<String, Value>>, MergeError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(object)) => Ok(Some(object)),
        Some(_) => Err(MergeError::Malformed(format!("{path} is not an object"))),
    }
}

fn list_at<'v>(object: &'v Map<String, Value>, field: &str, at: &str) -> Result<&'v [Value], MergeError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(MergeError::Malformed(format!("{at}.{field} is not a list"))),
    }
}

impl Plan<'_> {
    /// The RFC 6902 operations that make the additions to `pod` (the pod `plan` checked). Built
    /// directly rather than by diffing a mutated copy: the pod is never copied, and appends are
    /// explicit `add`s at the end of each list (a positional diff could not tell an append from a
    /// rewrite).
    pub(crate) fn into_ops(self, pod: &Value) -> Vec<PatchOperation> {
        let mut ops = Ops(Vec::new());
        let metadata = ops.parent(
            pod,
            "metadata",
            !self.annotations.is_empty() || !self.markers.is_empty() || !self.labels.is_empty(),
        );
        let annotations: Vec<(&str, &str)> = self.annotations.into_iter().chain(self.markers).collect();
        ops.map_entries(&["metadata"], metadata, "annotations", &annotations);
        ops.map_entries(&["metadata"], metadata, "labels", &self.labels);

        let spec = ops.parent(pod, "spec", true);
        ops.append(&["spec"], spec, "volumes", &self.volumes);
        ops.append(&["spec"], spec, "tolerations", &self.tolerations);
        ops.append(&["spec"], spec, "imagePullSecrets", &self.image_pull_secrets);
        if let Some(name) = self.service_account_name {
            ops.set(
                &["spec"],
                spec,
                "serviceAccountName",
                Value::String(name.to_owned()),
            );
        }
        if let Some(automount) = self.automount_service_account_token {
            ops.set(
                &["spec"],
                spec,
                "automountServiceAccountToken",
                Value::Bool(automount),
            );
        }
        let containers = spec
            .and_then(|s| s.get("containers"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (index, (container, plan)) in containers.iter().zip(self.containers).enumerate() {
            let index = index.to_string();
            let at = ["spec", "containers", index.as_str()];
            let container = container.as_object();
            ops.append(&at, container, "env", &plan.env);
            ops.append(&at, container, "volumeMounts", &plan.mounts);
            ops.append(&at, container, "envFrom", &plan.env_from);
            if let Some(command) = plan.command {
                ops.set(&at, container, "command", command.clone());
            }
            if let Some(args) = plan.args {
                ops.set(&at, container, "args", args.clone());
            }
        }
        ops.append(&["spec"], spec, "initContainers", &self.init_containers);
        ops.append(&["spec"], spec, "containers", &self.sidecars);
        ops.0
    }
}

/// Accumulates patch operations.
struct Ops(Vec<PatchOperation>);

impl Ops {
    fn add(&mut self, at: &[&str], field: &str, value: Value) {
        let path = PointerBuf::from_tokens(at.iter().copied().chain([field]));
        self.0.push(PatchOperation::Add(AddOperation { path, value }));
    }

    /// The pod's top-level object `field`; when it is absent and something goes in it, an `add`
    /// creates it empty first.
    fn parent<'v>(&mut self, pod: &'v Value, field: &str, needed: bool) -> Option<&'v Map<String, Value>> {
        let parent = pod.get(field).and_then(Value::as_object);
        if parent.is_none() && needed {
            self.add(&[], field, Value::Object(Map::new()));
        }
        parent
    }

    /// Adds entries to a string map, creating the map whole when it is absent.
    fn map_entries(
        &mut self,
        at: &[&str],
        parent: Option<&Map<String, Value>>,
        field: &str,
        entries: &[(&str, &str)],
    ) {
        if entries.is_empty() {
            return;
        }
        match parent.and_then(|p| p.get(field)).and_then(Value::as_object) {
            Some(existing) => {
                for (key, value) in entries {
                    if existing.get(*key).and_then(Value::as_str) != Some(value) {
                        let path = PointerBuf::from_tokens(at.iter().copied().chain([field, key]));
                        self.0.push(PatchOperation::Add(AddOperation {
                            path,
                            value: Value::String((*value).to_owned()),
                        }));
                    }
                }
            }
            None => {
                let map = entries
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
                    .collect();
                self.add(at, field, Value::Object(map));
            }
        }
    }

    /// Appends to a list at its end, creating the list whole when it is absent.
    fn append(&mut self, at: &[&str], parent: Option<&Map<String, Value>>, field: &str, items: &[&Value]) {
        if items.is_empty() {
            return;
        }
        match parent.and_then(|p| p.get(field)).and_then(Value::as_array) {
            Some(existing) => {
                for (offset, item) in items.iter().enumerate() {
                    let index = (existing.len() + offset).to_string();
                    let path = PointerBuf::from_tokens(at.iter().copied().chain([field, index.as_str()]));
                    self.0.push(PatchOperation::Add(AddOperation {
                        path,
                        value: (*item).clone(),
                    }));
                }
            }
            None => self.add(
                at,
                field,
                Value::Array(items.iter().map(|v| (*v).clone()).collect()),
            ),
        }
    }

    /// Sets a field unless it already has this value (`add` replaces an existing member).
    fn set(&mut self, at: &[&str], parent: Option<&Map<String, Value>>, field: &str, value: Value) {
        if parent.and_then(|p| p.get(field)) != Some(&value) {
            self.add(at, field, value);
        }
    }
}
