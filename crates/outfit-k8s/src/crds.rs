//! The CustomResourceDefinitions `outfit manifests` installs: each family of the kinds table
//! keeps its kinds' CRDs as YAML beside its code (`Family::crds`), so that a kind is one module
//! and one line of the table. The schemas are structural, so the API server validates policies
//! and `kubectl explain` documents them; `outfit-core` still checks every field when it loads a
//! policy, since it also reads policies from files no API server has seen.

use outfit_core::{document, family::Table};
use serde_json::Value;

/// Every CRD of `families`, in table order, but those of the API groups in `leave_out` (a
/// group another project installs: `kubeflow.org` beside Kubeflow, `mutations.gatekeeper.sh`
/// beside Gatekeeper).
pub fn of(families: Table, leave_out: &[String]) -> Vec<Value> {
    families
        .iter()
        .flat_map(|family| {
            // The CRDs are outfit's own text, checked by the tests below for every family.
            document::parse_stream(family.crds(), "crds.yaml").unwrap_or_default()
        })
        .map(|document| document.value)
        .filter(|crd| {
            let group = crd["spec"]["group"].as_str().unwrap_or_default();
            !leave_out.iter().any(|g| g == group)
        })
        .collect()
}

/// A group `--without-crds` names that no CRD of the table is in: a typo would otherwise install
/// the CRDs it meant to leave out, which another project then fights over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--without-crds {group:?}: outfit installs no CRD of that API group (its groups: {})", .known.join(", "))]
pub struct UnknownGroup {
    /// The group given.
    pub group: String,
    /// The groups of the table's CRDs.
    pub known: Vec<String>,
}

/// The API groups of the CRDs of `families`, in table order, each once.
pub fn groups(families: Table) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for crd in of(families, &[]) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        if !groups.iter().any(|g| g == group) {
            groups.push(group.to_owned());
        }
    }
    groups
}

/// Checks that every group of `leave_out` is one of the groups of `families`' CRDs.
pub fn check_groups(families: Table, leave_out: &[String]) -> Result<(), UnknownGroup> {
    let known = groups(families);
    match leave_out.iter().find(|group| !known.contains(group)) {
        Some(group) => Err(UnknownGroup {
            group: group.clone(),
            known,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use outfit_core::{kinds, vocab::Served};
    use serde_json::json;

    use super::*;

    fn spec_schema<'c>(crds: &'c [Value], name: &str) -> &'c Value {
        let crd = crds.iter().find(|c| c["metadata"]["name"] == name).unwrap();
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    }

    #[test]
    fn every_family_s_crds_parse() {
        for family in kinds::FAMILIES {
            let parsed = document::parse_stream(family.crds(), "crds.yaml");
            assert!(parsed.is_ok(), "{family:?}: {parsed:?}");
        }
    }

    #[test]
    fn every_kind_of_the_table_has_its_crd_with_the_same_group_plural_and_versions() {
        let crds = of(kinds::FAMILIES, &[]);
        // Built-in kinds (the filer injector's ConfigMaps and Secrets) have none.
        let kinds: Vec<_> = kinds::all()
            .filter(|kind| matches!(kind.info().served, Served::Crd))
            .collect();
        assert_eq!(kinds.len(), crds.len(), "one CRD per CRD kind of the table");
        for kind in kinds {
            let info = kind.info();
            let crd = crds
                .iter()
                .find(|crd| crd["spec"]["names"]["kind"] == info.name)
                .unwrap_or_else(|| panic!("no CRD for {kind}"));
            assert_eq!(crd["spec"]["group"], info.group, "{kind}");
            assert_eq!(crd["spec"]["names"]["plural"], info.plural, "{kind}");
            assert_eq!(crd["metadata"]["name"], format!("{}.{}", info.plural, info.group));
            assert_eq!(crd["spec"]["scope"] == "Namespaced", info.namespaced, "{kind}");
            let versions = crd["spec"]["versions"].as_array().unwrap();
            let served: Vec<&str> = versions.iter().map(|v| v["name"].as_str().unwrap()).collect();
            assert_eq!(served, info.versions, "{kind}");
            let stored: Vec<&str> = versions
                .iter()
                .filter(|v| v["storage"] == true)
                .map(|v| v["name"].as_str().unwrap())
                .collect();
            assert_eq!(
                stored,
                [info.versions[0]],
                "{kind}: the table's first version is stored"
            );
        }
    }

    #[test]
    fn groups_can_be_left_out_and_outfit_s_own_stay() {
        let names = |crds: Vec<Value>| -> Vec<String> {
            crds.iter()
                .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let leave_out = ["kubeflow.org".to_owned(), "mutations.gatekeeper.sh".to_owned()];
        assert_eq!(
            names(of(kinds::FAMILIES, &leave_out)),
            ["podpolicies.outfit.dev", "audiences.outfit.dev"]
        );
        assert_eq!(of(kinds::FAMILIES, &[]).len(), 7);
    }

    #[test]
    fn schemas_require_what_the_engine_requires_and_keep_free_form_values() {
        let crds = of(kinds::FAMILIES, &[]);
        let assign = spec_schema(&crds, "assign.mutations.gatekeeper.sh");
        assert_eq!(assign["required"], json!(["location"]));
        let value = &assign["properties"]["parameters"]["properties"]["assign"]["properties"]["value"];
        assert_eq!(value["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            assign["properties"]["match"]["properties"]["scope"]["enum"],
            json!(["*", "Cluster", "Namespaced"])
        );
        assert_eq!(
            spec_schema(&crds, "poddefaults.kubeflow.org")["required"],
            json!(["selector"])
        );
        for (name, scope) in [
            ("poddefaults.kubeflow.org", "Namespaced"),
            ("assign.mutations.gatekeeper.sh", "Cluster"),
            ("podpolicies.outfit.dev", "Cluster"),
            ("audiences.outfit.dev", "Cluster"),
        ] {
            let crd = crds.iter().find(|c| c["metadata"]["name"] == name).unwrap();
            assert_eq!(crd["spec"]["scope"], scope, "{name}");
        }
    }

    #[test]
    fn pod_policy_schemas_hold_requesters_and_quantities() {
        let crds = of(kinds::FAMILIES, &[]);
        let policy = spec_schema(&crds, "podpolicies.outfit.dev");
        assert_eq!(policy["required"], json!(["add"]));
        let requesters = &policy["properties"]["match"]["properties"]["requesters"]["properties"];
        for field in ["users", "groups", "serviceAccounts", "audiences", "exclude"] {
            assert!(
                requesters.get(field).is_some(),
                "requesters.{field}: {requesters}"
            );
        }
        let limits = &policy["properties"]["add"]["properties"]["resources"]["properties"]["limits"];
        assert_eq!(
            limits["additionalProperties"]["x-kubernetes-int-or-string"], true,
            "{limits}"
        );
        let members = &spec_schema(&crds, "audiences.outfit.dev")["properties"];
        for field in ["users", "groups", "serviceAccounts", "exclude"] {
            assert!(members.get(field).is_some(), "{field}: {members}");
        }
    }

    /// Issue 23: a group outfit installs no CRD of is refused, naming the groups it does install
    /// (it was ignored, and the CRDs meant to be left out were installed).
    #[test]
    fn an_unknown_group_to_leave_out_is_refused_naming_the_known_ones() {
        let known = groups(kinds::FAMILIES);
        assert!(known.contains(&"kubeflow.org".to_owned()), "{known:?}");
        assert!(known.contains(&"mutations.gatekeeper.sh".to_owned()), "{known:?}");
        assert_eq!(
            check_groups(kinds::FAMILIES, &["kubeflow.org".to_owned()]),
            Ok(())
        );
        let error = check_groups(
            kinds::FAMILIES,
            &["kubeflow.org".to_owned(), "kubeflow.com".to_owned()],
        )
        .unwrap_err();
        assert_eq!(error.group, "kubeflow.com");
        assert_eq!(
            error.to_string(),
            format!(
                "--without-crds \"kubeflow.com\": outfit installs no CRD of that API group (its groups: {})",
                known.join(", ")
            )
        );
    }
}
