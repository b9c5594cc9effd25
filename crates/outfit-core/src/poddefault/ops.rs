//! The RFC 6902 operations that make a [`Plan`]'s additions to the pod it was checked against.
//! Built directly rather than by diffing a mutated copy: the pod is never copied, the values are
//! the PodDefaults' own JSON text, and appends are explicit `add`s at the end of each list (a
//! positional diff could not tell an append from a rewrite).

use serde_json::value::RawValue;

use super::merge::Plan;
use crate::{
    patch::{AddOp, OpValue},
    view::{Members, pod::PodView, raw_str},
};

impl<'p> Plan<'p, '_> {
    /// The operations, against `pod`, the view `plan` checked.
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

        let spec = pod.spec.get().map(|spec| &**spec);
        if spec.is_none() {
            ops.add(&[], "spec", OpValue::EmptyObject);
        }
        let len = |f: fn(&crate::view::pod::SpecView<'_>) -> Option<usize>| spec.and_then(f);
        ops.append(
            &["spec"],
            len(|s| s.volumes.present_len()),
            "volumes",
            self.volumes,
        );
        ops.append(
            &["spec"],
            len(|s| s.tolerations.present_len()),
            "tolerations",
            self.tolerations,
        );
        let pull_secrets = len(|s| s.image_pull_secrets.present_len());
        ops.append(
            &["spec"],
            pull_secrets,
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
            let view = plan.view;
            ops.append(&at, view.env.present_len(), "env", plan.env);
            ops.append(&at, view.volume_mounts.present_len(), "volumeMounts", plan.mounts);
            let env_from = plan.env_from.iter().map(|r| &*r.json.0).collect();
            ops.append(&at, view.env_from.present_len(), "envFrom", env_from);
            // Only planned where the container has none (absent or null).
            if let Some(command) = plan.command {
                ops.add(&at, "command", OpValue::Json(&command.json.0));
            }
            if let Some(args) = plan.args {
                ops.add(&at, "args", OpValue::Json(&args.json.0));
            }
        }
        let init_containers = len(|s| s.init_containers.present_len());
        ops.append(&["spec"], init_containers, "initContainers", self.init_containers);
        let containers = len(|s| s.containers.present_len());
        ops.append(&["spec"], containers, "containers", self.sidecars);
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

    /// Appends to a list of `existing` entries at its end, creating it whole when it is absent.
    fn append(&mut self, at: &[&str], existing: Option<usize>, field: &str, items: Vec<&'p RawValue>) {
        if items.is_empty() {
            return;
        }
        match existing {
            Some(existing) => {
                for (offset, item) in items.into_iter().enumerate() {
                    let path = at.iter().copied().chain([field]);
                    self.0
                        .push(AddOp::at_index(path, existing + offset, OpValue::Json(item)));
                }
            }
            None => self.add(at, field, OpValue::List(items)),
        }
    }
}
