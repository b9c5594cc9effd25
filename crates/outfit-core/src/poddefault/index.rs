//! PodDefaults indexed for matching: by namespace, then by a label key each selector requires,
//! so that a pod meets only the PodDefaults that can match it.

use super::policy::PodDefault;
use crate::{selector::Labels, vocab::FastMap};

/// PodDefaults of one namespace, sorted by name (Kubeflow applies them in API list order, which is
/// name order), with an index from label key to the PodDefaults whose selector requires that key.
#[derive(Debug, Default)]
pub(super) struct NamespaceDefaults {
    pub(super) items: Vec<PodDefault>,
    by_required_label: FastMap<String, Vec<u32>>,
    /// PodDefaults whose selector requires no particular key (empty, or only negative terms).
    unindexed: Vec<u32>,
}

impl NamespaceDefaults {
    pub(super) fn new(mut items: Vec<PodDefault>) -> Self {
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

    pub(super) fn matching<L: Labels + ?Sized>(&self, labels: Option<&L>) -> Vec<&PodDefault> {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        document::Document,
        poddefault::{self, parse},
        vocab::Origin,
    };

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
        parse(&document, "ns", &mut Vec::new()).expect("a valid PodDefault")
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
