//! Reading PodPolicy and Audience documents: every field checked, unknown fields refused (outfit
//! owns the CRD, so a field it does not know is a typo, not a newer upstream's), each error naming
//! the policy and the field path.

use serde_json::{Map, Value};

use super::{
    identity::{Glob, Identities, Owner, OwnerField},
    policy::{API_VERSION, AUDIENCE_KIND, Additions, Audience, POD_POLICY_KIND, PodPolicy},
    requesters::{Members, Requesters},
};
use crate::{
    document::Document,
    error::{PolicyError, Problem},
    fieldpath::FieldPath,
    gatekeeper::matching::Wildcard,
    quantity::is_quantity,
    selector::{LabelSelector, validate_key, validate_value},
    vocab::{PolicyKind, PolicyRef},
};

/// Where errors of one document point.
struct Reader<'d> {
    document: &'d Document,
    policy: PolicyRef,
}

impl Reader<'_> {
    fn error(&self, field: &FieldPath, problem: Problem) -> PolicyError {
        PolicyError {
            origin: self.document.origin.clone(),
            policy: self.policy.clone(),
            field: field.clone(),
            problem,
        }
    }

    fn invalid(&self, field: &FieldPath, why: impl Into<String>) -> PolicyError {
        self.error(field, Problem::Invalid(why.into()))
    }

    /// The object at `field` (absent or null: empty), with only the `allowed` keys.
    fn object<'v>(
        &self,
        value: Option<&'v Value>,
        field: &FieldPath,
        allowed: &[&str],
    ) -> Result<Option<&'v Map<String, Value>>, PolicyError> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let Value::Object(object) = value else {
            return Err(self.error(
                field,
                Problem::WrongType {
                    expected: "an object",
                },
            ));
        };
        if let Some(unknown) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(self.invalid(
                &field.field(unknown),
                format!("unknown field; expected one of {}", allowed.join(", ")),
            ));
        }
        Ok(Some(object))
    }

    fn list<'v>(&self, value: Option<&'v Value>, field: &FieldPath) -> Result<&'v [Value], PolicyError> {
        match value {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(self.error(field, Problem::WrongType { expected: "a list" })),
        }
    }

    fn string<'v>(&self, value: &'v Value, field: &FieldPath) -> Result<&'v str, PolicyError> {
        value
            .as_str()
            .ok_or_else(|| self.error(field, Problem::WrongType { expected: "a string" }))
    }

    fn strings<'v>(&self, value: Option<&'v Value>, field: &FieldPath) -> Result<Vec<&'v str>, PolicyError> {
        self.list(value, field)?
            .iter()
            .enumerate()
            .map(|(i, item)| self.string(item, &field.index(i)))
            .collect()
    }

    fn globs(
        &self,
        value: Option<&Value>,
        field: &FieldPath,
        compile: fn(&str) -> Result<Glob, String>,
    ) -> Result<Vec<Glob>, PolicyError> {
        self.strings(value, field)?
            .into_iter()
            .enumerate()
            .map(|(i, pattern)| compile(pattern).map_err(|why| self.invalid(&field.index(i), why)))
            .collect()
    }

    fn identities(
        &self,
        object: Option<&Map<String, Value>>,
        field: &FieldPath,
    ) -> Result<Identities, PolicyError> {
        let get = |name: &str| object.and_then(|o| o.get(name));
        Ok(Identities {
            users: self.globs(get("users"), &field.field("users"), Glob::new)?,
            groups: self.globs(get("groups"), &field.field("groups"), Glob::new)?,
            service_accounts: self.globs(
                get("serviceAccounts"),
                &field.field("serviceAccounts"),
                Glob::service_account,
            )?,
        })
    }

    fn names(&self, value: Option<&Value>, field: &FieldPath) -> Result<Vec<String>, PolicyError> {
        self.strings(value, field)?
            .into_iter()
            .enumerate()
            .map(|(i, name)| match name.is_empty() {
                true => Err(self.error(&field.index(i), Problem::Missing)),
                false => Ok(name.to_owned()),
            })
            .collect()
    }

    /// A map of strings whose keys (and, for labels, values) are valid label keys and values.
    fn string_map(
        &self,
        value: Option<&Value>,
        field: &FieldPath,
        check_values: bool,
    ) -> Result<Vec<(String, String)>, PolicyError> {
        let map = match value {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(self.error(
                    field,
                    Problem::WrongType {
                        expected: "a map of strings",
                    },
                ));
            }
        };
        let mut out = Vec::with_capacity(map.len());
        for (key, value) in map {
            let at = field.field(key);
            validate_key(key).map_err(|why| self.invalid(&at, format!("key {key:?}: {why}")))?;
            let value = self.string(value, &at)?;
            if check_values {
                validate_value(value).map_err(|why| self.invalid(&at, format!("value {value:?}: {why}")))?;
            }
            out.push((key.clone(), value.to_owned()));
        }
        Ok(out)
    }
}

/// Checks `apiVersion` and returns the reader for a document of `kind`.
fn reader<'d>(document: &'d Document, kind: PolicyKind) -> Result<Reader<'d>, PolicyError> {
    let reader = Reader {
        document,
        policy: PolicyRef::new(kind, None, document.name()),
    };
    let api_version = document.api_version();
    if api_version != API_VERSION {
        return Err(reader.error(
            &FieldPath::new("apiVersion"),
            Problem::Unsupported(format!("{api_version}; {kind} is served as {API_VERSION}")),
        ));
    }
    if document.name().is_empty() {
        return Err(reader.error(&FieldPath::new("metadata.name"), Problem::Missing));
    }
    reader.object(
        Some(&document.value),
        &FieldPath::root(),
        &["apiVersion", "kind", "metadata", "spec", "status"],
    )?;
    Ok(reader)
}

/// Reads an Audience.
pub(crate) fn parse_audience(document: &Document) -> Result<Audience, PolicyError> {
    let r = reader(document, AUDIENCE_KIND)?;
    let spec_path = FieldPath::new("spec");
    let spec = r.object(
        document.value.get("spec"),
        &spec_path,
        &["users", "groups", "serviceAccounts", "exclude"],
    )?;
    let exclude_path = spec_path.field("exclude");
    let exclude = r.object(
        spec.and_then(|s| s.get("exclude")),
        &exclude_path,
        &["users", "groups", "serviceAccounts"],
    )?;
    Ok(Audience {
        members: Members {
            include: r.identities(spec, &spec_path)?,
            exclude: r.identities(exclude, &exclude_path)?,
        },
        reference: r.policy,
    })
}

/// Reads a PodPolicy.
pub(crate) fn parse_pod_policy(document: &Document) -> Result<PodPolicy, PolicyError> {
    let r = reader(document, POD_POLICY_KIND)?;
    let spec_path = FieldPath::new("spec");
    let spec = r.object(document.value.get("spec"), &spec_path, &["match", "add"])?;
    let Some(add) = spec.and_then(|s| s.get("add")) else {
        return Err(r.error(&spec_path.field("add"), Problem::Missing));
    };
    let match_path = spec_path.field("match");
    let matching = r.object(
        spec.and_then(|s| s.get("match")),
        &match_path,
        &[
            "namespaces",
            "excludedNamespaces",
            "selector",
            "requesters",
            "owner",
        ],
    )?;
    let get = |name: &str| matching.and_then(|m| m.get(name));
    let wildcards = |name: &str| -> Result<Vec<Wildcard>, PolicyError> {
        let field = match_path.field(name);
        r.strings(get(name), &field)?
            .into_iter()
            .enumerate()
            .map(|(i, pattern)| Wildcard::new(pattern).map_err(|why| r.invalid(&field.index(i), why)))
            .collect()
    };
    let selector = LabelSelector::compile(get("selector"))
        .map_err(|why| r.error(&match_path.field("selector"), Problem::InvalidSelector(why)))?;
    Ok(PodPolicy {
        namespaces: wildcards("namespaces")?,
        excluded_namespaces: wildcards("excludedNamespaces")?,
        selector,
        requesters: requesters(&r, get("requesters"), &match_path.field("requesters"))?,
        owner: owner(&r, get("owner"), &match_path.field("owner"))?,
        add: additions(&r, add, &spec_path.field("add"))?,
        reference: r.policy,
    })
}

fn requesters(r: &Reader<'_>, value: Option<&Value>, path: &FieldPath) -> Result<Requesters, PolicyError> {
    const FIELDS: &[&str] = &["users", "groups", "serviceAccounts", "audiences", "exclude"];
    let object = r.object(value, path, FIELDS)?;
    let exclude_path = path.field("exclude");
    let exclude = r.object(object.and_then(|o| o.get("exclude")), &exclude_path, &FIELDS[..4])?;
    Ok(Requesters {
        include: r.identities(object, path)?,
        audiences: r.names(object.and_then(|o| o.get("audiences")), &path.field("audiences"))?,
        exclude: r.identities(exclude, &exclude_path)?,
        excluded_audiences: r.names(
            exclude.and_then(|o| o.get("audiences")),
            &exclude_path.field("audiences"),
        )?,
    })
}

fn owner(r: &Reader<'_>, value: Option<&Value>, path: &FieldPath) -> Result<Option<Owner>, PolicyError> {
    let Some(object) = r.object(
        value,
        path,
        &["label", "annotation", "groupsAnnotation", "provisioners"],
    )?
    else {
        return Ok(None);
    };
    let key = |name: &str| -> Result<Option<String>, PolicyError> {
        let Some(value) = object.get(name) else {
            return Ok(None);
        };
        let key = r.string(value, &path.field(name))?;
        validate_key(key).map_err(|why| r.invalid(&path.field(name), format!("{key:?}: {why}")))?;
        Ok(Some(key.to_owned()))
    };
    let field = match (key("label")?, key("annotation")?) {
        (Some(label), None) => OwnerField::Label(label),
        (None, Some(annotation)) => OwnerField::Annotation(annotation),
        (Some(_), Some(_)) => {
            return Err(r.invalid(path, "set either label or annotation, not both"));
        }
        (None, None) => return Err(r.error(&path.field("label"), Problem::Missing)),
    };
    let groups = key("groupsAnnotation")?;
    let provisioners_path = path.field("provisioners");
    let provisioners = r.object(
        object.get("provisioners"),
        &provisioners_path,
        &["users", "groups", "serviceAccounts"],
    )?;
    let provisioners = r.identities(provisioners, &provisioners_path)?;
    if provisioners.is_empty() {
        // Trusting every requester to name the owner would let anyone claim to be anyone.
        return Err(r.error(&provisioners_path, Problem::Missing));
    }
    Ok(Some(Owner {
        field,
        groups,
        provisioners,
    }))
}

const ADD_FIELDS: &[&str] = &[
    "containers",
    "resources",
    "env",
    "volumeMounts",
    "volumes",
    "tolerations",
    "nodeSelector",
    "runtimeClassName",
    "annotations",
    "labels",
];

fn additions(r: &Reader<'_>, value: &Value, path: &FieldPath) -> Result<Additions, PolicyError> {
    let Some(add) = r.object(Some(value), path, ADD_FIELDS)? else {
        return Err(r.error(path, Problem::Missing));
    };
    let containers = match add.get("containers") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let names = r.names(Some(value), &path.field("containers"))?;
            (!names.iter().any(|n| n == "*")).then_some(names)
        }
    };
    let resources_path = path.field("resources");
    let resources = r.object(add.get("resources"), &resources_path, &["limits", "requests"])?;
    let quantities = |name: &str| {
        quantities(
            r,
            resources.and_then(|o| o.get(name)),
            &resources_path.field(name),
        )
    };
    let runtime_class_name = match add.get("runtimeClassName") {
        None | Some(Value::Null) => None,
        Some(value) => Some(r.string(value, &path.field("runtimeClassName"))?.to_owned()),
    };
    let additions = Additions {
        containers,
        limits: quantities("limits")?,
        requests: quantities("requests")?,
        env: keyed(r, add.get("env"), &path.field("env"), &["name"])?,
        volume_mounts: keyed(
            r,
            add.get("volumeMounts"),
            &path.field("volumeMounts"),
            &["name", "mountPath"],
        )?,
        volumes: keyed(r, add.get("volumes"), &path.field("volumes"), &["name"])?,
        tolerations: tolerations(r, add.get("tolerations"), &path.field("tolerations"))?,
        node_selector: r.string_map(add.get("nodeSelector"), &path.field("nodeSelector"), true)?,
        runtime_class_name,
        annotations: r.string_map(add.get("annotations"), &path.field("annotations"), false)?,
        labels: r.string_map(add.get("labels"), &path.field("labels"), true)?,
    };
    Ok(additions)
}

/// Entries of a list identified by `name`, each an object with the `required` string fields.
fn keyed(
    r: &Reader<'_>,
    value: Option<&Value>,
    path: &FieldPath,
    required: &[&str],
) -> Result<Vec<(String, Value)>, PolicyError> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for (i, item) in r.list(value, path)?.iter().enumerate() {
        let at = path.index(i);
        if !item.is_object() {
            return Err(r.error(
                &at,
                Problem::WrongType {
                    expected: "an object",
                },
            ));
        }
        for field in required {
            match item.get(*field).and_then(Value::as_str) {
                Some(s) if !s.is_empty() => {}
                _ => return Err(r.error(&at.field(field), Problem::Missing)),
            }
        }
        let name = item["name"].as_str().unwrap_or_default().to_owned();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(r.error(
                &at,
                Problem::Duplicate {
                    key: format!("name {name:?}"),
                },
            ));
        }
        out.push((name, item.clone()));
    }
    Ok(out)
}

fn tolerations(r: &Reader<'_>, value: Option<&Value>, path: &FieldPath) -> Result<Vec<Value>, PolicyError> {
    const FIELDS: &[&str] = &["key", "operator", "value", "effect", "tolerationSeconds"];
    r.list(value, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| {
            r.object(Some(item), &path.index(i), FIELDS)?;
            Ok(item.clone())
        })
        .collect()
}

/// Resource quantities, kept as the strings the API server stores (`1`, not the number 1), so
/// that a pod admitted again compares equal.
fn quantities(
    r: &Reader<'_>,
    value: Option<&Value>,
    path: &FieldPath,
) -> Result<Vec<(String, String)>, PolicyError> {
    let Some(map) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Value::Object(map) = map else {
        return Err(r.error(
            path,
            Problem::WrongType {
                expected: "a map of quantities",
            },
        ));
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, quantity) in map {
        let at = path.field(name);
        validate_key(name).map_err(|why| r.invalid(&at, format!("resource name {name:?}: {why}")))?;
        let text = match quantity {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(r.error(
                    &at,
                    Problem::WrongType {
                        expected: "a quantity",
                    },
                ));
            }
        };
        if !is_quantity(&text) {
            return Err(r.invalid(&at, format!("{text:?} is not a quantity (e.g. 1, 500m, 2Gi)")));
        }
        out.push((name.clone(), text));
    }
    Ok(out)
}
