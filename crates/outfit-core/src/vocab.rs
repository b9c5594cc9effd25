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

/// What the API calls a kind of policy, and where it is served: one entry of the kinds table
/// (`crate::kinds`), declared by the module that reads the kind.
#[derive(Debug)]
pub struct KindInfo {
    /// The Kubernetes `kind`, e.g. `PodDefault`.
    pub name: &'static str,
    /// The API group, e.g. `kubeflow.org`.
    pub group: &'static str,
    /// The versions it is served in; the first is the one outfit watches.
    pub versions: &'static [&'static str],
    /// The resource's plural name, e.g. `poddefaults`.
    pub plural: &'static str,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// Who serves it, and so what outfit installs and watches of it.
    pub served: Served,
}

/// Who serves a kind of the table.
#[derive(Debug)]
pub enum Served {
    /// A CustomResourceDefinition (`outfit manifests` installs it); every object is watched.
    Crd,
    /// The API server itself (ConfigMaps, Secrets): no CRD, and only the objects a family reads
    /// are watched.
    BuiltIn {
        /// Which objects, by name.
        names: Names,
        /// The `data` keys the family reads of these objects only for whether they are set (the
        /// filer injector's Secrets: StatCan skips an SVM whose S3 keys are missing or empty),
        /// unless their values are asked for (`--filer-plain-secrets`): the watch keeps of each
        /// object its name and, per key, whether it is set, and never the values. Empty: the
        /// objects are kept whole.
        keys_only: &'static [&'static str],
    },
}

/// The names of the objects of a [`Names::Listed`] kind that one object of the family lists
/// (the filer injector's `filers-list` lists its SVMs, whose Secrets are `<svm>-conn-secret`),
/// given the family's own namespace (`das`): objects elsewhere list none.
pub type ListedNames = fn(object: &serde_json::Value, family_namespace: &str) -> Vec<String>;

/// The objects of a built-in kind a family reads.
#[derive(Debug)]
pub enum Names {
    /// Exactly these: one watch per name (a `metadata.name` field selector), and RBAC granted on
    /// these names alone.
    Exactly(&'static [&'static str]),
    /// The names the family's other objects list: one watch per name, started and stopped as
    /// those objects change, and RBAC granted on the names `outfit manifests` is given.
    Listed(ListedNames),
}

/// A kind of policy outfit reads: a handle on its [`KindInfo`]. Kinds compare, hash and order by
/// name (Gatekeeper orders its mutators byte-wise by kind) and then by group.
#[derive(Clone, Copy)]
pub struct PolicyKind(&'static KindInfo);

impl PolicyKind {
    /// The kind described by `info`.
    pub const fn new(info: &'static KindInfo) -> Self {
        Self(info)
    }

    /// The Kubernetes `kind`.
    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    /// Its group, versions, plural and scope.
    pub fn info(self) -> &'static KindInfo {
        self.0
    }

    fn key(self) -> (&'static str, &'static str) {
        (self.0.name, self.0.group)
    }
}

impl PartialEq for PolicyKind {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for PolicyKind {}

impl std::hash::Hash for PolicyKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialOrd for PolicyKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PolicyKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Debug for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for PolicyKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
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
