//! Kubeflow's merge of PodDefaults into a pod, as two steps: [`plan`] checks every conflict
//! against the untouched pod and lists what to add (no copy is made, so a denied or unmatched pod
//! costs no allocation of the pod), then [`Plan::apply`] writes the additions into a copy.
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
//!   containers and not to the sidecars PodDefaults inject.

use std::fmt;

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
        container_plans.push(cx.container(container, index, pod_defaults)?);
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
    /// Writes the additions into `pod` (the same pod `plan` checked, or a copy of it).
    pub(crate) fn apply(self, pod: &mut Value) {
        let Value::Object(pod) = pod else { return };
        let metadata = object_entry(pod, "metadata");
        let annotations = object_entry(metadata, "annotations");
        for (key, value) in self.annotations.into_iter().chain(self.markers) {
            annotations.insert(key.to_owned(), Value::String(value.to_owned()));
        }
        if !self.labels.is_empty() {
            let labels = object_entry(metadata, "labels");
            for (key, value) in self.labels {
                labels.insert(key.to_owned(), Value::String(value.to_owned()));
            }
        }

        let spec = object_entry(pod, "spec");
        append(spec, "volumes", &self.volumes);
        append(spec, "tolerations", &self.tolerations);
        append(spec, "imagePullSecrets", &self.image_pull_secrets);
        if let Some(name) = self.service_account_name {
            spec.insert("serviceAccountName".into(), Value::String(name.to_owned()));
        }
        if let Some(automount) = self.automount_service_account_token {
            spec.insert("automountServiceAccountToken".into(), Value::Bool(automount));
        }
        if let Some(Value::Array(containers)) = spec.get_mut("containers") {
            for (container, plan) in containers.iter_mut().zip(self.containers) {
                let Value::Object(container) = container else {
                    continue;
                };
                append(container, "env", &plan.env);
                append(container, "volumeMounts", &plan.mounts);
                append(container, "envFrom", &plan.env_from);
                if let Some(command) = plan.command {
                    container.insert("command".into(), command.clone());
                }
                if let Some(args) = plan.args {
                    container.insert("args".into(), args.clone());
                }
            }
        }
        append(spec, "initContainers", &self.init_containers);
        append(spec, "containers", &self.sidecars);
    }
}

/// The object at `field`, created (or replacing `null`) when absent.
fn object_entry<'m>(object: &'m mut Map<String, Value>, field: &str) -> &'m mut Map<String, Value> {
    let entry = object.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("just made an object")
}

fn append(object: &mut Map<String, Value>, field: &str, items: &[&Value]) {
    if items.is_empty() {
        return;
    }
    let entry = object.entry(field).or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Value::Array(list) = entry {
        list.extend(items.iter().map(|v| (*v).clone()));
    }
}
