//! What isolation sets, apart from the NetworkPolicy itself: the pod spec defaults every workspace
//! gets unless its manifest says otherwise, and the NetworkPolicy's settings as configured. Pure
//! data that needs nothing of the crate but [`Cidr`], so [`config`](crate::model::config) (which
//! reads the settings) and [`manifest`](crate::workspace::manifest) (which applies the defaults)
//! import it from below, while the NetworkPolicy, which needs both of them, sits above.

use k8s_openapi::api::core::v1::PodSpec;

use crate::cidr::Cidr;

/// How workspace pods are fenced in (`networkPolicy` and the keys after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkIsolation {
    /// Whether each pod gets a NetworkPolicy. The caller checks it;
    /// [`network_policy`](fn@crate::workspace::network_policy::network_policy) does not.
    pub enabled: bool,
    /// The namespaces whose pods may reach a workspace: the ingress controller's.
    pub ingress_namespaces: Vec<String>,
    /// The namespace the backend runs in; its pods may reach a workspace.
    pub backend_namespace: String,
    /// Where a workspace may not connect: the cluster's and the site's internal ranges.
    pub denied_egress_cidrs: Vec<Cidr>,
    /// Where it may connect even inside the denied ranges.
    pub allowed_egress_cidrs: Vec<Cidr>,
}

/// Turns off what a pod gets by default and a workspace has no use for, where the manifest does
/// not say otherwise: the environment variables of every Service in the namespace (a map of the
/// other users' workspaces) and the ServiceAccount token (an API credential in a pod the user
/// controls); and, unless `host_users` (the config's `hostUsers`), the host's users: the pod
/// gets a user namespace of its own, so that root in it is nobody on the node. An explicit value
/// in the manifest wins.
pub fn apply_pod_defaults(spec: &mut PodSpec, host_users: bool) {
    spec.enable_service_links.get_or_insert(false);
    spec.automount_service_account_token.get_or_insert(false);
    if !host_users {
        spec.host_users.get_or_insert(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_defaults_turn_off_service_links_and_the_token_unless_set() {
        let mut spec = PodSpec::default();
        apply_pod_defaults(&mut spec, true);
        assert_eq!(spec.enable_service_links, Some(false));
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.host_users, None, "the host's users unless asked");
        let mut spec = PodSpec {
            enable_service_links: Some(true),
            automount_service_account_token: Some(true),
            ..PodSpec::default()
        };
        apply_pod_defaults(&mut spec, false);
        assert_eq!(spec.enable_service_links, Some(true));
        assert_eq!(spec.automount_service_account_token, Some(true));
        assert_eq!(spec.host_users, Some(false), "a user namespace of its own");
        // A manifest that needs the host's users (a device, say) says so and keeps them.
        let mut spec = PodSpec {
            host_users: Some(true),
            ..PodSpec::default()
        };
        apply_pod_defaults(&mut spec, false);
        assert_eq!(spec.host_users, Some(true));
    }
}
