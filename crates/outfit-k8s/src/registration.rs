//! What outfit's MutatingWebhookConfiguration should say, and the edit that makes it so: a pure
//! function of the policy set's rules and the CA bundle, which `outfit serve --from-cluster`'s
//! webhook controller applies (the I/O lives there).
//!
//! Every webhook of the configuration gets the same `rules` and `caBundle`: `outfit manifests`
//! prints one webhook, and a team that splits it keeps both pointed at outfit. Everything else
//! (namespaceSelector, failurePolicy, timeouts, fields of later API versions) is left as it is.

use std::{collections::BTreeSet, fmt};

use base64::{Engine, prelude::BASE64_STANDARD};
use serde_json::Value;

use crate::rules::{self, Rules};

/// What the configuration's webhooks should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// Their `rules`, as [`rules::to_json`] writes them.
    pub rules: Value,
    /// Their `clientConfig.caBundle` (base64 of the PEM bundle); `None` leaves it to someone else
    /// (cert-manager's CA injector, or a team that fills it itself).
    pub ca_bundle: Option<String>,
}

impl Desired {
    /// The configuration for `rules` and the PEM bundle of the CAs that may have signed the
    /// certificate served.
    pub fn new(rules: &Rules, ca_bundle_pem: Option<&str>) -> Self {
        Self {
            rules: rules::to_json(rules),
            ca_bundle: ca_bundle_pem.map(|pem| BASE64_STANDARD.encode(pem.as_bytes())),
        }
    }
}

/// Which field of the configuration an edit changes (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// A webhook's `rules`.
    Rules,
    /// A webhook's `clientConfig.caBundle`.
    CaBundle,
}

impl Field {
    /// The field's name as the API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Rules => "rules",
            Field::CaBundle => "caBundle",
        }
    }
}

/// Why an edit is made (a metric label and a log field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The first look since this replica began writing: the configuration was stale (a fresh
    /// install without `caBundle`, or policies that changed while no replica wrote).
    Startup,
    /// The policies' kinds changed.
    Policies,
    /// The certificate's CA bundle changed.
    Certificate,
    /// The configuration said what it should, and someone changed it.
    Restored,
}

impl Reason {
    /// Its name as the metric label says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Startup => "startup",
            Reason::Policies => "policies",
            Reason::Certificate => "certificate",
            Reason::Restored => "restored",
        }
    }

    /// Why `field` is written now, given what the configuration said when last in step
    /// (`None`: not since this replica began writing).
    pub fn of(field: Field, in_step: Option<&Desired>, desired: &Desired) -> Reason {
        match (in_step, field) {
            (None, _) => Reason::Startup,
            (Some(before), Field::Rules) if before.rules != desired.rules => Reason::Policies,
            (Some(before), Field::CaBundle) if before.ca_bundle != desired.ca_bundle => Reason::Certificate,
            (Some(_), _) => Reason::Restored,
        }
    }
}

/// One difference an edit corrects, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The webhook's name.
    pub webhook: String,
    /// The field.
    pub field: Field,
    /// For rules: the `group/version/resource`s added and removed (both empty when only the
    /// operations or the scope differed).
    pub added: Vec<String>,
    /// See `added`.
    pub removed: Vec<String>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "webhook {}: {}", self.webhook, self.field.as_str())?;
        match self.field {
            Field::CaBundle => f.write_str(" set to the served certificate's CA bundle"),
            Field::Rules if self.added.is_empty() && self.removed.is_empty() => {
                f.write_str(" operations or scope restored")
            }
            Field::Rules => {
                if !self.added.is_empty() {
                    write!(f, " added {}", self.added.join(", "))?;
                }
                if !self.removed.is_empty() {
                    let sep = if self.added.is_empty() { "" } else { ";" };
                    write!(f, "{sep} removed {}", self.removed.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

/// The configuration as it should be, and what differs, or `None` when it already says what it
/// should (then nothing is written).
pub fn plan(configuration: &Value, desired: &Desired) -> Option<(Value, Vec<Change>)> {
    let mut updated = configuration.clone();
    let mut changes = Vec::new();
    let webhooks = updated.get_mut("webhooks").and_then(Value::as_array_mut)?;
    for webhook in webhooks {
        let name = webhook["name"].as_str().unwrap_or_default().to_owned();
        if webhook.get("rules") != Some(&desired.rules) {
            let (added, removed) = difference(webhook.get("rules"), &desired.rules);
            changes.push(Change {
                webhook: name.clone(),
                field: Field::Rules,
                added,
                removed,
            });
            webhook["rules"] = desired.rules.clone();
        }
        if let Some(bundle) = &desired.ca_bundle {
            let client_config = &mut webhook["clientConfig"];
            if client_config.get("caBundle").and_then(Value::as_str) != Some(bundle) {
                changes.push(Change {
                    webhook: name,
                    field: Field::CaBundle,
                    added: Vec::new(),
                    removed: Vec::new(),
                });
                client_config["caBundle"] = Value::String(bundle.clone());
            }
        }
    }
    (!changes.is_empty()).then_some((updated, changes))
}

/// The resources `desired` names that `current` does not, and the reverse.
fn difference(current: Option<&Value>, desired: &Value) -> (Vec<String>, Vec<String>) {
    let current = current.map(resources).unwrap_or_default();
    let desired = resources(desired);
    (
        desired.difference(&current).cloned().collect(),
        current.difference(&desired).cloned().collect(),
    )
}

/// Every `group/version/resource` the rules name (`core` for the core group).
fn resources(rules: &Value) -> BTreeSet<String> {
    let strings = |rule: &Value, key: &str| -> Vec<String> {
        rule[key]
            .as_array()
            .map(|values| {
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut names = BTreeSet::new();
    for rule in rules.as_array().into_iter().flatten() {
        for group in strings(rule, "apiGroups") {
            let group = if group.is_empty() {
                "core".to_owned()
            } else {
                group
            };
            for version in strings(rule, "apiVersions") {
                for resource in strings(rule, "resources") {
                    names.insert(format!("{group}/{version}/{resource}"));
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rules::ResourceRule;

    fn configuration(rules: Value, ca_bundle: Option<&str>) -> Value {
        let mut client_config = json!({"url": "https://127.0.0.1:8443/mutate"});
        if let Some(bundle) = ca_bundle {
            client_config["caBundle"] = json!(bundle);
        }
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
               "metadata": {"name": "outfit", "resourceVersion": "7"},
               "webhooks": [{"name": "mutate.outfit.dev", "clientConfig": client_config, "rules": rules,
                             "failurePolicy": "Fail", "sideEffects": "None"}]})
    }

    fn services() -> Rules {
        Rules::Resources(vec![ResourceRule {
            group: String::new(),
            version: "v1".into(),
            resource: "services".into(),
        }])
    }

    #[test]
    fn a_configuration_that_says_what_it_should_is_left_alone() {
        let desired = Desired::new(&Rules::Pods, Some("CA"));
        let current = configuration(rules::to_json(&Rules::Pods), Some("Q0E="));
        assert_eq!(plan(&current, &desired), None);
    }

    #[test]
    fn a_fresh_install_gets_its_ca_bundle_and_keeps_the_rest() {
        let desired = Desired::new(&Rules::Pods, Some("CA"));
        let current = configuration(rules::to_json(&Rules::Pods), None);
        let (updated, changes) = plan(&current, &desired).expect("an edit");
        let webhook = &updated["webhooks"][0];
        assert_eq!(webhook["clientConfig"]["caBundle"], "Q0E=");
        assert_eq!(webhook["clientConfig"]["url"], "https://127.0.0.1:8443/mutate");
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(
            updated["metadata"]["resourceVersion"], "7",
            "the write is conditional on it"
        );
        assert_eq!(
            changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["webhook mutate.outfit.dev: caBundle set to the served certificate's CA bundle"]
        );
    }

    #[test]
    fn a_new_kind_adds_its_rule_and_the_last_policy_of_a_kind_removes_it() {
        let pods_only = configuration(rules::to_json(&Rules::Pods), Some("Q0E="));
        let (with_services, changes) = plan(&pods_only, &Desired::new(&services(), Some("CA"))).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].field, Field::Rules);
        assert_eq!(changes[0].added, ["core/v1/services"]);
        assert_eq!(
            changes[0].to_string(),
            "webhook mutate.outfit.dev: rules added core/v1/services"
        );
        assert_eq!(
            with_services["webhooks"][0]["rules"][1]["resources"],
            json!(["services"])
        );

        let (back, changes) = plan(&with_services, &Desired::new(&Rules::Pods, Some("CA"))).unwrap();
        assert_eq!(changes[0].removed, ["core/v1/services"]);
        assert_eq!(back, pods_only);
    }

    #[test]
    fn the_reason_tells_a_policy_change_from_a_hand_edit() {
        let pods = Desired::new(&Rules::Pods, Some("CA"));
        let with_services = Desired::new(&services(), Some("CA"));
        let new_ca = Desired::new(&Rules::Pods, Some("CA2"));
        assert_eq!(Reason::of(Field::Rules, None, &pods), Reason::Startup);
        assert_eq!(
            Reason::of(Field::Rules, Some(&pods), &with_services),
            Reason::Policies
        );
        assert_eq!(Reason::of(Field::Rules, Some(&pods), &pods), Reason::Restored);
        assert_eq!(
            Reason::of(Field::CaBundle, Some(&pods), &new_ca),
            Reason::Certificate
        );
        assert_eq!(
            Reason::of(Field::CaBundle, Some(&pods), &with_services),
            Reason::Restored
        );
    }

    #[test]
    fn a_hand_edit_is_undone_and_cert_managers_bundle_is_left_alone() {
        let mut edited = configuration(rules::to_json(&Rules::Pods), Some("b3RoZXI="));
        edited["webhooks"][0]["rules"][0]["operations"] = json!(["CREATE"]);
        let (restored, changes) = plan(&edited, &Desired::new(&Rules::Pods, None)).unwrap();
        assert_eq!(
            changes[0].to_string(),
            "webhook mutate.outfit.dev: rules operations or scope restored"
        );
        assert_eq!(
            restored["webhooks"][0]["rules"][0]["operations"],
            json!(["CREATE", "UPDATE"])
        );
        assert_eq!(
            restored["webhooks"][0]["clientConfig"]["caBundle"], "b3RoZXI=",
            "without a CA of its own outfit leaves caBundle to its injector"
        );
    }
}
