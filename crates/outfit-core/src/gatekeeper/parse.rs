//! Reading one `mutations.gatekeeper.sh` document into a [`Mutator`], with every rule Gatekeeper's
//! validating webhook checks, plus load-time errors or warnings for what Gatekeeper would accept and
//! then silently never apply.

mod fields;

use serde_json::{Map, Value};

use self::fields::{apply_to, match_block, path_tests};
use super::{
    action::{Action, AssignValue, MetadataField},
    image::ImageParams,
    location::{Location, Node},
    mutator::{ASSIGN, ASSIGN_IMAGE, ASSIGN_METADATA, MODIFY_SET, Mutator},
    traverse::{Condition, Tester},
};
use crate::{
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    fieldpath::FieldPath,
    policy_context::PolicyContext,
    vocab::{PolicyKind, PolicyRef},
};

/// Gatekeeper's limit on mutator names.
const MAX_NAME: usize = 63;

/// The kind named by a document of the `mutations.gatekeeper.sh` group, if it is a mutator.
pub(crate) fn kind_of(kind: &str) -> Option<PolicyKind> {
    match kind {
        "Assign" => Some(ASSIGN),
        "AssignMetadata" => Some(ASSIGN_METADATA),
        "ModifySet" => Some(MODIFY_SET),
        "AssignImage" => Some(ASSIGN_IMAGE),
        _ => None,
    }
}

/// Validates and compiles one mutator document (its group is `mutations.gatekeeper.sh`).
pub(crate) fn parse(document: &Document, warnings: &mut Vec<LoadWarning>) -> Result<Mutator, PolicyError> {
    let name = document.name();
    let kind = kind_of(document.kind()).ok_or_else(|| PolicyError {
        origin: document.origin.clone(),
        policy: PolicyRef::new(ASSIGN, None, name),
        field: FieldPath::new("kind"),
        problem: Problem::Unsupported(format!(
            "{}; the Gatekeeper mutators are Assign, AssignMetadata, ModifySet and AssignImage",
            document.kind()
        )),
    })?;
    let cx = PolicyContext::new(
        document,
        PolicyRef::new(kind, None, name),
        format!("not a field of {kind}; Gatekeeper's API server would drop it, outfit ignores it"),
    );
    let result = validate(&cx, kind, name);
    warnings.extend(cx.warnings.take());
    result
}

fn validate(cx: &PolicyContext<'_>, kind: PolicyKind, name: &str) -> Result<Mutator, PolicyError> {
    let document = cx.document;
    cx.check_version(kind)?;
    if name.is_empty() {
        return Err(cx.error(FieldPath::new("metadata.name"), Problem::Missing));
    }
    if name.len() > MAX_NAME {
        return Err(cx.invalid("metadata.name", "maximum name length is 63 characters"));
    }
    if document
        .value
        .pointer("/metadata/namespace")
        .is_some_and(|ns| ns.as_str() != Some(""))
    {
        cx.warn("metadata.namespace: Gatekeeper mutators are cluster-scoped; the namespace is ignored");
    }
    let spec = match document.value.get("spec") {
        Some(Value::Object(spec)) => spec,
        None | Some(Value::Null) => return Err(cx.error(FieldPath::new("spec"), Problem::Missing)),
        Some(_) => return Err(cx.wrong_type(FieldPath::new("spec"), "an object")),
    };
    let mut spec_fields = vec!["match", "location", "parameters"];
    if kind != ASSIGN_METADATA {
        spec_fields.push("applyTo");
    }
    cx.warn_unknown(spec, "spec", &spec_fields);
    compile(cx, kind, spec)
}

fn compile(
    cx: &PolicyContext<'_>,
    kind: PolicyKind,
    spec: &Map<String, Value>,
) -> Result<Mutator, PolicyError> {
    let apply_to = if kind == ASSIGN_METADATA {
        Vec::new()
    } else {
        apply_to(cx, spec.get("applyTo"))?
    };
    let matcher = match_block(cx, spec.get("match"), &apply_to)?;
    let location = match spec.get("location") {
        Some(Value::String(text)) => Location::parse(text)
            .map_err(|e| cx.error(FieldPath::new("spec.location"), Problem::Location(e)))?,
        None | Some(Value::Null) => return Err(cx.error(FieldPath::new("spec.location"), Problem::Missing)),
        Some(_) => return Err(cx.wrong_type(FieldPath::new("spec.location"), "a string")),
    };
    let empty = Map::new();
    let parameters = match spec.get("parameters") {
        Some(Value::Object(parameters)) => parameters,
        None | Some(Value::Null) => &empty,
        Some(_) => return Err(cx.wrong_type(FieldPath::new("spec.parameters"), "an object")),
    };
    // `kind` is one of the four `kind_of` returns.
    let action = match kind.as_str() {
        "AssignMetadata" => metadata(cx, &location, parameters)?,
        "ModifySet" => modify_set(cx, &location, parameters)?,
        "AssignImage" => assign_image(cx, &location, parameters)?,
        _ => assign(cx, &location, parameters)?,
    };
    let tests = if kind == ASSIGN_METADATA {
        // AssignMetadata only adds: an implicit MustNotExist on the label or annotation itself.
        vec![(2, Condition::MustNotExist)]
    } else {
        path_tests(cx, &location, parameters.get("pathTests"))?
    };
    Ok(Mutator {
        reference: cx.reference.clone(),
        origin: cx.document.origin.clone(),
        apply_to,
        matcher,
        location,
        tester: Tester::new(&tests),
        action,
    })
}

/// Checks shared by Assign, ModifySet and AssignImage: not empty, not under the root `metadata`.
fn check_schema_location(cx: &PolicyContext<'_>, location: &Location, kind: &str) -> Result<(), PolicyError> {
    match location.nodes().first() {
        None => Err(cx.invalid("spec.location", "empty path")),
        Some(Node::Object(root)) if root == "metadata" => Err(cx.invalid(
            "spec.location",
            &format!("{kind} {location} can't change metadata"),
        )),
        _ => Ok(()),
    }
}

/// `…[key: v].key`: the last field is the key of the list just before it.
fn check_key_not_changed(cx: &PolicyContext<'_>, location: &Location) -> Result<(), PolicyError> {
    if let [.., Node::List { key, .. }, Node::Object(last)] = location.nodes()
        && key == last
    {
        return Err(cx.invalid(
            "spec.location",
            "invalid path format: changing the item key is not allowed",
        ));
    }
    Ok(())
}

fn assign(
    cx: &PolicyContext<'_>,
    location: &Location,
    parameters: &Map<String, Value>,
) -> Result<Action, PolicyError> {
    cx.warn_unknown(parameters, "spec.parameters", &["assign", "pathTests"]);
    check_schema_location(cx, location, "assign")?;
    check_key_not_changed(cx, location)?;
    let value = assign_value(cx, parameters)?;
    if let Some(Node::List {
        key,
        value: key_value,
    }) = location.nodes().last()
    {
        let Some(expected) = key_value.to_json() else {
            return Err(cx.invalid("spec.location", "can't append to a globbed list"));
        };
        let AssignValue::Value(value) = &value else {
            return Err(cx.invalid(
                "spec.parameters.assign.fromMetadata",
                "cannot assign a metadata field to a list",
            ));
        };
        let Value::Object(object) = value else {
            return Err(cx.invalid(
                "spec.parameters.assign.value",
                "only objects can be added to keyed lists",
            ));
        };
        if !object.get(key).is_some_and(|v| key_value.matches(v)) {
            return Err(cx.invalid(
                "spec.parameters.assign.value",
                &format!(
                    "adding object to list with different key {key}: want {expected}, got {}",
                    object.get(key).unwrap_or(&Value::Null)
                ),
            ));
        }
    }
    Ok(Action::Assign(value))
}

/// `parameters.assign`: exactly one of `value`, `fromMetadata`, `externalData`.
fn assign_value(cx: &PolicyContext<'_>, parameters: &Map<String, Value>) -> Result<AssignValue, PolicyError> {
    let Some(Value::Object(assign)) = parameters.get("assign") else {
        return Err(cx.invalid(
            "spec.parameters.assign",
            "assign must set one of `value`, `fromMetadata` or `externalData`",
        ));
    };
    cx.warn_unknown(
        assign,
        "spec.parameters.assign",
        &["value", "fromMetadata", "externalData"],
    );
    let set: Vec<&str> = ["value", "fromMetadata", "externalData"]
        .into_iter()
        .filter(|f| assign.get(*f).is_some_and(|v| !v.is_null()))
        .collect();
    match set.as_slice() {
        [] => Err(cx.invalid(
            "spec.parameters.assign",
            "assign must set one of `value`, `fromMetadata` or `externalData`",
        )),
        [_, _, ..] => Err(cx.invalid(
            "spec.parameters.assign",
            &format!(
                "assign must only set one of `value`, `fromMetadata` or `externalData`, not {}",
                set.join(" and ")
            ),
        )),
        ["externalData"] => Err(cx.error(
            FieldPath::new("spec.parameters.assign.externalData"),
            Problem::Unsupported(
                "externalData: outfit calls no external data providers; assign a value instead".into(),
            ),
        )),
        ["fromMetadata"] => from_metadata(cx, &assign["fromMetadata"]),
        _ => Ok(AssignValue::Value(assign["value"].clone())),
    }
}

fn from_metadata(cx: &PolicyContext<'_>, from: &Value) -> Result<AssignValue, PolicyError> {
    match from.get("field").and_then(Value::as_str) {
        Some("name") => Ok(AssignValue::FromMetadata(MetadataField::Name)),
        Some("namespace") => Ok(AssignValue::FromMetadata(MetadataField::Namespace)),
        Some(other) => Err(cx.invalid(
            "spec.parameters.assign.fromMetadata.field",
            &format!("unknown metadata field {other:?}: expected name or namespace"),
        )),
        None => Err(cx.error(
            FieldPath::new("spec.parameters.assign.fromMetadata.field"),
            Problem::Missing,
        )),
    }
}

fn metadata(
    cx: &PolicyContext<'_>,
    location: &Location,
    parameters: &Map<String, Value>,
) -> Result<Action, PolicyError> {
    if parameters.contains_key("pathTests") {
        // Issue #1354: users expect a condition; Gatekeeper's CRD drops the field silently.
        return Err(cx.error(
            FieldPath::new("spec.parameters.pathTests"),
            Problem::Unsupported(
                "AssignMetadata has no pathTests; it only ever adds a missing label or annotation".into(),
            ),
        ));
    }
    cx.warn_unknown(parameters, "spec.parameters", &["assign"]);
    let valid = matches!(location.nodes(),
        [Node::Object(root), Node::Object(map), Node::Object(_)]
            if root == "metadata" && (map == "labels" || map == "annotations"));
    if !valid {
        return Err(cx.invalid(
            "spec.location",
            &format!("invalid location for assignmetadata: {location}: expected metadata.labels.<key> or metadata.annotations.<key>"),
        ));
    }
    let value = assign_value(cx, parameters)?;
    if let AssignValue::Value(value) = &value
        && !value.is_string()
    {
        return Err(cx.invalid(
            "spec.parameters.assign.value",
            "spec.parameters.assign.value field must be a string for AssignMetadata",
        ));
    }
    Ok(Action::Metadata(value))
}

fn modify_set(
    cx: &PolicyContext<'_>,
    location: &Location,
    parameters: &Map<String, Value>,
) -> Result<Action, PolicyError> {
    cx.warn_unknown(
        parameters,
        "spec.parameters",
        &["operation", "values", "pathTests"],
    );
    check_schema_location(cx, location, "modifyset")?;
    if matches!(location.nodes().last(), Some(Node::List { .. })) {
        return Err(cx.invalid(
            "spec.location",
            "final node in a modifyset location cannot be a keyed list",
        ));
    }
    let prune = match parameters.get("operation") {
        None | Some(Value::Null) => false,
        Some(Value::String(op)) if op == "merge" => false,
        Some(Value::String(op)) if op == "prune" => true,
        Some(other) => {
            return Err(cx.invalid(
                "spec.parameters.operation",
                &format!("unknown operation {other}: expected merge or prune"),
            ));
        }
    };
    let values = match parameters.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(values)) => {
            cx.warn_unknown(values, "spec.parameters.values", &["fromList"]);
            match values.get("fromList") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(list)) => list.clone(),
                Some(_) => {
                    return Err(cx.wrong_type(FieldPath::new("spec.parameters.values.fromList"), "a list"));
                }
            }
        }
        Some(_) => return Err(cx.wrong_type(FieldPath::new("spec.parameters.values"), "an object")),
    };
    Ok(Action::ModifySet { prune, values })
}

fn assign_image(
    cx: &PolicyContext<'_>,
    location: &Location,
    parameters: &Map<String, Value>,
) -> Result<Action, PolicyError> {
    cx.warn_unknown(
        parameters,
        "spec.parameters",
        &["assignDomain", "assignPath", "assignTag", "pathTests"],
    );
    check_schema_location(cx, location, "assignimage")?;
    if matches!(location.nodes().last(), Some(Node::List { .. })) {
        return Err(cx.invalid("spec.location", "cannot mutate list-type fields with AssignImage"));
    }
    check_key_not_changed(cx, location)?;
    let component = |field: &str| -> Result<Option<String>, PolicyError> {
        match parameters.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
            Some(_) => Err(cx.wrong_type(FieldPath::new(format!("spec.parameters.{field}")), "a string")),
        }
    };
    let params = ImageParams {
        domain: component("assignDomain")?,
        path: component("assignPath")?,
        tag: component("assignTag")?,
    };
    params
        .validate()
        .map_err(|(field, why)| cx.invalid(&format!("spec.{field}"), &why))?;
    Ok(Action::Image(params))
}

#[cfg(test)]
mod tests;
