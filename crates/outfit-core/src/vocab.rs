//! The vocabulary every other module speaks: who a policy is ([`PolicyKind`], [`PolicyRef`]),
//! where a document came from ([`Origin`]), what is being admitted ([`Operation`]).
//!
//! It imports nothing of this crate, so that any module may use it without an import loop: the
//! engine, the parsers, the errors and the kinds all sit above it.

use std::{collections::HashMap, fmt, sync::Arc};

/// The maps admissions look up (PodDefaults by namespace and label key, namespace labels,
/// Gatekeeper mutators by kind): foldhash instead of SipHash, whose per-lookup cost shows on the
/// request path. Their keys come from policies, so hash flooding is not a concern.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The label the API server puts on every namespace, with the namespace's name as value.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The admission operation, as in `AdmissionRequest.operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`
    Create,
    /// `UPDATE`
    Update,
    /// `DELETE`
    Delete,
    /// `CONNECT`
    Connect,
}

impl Operation {
    /// The wire form (`CREATE`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }

    /// Parses the wire form (`CREATE`, ...).
    pub fn parse(operation: &str) -> Option<Self> {
        match operation {
            "CREATE" => Some(Self::Create),
            "UPDATE" => Some(Self::Update),
            "DELETE" => Some(Self::Delete),
            "CONNECT" => Some(Self::Connect),
            _ => None,
        }
    }
}

/// The kinds of policy outfit reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum PolicyKind {
    /// Kubeflow `PodDefault` (`kubeflow.org/v1alpha1`).
    PodDefault,
    /// Gatekeeper `Assign` (`mutations.gatekeeper.sh`).
    Assign,
    /// Gatekeeper `AssignImage`.
    AssignImage,
    /// Gatekeeper `AssignMetadata`.
    AssignMetadata,
    /// Gatekeeper `ModifySet`.
    ModifySet,
}

impl PolicyKind {
    /// Every kind, in the order policies of different kinds are applied.
    /// PodDefaults come first; the Gatekeeper kinds follow in Gatekeeper's own order.
    pub const ALL: &[PolicyKind] = &[
        PolicyKind::PodDefault,
        PolicyKind::Assign,
        PolicyKind::AssignImage,
        PolicyKind::AssignMetadata,
        PolicyKind::ModifySet,
    ];

    /// Its position in [`PolicyKind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The Kubernetes `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::PodDefault => "PodDefault",
            PolicyKind::Assign => "Assign",
            PolicyKind::AssignImage => "AssignImage",
            PolicyKind::AssignMetadata => "AssignMetadata",
            PolicyKind::ModifySet => "ModifySet",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy's identity: kind, namespace (for namespaced kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct PolicyRef {
    /// The kind.
    pub kind: PolicyKind,
    /// The namespace, for namespaced kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl PolicyRef {
    /// A reference from its parts.
    pub fn new(kind: PolicyKind, namespace: Option<&str>, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Where an object was read: the file, the document's index in the stream (from 0), and the item's
/// index when the document was a list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// File path, `<stdin>`, or another source name (`cluster` for watched objects).
    pub source: Arc<str>,
    /// Index of the document in the stream, from 0; `None` for an object that was not read from
    /// a stream (a cluster watch), which a document index would only mislead about.
    pub document: Option<usize>,
    /// Index inside a `kind: List` document.
    pub item: Option<usize>,
}

impl Origin {
    /// An origin for an object that did not come from a stream (a test, a cluster watch): it is
    /// shown as `source` alone, and errors name the object by its kind, namespace and name.
    pub fn named(source: &str) -> Self {
        Self {
            source: Arc::from(source),
            document: None,
            item: None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        let Some(document) = self.document else {
            return Ok(());
        };
        write!(f, " (document {document}")?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        f.write_str(")")
    }
}
