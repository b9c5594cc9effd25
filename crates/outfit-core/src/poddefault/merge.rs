//! Kubeflow's merge of PodDefaults into a pod, as two steps: [`plan`] checks every conflict
//! against the untouched pod and lists what to add, then `Plan::into_ops` (in `ops`) turns the
//! additions into RFC 6902 operations. The pod is read through its view (identities of list
//! entries only) and never copied; whole entries are parsed from its text only where a PodDefault
//! has an entry with the same identity.
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

use std::{cell::OnceCell, fmt};

use serde_json::{Value, value::RawValue};

use super::policy::{ISTIO_PROXY_CONTAINER, Keyed, Mount, PodDefault, Rendered};
use crate::{
    patch::PatchTooLarge,
    semantic,
    view::{
        List, Members, Shape, Str,
        pod::{ContainerView, Entries, Identity, MetadataView, PodView, SpecView, identity},
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
    /// The operations planned so far already pass the bound on the patch.
    TooLarge(PatchTooLarge),
}

/// The pod's whole text, parsed into a `Value` at most once and only when the merge must compare
/// whole entries: an entry with the same identity as a PodDefault's, `envFrom` sources, a
/// container named like one of the PodDefaults' sidecars.
pub(crate) struct PodText<'t> {
    text: &'t dyn Fn() -> Option<&'t RawValue>,
    parsed: OnceCell<Value>,
}

impl<'t> PodText<'t> {
    pub(crate) fn new(text: &'t dyn Fn() -> Option<&'t RawValue>) -> Self {
        Self {
            text,
            parsed: OnceCell::new(),
        }
    }

    /// The pod's value at `pointer`; `null` where there is none, or where the text cannot be read
    /// whole (nesting beyond serde_json's limit of 128 levels).
    fn at(&self, pointer: &str) -> &Value {
        static NULL: Value = Value::Null;
        let pod = self
            .parsed
            .get_or_init(|| (self.text)().map_or(Value::Null, raw_value));
        pod.pointer(pointer).unwrap_or(&NULL)
    }
}

/// What one regular container receives, with the view of it the operations are built against.
#[derive(Debug)]
pub(super) struct ContainerPlan<'p, 'v> {
    pub(super) view: &'v ContainerView<'v>,
    pub(super) env: Vec<&'p RawValue>,
    pub(super) mounts: Vec<&'p RawValue>,
    pub(super) env_from: Vec<&'p Rendered>,
    pub(super) command: Option<&'p Rendered>,
    pub(super) args: Option<&'p Rendered>,
}

impl ContainerPlan<'_, '_> {
    /// At least how many bytes of patch JSON its operations take: their values, and for each
    /// field that gets any, less than the framing of one operation (`{"op":"add","path":
    /// "/spec/containers/0/env","value":},` is 53 bytes), so that a plan refused for passing the
    /// bound would surely have passed it.
    fn json_len_floor(&self) -> usize {
        const FRAMING: usize = 48;
        let list = |items: &[&RawValue]| {
            if items.is_empty() {
                0
            } else {
                FRAMING + items.iter().map(|item| item.get().len()).sum::<usize>()
            }
        };
        let rendered = |value: Option<&Rendered>| value.map_or(0, |r| FRAMING + r.json.0.get().len());
        let env_from: usize = self.env_from.iter().map(|r| FRAMING + r.json.0.get().len()).sum();
        list(&self.env) + list(&self.mounts) + env_from + rendered(self.command) + rendered(self.args)
    }
}

/// The additions to make to one pod, checked free of conflicts.
#[derive(Debug)]
pub(crate) struct Plan<'p, 'v> {
    pub(super) volumes: Vec<&'p RawValue>,
    pub(super) tolerations: Vec<&'p RawValue>,
    pub(super) image_pull_secrets: Vec<&'p RawValue>,
    pub(super) init_containers: Vec<&'p RawValue>,
    pub(super) sidecars: Vec<&'p RawValue>,
    pub(super) annotations: Vec<(&'p str, &'p str)>,
    pub(super) labels: Vec<(&'p str, &'p str)>,
    pub(super) service_account_name: Option<&'p str>,
    pub(super) automount_service_account_token: Option<bool>,
    pub(super) containers: Vec<ContainerPlan<'p, 'v>>,
    pub(super) markers: Vec<(&'p str, &'p str)>,
}

/// Where one keyed list is, for reading entries and naming them in conflicts.
struct ListAt<'l, 'a> {
    entries: &'l [Shape<Identity<'a>>],
    /// The list's place: `spec.volumes`, or a container's list.
    place: Place<'l>,
}

/// Where a keyed list sits in a pod. Its pointer and name are only spelled out when an entry has to
/// be read whole or named in a conflict.
#[derive(Clone, Copy)]
enum Place<'l> {
    /// `spec.<field>`.
    Spec(&'l str),
    /// `spec.containers[index].<field>` of the container named `name`.
    Container {
        index: usize,
        name: &'l str,
        field: &'l str,
    },
}

impl Place<'_> {
    /// The JSON pointer of entry `index`.
    fn pointer(self, entry: usize) -> String {
        match self {
            Place::Spec(field) => format!("/spec/{field}/{entry}"),
            Place::Container { index, field, .. } => format!("/spec/containers/{index}/{field}/{entry}"),
        }
    }

    /// The list's name in conflicts, e.g. `spec.containers[name: main].env`.
    fn field(self) -> String {
        match self {
            Place::Spec(field) => format!("spec.{field}"),
            Place::Container { name, field, .. } => format!("spec.containers[name: {name}].{field}"),
        }
    }
}

static EMPTY_SPEC: SpecView<'static> = SpecView {
    volumes: List::Absent,
    tolerations: List::Absent,
    image_pull_secrets: List::Absent,
    init_containers: List::Absent,
    containers: List::Absent,
    service_account_name: None,
    automount_service_account_token: None,
};

static EMPTY_METADATA: MetadataView<'static> = MetadataView {
    name: Str(None),
    generate_name: Str(None),
    namespace: Str(None),
    labels: Shape::Absent,
    annotations: Shape::Absent,
};

/// Checks `pod_defaults` (in application order) against `pod` and lists what to add; refuses
/// ([`MergeError::TooLarge`]) once what its containers get passes `max_patch_bytes` of patch, so
/// that a pod of a great many containers costs the planning of only as many as fit.
pub(crate) fn plan<'p, 'v>(
    pod: &'v PodView<'v>,
    text: &PodText<'_>,
    pod_defaults: &[&'p PodDefault],
    max_patch_bytes: usize,
) -> Result<Plan<'p, 'v>, MergeError> {
    let spec = object_at(&pod.spec, "spec")?.map_or(&EMPTY_SPEC, |spec| &**spec);
    let metadata = object_at(&pod.metadata, "metadata")?.unwrap_or(&EMPTY_METADATA);
    let mut cx = Checker {
        conflicts: Vec::new(),
        text,
    };

    let spec_list = |entries: &'v Entries<'v>, name: &'static str| -> Result<_, MergeError> {
        Ok(ListAt {
            entries: list_at(entries, || format!("spec.{name}"))?,
            place: Place::Spec(name),
        })
    };
    let [volumes, tolerations, image_pull_secrets, init_containers] = [
        spec_list(&spec.volumes, "volumes")?,
        spec_list(&spec.tolerations, "tolerations")?,
        spec_list(&spec.image_pull_secrets, "imagePullSecrets")?,
        spec_list(&spec.init_containers, "initContainers")?,
    ];
    let containers = list_at(&spec.containers, || "spec.containers".into())?;
    let volumes = cx.keyed(volumes, pod_defaults, |pd| &pd.volumes, by_name, "name");
    let tolerations = cx.keyed(
        tolerations,
        pod_defaults,
        |pd| &pd.tolerations,
        by_toleration,
        "key:effect",
    );
    let image_pull_secrets = cx.keyed(
        image_pull_secrets,
        pod_defaults,
        |pd| &pd.image_pull_secrets,
        by_name,
        "name",
    );
    let init_containers = cx.keyed(
        init_containers,
        pod_defaults,
        |pd| &pd.init_containers,
        by_name,
        "name",
    );
    let sidecars = cx.sidecars(containers, pod_defaults);
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

    // The containers are the one part of the patch that grows with the object rather than with
    // the policies: every container gets its own operations.
    let mut container_plans = Vec::with_capacity(containers.len().min(1024));
    let mut planned_bytes = 0usize;
    for (index, container) in containers.iter().enumerate() {
        let Shape::Is(view) = container else {
            return Err(MergeError::Malformed(format!(
                "spec.containers[{index}] is not an object"
            )));
        };
        let container_plan = cx.container(view, index, pod_defaults)?;
        planned_bytes = planned_bytes.saturating_add(container_plan.json_len_floor());
        if planned_bytes > max_patch_bytes {
            return Err(MergeError::TooLarge(PatchTooLarge {
                limit: max_patch_bytes,
            }));
        }
        container_plans.push(container_plan);
    }

    if !cx.conflicts.is_empty() {
        return Err(MergeError::Conflicts(cx.conflicts));
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

struct Checker<'t, 'x> {
    conflicts: Vec<Conflict>,
    text: &'x PodText<'t>,
}

impl Checker<'_, '_> {
    /// Merges one keyed list: each PodDefault entry is skipped when an equal entry with its key is
    /// already in the pod or was added by an earlier PodDefault, a conflict when a different one is,
    /// and added otherwise.
    fn keyed<'p>(
        &mut self,
        list: ListAt<'_, '_>,
        pod_defaults: &[&'p PodDefault],
        entries: impl Fn(&'p PodDefault) -> &'p Vec<Keyed>,
        has_key: impl Fn(&Identity<'_>, &str) -> bool,
        key_name: &str,
    ) -> Vec<&'p RawValue> {
        let mut added: Vec<&'p Keyed> = Vec::new();
        for pd in pod_defaults {
            for entry in entries(pd) {
                let in_pod = list.entries.iter().position(|e| has_key(identity(e), &entry.key));
                let found = match in_pod {
                    Some(index) => Some(self.text.at(&list.place.pointer(index))),
                    None => added.iter().find(|a| a.key == entry.key).map(|a| &a.value),
                };
                match found {
                    None => added.push(entry),
                    Some(found) if semantic::equal(found, &entry.value) => {}
                    Some(found) => {
                        let field = format!("{}[{key_name}: {}]", list.place.field(), entry.key);
                        let found = found.clone();
                        self.conflict(pd, field, &entry.value, &found);
                    }
                }
            }
        }
        added.into_iter().map(|k| &*k.json.0).collect()
    }

    /// PodDefault sidecars are keyed by name against the pod's containers.
    fn sidecars<'p>(
        &mut self,
        containers: &[Shape<ContainerView<'_>>],
        pod_defaults: &[&'p PodDefault],
    ) -> Vec<&'p RawValue> {
        if pod_defaults.iter().all(|pd| pd.sidecars.is_empty()) {
            return Vec::new();
        }
        let names: Vec<Shape<Identity<'_>>> = containers
            .iter()
            .map(|c| match c {
                Shape::Is(c) => Shape::Is(Identity {
                    name: c.name.clone(),
                    ..Identity::default()
                }),
                Shape::Absent => Shape::Absent,
                Shape::Wrong => Shape::Wrong,
            })
            .collect();
        let list = ListAt {
            entries: &names,
            place: Place::Spec("containers"),
        };
        self.keyed(list, pod_defaults, |pd| &pd.sidecars, by_name, "name")
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

    fn container<'p, 'v>(
        &mut self,
        view: &'v ContainerView<'v>,
        index: usize,
        pod_defaults: &[&'p PodDefault],
    ) -> Result<ContainerPlan<'p, 'v>, MergeError> {
        let name = view.name.as_deref().unwrap_or_default();
        // A container that is one of these PodDefaults' sidecars (already injected, seen again on
        // reinvocation) gets nothing, exactly as when it was first injected.
        let is_sidecar = pod_defaults.iter().flat_map(|pd| &pd.sidecars).any(|sidecar| {
            sidecar.key == name
                && semantic::equal(&sidecar.value, self.text.at(&format!("/spec/containers/{index}")))
        });
        if is_sidecar {
            return Ok(ContainerPlan {
                view,
                env: Vec::new(),
                mounts: Vec::new(),
                env_from: Vec::new(),
                command: None,
                args: None,
            });
        }
        let at = |f: &str| format!("spec.containers[{index}].{f}");
        let list = |entries, field: &'static str| -> Result<ListAt<'v, 'v>, MergeError> {
            Ok(ListAt {
                entries: list_at(entries, || at(field))?,
                place: Place::Container { index, name, field },
            })
        };
        let env = list(&view.env, "env")?;
        let mounts = list(&view.volume_mounts, "volumeMounts")?;
        let existing_env_from = view.env_from.items().map_err(|_| malformed_list(at("envFrom")))?;
        let env = if pod_defaults.iter().any(|pd| !pd.env.is_empty()) {
            self.keyed(env, pod_defaults, |pd| &pd.env, by_name, "name")
        } else {
            Vec::new()
        };
        let mounts = self.mounts(mounts, pod_defaults);
        let env_from = env_from(existing_env_from, pod_defaults);

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
    fn mounts<'p>(&mut self, list: ListAt<'_, '_>, pod_defaults: &[&'p PodDefault]) -> Vec<&'p RawValue> {
        let mut added: Vec<&'p Mount> = Vec::new();
        for pd in pod_defaults {
            for mount in &pd.volume_mounts {
                let in_pod = |want: &dyn Fn(&Identity<'_>) -> bool| {
                    let index = list.entries.iter().position(|e| want(identity(e)))?;
                    Some(self.text.at(&list.place.pointer(index)))
                };
                let same_name = in_pod(&|id| id.name.as_deref() == Some(&mount.name))
                    .or_else(|| added.iter().find(|m| m.name == mount.name).map(|m| &m.value));
                let same_path = in_pod(&|id| id.mount_path.as_deref() == Some(&mount.path))
                    .or_else(|| added.iter().find(|m| m.path == mount.path).map(|m| &m.value));
                let mut conflicts = Vec::new();
                for (found, identity) in [
                    (same_name, format!("name: {}", mount.name)),
                    (same_path, format!("mountPath: {}", mount.path)),
                ] {
                    if let Some(found) = found.filter(|found| !semantic::equal(found, &mount.value)) {
                        conflicts.push((format!("{}[{identity}]", list.place.field()), found.clone()));
                    }
                }
                let ok = conflicts.is_empty();
                for (field, found) in conflicts {
                    self.conflict(pd, field, &mount.value, &found);
                }
                if ok && same_name.is_none() {
                    added.push(mount);
                }
            }
        }
        added.into_iter().map(|m| &*m.json.0).collect()
    }

    fn conflict(&mut self, pd: &PodDefault, field: String, wanted: &Value, found: &Value) {
        self.conflicts.push(Conflict {
            policy: pd.name().to_owned(),
            field,
            detail: format!("{} does not match existing {}", compact(wanted), compact(found)),
        });
    }
}

/// Kubeflow appends envFrom with no check at all, so re-applying duplicates it; outfit skips a
/// source the container already has (see the deviation table in docs/poddefault.md).
fn env_from<'p>(existing: &[&RawValue], pod_defaults: &[&'p PodDefault]) -> Vec<&'p Rendered> {
    let mut added: Vec<&'p Rendered> = Vec::new();
    if pod_defaults.iter().all(|pd| pd.env_from.is_empty()) {
        return added;
    }
    let existing: Vec<Value> = existing.iter().map(|raw| raw_value(raw)).collect();
    for source in pod_defaults.iter().flat_map(|pd| &pd.env_from) {
        let present = existing
            .iter()
            .chain(added.iter().map(|r| &r.value))
            .any(|v| semantic::equal(v, &source.value));
        if !present {
            added.push(source);
        }
    }
    added
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Whether a pod's list entry has this `name`.
fn by_name(identity: &Identity<'_>, name: &str) -> bool {
    identity.name.as_deref() == Some(name)
}

/// Whether a pod's toleration has this `key:effect` (absent fields read as empty).
fn by_toleration(id: &Identity<'_>, identity: &str) -> bool {
    identity.split_once(':').is_some_and(|(key, effect)| {
        id.key.as_deref().unwrap_or_default() == key && id.effect.as_deref().unwrap_or_default() == effect
    })
}

fn object_at<'v, T>(shape: &'v Shape<T>, path: &str) -> Result<Option<&'v T>, MergeError> {
    shape
        .object()
        .map_err(|_| MergeError::Malformed(format!("{path} is not an object")))
}

fn list_at<T>(list: &List<T>, path: impl FnOnce() -> String) -> Result<&[T], MergeError> {
    list.items().map_err(|_| malformed_list(path()))
}

fn malformed_list(path: String) -> MergeError {
    MergeError::Malformed(format!("{path} is not a list"))
}
