//! The immutable, indexed set of compiled policies, and the builder that loads documents into it.
//!
//! A [`PolicySet`] is built once per policy change (off the request path) and shared read-only:
//! applying it to an object parses nothing and looks only at policies that can match.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::{
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    fieldpath::FieldPath,
    gatekeeper::{self, Mutator, Mutators, conflicts},
    poddefault::{self, PodDefault},
    selector::Labels,
    vocab::{FastMap, NAMESPACE_NAME_LABEL, Origin, PolicyKind, PolicyRef},
};

/// A policy that changed an object: borrowed from the [`PolicySet`] that decided it, so that
/// naming the policies costs no copy on the admission path.
pub type AppliedPolicy<'p> = std::borrow::Cow<'p, PolicyRef>;

/// PodDefaults of one namespace, sorted by name (Kubeflow applies them in API list order, which is
/// name order), with an index from label key to the PodDefaults whose selector requires that key.
#[derive(Debug, Default)]
struct NamespaceDefaults {
    items: Vec<PodDefault>,
    by_required_label: FastMap<String, Vec<u32>>,
    /// PodDefaults whose selector requires no particular key (empty, or only negative terms).
    unindexed: Vec<u32>,
}

impl NamespaceDefaults {
    fn new(mut items: Vec<PodDefault>) -> Self {
        items.sort_by(|a, b| a.name().cmp(b.name()));
        // Built by pushing: up to half of it spare, for as long as the set is loaded.
        items.shrink_to_fit();
        let mut index = Self {
            items,
            ..Self::default()
        };
        for (position, pd) in index.items.iter().enumerate() {
            let position = u32::try_from(position).expect("fewer than 2^32 PodDefaults in a namespace");
            match pd.selector().required_key() {
                Some(key) => index
                    .by_required_label
                    .entry(key.to_owned())
                    .or_default()
                    .push(position),
                None => index.unindexed.push(position),
            }
        }
        index
    }

    fn matching<L: Labels + ?Sized>(&self, labels: Option<&L>) -> Vec<&PodDefault> {
        let mut candidates: Vec<u32> = self.unindexed.clone();
        if let Some(labels) = labels {
            for key in labels.keys() {
                if let Some(positions) = self.by_required_label.get(key) {
                    candidates.extend_from_slice(positions);
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .map(|position| &self.items[position as usize])
            .filter(|pd| pd.selector().matches(labels))
            .collect()
    }
}

/// An immutable, indexed set of compiled policies plus the namespace labels matching needs.
#[derive(Debug, Default)]
pub struct PolicySet {
    pod_defaults: FastMap<String, NamespaceDefaults>,
    namespaces: FastMap<String, Map<String, Value>>,
    /// Policies by kind, indexed by [`PolicyKind::index`].
    counts: [usize; PolicyKind::ALL.len()],
    mutators: Mutators,
    /// Gatekeeper mutators left out by a schema conflict, with the reason (for explanations).
    disabled: Vec<(PolicyRef, String)>,
}

impl PolicySet {
    /// A set with no policies.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Starts loading documents into a new set.
    pub fn builder() -> PolicySetBuilder {
        PolicySetBuilder::default()
    }

    /// The PodDefaults of `namespace` whose selector matches `labels`, in application order.
    pub fn matching_pod_defaults<L: Labels + ?Sized>(
        &self,
        namespace: &str,
        labels: Option<&L>,
    ) -> Vec<&PodDefault> {
        self.pod_defaults
            .get(namespace)
            .map(|index| index.matching(labels))
            .unwrap_or_default()
    }

    /// Labels of a namespace read from a `Namespace` object, if one was loaded.
    pub fn namespace_labels(&self, namespace: &str) -> Option<&Map<String, Value>> {
        self.namespaces.get(namespace)
    }

    /// The enabled Gatekeeper mutators, in application order.
    pub fn gatekeeper_mutators(&self) -> &Mutators {
        &self.mutators
    }

    /// Every PodDefault, by namespace and then in application order.
    pub fn all_pod_defaults(&self) -> Vec<&PodDefault> {
        let mut namespaces: Vec<(&String, &NamespaceDefaults)> = self.pod_defaults.iter().collect();
        namespaces.sort_unstable_by_key(|(namespace, _)| *namespace);
        namespaces
            .into_iter()
            .flat_map(|(_, index)| &index.items)
            .collect()
    }

    /// The Gatekeeper mutators left out by a schema conflict, each with the reason.
    pub fn disabled_mutators(&self) -> &[(PolicyRef, String)] {
        &self.disabled
    }

    /// How many policies of `kind` the set holds.
    pub fn count(&self, kind: PolicyKind) -> usize {
        self.counts[kind.index()]
    }

    /// How many policies the set holds.
    pub fn len(&self) -> usize {
        self.counts.iter().sum()
    }

    /// Whether the set holds no policy.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`PolicySetBuilder::add`] did with a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// A policy was compiled into the set.
    Policy(PolicyRef),
    /// A `Namespace` supplied labels for matching.
    Namespace(String),
    /// Not a kind outfit reads; the string says what it was.
    Skipped(String),
}

/// What loading found besides the policies themselves.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Policies rejected, each left out of the set.
    pub errors: Vec<PolicyError>,
    /// Problems that did not stop a policy from loading.
    pub warnings: Vec<LoadWarning>,
    /// Documents of kinds outfit does not read.
    pub skipped: Vec<(Origin, String)>,
}

/// Collects documents, compiling each policy as it is added, then builds a [`PolicySet`].
#[derive(Debug)]
pub struct PolicySetBuilder {
    default_namespace: String,
    pod_defaults: Vec<PodDefault>,
    mutators: Vec<Mutator>,
    namespaces: FastMap<String, Map<String, Value>>,
    seen: HashMap<PolicyRef, Origin>,
    disabled: Vec<(PolicyRef, String)>,
    report: LoadReport,
}

impl Default for PolicySetBuilder {
    fn default() -> Self {
        Self {
            default_namespace: "default".to_owned(),
            pod_defaults: Vec::new(),
            mutators: Vec::new(),
            namespaces: FastMap::default(),
            seen: HashMap::new(),
            disabled: Vec::new(),
            report: LoadReport::default(),
        }
    }
}

impl PolicySetBuilder {
    /// The namespace of namespaced policies whose documents name none (`default` unless set).
    pub fn default_namespace(mut self, namespace: &str) -> Self {
        namespace.clone_into(&mut self.default_namespace);
        self
    }

    /// Compiles one document. A rejected policy is recorded in the report and also returned.
    pub fn add(&mut self, document: &Document) -> Result<Added, PolicyError> {
        let result = self.compile(document);
        match &result {
            Err(error) => self.report.errors.push(error.clone()),
            Ok(Added::Skipped(what)) => self.report.skipped.push((document.origin.clone(), what.clone())),
            Ok(_) => {}
        }
        result
    }

    /// Compiles every document; rejected ones are recorded in the report.
    pub fn add_all<'d>(&mut self, documents: impl IntoIterator<Item = &'d Document>) {
        for document in documents {
            let _ = self.add(document);
        }
    }

    /// Errors, warnings and skipped documents so far.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    fn compile(&mut self, document: &Document) -> Result<Added, PolicyError> {
        let (api_version, kind) = (document.api_version(), document.kind());
        match (api_version, kind) {
            (poddefault::API_VERSION, poddefault::KIND) => {
                let pd = poddefault::parse(document, &self.default_namespace, &mut self.report.warnings)?;
                let reference = pd.reference().clone();
                self.remember(&reference, document)?;
                self.pod_defaults.push(pd);
                Ok(Added::Policy(reference))
            }
            (_, poddefault::KIND) if api_version.starts_with("kubeflow.org/") => Err(PolicyError {
                origin: document.origin.clone(),
                policy: PolicyRef::new(PolicyKind::PodDefault, None, document.name()),
                field: FieldPath::new("apiVersion"),
                problem: Problem::Unsupported(format!(
                    "{api_version}; PodDefault is served as {}",
                    poddefault::API_VERSION
                )),
            }),
            _ if api_version.split_once('/').map(|(group, _)| group) == Some(gatekeeper::GROUP) => {
                let mutator = gatekeeper::parse(document, &mut self.report.warnings)?;
                let reference = mutator.reference().clone();
                self.remember(&reference, document)?;
                self.mutators.push(mutator);
                Ok(Added::Policy(reference))
            }
            ("v1", "Namespace") => {
                let name = document.name().to_owned();
                let mut labels = document
                    .value
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                labels.insert(NAMESPACE_NAME_LABEL.to_owned(), Value::String(name.clone()));
                self.namespaces.insert(name.clone(), labels);
                Ok(Added::Namespace(name))
            }
            _ => Ok(Added::Skipped(format!("{kind} ({api_version})"))),
        }
    }

    /// Rejects a second policy with the same identity.
    fn remember(&mut self, reference: &PolicyRef, document: &Document) -> Result<(), PolicyError> {
        if let Some(first) = self.seen.get(reference) {
            return Err(PolicyError {
                origin: document.origin.clone(),
                policy: reference.clone(),
                field: FieldPath::new("metadata.name"),
                problem: Problem::DuplicatePolicy { first: first.clone() },
            });
        }
        self.seen.insert(reference.clone(), document.origin.clone());
        Ok(())
    }

    /// Builds the indexed set, and returns it with the load report.
    ///
    /// Gatekeeper mutators whose locations conflict (see [`conflicts`]) are both left out, as
    /// Gatekeeper disables both, and each is reported as an error naming the other.
    pub fn build(mut self) -> (PolicySet, LoadReport) {
        let mut counts = [0; PolicyKind::ALL.len()];
        counts[PolicyKind::PodDefault.index()] = self.pod_defaults.len();
        let mutators = self.compile_mutators();
        for mutator in mutators.items() {
            counts[mutator.reference().kind.index()] += 1;
        }
        let mut by_namespace: HashMap<String, Vec<PodDefault>> = HashMap::new();
        for pd in self.pod_defaults {
            by_namespace
                .entry(pd.namespace().to_owned())
                .or_default()
                .push(pd);
        }
        let pod_defaults = by_namespace
            .into_iter()
            .map(|(ns, items)| (ns, NamespaceDefaults::new(items)))
            .collect();
        (
            PolicySet {
                pod_defaults,
                namespaces: self.namespaces,
                counts,
                mutators,
                disabled: self.disabled,
            },
            self.report,
        )
    }
}

impl PolicySetBuilder {
    /// Sorts and indexes the Gatekeeper mutators, leaving out both sides of every schema conflict.
    fn compile_mutators(&mut self) -> Mutators {
        let mutators = std::mem::take(&mut self.mutators);
        let found = conflicts::find(&mutators);
        let mut disabled = vec![false; mutators.len()];
        for conflict in &found {
            for (this, other) in [
                (conflict.first, conflict.second),
                (conflict.second, conflict.first),
            ] {
                disabled[this] = true;
                let (this, other) = (&mutators[this], &mutators[other]);
                self.disabled.push((
                    this.reference().clone(),
                    format!(
                        "schema conflict with {} at spec.location: {}",
                        other.reference(),
                        conflict.detail
                    ),
                ));
                self.report.errors.push(PolicyError {
                    origin: this.origin().clone(),
                    policy: this.reference().clone(),
                    field: FieldPath::new("spec.location"),
                    problem: Problem::SchemaConflict {
                        other: other.reference().clone(),
                        other_origin: other.origin().clone(),
                        detail: conflict.detail.clone(),
                    },
                });
            }
        }
        let loaded = mutators.len();
        let mut enabled: Vec<Mutator> = mutators
            .into_iter()
            .zip(disabled)
            .filter_map(|(mutator, disabled)| (!disabled).then_some(mutator))
            .collect();
        // Collected in place into the builder's list, which grew by doubling.
        enabled.shrink_to_fit();
        Mutators::new(enabled, loaded)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn kinds_index_their_own_count() {
        for (position, kind) in PolicyKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), position, "{kind}");
        }
    }

    const KEYS: &[&str] = &["app", "team", "gpu"];

    fn selector() -> impl Strategy<Value = Value> {
        let key = prop::sample::select(KEYS);
        let value = prop::sample::select(&["x", "y"][..]);
        let operator = prop::sample::select(&["In", "NotIn", "Exists", "DoesNotExist"][..]);
        let expression = (key.clone(), operator, value.clone()).prop_map(|(key, operator, value)| {
            let values = if operator.ends_with("In") {
                json!([value])
            } else {
                json!(null)
            };
            json!({"key": key, "operator": operator, "values": values})
        });
        (
            prop::collection::btree_map(key, value, 0..=2),
            prop::collection::vec(expression, 0..=2),
        )
            .prop_map(|(labels, expressions)| json!({"matchLabels": labels, "matchExpressions": expressions}))
    }

    fn pod_default(name: String, selector: Value) -> PodDefault {
        let document = Document {
            origin: Origin::named("test"),
            value: json!({
                "apiVersion": poddefault::API_VERSION,
                "kind": poddefault::KIND,
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"selector": selector, "desc": "d"},
            }),
        };
        poddefault::parse(&document, "ns", &mut Vec::new()).expect("a valid PodDefault")
    }

    proptest! {
        /// The label-key index only narrows: a pod meets exactly the PodDefaults whose selector
        /// matches its labels (an empty selector matches every pod, as in Kubeflow), in name order.
        #[test]
        fn indexed_pod_defaults_are_exactly_the_matching_ones(
            selectors in prop::collection::vec(selector(), 0..12),
            labels in prop::option::of(prop::collection::btree_map(prop::sample::select(KEYS), prop::sample::select(&["x", "y"][..]), 0..=3)),
        ) {
            let items: Vec<PodDefault> = selectors
                .into_iter()
                .enumerate()
                .map(|(i, selector)| pod_default(format!("pd-{i:02}"), selector))
                .collect();
            let expected: Vec<String> = items
                .iter()
                .filter(|pd| {
                    let labels = labels.as_ref().map(|l| json!(l).as_object().cloned().unwrap_or_default());
                    pd.selector().matches(labels.as_ref())
                })
                .map(|pd| pd.name().to_owned())
                .collect();
            let index = NamespaceDefaults::new(items);
            let labels = labels.map(|l| json!(l).as_object().cloned().unwrap_or_default());
            let found: Vec<String> = index.matching(labels.as_ref()).iter().map(|pd| pd.name().to_owned()).collect();
            prop_assert_eq!(found, expected);
        }
    }
}
