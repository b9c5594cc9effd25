//! Placeholder pods (issue 35, `placeholders`): what one is, and which to make or remove so that
//! a cluster keeps as many as configured. A placeholder is a `pause` container of the typical
//! workspace's size, of a PriorityClass below every workspace's (which have none, priority 0): the
//! scheduler preempts one for a launch that finds no room, so the launch starts on capacity that
//! was already there, and the leader makes it again, where there is room or, pending, where a
//! cluster autoscaler adds a node for it. Not outfit's workspaces: they carry no
//! `app.kubernetes.io/managed-by` of the backend, so its watches and sweeps never see them.

use std::{
    collections::{BTreeMap, VecDeque},
    time::Duration,
};

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
            containers: vec![own_container("placeholder", IMAGE, requests)],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A container of outfit's own (`name`, running `image`) that asks for `requests` and holds to
/// them, and needs no rights.
pub(crate) fn own_container(name: &str, image: &str, requests: BTreeMap<String, Quantity>) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(image.to_owned()),
        resources: Some(ResourceRequirements {
            requests: Some(requests.clone()),
            limits: Some(requests),
            ..ResourceRequirements::default()
        }),
        security_context: Some(restricted()),
        ..Container::default()
    }
}

/// A container security context that Pod Security `restricted` admits (nothing a workspace
/// namespace refuses): for containers of outfit's own, which need no rights.
fn restricted() -> SecurityContext {
    SecurityContext {
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

/// The most workspaces that ran at once on a cluster, minute by minute through a window
/// (`placeholders.shareOfPeak`).
#[derive(Debug, Default)]
pub struct Peak {
    /// Each minute's most (minutes since the epoch), oldest first.
    minutes: VecDeque<(u64, usize)>,
}

impl Peak {
    /// Records `running` workspaces at `now` (seconds since the epoch), forgetting what is older
    /// than `window`.
    pub fn record(&mut self, now: u64, running: usize, window: Duration) {
        let minute = now / 60;
        match self.minutes.back_mut() {
            Some((last, most)) if *last == minute => *most = (*most).max(running),
            _ => self.minutes.push_back((minute, running)),
        }
        let oldest = minute.saturating_sub(window.as_secs().div_ceil(60));
        while self.minutes.front().is_some_and(|(m, _)| *m < oldest) {
            self.minutes.pop_front();
        }
    }

    /// The most recorded in the window.
    pub fn most(&self) -> usize {
        self.minutes.iter().map(|(_, most)| *most).max().unwrap_or(0)
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
    fn the_peak_is_the_most_at_once_within_the_window() {
        let hour = Duration::from_secs(3600);
        let mut peak = Peak::default();
        peak.record(0, 5, hour);
        peak.record(30, 9, hour);
        peak.record(59, 2, hour);
        peak.record(600, 4, hour);
        assert_eq!(peak.most(), 9);
        // An hour and a minute on, the first minute has left the window.
        peak.record(3660, 1, hour);
        assert_eq!(peak.most(), 4);
        peak.record(3600 * 3, 0, hour);
        assert_eq!(peak.most(), 0);
    }

    #[test]
    fn a_cluster_keeps_its_own_count_or_its_share_of_the_peak() {
        let config: Placeholders = serde_json::from_value(json!({
            "count": 2, "clusters": {"east": 5}, "shareOfPeak": 0.1
        }))
        .unwrap();
        assert_eq!(config.wanted("default", 0), 2);
        assert_eq!(config.wanted("east", 0), 5);
        assert_eq!(config.wanted("default", 41), 5, "a tenth of 41, rounded up");
        assert_eq!(config.wanted("east", 41), 5);
        assert!(config.any());
        assert!(!Placeholders::default().any());
        let share_only: Placeholders = serde_json::from_value(json!({"shareOfPeak": 0.5})).unwrap();
        assert!(share_only.any());
        assert_eq!(share_only.wanted("x", 3), 2);
        let bad: Placeholders = serde_json::from_value(json!({"shareOfPeak": 1.5})).unwrap();
        assert!(bad.check().unwrap_err().contains("shareOfPeak"));
        let long: Placeholders = serde_json::from_value(json!({"peakWindow": "1000h"})).unwrap();
        assert!(long.check().unwrap_err().contains("peakWindow"));
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
