//! Why a mutator does or does not apply to an object, and what it alone changes: the step-by-step
//! twin of [`Mutator::matches`] and of one step of the run loop, for `outfit explain`. Never on
//! the admission path; a test holds it to agree with `matches`.

use serde_json::{Map, Value};

use super::{
    action::Action,
    keyed::KeyedLists,
    matching::{Match, NamespaceName, Scope, Source, Subject, Wildcard},
    mutator::Mutator,
    setters::Meta,
    traverse::{self, Tester, WalkError},
};
use crate::{explain::report::Clause, selector::LabelSelector, vocab::Operation};

impl Mutator {
    /// The first clause that rules the object out; `None` exactly when [`Mutator::matches`] holds.
    pub(crate) fn mismatch<'n>(
        &self,
        subject: &Subject<'_>,
        namespace_labels: &dyn Fn(&str) -> Option<&'n Map<String, Value>>,
    ) -> Option<Clause> {
        let operation = subject.operation;
        if let Action::Metadata(_) = self.action {
            if !matches!(operation, Operation::Create | Operation::Update) {
                return Some(Clause::new(
                    "operation",
                    format!(
                        "{}; AssignMetadata applies on CREATE and UPDATE",
                        operation.as_str()
                    ),
                ));
            }
        } else if !self.apply_to.iter().any(|entry| entry.applies(subject)) {
            let group = if subject.group.is_empty() {
                "core"
            } else {
                subject.group
            };
            return Some(Clause::new(
                "spec.applyTo",
                format!(
                    "{} {group}/{} {} is in no entry",
                    operation.as_str(),
                    subject.version,
                    subject.kind
                ),
            ));
        }
        self.matcher.mismatch(subject, namespace_labels)
    }

    /// Applies the mutator once to `object`, as one step of the run loop does; returns whether it
    /// changed the object.
    pub(crate) fn mutate_once(
        &self,
        object: &mut Value,
        request_namespace: &str,
        operation: Operation,
    ) -> Result<bool, WalkError> {
        let Some(subject) = Subject::new(object, request_namespace, operation) else {
            return Ok(false);
        };
        let setter = self.setter(Meta {
            name: subject.name(),
            namespace: subject.namespace,
        });
        self.apply(&setter, object, &mut KeyedLists::default())
    }

    /// Whether its `pathTests` are what keeps it from changing the object: without them it would.
    pub(crate) fn stopped_by_path_tests(&self, subject: &Subject<'_>) -> bool {
        let setter = self.setter(Meta {
            name: subject.name(),
            namespace: subject.namespace,
        });
        let untested = Tester::new(&[]);
        !traverse::would_change(self.location.nodes(), &self.tester, &setter, subject.object)
            && traverse::would_change(self.location.nodes(), &untested, &setter, subject.object)
    }
}

impl Match {
    /// The first clause of `match` that rules the object out, in the order `matches` checks them.
    fn mismatch<'n>(
        &self,
        subject: &Subject<'_>,
        namespace_labels: &dyn Fn(&str) -> Option<&'n Map<String, Value>>,
    ) -> Option<Clause> {
        if !(self.kinds.is_empty() || self.kinds.iter().any(|k| k.matches(subject.group, subject.kind))) {
            let listed: Vec<String> = self
                .kinds
                .iter()
                .map(|k| format!("{:?} in groups {:?}", k.kinds, k.groups))
                .collect();
            return Some(Clause::new(
                "spec.match.kinds",
                format!(
                    "{} (group {:?}) is not one of {}",
                    subject.kind,
                    subject.group,
                    listed.join("; ")
                ),
            ));
        }
        if !self.scope_matches(subject) {
            let (wanted, has) = match self.scope {
                Scope::Cluster => ("Cluster", "namespaced"),
                _ => ("Namespaced", "cluster-scoped"),
            };
            return Some(Clause::new(
                "spec.match.scope",
                format!("{wanted}; the object is {has}"),
            ));
        }
        if let Some(clause) = self.namespace_mismatch(subject) {
            return Some(clause);
        }
        if self.source == Source::Generated {
            return Some(Clause::new(
                "spec.match.source",
                "Generated; admission requests carry original objects",
            ));
        }
        if let Some(unmet) = self.label_selector.unmet(subject.labels()) {
            return Some(Clause::new(
                "spec.match.labelSelector",
                format!(
                    "requires {unmet}; the object has {}",
                    unmet.found(subject.labels())
                ),
            ));
        }
        if !self.namespace_selector_matches(subject, namespace_labels) {
            return Some(self.namespace_selector_mismatch(subject, namespace_labels));
        }
        self.name_mismatch(subject)
    }

    fn name_mismatch(&self, subject: &Subject<'_>) -> Option<Clause> {
        if self.name_matches(subject) {
            return None;
        }
        let pattern = self.name.as_ref().map_or("", |w| w.0.as_str());
        let name = subject.name();
        let detail = if name.is_empty() {
            format!(
                "{pattern:?} does not match generateName {:?}",
                subject.metadata_str("generateName")
            )
        } else {
            format!("{pattern:?} does not match name {name:?}")
        };
        Some(Clause::new("spec.match.name", detail))
    }

    fn namespace_mismatch(&self, subject: &Subject<'_>) -> Option<Clause> {
        if self.namespaces_match(subject) {
            return None;
        }
        let namespace = subject.namespace_key().unwrap_or_default();
        let patterns = |list: &[Wildcard]| list.iter().map(|w| w.0.as_str()).collect::<Vec<_>>().join(", ");
        if let Some(excluded) = self.excluded_namespaces.iter().find(|w| w.matches(namespace)) {
            return Some(Clause::new(
                "spec.match.excludedNamespaces",
                format!("namespace {namespace:?} matches {:?}", excluded.0),
            ));
        }
        Some(Clause::new(
            "spec.match.namespaces",
            format!(
                "namespace {namespace:?} matches none of [{}]",
                patterns(&self.namespaces)
            ),
        ))
    }

    fn namespace_selector_mismatch<'n>(
        &self,
        subject: &Subject<'_>,
        namespace_labels: &dyn Fn(&str) -> Option<&'n Map<String, Value>>,
    ) -> Clause {
        static EVERYTHING: LabelSelector = LabelSelector::EMPTY;
        let field = "spec.match.namespaceSelector";
        let selector = self.namespace_selector.as_ref().unwrap_or(&EVERYTHING);
        if subject.is_namespace() {
            let labels = subject.labels();
            return match selector.unmet(labels) {
                Some(unmet) => Clause::new(
                    field,
                    format!("requires {unmet}; the Namespace has {}", unmet.found(labels)),
                ),
                None => Clause::new(field, "does not match the Namespace"),
            };
        }
        let namespace = subject.namespace.unwrap_or_default();
        let detail = match namespace_labels(namespace) {
            Some(labels) => selector.unmet(Some(labels)).map(|unmet| {
                format!(
                    "requires {unmet}; namespace {namespace:?} has {}",
                    unmet.found(Some(labels))
                )
            }),
            None => {
                let only_name = NamespaceName(namespace);
                selector.unmet(Some(&only_name)).map(|unmet| {
                    format!(
                        "requires {unmet}; namespace {namespace:?} has {} (outfit knows no other labels of it: load its Namespace object to match on them)",
                        unmet.found(Some(&only_name))
                    )
                })
            }
        };
        Clause::new(
            field,
            detail.unwrap_or_else(|| format!("does not match namespace {namespace:?}")),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{matching::Subject, test_support::mutator};
    use crate::vocab::Operation;

    fn pod(namespace: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": namespace, "labels": labels}})
    }

    /// `mismatch` is `matches` step by step: it names a clause exactly when `matches` is false, and
    /// the clause is the one each case sets up to fail.
    #[test]
    fn a_clause_is_named_exactly_when_the_mutator_does_not_match() {
        let apply_to = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
        let spec = |matching: Value| json!({"applyTo": apply_to, "match": matching, "location": "spec.priority", "parameters": {"assign": {"value": 1}}});
        let cases: &[(Value, Option<&str>)] = &[
            (json!({}), None),
            (
                json!({"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]}),
                Some("spec.match.kinds"),
            ),
            (json!({"scope": "Cluster"}), Some("spec.match.scope")),
            (json!({"namespaces": ["prod-*"]}), Some("spec.match.namespaces")),
            (
                json!({"namespaces": ["team-*"], "excludedNamespaces": ["*-a"]}),
                Some("spec.match.excludedNamespaces"),
            ),
            (json!({"source": "Generated"}), Some("spec.match.source")),
            (
                json!({"labelSelector": {"matchLabels": {"app": "db"}}}),
                Some("spec.match.labelSelector"),
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
                None,
            ),
            (
                json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}),
                Some("spec.match.namespaceSelector"),
            ),
            (json!({"name": "db-*"}), Some("spec.match.name")),
            (json!({"name": "web-*"}), None),
        ];
        let object = pod("team-a", json!({"app": "web"}));
        let subject = Subject::new(&object, "team-a", Operation::Create).expect("a subject");
        let no_labels = |_: &str| None;
        for (matching, expected) in cases {
            let mutator = mutator("Assign", "m", spec(matching.clone())).expect("a valid Assign");
            let clause = mutator.mismatch(&subject, &no_labels);
            assert_eq!(
                clause.is_none(),
                mutator.matches(&subject, &no_labels),
                "{matching}"
            );
            assert_eq!(
                clause.as_ref().map(|c| c.field.as_str()),
                *expected,
                "{matching}: {clause:?}"
            );
        }
        let wrong_kind = mutator(
            "Assign",
            "m",
            json!({
                "applyTo": [{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}],
                "location": "spec.priority", "parameters": {"assign": {"value": 1}},
            }),
        )
        .expect("a valid Assign");
        let clause = wrong_kind.mismatch(&subject, &no_labels).expect("ruled out");
        assert_eq!(clause.field, "spec.applyTo");
        assert_eq!(clause.detail, "CREATE core/v1 Pod is in no entry");
    }

    #[test]
    fn the_clause_says_what_was_required_and_what_the_object_has() {
        let object = pod("team-a", json!({"app": "web"}));
        let subject = Subject::new(&object, "team-a", Operation::Create).expect("a subject");
        let selector = mutator("Assign", "m", json!({
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "match": {"labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {"matchLabels": {"env": "prod"}}},
            "location": "spec.priority", "parameters": {"assign": {"value": 1}},
        }))
        .expect("a valid Assign");
        let clause = selector.mismatch(&subject, &|_| None).expect("ruled out");
        assert_eq!(clause.detail, "requires app=db; the object has app=web");
        let labels = json!({"env": "dev"});
        let labels = labels.as_object().expect("a map");
        let namespace_only = mutator(
            "Assign",
            "m",
            json!({
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "match": {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
                "location": "spec.priority", "parameters": {"assign": {"value": 1}},
            }),
        )
        .expect("a valid Assign");
        let clause = namespace_only
            .mismatch(&subject, &|_| Some(labels))
            .expect("ruled out");
        assert_eq!(
            clause.detail,
            r#"requires env=prod; namespace "team-a" has env=dev"#
        );
    }
}
