//! The fields every Gatekeeper mutator shares: `applyTo`, `match` and `pathTests`.

use serde_json::Value;

use crate::{
    error::{PolicyError, Problem},
    fieldpath::FieldPath,
    gatekeeper::{
        location::Location,
        matching::{ApplyTo, Kinds, Match, Operations, Scope, Source, Wildcard},
        mutator::{GROUP, IMAGE_VERSIONS, VERSIONS},
        traverse::Condition,
    },
    policy_context::PolicyContext,
    selector::LabelSelector,
    vocab::PolicyKind,
};

/// The Gatekeeper-only helpers of the parse context.
impl PolicyContext<'_> {
    pub(crate) fn invalid(&self, field: &str, why: &str) -> PolicyError {
        self.error(FieldPath::new(field), Problem::Invalid(why.to_owned()))
    }

    pub(crate) fn check_version(&self, kind: PolicyKind) -> Result<(), PolicyError> {
        let api_version = self.document.api_version();
        let served = if kind == crate::gatekeeper::mutator::ASSIGN_IMAGE {
            IMAGE_VERSIONS
        } else {
            VERSIONS
        };
        let version = api_version.strip_prefix(GROUP).and_then(|v| v.strip_prefix('/'));
        if version.is_some_and(|v| served.contains(&v)) {
            return Ok(());
        }
        Err(self.error(
            FieldPath::new("apiVersion"),
            Problem::Unsupported(format!(
                "{api_version}; {kind} is served as {}",
                served
                    .iter()
                    .map(|v| format!("{GROUP}/{v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ))
    }

    fn strings(&self, value: Option<&Value>, at: &str) -> Result<Vec<String>, PolicyError> {
        match value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(self.wrong_type(FieldPath::new(format!("{at}[{i}]")), "a string")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(exact),
            Some(_) => Err(self.wrong_type(FieldPath::new(at), "a list of strings")),
        }
    }
}

/// `spec.applyTo`: required, each entry with at least one group, version and kind.
pub(crate) fn apply_to(cx: &PolicyContext<'_>, value: Option<&Value>) -> Result<Vec<ApplyTo>, PolicyError> {
    let entries = cx.objects(value, &FieldPath::new("spec.applyTo"))?;
    if entries.is_empty() {
        return Err(cx.invalid(
            "spec.applyTo",
            &format!(
                "applyTo required for {} mutator {}",
                cx.reference.kind, cx.reference.name
            ),
        ));
    }
    let mut out = Vec::with_capacity(entries.len());
    for (path, entry) in entries {
        let at = path.as_str();
        cx.warn_unknown(entry, at, &["groups", "versions", "kinds", "operations"]);
        let groups = cx.strings(entry.get("groups"), &format!("{at}.groups"))?;
        let versions = cx.strings(entry.get("versions"), &format!("{at}.versions"))?;
        let kinds = cx.strings(entry.get("kinds"), &format!("{at}.kinds"))?;
        if groups.is_empty() || versions.is_empty() || kinds.is_empty() {
            return Err(cx.invalid(
                at,
                &format!(
                    "invalid applyTo for {} mutator {}, all of group, version and kind must be specified",
                    cx.reference.kind, cx.reference.name
                ),
            ));
        }
        warn_never_matching_apply_to(cx, at, &groups, &versions, &kinds);
        let operations = operations(cx, entry.get("operations"), &format!("{at}.operations"))?;
        out.push(ApplyTo {
            groups,
            versions,
            kinds,
            operations,
        });
    }
    Ok(out)
}

/// gatekeeper-library#401: `applyTo` is matched exactly, so these entries never match anything.
fn warn_never_matching_apply_to(
    cx: &PolicyContext<'_>,
    at: &str,
    groups: &[String],
    versions: &[String],
    kinds: &[String],
) {
    for group in groups.iter().filter(|g| g.contains('/') || g.contains('*')) {
        cx.warn(&format!(
            "{at}.groups: {group:?} never matches: applyTo takes exact API group names (no globs, no version)"
        ));
    }
    for version in versions.iter().filter(|v| v.contains('/') || v.contains('*')) {
        cx.warn(&format!(
            "{at}.versions: {version:?} never matches: applyTo takes exact versions such as \"v1\" (the group goes in groups)"
        ));
    }
    for kind in kinds
        .iter()
        .filter(|k| k.contains('*') || k.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        cx.warn(&format!(
            "{at}.kinds: {kind:?} never matches: applyTo takes exact kinds such as \"Pod\" (not resources, no globs)"
        ));
    }
}

/// `applyTo[].operations`: CREATE, UPDATE or a lone `*`; absent or empty means both.
pub(crate) fn operations(
    cx: &PolicyContext<'_>,
    value: Option<&Value>,
    at: &str,
) -> Result<Operations, PolicyError> {
    let items = cx.strings(value, at)?;
    if items.is_empty() {
        return Ok(Operations::ALL);
    }
    let mut ops = Operations {
        create: false,
        update: false,
    };
    for (index, item) in items.iter().enumerate() {
        if items[..index].contains(item) {
            return Err(cx.invalid(
                &format!("{at}[{index}]"),
                &format!("duplicate operation {item:?}"),
            ));
        }
        match item.as_str() {
            "*" if items.len() == 1 => return Ok(Operations::ALL),
            "*" => {
                return Err(cx.invalid(
                    &format!("{at}[{index}]"),
                    "`*` cannot be combined with other operations",
                ));
            }
            "CREATE" => ops.create = true,
            "UPDATE" => ops.update = true,
            other => {
                return Err(cx.invalid(
                    &format!("{at}[{index}]"),
                    &format!("unsupported operation {other:?}: mutation supports only CREATE, UPDATE and *"),
                ));
            }
        }
    }
    Ok(ops)
}

/// `spec.match`.
pub(crate) fn match_block(
    cx: &PolicyContext<'_>,
    value: Option<&Value>,
    apply_to: &[ApplyTo],
) -> Result<Match, PolicyError> {
    let mut matcher = Match::default();
    let object = match value {
        None | Some(Value::Null) => return Ok(matcher),
        Some(Value::Object(object)) => object,
        Some(_) => return Err(cx.wrong_type(FieldPath::new("spec.match"), "an object")),
    };
    let known = [
        "kinds",
        "scope",
        "namespaces",
        "excludedNamespaces",
        "labelSelector",
        "namespaceSelector",
        "name",
        "source",
    ];
    cx.warn_unknown(object, "spec.match", &known);
    for (path, entry) in cx.objects(object.get("kinds"), &FieldPath::new("spec.match.kinds"))? {
        let at = path.as_str();
        matcher.kinds.push(Kinds {
            groups: cx.strings(entry.get("apiGroups"), &format!("{at}.apiGroups"))?,
            kinds: cx.strings(entry.get("kinds"), &format!("{at}.kinds"))?,
        });
    }
    matcher.scope = match object.get("scope").and_then(Value::as_str).unwrap_or("") {
        "" | "*" => Scope::All,
        "Cluster" => Scope::Cluster,
        "Namespaced" => Scope::Namespaced,
        // Gatekeeper matches everything on any other value, typos included.
        other => {
            return Err(cx.invalid(
                "spec.match.scope",
                &format!("unknown scope {other:?}: expected Cluster, Namespaced or * (Gatekeeper would silently match every object)"),
            ));
        }
    };
    matcher.namespaces = wildcards(cx, object.get("namespaces"), "spec.match.namespaces")?;
    matcher.excluded_namespaces = wildcards(
        cx,
        object.get("excludedNamespaces"),
        "spec.match.excludedNamespaces",
    )?;
    matcher.label_selector = LabelSelector::compile(object.get("labelSelector")).map_err(|e| {
        cx.error(
            FieldPath::new("spec.match.labelSelector"),
            Problem::InvalidSelector(e),
        )
    })?;
    if object.get("namespaceSelector").is_some_and(|v| !v.is_null()) {
        matcher.namespace_selector = Some(LabelSelector::compile(object.get("namespaceSelector")).map_err(
            |e| {
                cx.error(
                    FieldPath::new("spec.match.namespaceSelector"),
                    Problem::InvalidSelector(e),
                )
            },
        )?);
    }
    matcher.name = match object.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(Wildcard::new(s).map_err(|e| cx.invalid("spec.match.name", &e))?),
        Some(_) => return Err(cx.wrong_type(FieldPath::new("spec.match.name"), "a string")),
    };
    matcher.source = match object.get("source").and_then(Value::as_str).unwrap_or("") {
        "" | "All" => Source::All,
        "Original" => Source::Original,
        "Generated" => {
            cx.warn("spec.match.source: Generated objects come from expansion, which an admission request never is; this mutator never applies");
            Source::Generated
        }
        other => {
            return Err(cx.invalid(
                "spec.match.source",
                &format!("unknown source {other:?}: expected All, Original or Generated"),
            ));
        }
    };
    warn_kinds_disjoint(cx, &matcher, apply_to);
    Ok(matcher)
}

fn wildcards(cx: &PolicyContext<'_>, value: Option<&Value>, at: &str) -> Result<Vec<Wildcard>, PolicyError> {
    cx.strings(value, at)?
        .iter()
        .enumerate()
        .map(|(i, s)| Wildcard::new(s).map_err(|e| cx.invalid(&format!("{at}[{i}]"), &e)))
        .collect::<Result<Vec<_>, _>>()
        .map(exact)
}

/// A list collected from a fallible iterator starts at a capacity of four and doubles: each
/// compiled mutator keeps a dozen such lists, mostly of one entry, for as long as it is loaded.
fn exact<T>(mut items: Vec<T>) -> Vec<T> {
    items.shrink_to_fit();
    items
}

/// `match.kinds` that no `applyTo` entry can satisfy: the mutator never applies.
fn warn_kinds_disjoint(cx: &PolicyContext<'_>, matcher: &Match, apply_to: &[ApplyTo]) {
    if matcher.kinds.is_empty() || apply_to.is_empty() {
        return;
    }
    let reachable = apply_to.iter().any(|entry| {
        entry.groups.iter().any(|g| {
            entry
                .kinds
                .iter()
                .any(|k| matcher.kinds.iter().any(|m| m.matches(g, k)))
        })
    });
    if !reachable {
        cx.warn("spec.match.kinds: no kind in spec.applyTo is among these kinds; this mutator never applies");
    }
}

/// `parameters.pathTests`: each sub-path a node-wise prefix of the location, no depth with two
/// conditions, and (outfit only) no MustExist below a MustNotExist, which could never hold.
pub(crate) fn path_tests(
    cx: &PolicyContext<'_>,
    location: &Location,
    value: Option<&Value>,
) -> Result<Vec<(usize, Condition)>, PolicyError> {
    let mut tests: Vec<(usize, Condition)> = Vec::new();
    for (path, test) in cx.objects(value, &FieldPath::new("spec.parameters.pathTests"))? {
        let at = path.as_str();
        cx.warn_unknown(test, at, &["subPath", "condition"]);
        let sub_path = match test.get("subPath") {
            Some(Value::String(s)) => Location::parse(s)
                .map_err(|e| cx.error(FieldPath::new(format!("{at}.subPath")), Problem::Location(e)))?,
            _ => return Err(cx.error(FieldPath::new(format!("{at}.subPath")), Problem::Missing)),
        };
        if sub_path.nodes().is_empty() || !location.starts_with(&sub_path) {
            return Err(cx.invalid(
                &format!("{at}.subPath"),
                "all subpaths must be a prefix of the `location` value",
            ));
        }
        let condition = match test.get("condition").and_then(Value::as_str) {
            Some("MustExist") => Condition::MustExist,
            Some("MustNotExist") => Condition::MustNotExist,
            _ => {
                return Err(cx.invalid(
                    &format!("{at}.condition"),
                    "condition must be MustExist or MustNotExist",
                ));
            }
        };
        let depth = sub_path.nodes().len() - 1;
        let clash = tests.iter().find(|(d, c)| {
            (*d == depth && *c != condition)
                || (condition == Condition::MustExist && *c == Condition::MustNotExist && *d < depth)
                || (condition == Condition::MustNotExist && *c == Condition::MustExist && *d > depth)
        });
        if clash.is_some() {
            return Err(cx.invalid(
                &format!("{at}.condition"),
                "conflicting path test conditions: a path cannot both exist and not exist (MustExist at or below a MustNotExist never holds)",
            ));
        }
        tests.push((depth, condition));
    }
    Ok(tests)
}
