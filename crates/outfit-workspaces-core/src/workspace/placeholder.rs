//! Placeholder pods (issue 35, `placeholders`): what one is, and which to make or remove so that
//! a cluster keeps as many as configured. A placeholder is a `pause` container of the typical
//! workspace's size, of a PriorityClass below every workspace's (which have none, priority 0): the
//! scheduler preempts one for a launch that finds no room, so the launch starts on capacity that
//! was already there, and the leader makes it again, where there is room or, pending, where a
//! cluster autoscaler adds a node for it. Not outfit's workspaces: they carry no
//! `app.kubernetes.io/managed-by` of the backend, so its watches and sweeps never see them.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Capabilities, Container, Pod, PodSpec, ResourceRequirements, SecurityContext},
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};

use crate::model::config::Placeholders;

/// The label every placeholder carries (`true`), and that finds them.
pub const LABEL: &str = "outfit.dev/placeholder";
/// The PriorityClass of placeholders, which `outfit manifests --workspaces` and the chart install.
pub const PRIORITY_CLASS: &str = "outfit-workspace-placeholder";
/// Its value: below a workspace's (0, no class), so the scheduler preempts a placeholder for one.
pub const PRIORITY: i32 = -10;
/// The image: the pause container, which every node already holds for its pod sandboxes.
pub const IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Placeholders are named `outfit-placeholder-<n>`.
const PREFIX: &str = "outfit-placeholder-";

/// The placeholder `name`, as `config` sizes and places it.
pub fn pod(name: &str, config: &Placeholders) -> Pod {
    let requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity(config.cpu.clone())),
        ("memory".to_owned(), Quantity(config.memory.clone())),
    ]);
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            priority_class_name: Some(PRIORITY_CLASS.to_owned()),
            // Preempted at once: the launch waiting for its room should not wait for it.
            termination_grace_period_seconds: Some(0),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            node_selector: (!config.node_selector.is_empty()).then(|| config.node_selector.clone()),
            tolerations: (!config.tolerations.is_empty()).then(|| config.tolerations.clone()),
            containers: vec![Container {
                name: "placeholder".to_owned(),
                image: Some(IMAGE.to_owned()),
                resources: Some(ResourceRequirements {
                    requests: Some(requests.clone()),
                    limits: Some(requests),
                    ..ResourceRequirements::default()
                }),
                // Pod Security `restricted` holds: nothing a workspace namespace refuses.
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    run_as_non_root: Some(true),
                    run_as_user: Some(65535),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".to_owned()]),
                        add: None,
                    }),
                    seccomp_profile: Some(k8s_openapi::api::core::v1::SeccompProfile {
                        type_: "RuntimeDefault".to_owned(),
                        localhost_profile: None,
                    }),
                    ..SecurityContext::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// What to do so that `want` placeholders are kept, given the ones there are (`existing`: each
/// name, and whether it is being deleted, as a preempted one is).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// New placeholders to make (names no existing one holds).
    pub make: Vec<String>,
    /// Placeholders past `want` to remove (the newest names first).
    pub remove: Vec<String>,
}

/// The [`Plan`] that keeps `want` placeholders.
pub fn plan(existing: &[(String, bool)], want: usize) -> Plan {
    let live: Vec<&String> = existing
        .iter()
        .filter(|(_, deleting)| !deleting)
        .map(|(name, _)| name)
        .collect();
    if live.len() > want {
        let mut extra: Vec<String> = live.iter().map(|name| (*name).clone()).collect();
        extra.sort_by_key(|name| std::cmp::Reverse(ordinal(name)));
        extra.truncate(live.len() - want);
        return Plan {
            make: Vec::new(),
            remove: extra,
        };
    }
    let taken: Vec<&str> = existing.iter().map(|(name, _)| name.as_str()).collect();
    let make = (0..)
        .map(|n| format!("{PREFIX}{n}"))
        .filter(|name| !taken.contains(&name.as_str()))
        .take(want - live.len())
        .collect();
    Plan {
        make,
        remove: Vec::new(),
    }
}

/// The `<n>` of a placeholder's name (names of another form last).
fn ordinal(name: &str) -> u64 {
    name.strip_prefix(PREFIX)
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_placeholder_is_a_pause_pod_of_the_low_class_sized_and_placed_as_configured() {
        let config: Placeholders = serde_json::from_value(json!({
            "count": 2, "cpu": "2", "memory": "4Gi",
            "nodeSelector": {"pool": "workspaces"},
            "tolerations": [{"key": "workspaces", "operator": "Exists", "effect": "NoSchedule"}]
        }))
        .unwrap();
        let pod = serde_json::to_value(pod("outfit-placeholder-0", &config)).unwrap();
        assert_eq!(pod["metadata"]["labels"], json!({LABEL: "true"}));
        assert!(
            pod["metadata"]["labels"]
                .get("app.kubernetes.io/managed-by")
                .is_none()
        );
        let spec = &pod["spec"];
        assert_eq!(spec["priorityClassName"], PRIORITY_CLASS);
        assert_eq!(spec["terminationGracePeriodSeconds"], 0);
        assert_eq!(spec["nodeSelector"], json!({"pool": "workspaces"}));
        assert_eq!(spec["tolerations"][0]["key"], "workspaces");
        let container = &spec["containers"][0];
        assert_eq!(container["image"], IMAGE);
        assert_eq!(
            container["resources"]["requests"],
            json!({"cpu": "2", "memory": "4Gi"})
        );
        assert_eq!(
            container["securityContext"]["capabilities"]["drop"],
            json!(["ALL"])
        );
        let plain = serde_json::to_value(super::pod("p", &Placeholders::default())).unwrap();
        assert!(plain["spec"].get("nodeSelector").is_none());
    }

    #[test]
    fn the_plan_makes_the_missing_and_removes_the_extra() {
        let named = |names: &[(&str, bool)]| -> Vec<(String, bool)> {
            names.iter().map(|(n, d)| ((*n).to_owned(), *d)).collect()
        };
        assert_eq!(
            plan(&[], 2).make,
            ["outfit-placeholder-0", "outfit-placeholder-1"]
        );
        // A preempted one (being deleted) still holds its name; a new one takes another.
        let preempted = named(&[("outfit-placeholder-0", true), ("outfit-placeholder-1", false)]);
        assert_eq!(plan(&preempted, 2).make, ["outfit-placeholder-2"]);
        assert_eq!(plan(&preempted, 1), Plan::default());
        let three = named(&[
            ("outfit-placeholder-0", false),
            ("outfit-placeholder-2", false),
            ("outfit-placeholder-10", false),
        ]);
        assert_eq!(
            plan(&three, 1).remove,
            ["outfit-placeholder-10", "outfit-placeholder-2"]
        );
        assert_eq!(plan(&three, 0).remove.len(), 3);
    }
}
