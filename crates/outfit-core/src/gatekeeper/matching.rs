//! Which objects a mutator applies to: `applyTo` (exact group/version/kind and operation) and
//! `match` (kinds, scope, namespaces with globs, selectors, name, source), as Gatekeeper's
//! `pkg/mutation/match`.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::{
    selector::{LabelSelector, Labels},
    vocab::NAMESPACE_NAME_LABEL,
    vocab::Operation,
};

/// The labels of a namespace no `Namespace` object was loaded for: only the one the API server
/// sets on every namespace, `kubernetes.io/metadata.name`, with its name.
pub(super) struct NamespaceName<'a>(pub(super) &'a str);

impl Labels for NamespaceName<'_> {
    fn label(&self, key: &str) -> Option<Option<Cow<'_, str>>> {
        (key == NAMESPACE_NAME_LABEL).then_some(Some(Cow::Borrowed(self.0)))
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::once(NAMESPACE_NAME_LABEL)
    }
}

/// Kinds the API server serves cluster-scoped. Without discovery outfit cannot know the scope of
/// any kind; these are the built-in ones, and objects of other kinds are namespaced when they (or
/// the request) name a namespace.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
];

/// The object being mutated, as matching sees it.
#[derive(Debug)]
pub struct Subject<'a> {
    /// The object in its current state.
    pub object: &'a Value,
    /// API group (`""` for the core group).
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    /// The admission operation.
    pub operation: Operation,
}

impl<'a> Subject<'a> {
    /// Reads group, version, kind and namespace; `None` when the object has no apiVersion or kind.
    pub fn new(object: &'a Value, request_namespace: &'a str, operation: Operation) -> Option<Self> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str().filter(|k| !k.is_empty())?;
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let cluster_scoped = CLUSTER_SCOPED.contains(&(group, kind));
        let namespace = if cluster_scoped {
            None
        } else {
            // `get` rather than `pointer`, which allocates to unescape each segment: this runs
            // before every mutator.
            object
                .get("metadata")
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .or(Some(request_namespace).filter(|ns| !ns.is_empty()))
        };
        Some(Self {
            object,
            group,
            version,
            kind,
            namespace,
            operation,
        })
    }

    pub(super) fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.kind == "Namespace"
    }

    /// The name `namespaces` and `excludedNamespaces` compare: a Namespace's own name, otherwise
    /// the object's namespace (`None` for cluster-scoped objects, which they never filter).
    pub(crate) fn namespace_key(&self) -> Option<&'a str> {
        if self.is_namespace() {
            Some(self.name())
        } else {
            self.namespace
        }
    }

    pub(super) fn metadata_str(&self, field: &str) -> &'a str {
        let object: &'a Value = self.object;
        object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `metadata.name` (`""` when absent).
    pub fn name(&self) -> &'a str {
        self.metadata_str("name")
    }

    pub(super) fn labels(&self) -> Option<&'a Map<String, Value>> {
        let object: &'a Value = self.object;
        object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
    }
}

/// A Gatekeeper wildcard: `x*` prefix, `*x` suffix, `*x*` contains, otherwise exact.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Wildcard(pub String);

impl Wildcard {
    /// Checks the CRD pattern `^\*?[-:a-z0-9]*\*?$`.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let inner = pattern.strip_prefix('*').unwrap_or(pattern);
        let inner = inner.strip_suffix('*').unwrap_or(inner);
        if inner
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == ':')
        {
            Ok(Self(pattern.to_owned()))
        } else {
            Err(format!(
                "invalid pattern {pattern:?}: expected lowercase letters, digits, `-` or `:`, with `*` only at either end"
            ))
        }
    }

    /// Whether `candidate` matches.
    pub fn matches(&self, candidate: &str) -> bool {
        let w = self.0.as_str();
        match (w.strip_prefix('*'), w.strip_suffix('*')) {
            (Some(_), Some(_)) if w.len() >= 2 => candidate.contains(&w[1..w.len() - 1]),
            (Some(suffix), _) => candidate.ends_with(suffix),
            (None, Some(prefix)) => candidate.starts_with(prefix),
            (None, None) => w == candidate,
        }
    }

    /// Gatekeeper's `MatchesGenerateName`: only prefix and contains patterns can match a
    /// `generateName`, and then by prefix (or contains) of it.
    fn matches_generate_name(&self, generate_name: &str) -> bool {
        let w = self.0.as_str();
        match (w.strip_prefix('*'), w.strip_suffix('*')) {
            (Some(_), Some(_)) if w.len() >= 2 => generate_name.contains(&w[1..w.len() - 1]),
            (None, Some(prefix)) => generate_name.starts_with(prefix),
            _ => false,
        }
    }
}

/// The operations an `applyTo` entry covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Operations {
    /// CREATE.
    pub create: bool,
    /// UPDATE.
    pub update: bool,
}

impl Operations {
    /// Every operation the mutation webhook sees.
    pub const ALL: Operations = Operations {
        create: true,
        update: true,
    };

    /// Whether `operation` is covered (DELETE and CONNECT never are).
    pub fn covers(self, operation: Operation) -> bool {
        match operation {
            Operation::Create => self.create,
            Operation::Update => self.update,
            Operation::Delete | Operation::Connect => false,
        }
    }
}

/// One `applyTo` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApplyTo {
    /// `groups`.
    pub groups: Vec<String>,
    /// `versions`.
    pub versions: Vec<String>,
    /// `kinds`.
    pub kinds: Vec<String>,
    /// `operations`.
    pub operations: Operations,
}

impl ApplyTo {
    /// Exact membership of group, version and kind, plus the operation, in this one entry.
    pub fn applies(&self, subject: &Subject<'_>) -> bool {
        let has = |list: &[String], item: &str| list.iter().any(|x| x == item);
        has(&self.groups, subject.group)
            && has(&self.versions, subject.version)
            && has(&self.kinds, subject.kind)
            && self.operations.covers(subject.operation)
    }
}

/// `match.scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Empty or `*`.
    All,
    /// `Cluster`.
    Cluster,
    /// `Namespaced`.
    Namespaced,
}

/// `match.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// Empty or `All`.
    All,
    /// `Original`: what the webhook sees.
    Original,
    /// `Generated`: objects from expansion, which outfit never sees.
    Generated,
}

/// One `match.kinds` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Kinds {
    /// `apiGroups` (empty or `*` for any).
    pub groups: Vec<String>,
    /// `kinds` (empty or `*` for any).
    pub kinds: Vec<String>,
}

impl Kinds {
    /// Gatekeeper's rule: each list matches when empty, when it holds `*`, or when it holds the item.
    pub fn matches(&self, group: &str, kind: &str) -> bool {
        let has = |list: &[String], item: &str| list.is_empty() || list.iter().any(|x| x == "*" || x == item);
        has(&self.groups, group) && has(&self.kinds, kind)
    }
}

/// A compiled `match` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// `kinds`.
    pub kinds: Vec<Kinds>,
    /// `scope`.
    pub scope: Scope,
    /// `namespaces`.
    pub namespaces: Vec<Wildcard>,
    /// `excludedNamespaces`.
    pub excluded_namespaces: Vec<Wildcard>,
    /// `labelSelector`.
    pub label_selector: LabelSelector,
    /// `namespaceSelector` (`None` when absent).
    pub namespace_selector: Option<LabelSelector>,
    /// `name`.
    pub name: Option<Wildcard>,
    /// `source`.
    pub source: Source,
}

impl Default for Match {
    fn default() -> Self {
        Self {
            kinds: Vec::new(),
            scope: Scope::All,
            namespaces: Vec::new(),
            excluded_namespaces: Vec::new(),
            label_selector: LabelSelector::default(),
            namespace_selector: None,
            name: None,
            source: Source::All,
        }
    }
}

impl Match {
    /// Whether the object matches, in Gatekeeper's order with early exit. `namespace_labels` looks
    /// up a loaded Namespace's labels; without one, the namespace has only
    /// `kubernetes.io/metadata.name` (Gatekeeper would fail the request instead).
    pub fn matches<'n>(
        &self,
        subject: &Subject<'_>,
        namespace_labels: &dyn Fn(&str) -> Option<&'n Map<String, Value>>,
    ) -> bool {
        self.matches_identity(subject)
            && self.label_selector.matches(subject.labels())
            && self.namespace_selector_matches(subject, namespace_labels)
            && self.name_matches(subject)
    }

    /// The criteria that depend only on the object's identity (group, kind, namespace, and the
    /// name of a Namespace): kinds, scope, namespaces, excludedNamespaces and source. The others
    /// read the object's labels and name and its namespace's labels. All are pure, so checking
    /// these first changes nothing but the time.
    pub(crate) fn matches_identity(&self, subject: &Subject<'_>) -> bool {
        (self.kinds.is_empty() || self.kinds.iter().any(|k| k.matches(subject.group, subject.kind)))
            && self.scope_matches(subject)
            && self.namespaces_match(subject)
            && self.source != Source::Generated
    }

    pub(super) fn scope_matches(&self, subject: &Subject<'_>) -> bool {
        let cluster = subject.is_namespace() || subject.namespace.is_none();
        match self.scope {
            Scope::All => true,
            Scope::Cluster => cluster,
            Scope::Namespaced => !cluster,
        }
    }

    /// `namespaces` and `excludedNamespaces`: a Namespace is compared by its own name, and
    /// cluster-scoped objects are neither included nor excluded.
    pub(super) fn namespaces_match(&self, subject: &Subject<'_>) -> bool {
        let Some(namespace) = subject.namespace_key() else {
            return true;
        };
        (self.namespaces.is_empty() || self.namespaces.iter().any(|w| w.matches(namespace)))
            && !self.excluded_namespaces.iter().any(|w| w.matches(namespace))
    }

    pub(super) fn namespace_selector_matches<'n>(
        &self,
        subject: &Subject<'_>,
        namespace_labels: &dyn Fn(&str) -> Option<&'n Map<String, Value>>,
    ) -> bool {
        let Some(selector) = &self.namespace_selector else {
            return true;
        };
        if subject.is_namespace() {
            return selector.matches(subject.labels());
        }
        let Some(namespace) = subject.namespace else {
            return true;
        };
        match namespace_labels(namespace) {
            Some(labels) => selector.matches(Some(labels)),
            None => selector.matches(Some(&NamespaceName(namespace))),
        }
    }

    pub(super) fn name_matches(&self, subject: &Subject<'_>) -> bool {
        let Some(pattern) = &self.name else {
            return true;
        };
        let name = subject.name();
        if name.is_empty() {
            pattern.matches_generate_name(subject.metadata_str("generateName"))
        } else {
            pattern.matches(name)
        }
    }
}

#[cfg(test)]
mod tests;
