//! The requests that never wait on outfit, whatever its policies target (issue 33): the cluster's
//! own traffic. With an all-kinds policy and `failurePolicy: Fail`, an outfit outage once refused
//! every kubelet's heartbeat Lease, so nodes went NotReady and their pods were evicted because a
//! mutation service was down. The webhook configuration therefore leaves out, in the API server,
//! before outfit is ever called:
//!
//! - by namespace (`namespaceSelector`, on the immutable `kubernetes.io/metadata.name` label):
//!   the control plane's (`kube-system`), the nodes' heartbeats (`kube-node-lease`), the
//!   cluster's public information (`kube-public`), outfit's own (so that it can always recover),
//!   and any an admin names; and any namespace labelled `outfit.dev/ignore: "true"`;
//! - by request (`matchConditions`, GA in Kubernetes 1.30): whatever a node asks
//!   (`system:node:*`: its Node, Leases, Events, mirror pods), the cluster's bookkeeping
//!   ([`BOOKKEEPING`]: Events, Leases, token and access reviews, certificate requests), and any
//!   object other than a pod labelled `outfit.dev/ignore: "true"`.
//!
//! A pod cannot opt itself out: pod mutations carry a site's rules (a sandboxed runtime, a
//! device's path, the defaults a PodPolicy gives a group of users), and whoever creates a pod
//! would otherwise skip them with a label. Its namespace's label, which only someone allowed to
//! change namespaces can set, opts out all of it.
//!
//! The registration controller (`serve --from-cluster`) writes only `rules` and `caBundle`, so
//! these stay as installed.

use serde_json::{Value, json};

/// The namespaces of the cluster's own workings, never sent to outfit.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-node-lease", "kube-public"];

/// The label (value `"true"`) that opts a namespace, or an object other than a pod, out.
pub const IGNORE_LABEL: &str = "outfit.dev/ignore";

/// The cluster's bookkeeping, `group/resource` (the core group is empty): never sent to outfit,
/// since no policy has reason to change it and the cluster stalls when it waits.
pub const BOOKKEEPING: [&str; 10] = [
    "/events",
    "events.k8s.io/events",
    "coordination.k8s.io/leases",
    "authentication.k8s.io/tokenreviews",
    "authentication.k8s.io/selfsubjectreviews",
    "authorization.k8s.io/subjectaccessreviews",
    "authorization.k8s.io/selfsubjectaccessreviews",
    "authorization.k8s.io/localsubjectaccessreviews",
    "authorization.k8s.io/selfsubjectrulesreviews",
    "certificates.k8s.io/certificatesigningrequests",
];

/// The webhook's `namespaceSelector`: every namespace but the system ones, `own` (outfit's),
/// `excluded`, and those labelled to opt out.
pub fn namespace_selector(own: &str, excluded: &[String]) -> Value {
    let mut names: Vec<&str> = SYSTEM_NAMESPACES.to_vec();
    for name in std::iter::once(own).chain(excluded.iter().map(String::as_str)) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    json!({"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": names},
        {"key": IGNORE_LABEL, "operator": "NotIn", "values": ["true"]},
    ]})
}

/// The webhook's `matchConditions`: a request is sent only when each holds.
pub fn match_conditions() -> Value {
    let bookkeeping = BOOKKEEPING
        .iter()
        .map(|resource| format!("'{resource}'"))
        .collect::<Vec<_>>()
        .join(", ");
    json!([
        {"name": "not-a-node", "expression": "!request.userInfo.username.startsWith('system:node:')"},
        {"name": "not-bookkeeping",
         "expression": format!("!(request.resource.group + '/' + request.resource.resource in [{bookkeeping}])")},
        {"name": "not-opted-out",
         "expression": format!(
             "(request.resource.group == '' && request.resource.resource == 'pods') || object == null || \
              !has(object.metadata.labels) || !('{IGNORE_LABEL}' in object.metadata.labels) || \
              object.metadata.labels['{IGNORE_LABEL}'] != 'true'")},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_namespaces_outfit_s_own_and_the_named_ones_are_left_out_once_each() {
        let selector = namespace_selector("outfit-system", &["legacy".to_owned(), "kube-system".to_owned()]);
        assert_eq!(
            selector["matchExpressions"][0]["values"],
            json!([
                "kube-system",
                "kube-node-lease",
                "kube-public",
                "outfit-system",
                "legacy"
            ])
        );
        assert_eq!(
            selector["matchExpressions"][1],
            json!({"key": "outfit.dev/ignore", "operator": "NotIn", "values": ["true"]})
        );
    }

    #[test]
    fn the_conditions_name_every_bookkeeping_resource_and_let_no_pod_opt_out() {
        let conditions = match_conditions();
        let names: Vec<_> = conditions
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["not-a-node", "not-bookkeeping", "not-opted-out"]);
        let bookkeeping = conditions[1]["expression"].as_str().unwrap();
        for resource in BOOKKEEPING {
            assert!(bookkeeping.contains(&format!("'{resource}'")), "{resource}");
        }
        let opted_out = conditions[2]["expression"].as_str().unwrap();
        assert!(
            opted_out.starts_with("(request.resource.group == '' && request.resource.resource == 'pods') ||")
        );
    }
}
