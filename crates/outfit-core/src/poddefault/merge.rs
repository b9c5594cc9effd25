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

use std::{borrow::Cow, fmt};

use serde_json::{Value, value::RawValue};

use super::{ISTIO_PROXY_CONTAINER, Keyed, PodDefault, Rendered};
use crate::{
    patch::{AddOp, OpValue},
    semantic,
    view::{
        List, Members, Shape,
        pod::{ContainerView, Identity, MetadataView, PodView, SpecView},
        raw_str, raw_value,
    },
};

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
#[derive(Debug)]
pub(crate) enum MergeError {
    /// The pod itself has a field of the wrong shape.
    Malformed(String),
    /// Entries that conflict.
    Conflicts(Vec<Conflict>),
    /// The pod's text repeats a key inside a part the merge reads: the caller reads it again
    /// through a `Value`, which keeps the last one.
    Unreadable(serde_json::Error),
}

/// What one regular container receives, with the view of it the operations are built against.
#[derive(Debug, Default)]
struct ContainerPlan<'p, 'a> {
    view: ContainerView<'a>,
    env: Vec<&'p RawValue>,
    mounts: Vec<&'p RawValue>,
    env_from: Vec<&'p Rendered>,
    command: Option<&'p Rendered>,
    args: Option<&'p Rendered>,
}

/// The additions to make to one pod, checked free of conflicts.
#[derive(Debug)]
pub(crate) struct Plan<'p, 'a> {
    volumes: Vec<&'p RawValue>,
    tolerations: Vec<&'p RawValue>,
    image_pull_secrets: Vec<&'p RawValue>,
    init_containers: Vec<&'p RawValue>,
    sidecars: Vec<&'p RawValue>,
    annotations: Vec<(&'p str, &'p str)>,
    labels: Vec<(&'p str, &'p str)>,
    service_account_name: Option<&'p str>,
    automount_service_account_token: Option<bool>,
    containers: Vec<ContainerPlan<'p, 'a>>,
    markers: Vec<(&'p str, &'p str)>,
}

/// A pod entry with the same identity as a PodDefault's entry: the pod's own, or one an earlier
/// PodDefault added.
#[derive(Clone, Copy)]
enum Found<'x> {
    Pod(&'x RawValue),
    Added(&'x Value),
}

impl Found<'_> {
    fn value(self) -> Cow<'static, Value> {
        match self {
            Found::Pod(raw) => Cow::Owned(raw_value(raw)),
            Found::Added(value) => Cow::Owned(value.clone()),
        }
    }
}

/// Checks `pod_defaults` (in application order) against `pod` and lists what to add.
pub(crate) fn plan<'p, 'a>(
    pod: &PodView<'a>,
    pod_defaults: &[&'p PodDefault],
) -> Result<Plan<'p, 'a>, MergeError> {
    let (empty_spec, empty_metadata) = (SpecView::default(), MetadataView::default());
    let spec = object_at(&pod.spec, "spec")?.unwrap_or(&empty_spec);
    let metadata = object_at(&pod.metadata, "metadata")?.unwrap_or(&empty_metadata);
    let mut conflicts = Vec::new();
    let mut cx = Checker {
        conflicts: &mut conflicts,
    };

    let by_toleration = |id: &Identity<'_>, identity: &str| {
        identity.split_once(':').is_some_and(|(key, effect)| {
            id.key.as_deref().unwrap_or_default() == key && id.effect.as_deref().unwrap_or_default() == effect
        })
    };
    let volumes = list_at(&spec.volumes, "spec.volumes")?;
    let tolerations = list_at(&spec.tolerations, "spec.tolerations")?;
    let image_pull_secrets = list_at(&spec.image_pull_secrets, "spec.imagePullSecrets")?;
    let init_containers = list_at(&spec.init_containers, "spec.initContainers")?;
    let containers = list_at(&spec.containers, "spec.containers")?;
    let volumes = cx.keyed(
        volumes,
        pod_defaults,
        |pd| &pd.volumes,
        by_name,
        &|| "spec.volumes".into(),
        "name",
    )?;
    let tolerations = cx.keyed(
        tolerations,
        pod_defaults,
        |pd| &pd.tolerations,
        by_toleration,
        &|| "spec.tolerations".into(),
        "key:effect",
    )?;
    let image_pull_secrets = cx.keyed(
        image_pull_secrets,
        pod_defaults,
        |pd| &pd.image_pull_secrets,
        by_name,
        &|| "spec.imagePullSecrets".into(),
        "name",
    )?;
    let init_containers = cx.keyed(
        init_containers,
        pod_defaults,
        |pd| &pd.init_containers,
        by_name,
        &|| "spec.initContainers".into(),
        "name",
    )?;
    let sidecars = cx.keyed(
        containers,
        pod_defaults,
        |pd| &pd.sidecars,
        by_name,
        &|| "spec.containers".into(),
        "name",
    )?;
    let annotations = cx.string_map(
        object_at(&metadata.annotations, "metadata.annotations")?,
        pod_defaults,
        |pd| &pd.annotations,
        "metadata.annotations",
    );
    let labels = cx.string_map(
        object_at(&metadata.labels, "metadata.labels")?,
        pod_defaults,
        |pd| &pd.labels,
        "metadata.labels",
    );

    let mut container_plans = Vec::with_capacity(containers.len());
    for (index, container) in containers.iter().enumerate() {
        let view = match serde_json::from_str::<Shape<ContainerView<'a>>>(container.get()) {
            Ok(Shape::Is(view)) => view,
            Ok(_) => {
                return Err(MergeError::Malformed(format!(
                    "spec.containers[{index}] is not an object"
                )));
            }
            Err(error) => return Err(MergeError::Unreadable(error)),
        };
        // A container that is one of these PodDefaults' sidecars (already injected, seen again on
        // reinvocation) gets nothing, exactly as when it was first injected.
        let name = view.name.as_deref().unwrap_or_default();
        let is_sidecar = pod_defaults
            .iter()
            .flat_map(|pd| &pd.sidecars)
            .any(|sidecar| sidecar.key == name && semantic::equal(&sidecar.value, &raw_value(container)));
        container_plans.push(if is_sidecar {
            ContainerPlan {
                view,
                ..ContainerPlan::default()
            }
        } else {
            cx.container(view, index, pod_defaults)?
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
    /// and added otherwise. The pod's entries are only read when a PodDefault has entries here.
    fn keyed<'p>(
        &mut self,
        existing: &[&RawValue],
        pod_defaults: &[&'p PodDefault],
        entries: impl Fn(&'p PodDefault) -> &'p Vec<Keyed>,
        has_key: impl Fn(&Identity<'_>, &str) -> bool,
        field: &dyn Fn() -> String,
        key_name: &str,
    ) -> Result<Vec<&'p RawValue>, MergeError> {
        if pod_defaults.iter().all(|pd| entries(pd).is_empty()) {
            return Ok(Vec::new());
        }
        let identities = identities(existing)?;
        let mut added: Vec<&'p Keyed> = Vec::new();
        for pd in pod_defaults {
            for entry in entries(pd) {
                let found = identities
                    .iter()
                    .position(|id| has_key(id, &entry.key))
                    .map(|i| Found::Pod(existing[i]))
                    .or_else(|| {
                        added
                            .iter()
                            .find(|a| a.key == entry.key)
                            .map(|a| Found::Added(&a.value))
                    });
                match found.map(Found::value) {
                    None => added.push(entry),
                    Some(found) if semantic::equal(&found, &entry.value) => {}
                    Some(found) => self.conflict(
                        pd,
                        format!("{}[{key_name}: {}]", field(), entry.key),
                        &entry.value,
                        &found,
                    ),
                }
            }
        }
        Ok(added.into_iter().map(|k| &*k.json.0).collect())
    }

    fn string_map<'p>(
        &mut self,
        existing: Option<&Members<'_>>,
        pod_defaults: &[&'p PodDefault],
        entries: impl Fn(&'p PodDefault) -> &'p Vec<(String, String)>,
        field: &str,
    ) -> Vec<(&'p str, &'p str)> {
        let mut added: Vec<(&'p str, &'p str)> = Vec::new();
        for pd in pod_defaults {
            for (key, value) in entries(pd) {
                let wanted = || Value::String(value.clone());
                match existing.and_then(|m| m.get(key)) {
                    Some(raw) => {
                        if raw_str(raw).as_deref() != Some(value.as_str()) {
                            self.conflict(pd, format!("{field}[{key}]"), &wanted(), &raw_value(raw));
                        }
                    }
                    None => match added.iter().find(|(k, _)| k == key) {
                        None => added.push((key, value)),
                        Some((_, found)) if found == value => {}
                        Some((_, found)) => {
                            let found = Value::String((*found).to_owned());
                            self.conflict(pd, format!("{field}[{key}]"), &wanted(), &found);
                        }
                    },
                }
            }
        }
        added
    }

    fn container<'p, 'a>(
        &mut self,
        view: ContainerView<'a>,
        index: usize,
        pod_defaults: &[&'p PodDefault],
    ) -> Result<ContainerPlan<'p, 'a>, MergeError> {
        let name = view.name.as_deref().unwrap_or_default();
        let at = |f: &str| format!("spec.containers[{index}].{f}");
        let field = |f: &str| format!("spec.containers[name: {name}].{f}");
        let env = self.keyed(
            list_at_with(&view.env, || at("env"))?,
            pod_defaults,
            |pd| &pd.env,
            by_name,
            &|| field("env"),
            "name",
        )?;
        let mounts = self.mounts(
            list_at_with(&view.volume_mounts, || at("volumeMounts"))?,
            pod_defaults,
            &|| field("volumeMounts"),
        )?;

        // Kubeflow appends envFrom with no check at all, so re-applying duplicates it; outfit skips
        // a source the container already has (see the README's deviation table).
        let existing_env_from = list_at_with(&view.env_from, || at("envFrom"))?;
        let mut env_from: Vec<&'p Rendered> = Vec::new();
        if pod_defaults.iter().any(|pd| !pd.env_from.is_empty()) {
            let existing: Vec<Value> = existing_env_from.iter().map(|raw| raw_value(raw)).collect();
            for source in pod_defaults.iter().flat_map(|pd| &pd.env_from) {
                let present = existing
                    .iter()
                    .chain(env_from.iter().map(|r| &r.value))
                    .any(|v| semantic::equal(v, &source.value));
                if !present {
                    env_from.push(source);
                }
            }
        }

        let (mut command, mut args) = (None, None);
        if name != ISTIO_PROXY_CONTAINER {
            if view.command.is_none() {
                command = pod_defaults.iter().find_map(|pd| pd.command.as_ref());
            }
            if view.args.is_none() {
                args = pod_defaults.iter().find_map(|pd| pd.args.as_ref());
            }
        }
        Ok(ContainerPlan {
            view,
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
        existing: &[&RawValue],
        pod_defaults: &[&'p PodDefault],
        field: &dyn Fn() -> String,
    ) -> Result<Vec<&'p RawValue>, MergeError> {
        if pod_defaults.iter().all(|pd| pd.volume_mounts.is_empty()) {
            return Ok(Vec::new());
        }
        let identities = identities(existing)?;
        let mut added: Vec<&'p super::Mount> = Vec::new();
        for pd in pod_defaults {
            for mount in &pd.volume_mounts {
                let in_pod = |want: &dyn Fn(&Identity<'_>) -> bool| {
                    identities.iter().position(want).map(|i| Found::Pod(existing[i]))
                };
                let same_name = in_pod(&|id| id.name.as_deref() == Some(&mount.name)).or_else(|| {
                    added
                        .iter()
                        .find(|m| m.name == mount.name)
                        .map(|m| Found::Added(&m.value))
                });
                let same_path = in_pod(&|id| id.mount_path.as_deref() == Some(&mount.path)).or_else(|| {
                    added
                        .iter()
                        .find(|m| m.path == mount.path)
                        .map(|m| Found::Added(&m.value))
                });
                let mut ok = true;
                for (found, identity) in [
                    (same_name, format!("name: {}", mount.name)),
                    (same_path, format!("mountPath: {}", mount.path)),
                ] {
                    let Some(found) = found.map(Found::value) else {
                        continue;
                    };
                    if !semantic::equal(&found, &mount.value) {
                        self.conflict(pd, format!("{}[{identity}]", field()), &mount.value, &found);
                        ok = false;
                    }
                }
                if ok && same_name.is_none() {
                    added.push(mount);
                }
            }
        }
        Ok(added.into_iter().map(|m| &*m.json.0).collect())
    }

    fn conflict(&mut self, pd: &PodDefault, field: String, wanted: &Value, found: &Value) {
        self.conflicts.push(Conflict {
            policy: pd.name().to_owned(),
            field,
            detail: format!("{} does not match existing {}", compact(wanted), compact(found)),
        });
    }
}

fn present<'l, 'a>(list: Option<&'l List<'a>>) -> Option<&'l [&'a RawValue]> {
    list.and_then(List::present)
}

fn identities<'a>(entries: &[&'a RawValue]) -> Result<Vec<Identity<'a>>, MergeError> {
    entries
        .iter()
        .map(|entry| Identity::of(entry).map_err(MergeError::Unreadable))
        .collect()
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Whether a pod's list entry has this `name`.
fn by_name(identity: &Identity<'_>, name: &str) -> bool {
    identity.name.as_deref() == Some(name)
}

fn object_at<'v, T>(shape: &'v Shape<T>, path: &str) -> Result<Option<&'v T>, MergeError> {
    shape
        .object()
        .map_err(|_| MergeError::Malformed(format!("{path} is not an object")))
}

fn list_at<'l, 'a>(list: &'l List<'a>, path: &str) -> Result<&'l [&'a RawValue], MergeError> {
    list_at_with(list, || path.to_owned())
}

fn list_at_with<'l, 'a>(
    list: &'l List<'a>,
    path: impl FnOnce() -> String,
) -> Result<&'l [&'a RawValue], MergeError> {
    list.items()
        .map_err(|_| MergeError::Malformed(format!("{} is not a list", path())))
}

impl<'p> Plan<'p, '_> {
    /// The RFC 6902 operations that make the additions to `pod` (the pod `plan` checked). Built
    /// directly rather than by diffing a mutated copy: the pod is never copied, the values are
    /// borrowed from the PodDefaults, and appends are explicit `add`s at the end of each list (a
    /// positional diff could not tell an append from a rewrite).
    pub(crate) fn into_ops(self, pod: &PodView<'_>) -> Vec<AddOp<'p>> {
        let mut ops = Ops(Vec::new());
        let metadata = pod.metadata();
        let metadata_needed =
            !self.annotations.is_empty() || !self.markers.is_empty() || !self.labels.is_empty();
        if metadata.is_none() && metadata_needed {
            ops.add(&[], "metadata", OpValue::EmptyObject);
        }
        let annotations: Vec<(&str, &str)> = self.annotations.into_iter().chain(self.markers).collect();
        let annotations_now = metadata.and_then(|m| m.annotations.get());
        let labels_now = metadata.and_then(|m| m.labels.get());
        ops.map_entries(&["metadata"], annotations_now, "annotations", annotations);
        ops.map_entries(&["metadata"], labels_now, "labels", self.labels);

        let spec = pod.spec.get();
        if spec.is_none() {
            ops.add(&[], "spec", OpValue::EmptyObject);
        }
        let spec_volumes = present(spec.map(|s| &s.volumes));
        ops.append(&["spec"], spec_volumes, "volumes", self.volumes);
        let spec_tolerations = present(spec.map(|s| &s.tolerations));
        ops.append(&["spec"], spec_tolerations, "tolerations", self.tolerations);
        let spec_pull_secrets = present(spec.map(|s| &s.image_pull_secrets));
        ops.append(
            &["spec"],
            spec_pull_secrets,
            "imagePullSecrets",
            self.image_pull_secrets,
        );
        if let Some(name) = self.service_account_name {
            let existing = spec.and_then(|s| s.service_account_name);
            if existing.and_then(raw_str).as_deref() != Some(name) {
                ops.add(&["spec"], "serviceAccountName", OpValue::Str(name));
            }
        }
        if let Some(automount) = self.automount_service_account_token {
            let existing = spec.and_then(|s| s.automount_service_account_token);
            if existing.map(RawValue::get) != Some(if automount { "true" } else { "false" }) {
                ops.add(
                    &["spec"],
                    "automountServiceAccountToken",
                    OpValue::Bool(automount),
                );
            }
        }
        for (index, plan) in self.containers.into_iter().enumerate() {
            let index = index.to_string();
            let at = ["spec", "containers", index.as_str()];
            let view = &plan.view;
            ops.append(&at, view.env.present(), "env", plan.env);
            ops.append(&at, view.volume_mounts.present(), "volumeMounts", plan.mounts);
            let env_from = plan.env_from.iter().map(|r| &*r.json.0).collect();
            ops.append(&at, view.env_from.present(), "envFrom", env_from);
            // Only planned where the container has none (absent or null).
            if let Some(command) = plan.command {
                ops.add(&at, "command", OpValue::Json(&command.json.0));
            }
            if let Some(args) = plan.args {
                ops.add(&at, "args", OpValue::Json(&args.json.0));
            }
        }
        let spec_init_containers = present(spec.map(|s| &s.init_containers));
        ops.append(
            &["spec"],
            spec_init_containers,
            "initContainers",
            self.init_containers,
        );
        let spec_containers = present(spec.map(|s| &s.containers));
        ops.append(&["spec"], spec_containers, "containers", self.sidecars);
        ops.0
    }
}

/// Accumulates patch operations.
struct Ops<'p>(Vec<AddOp<'p>>);

impl<'p> Ops<'p> {
    fn add(&mut self, at: &[&str], field: &str, value: OpValue<'p>) {
        self.0.push(AddOp::new(at.iter().copied().chain([field]), value));
    }

    /// Adds entries to a string map, creating the map whole when it is absent.
    fn map_entries(
        &mut self,
        at: &[&str],
        existing: Option<&Members<'_>>,
        field: &str,
        entries: Vec<(&'p str, &'p str)>,
    ) {
        if entries.is_empty() {
            return;
        }
        match existing {
            Some(existing) => {
                for (key, value) in entries {
                    if existing.get(key).and_then(raw_str).as_deref() != Some(value) {
                        let path = at.iter().copied().chain([field, key]);
                        self.0.push(AddOp::new(path, OpValue::Str(value)));
                    }
                }
            }
            None => self.add(at, field, OpValue::Strings(entries)),
        }
    }

    /// Appends to a list at its end, creating the list whole when it is absent.
    fn append(&mut self, at: &[&str], existing: Option<&[&RawValue]>, field: &str, items: Vec<&'p RawValue>) {
        if items.is_empty() {
            return;
        }
        match existing {
            Some(existing) => {
                for (offset, item) in items.into_iter().enumerate() {
                    let index = (existing.len() + offset).to_string();
                    let path = at.iter().copied().chain([field, index.as_str()]);
                    self.0.push(AddOp::new(path, OpValue::Json(item)));
                }
            }
            None => self.add(at, field, OpValue::List(items)),
        }
    }
}
