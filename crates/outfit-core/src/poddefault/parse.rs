//! Reading one PodDefault document into a [`PodDefault`], with every rule checked at load.

use serde_json::{Map, Value};

use super::policy::{ANNOTATION_PREFIX, Keyed, Mount, POLICY_KIND, PodDefault, Rendered};
use crate::{
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    fieldpath::FieldPath,
    policy_context::{ObjectEntries, PolicyContext},
    selector::{self, LabelSelector},
    vocab::PolicyRef,
};

/// Every `spec` field Kubeflow's PodDefault type has.
const SPEC_FIELDS: &[&str] = &[
    "selector",
    "desc",
    "env",
    "envFrom",
    "volumes",
    "volumeMounts",
    "annotations",
    "labels",
    "tolerations",
    "serviceAccountName",
    "automountServiceAccountToken",
    "imagePullSecrets",
    "initContainers",
    "sidecars",
    "command",
    "args",
];

const TOLERATION_OPERATORS: &[&str] = &["", "Exists", "Equal"];
const TAINT_EFFECTS: &[&str] = &["", "NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The PodDefault-only helpers of the parse context.
impl PolicyContext<'_> {
    /// A list of objects; absent or `null` is empty.
    fn object_list<'v>(
        &self,
        parent: &'v Map<String, Value>,
        name: &str,
        at: &FieldPath,
    ) -> Result<ObjectEntries<'v>, PolicyError> {
        self.objects(parent.get(name), &at.field(name))
    }

    /// A required, non-empty string field of an object.
    fn required_str<'v>(
        &self,
        object: &'v Map<String, Value>,
        name: &str,
        at: &FieldPath,
    ) -> Result<&'v str, PolicyError> {
        match object.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            None | Some(Value::Null) => Err(self.error(at.field(name), Problem::Missing)),
            Some(Value::String(_)) => Err(self.error(at.field(name), Problem::Missing)),
            Some(_) => Err(self.wrong_type(at.field(name), "a string")),
        }
    }

    fn optional_str<'v>(
        &self,
        object: &'v Map<String, Value>,
        name: &str,
        at: &FieldPath,
    ) -> Result<Option<&'v str>, PolicyError> {
        match object.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.wrong_type(at.field(name), "a string")),
        }
    }

    fn string_map(
        &self,
        object: &Map<String, Value>,
        name: &str,
        at: &FieldPath,
    ) -> Result<Vec<(String, String)>, PolicyError> {
        let path = at.field(name);
        let entries = match object.get(name) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(entries)) => entries,
            Some(_) => return Err(self.wrong_type(path, "a map of strings")),
        };
        entries
            .iter()
            .map(|(key, value)| {
                selector::validate_key(key).map_err(|why| {
                    self.error(path.field(key), Problem::Invalid(format!("invalid key: {why}")))
                })?;
                match value {
                    Value::String(value) => Ok((key.clone(), value.clone())),
                    _ => Err(self.wrong_type(path.field(key), "a string")),
                }
            })
            .collect()
    }

    /// Rejects a second entry with the same identity key inside one list of this policy.
    fn unique<'k>(
        &self,
        seen: &mut Vec<&'k str>,
        key: &'k str,
        describe: &str,
        at: FieldPath,
    ) -> Result<(), PolicyError> {
        if seen.contains(&key) {
            return Err(self.error(
                at,
                Problem::Duplicate {
                    key: format!("{describe} {key:?}"),
                },
            ));
        }
        seen.push(key);
        Ok(())
    }
}

/// Parses and validates a PodDefault document. A PodDefault without `metadata.namespace` belongs to
/// `default_namespace`. Fields Kubeflow does not have become warnings.
pub(crate) fn parse(
    document: &Document,
    default_namespace: &str,
    warnings: &mut Vec<LoadWarning>,
) -> Result<PodDefault, PolicyError> {
    let metadata = document.value.get("metadata").and_then(Value::as_object);
    let name = document.name();
    let namespace = metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(default_namespace);
    let reference = PolicyRef::new(POLICY_KIND, Some(namespace), name);
    let cx = PolicyContext::new(
        document,
        reference,
        "PodDefault has no such field; it is ignored (the API server would prune it)".to_owned(),
    );
    let result = validate(&cx, metadata, name);
    warnings.extend(cx.warnings.take());
    result
}

fn validate(
    cx: &PolicyContext<'_>,
    metadata: Option<&Map<String, Value>>,
    name: &str,
) -> Result<PodDefault, PolicyError> {
    let document = cx.document;
    if name.is_empty() {
        return Err(cx.error(FieldPath::new("metadata.name"), Problem::Missing));
    }
    let resource_version = metadata
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();

    let at = FieldPath::new("spec");
    let spec = match document.value.get("spec") {
        Some(Value::Object(spec)) => spec,
        None | Some(Value::Null) => return Err(cx.error(at, Problem::Missing)),
        Some(_) => return Err(cx.wrong_type(at, "an object")),
    };
    cx.warn_unknown(spec, &at, SPEC_FIELDS);

    let selector = match spec.get("selector") {
        None => return Err(cx.error(at.field("selector"), Problem::Missing)),
        Some(value) => LabelSelector::compile(Some(value))
            .map_err(|why| cx.error(at.field("selector"), Problem::InvalidSelector(why)))?,
    };

    // `desc` is for Kubeflow's UI; checked for its type, not kept.
    cx.optional_str(spec, "desc", &at)?;

    let pod_default = PodDefault {
        marker_annotation: format!("{ANNOTATION_PREFIX}/poddefault-{name}"),
        resource_version,
        selector,
        env: parse_env(cx, spec, &at)?,
        env_from: parse_env_from(cx, spec, &at)?,
        volumes: parse_volumes(cx, spec, &at)?,
        volume_mounts: parse_volume_mounts(cx, spec, &at)?,
        annotations: cx.string_map(spec, "annotations", &at)?,
        labels: parse_labels(cx, spec, &at)?,
        tolerations: parse_tolerations(cx, spec, &at)?,
        service_account_name: cx
            .optional_str(spec, "serviceAccountName", &at)?
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        automount_service_account_token: match spec.get("automountServiceAccountToken") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(cx.wrong_type(at.field("automountServiceAccountToken"), "a boolean")),
        },
        image_pull_secrets: parse_named(cx, spec, "imagePullSecrets", &[], &at)?,
        init_containers: parse_named(cx, spec, "initContainers", &["image"], &at)?,
        sidecars: parse_named(cx, spec, "sidecars", &["image"], &at)?,
        command: parse_strings(cx, spec, "command", &at)?,
        args: parse_strings(cx, spec, "args", &at)?,
        reference: cx.reference.clone(),
    };
    Ok(pod_default)
}

fn parse_env(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    at: &FieldPath,
) -> Result<Vec<Keyed>, PolicyError> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (path, var) in cx.object_list(spec, "env", at)? {
        let name = cx.required_str(var, "name", &path)?;
        cx.optional_str(var, "value", &path)?;
        if var.get("value").is_some_and(|v| !v.is_null())
            && var.get("valueFrom").is_some_and(|v| !v.is_null())
        {
            return Err(cx.error(
                path,
                Problem::Invalid("`value` and `valueFrom` are mutually exclusive".into()),
            ));
        }
        let value_from = var.get("valueFrom").filter(|v| !v.is_null());
        if value_from.is_some_and(|from| from.as_object().is_none_or(|o| o.len() != 1)) {
            return Err(cx.error(
                path.field("valueFrom"),
                Problem::Invalid(
                    "must name exactly one source (fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef)".into(),
                ),
            ));
        }
        cx.unique(&mut seen, name, "name", path.field("name"))?;
        out.push(Keyed::new(name.to_owned(), Value::Object(var.clone())));
    }
    out.shrink_to_fit();
    Ok(out)
}

fn parse_env_from(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    at: &FieldPath,
) -> Result<Vec<Rendered>, PolicyError> {
    cx.object_list(spec, "envFrom", at)?
        .into_iter()
        .map(|(path, source)| {
            let has_source = ["configMapRef", "secretRef"]
                .iter()
                .any(|k| source.get(*k).is_some_and(Value::is_object));
            if !has_source {
                return Err(cx.error(
                    path,
                    Problem::Invalid("must have a configMapRef or a secretRef".into()),
                ));
            }
            Ok(Rendered::new(Value::Object(source.clone())))
        })
        .collect()
}

fn parse_volumes(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    at: &FieldPath,
) -> Result<Vec<Keyed>, PolicyError> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (path, volume) in cx.object_list(spec, "volumes", at)? {
        let name = cx.required_str(volume, "name", &path)?;
        let sources: Vec<&str> = volume
            .iter()
            .filter(|(k, v)| *k != "name" && !v.is_null())
            .map(|(k, _)| k.as_str())
            .collect();
        match sources.len() {
            0 => {
                return Err(cx.error(
                    path,
                    Problem::Invalid(format!(
                        "volume {name:?} has no source (emptyDir, secret, persistentVolumeClaim, nfs, ...)"
                    )),
                ));
            }
            1 => {}
            _ => {
                return Err(cx.error(
                    path,
                    Problem::Invalid(format!(
                        "volume {name:?} has more than one source: {}",
                        sources.join(", ")
                    )),
                ));
            }
        }
        cx.unique(&mut seen, name, "name", path.field("name"))?;
        out.push(Keyed::new(name.to_owned(), Value::Object(volume.clone())));
    }
    out.shrink_to_fit();
    Ok(out)
}

fn parse_volume_mounts(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    at: &FieldPath,
) -> Result<Vec<Mount>, PolicyError> {
    let mut names = Vec::new();
    let mut paths = Vec::new();
    let mut out = Vec::new();
    for (path, mount) in cx.object_list(spec, "volumeMounts", at)? {
        let name = cx.required_str(mount, "name", &path)?;
        let mount_path = cx.required_str(mount, "mountPath", &path)?;
        // Kubeflow keys mounts by volume name, so one PodDefault mounting one volume twice (two
        // subPaths) conflicts with itself and denies every pod it matches; say so at load instead.
        cx.unique(&mut names, name, "volume name", path.field("name"))?;
        cx.unique(&mut paths, mount_path, "mountPath", path.field("mountPath"))?;
        out.push(Mount::new(
            name.to_owned(),
            mount_path.to_owned(),
            Value::Object(mount.clone()),
        ));
    }
    out.shrink_to_fit();
    Ok(out)
}

fn parse_labels(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    at: &FieldPath,
) -> Result<Vec<(String, String)>, PolicyError> {
    let labels = cx.string_map(spec, "labels", at)?;
    for (key, value) in &labels {
        selector::validate_value(value).map_err(|why| {
            cx.error(
                at.field("labels").field(key),
                Problem::Invalid(format!("invalid label value {value:?}: {why}")),
            )
        })?;
    }
    Ok(labels)
}

fn parse_tolerations(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    at: &FieldPath,
) -> Result<Vec<Keyed>, PolicyError> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (path, toleration) in cx.object_list(spec, "tolerations", at)? {
        let key = cx.optional_str(toleration, "key", &path)?.unwrap_or_default();
        let operator = cx
            .optional_str(toleration, "operator", &path)?
            .unwrap_or_default();
        let effect = cx.optional_str(toleration, "effect", &path)?.unwrap_or_default();
        let value = cx.optional_str(toleration, "value", &path)?.unwrap_or_default();
        if !TOLERATION_OPERATORS.contains(&operator) {
            return Err(cx.error(
                path.field("operator"),
                Problem::Invalid(format!("{operator:?} is not Exists or Equal")),
            ));
        }
        if !TAINT_EFFECTS.contains(&effect) {
            return Err(cx.error(
                path.field("effect"),
                Problem::Invalid(format!(
                    "{effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
                )),
            ));
        }
        if operator == "Exists" && !value.is_empty() {
            return Err(cx.error(
                path.field("value"),
                Problem::Invalid("must be empty when operator is Exists".into()),
            ));
        }
        if key.is_empty() && operator != "Exists" {
            return Err(cx.error(
                path.field("operator"),
                Problem::Invalid("must be Exists when key is empty".into()),
            ));
        }
        let identity = toleration_identity(key, effect);
        if seen.contains(&identity) {
            return Err(cx.error(
                path,
                Problem::Duplicate {
                    key: format!("key {key:?} and effect {effect:?}"),
                },
            ));
        }
        seen.push(identity.clone());
        out.push(Keyed::new(identity, Value::Object(toleration.clone())));
    }
    out.shrink_to_fit();
    Ok(out)
}

/// Tolerations are identified by key and effect: one key may be tolerated for several effects.
pub(crate) fn toleration_identity(key: &str, effect: &str) -> String {
    format!("{key}:{effect}")
}

/// A list of objects identified by `name`, unique within the policy, each also carrying every
/// field in `required` (pull secrets need only a name; containers also an image).
fn parse_named(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    field: &str,
    required: &[&str],
    at: &FieldPath,
) -> Result<Vec<Keyed>, PolicyError> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (path, item) in cx.object_list(spec, field, at)? {
        let name = cx.required_str(item, "name", &path)?;
        for other in required {
            cx.required_str(item, other, &path)?;
        }
        cx.unique(&mut seen, name, "name", path.field("name"))?;
        out.push(Keyed::new(name.to_owned(), Value::Object(item.clone())));
    }
    out.shrink_to_fit();
    Ok(out)
}

fn parse_strings(
    cx: &PolicyContext<'_>,
    spec: &Map<String, Value>,
    field: &str,
    at: &FieldPath,
) -> Result<Option<Rendered>, PolicyError> {
    match spec.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(list @ Value::Array(items)) => {
            if let Some(index) = items.iter().position(|v| !v.is_string()) {
                return Err(cx.wrong_type(at.field(field).index(index), "a string"));
            }
            Ok(Some(Rendered::new(list.clone())))
        }
        Some(_) => Err(cx.wrong_type(at.field(field), "a list of strings")),
    }
}
