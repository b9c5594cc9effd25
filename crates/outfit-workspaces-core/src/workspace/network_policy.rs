//! The NetworkPolicy of each workspace pod: in from the ingress controller, the backend and (for
//! ssh) anywhere on port 22; out to DNS and the internet but not the internal ranges, save the
//! user's own silo. It reads the pod as [`manifest`](super::manifest) made it (its asks through
//! [`pod_needs`]) and names itself as [`objects`] names a pod's objects, so it sits above them;
//! what it is configured with is in [`model::isolation`](crate::model::isolation).

use std::{collections::BTreeMap, net::IpAddr};

use k8s_openapi::{
    api::{
        core::v1::Pod,
        networking::v1::{
            IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
            NetworkPolicyPort, NetworkPolicySpec,
        },
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, OwnerReference},
        util::intstr::IntOrString,
    },
};

use crate::{
    cidr::Cidr,
    model::{config::data_network_address, isolation::NetworkIsolation, keys, names},
    workspace::{objects, pod_needs},
};

/// The label every namespace carries with its own name (set by the API server since 1.21).
const LABEL_NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";
/// The label the backend's own pods carry (see [`install`]).
const LABEL_APP_NAME: &str = "app.kubernetes.io/name";
/// Where the cluster's DNS runs.
const DNS_NAMESPACE: &str = "kube-system";

/// The NetworkPolicy of `pod`: `<pod>-isolation`, owned by `owner` so that the garbage collector
/// removes it with the pod, selecting that pod alone.
///
/// In: from the ingress controller's namespaces, from the backend, and on port 22 from anywhere
/// when the pod has an ssh NodePort Service (a NodePort's traffic reaches the pod from outside
/// the cluster, from addresses no rule could name).
///
/// Out: DNS to kube-system; anywhere outside `denied_egress_cidrs`; and to
/// `allowed_egress_cidrs` and the pod's silo, which is usually on an internal range.
pub fn network_policy(pod: &Pod, owner: &OwnerReference, policy: &NetworkIsolation) -> NetworkPolicy {
    let pod_name = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(keys::LABEL_POD_NAME))
        .unwrap_or(&owner.name);
    NetworkPolicy {
        metadata: objects::per_pod_meta(names::network_policy(&owner.name), pod, owner),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(match_labels([(keys::LABEL_POD_NAME, pod_name.as_str())])),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(ingress_rules(pod, policy)),
            egress: Some(egress_rules(pod, policy)),
        }),
    }
}

fn ingress_rules(pod: &Pod, policy: &NetworkIsolation) -> Vec<NetworkPolicyIngressRule> {
    let controllers = policy
        .ingress_namespaces
        .iter()
        .map(|namespace| NetworkPolicyPeer {
            namespace_selector: Some(namespace_named(namespace)),
            ..NetworkPolicyPeer::default()
        });
    let backend = NetworkPolicyPeer {
        namespace_selector: Some(namespace_named(&policy.backend_namespace)),
        pod_selector: Some(match_labels([(LABEL_APP_NAME, keys::APP_NAME)])),
        ip_block: None,
    };
    let mut rules = vec![NetworkPolicyIngressRule {
        from: Some(controllers.chain([backend]).collect()),
        ports: None,
    }];
    if pod_needs::exposes_ssh(pod) {
        rules.push(NetworkPolicyIngressRule {
            // No `from`: any source.
            from: None,
            ports: Some(vec![port("TCP", 22)]),
        });
    }
    rules
}

fn egress_rules(pod: &Pod, policy: &NetworkIsolation) -> Vec<NetworkPolicyEgressRule> {
    let mut rules = vec![NetworkPolicyEgressRule {
        to: Some(vec![NetworkPolicyPeer {
            namespace_selector: Some(namespace_named(DNS_NAMESPACE)),
            ..NetworkPolicyPeer::default()
        }]),
        ports: Some(vec![port("UDP", 53), port("TCP", 53)]),
    }];
    // An ipBlock's `except` must lie inside its `cidr`, so each family gets a rule of its own.
    for (everything, ipv4) in [("0.0.0.0/0", true), ("::/0", false)] {
        let denied: Vec<Cidr> = policy
            .denied_egress_cidrs
            .iter()
            .filter(|c| c.is_ipv4() == ipv4)
            .map(Cidr::network)
            .collect();
        // A denied /0 leaves nothing of the family to allow, and is not a strict subset of
        // itself, which the API server requires of an `except`.
        if denied.iter().any(|c| c.prefix() == 0) {
            continue;
        }
        rules.push(NetworkPolicyEgressRule {
            to: Some(vec![ip_block(everything.to_owned(), dedup(denied))]),
            ports: None,
        });
    }
    let allowed: Vec<Cidr> = policy
        .allowed_egress_cidrs
        .iter()
        .map(Cidr::network)
        .chain(silo_hosts(pod))
        .collect();
    let allowed = dedup(allowed);
    if !allowed.is_empty() {
        rules.push(NetworkPolicyEgressRule {
            to: Some(
                allowed
                    .into_iter()
                    .map(|cidr| ip_block(cidr, Vec::new()))
                    .collect(),
            ),
            ports: None,
        });
    }
    rules
}

/// The user's silo as the pod reaches it: the address the create came from, and its
/// data-network address, which the pod is given as `HOME_SERVER_IP`.
fn silo_hosts(pod: &Pod) -> Vec<Cidr> {
    let Some(silo_ip) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ANNOTATION_SILO_IP))
    else {
        return Vec::new();
    };
    [silo_ip.clone(), data_network_address(silo_ip)]
        .iter()
        .filter_map(|ip| ip.trim().parse::<IpAddr>().ok())
        .map(Cidr::host)
        .collect()
}

/// The texts of `cidrs`, each once, in order.
fn dedup(cidrs: Vec<Cidr>) -> Vec<String> {
    let mut texts: Vec<String> = Vec::with_capacity(cidrs.len());
    for text in cidrs.iter().map(Cidr::to_string) {
        if !texts.contains(&text) {
            texts.push(text);
        }
    }
    texts
}

fn ip_block(cidr: String, except: Vec<String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr,
            except: (!except.is_empty()).then_some(except),
        }),
        ..NetworkPolicyPeer::default()
    }
}

fn port(protocol: &str, number: i32) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(protocol.to_owned()),
        port: Some(IntOrString::Int(number)),
        end_port: None,
    }
}

fn namespace_named(namespace: &str) -> LabelSelector {
    match_labels([(LABEL_NAMESPACE_NAME, namespace)])
}

fn match_labels<const N: usize>(labels: [(&str, &str); N]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        match_expressions: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    use super::*;

    fn cidrs(texts: &[&str]) -> Vec<Cidr> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    fn isolation() -> NetworkIsolation {
        NetworkIsolation {
            enabled: true,
            ingress_namespaces: vec!["ingress-nginx".to_owned()],
            backend_namespace: "outfit-system".to_owned(),
            denied_egress_cidrs: cidrs(&["10.0.0.0/8", "169.254.0.0/16", "fc00::/7"]),
            allowed_egress_cidrs: Vec::new(),
        }
    }

    fn pod(ssh: bool) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("jupyter-alice-dtu-dk".to_owned());
        pod.metadata.namespace = Some("ws".to_owned());
        pod.metadata.uid = Some("uid-1".to_owned());
        pod.metadata.labels = Some(BTreeMap::from([
            (keys::LABEL_POD_NAME.to_owned(), "jupyter-alice-dtu-dk".to_owned()),
            (keys::LABEL_USER.to_owned(), "alice".to_owned()),
        ]));
        pod.metadata.annotations = Some(BTreeMap::from([(
            keys::ANNOTATION_SILO_IP.to_owned(),
            "10.0.0.11".to_owned(),
        )]));
        pod.spec = Some(PodSpec {
            containers: vec![Container {
                name: "main".to_owned(),
                ports: ssh.then(|| {
                    vec![ContainerPort {
                        container_port: 22,
                        ..ContainerPort::default()
                    }]
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        });
        pod
    }

    fn policy_for(pod: &Pod, isolation: &NetworkIsolation) -> NetworkPolicy {
        network_policy(pod, &objects::owned_by(pod).unwrap(), isolation)
    }

    /// Every ipBlock of the egress rules, as (cidr, except).
    fn blocks(policy: &NetworkPolicy) -> Vec<(String, Vec<String>)> {
        policy
            .spec
            .as_ref()
            .unwrap()
            .egress
            .iter()
            .flatten()
            .flat_map(|rule| rule.to.iter().flatten())
            .filter_map(|peer| peer.ip_block.as_ref())
            .map(|b| (b.cidr.clone(), b.except.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn a_plain_pod_is_reached_only_by_the_ingress_controller_and_the_backend() {
        let policy = policy_for(&pod(false), &isolation());
        assert_eq!(
            policy.metadata.name.as_deref(),
            Some("jupyter-alice-dtu-dk-isolation")
        );
        assert_eq!(policy.metadata.namespace.as_deref(), Some("ws"));
        let labels = policy.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[keys::LABEL_CREATED_FOR_POD], "jupyter-alice-dtu-dk");
        assert_eq!(labels[keys::LABEL_MANAGED_BY], keys::MANAGED_BY);
        let spec = policy.spec.as_ref().unwrap();
        assert_eq!(
            spec.pod_selector,
            Some(match_labels([(keys::LABEL_POD_NAME, "jupyter-alice-dtu-dk")]))
        );
        assert_eq!(
            spec.policy_types.as_deref(),
            Some(&["Ingress".to_owned(), "Egress".to_owned()][..])
        );
        let ingress = spec.ingress.as_ref().unwrap();
        assert_eq!(ingress.len(), 1);
        assert!(ingress[0].ports.is_none());
        let from = ingress[0].from.as_ref().unwrap();
        assert_eq!(from.len(), 2);
        assert_eq!(from[0].namespace_selector, Some(namespace_named("ingress-nginx")));
        assert!(from[0].pod_selector.is_none());
        assert_eq!(from[1].namespace_selector, Some(namespace_named("outfit-system")));
        assert_eq!(
            from[1].pod_selector,
            Some(match_labels([("app.kubernetes.io/name", "outfit-workspaces")]))
        );
        let egress = spec.egress.as_ref().unwrap();
        assert_eq!(
            egress[0].to.as_ref().unwrap()[0].namespace_selector,
            Some(namespace_named("kube-system"))
        );
        assert_eq!(egress[0].ports, Some(vec![port("UDP", 53), port("TCP", 53)]));
    }

    #[test]
    fn an_ssh_pod_also_takes_port_22_from_anywhere() {
        let policy = policy_for(&pod(true), &isolation());
        let ingress = policy.spec.unwrap().ingress.unwrap();
        assert_eq!(ingress.len(), 2);
        assert!(ingress[1].from.is_none());
        assert_eq!(ingress[1].ports, Some(vec![port("TCP", 22)]));
    }

    #[test]
    fn denied_ranges_are_split_by_family_inside_their_own_everything() {
        let mut isolation = isolation();
        isolation.denied_egress_cidrs = cidrs(&[
            "10.0.0.0/8",
            "fc00::/7",
            "192.168.1.7/16",
            "fe80::/10",
            "10.0.0.0/8",
        ]);
        let blocks = blocks(&policy_for(&pod(false), &isolation));
        assert_eq!(
            blocks[0],
            (
                "0.0.0.0/0".to_owned(),
                vec!["10.0.0.0/8".to_owned(), "192.168.0.0/16".to_owned()]
            )
        );
        assert_eq!(
            blocks[1],
            (
                "::/0".to_owned(),
                vec!["fc00::/7".to_owned(), "fe80::/10".to_owned()]
            )
        );
    }

    #[test]
    fn a_family_with_nothing_denied_is_open_and_one_denied_whole_is_left_out() {
        let mut isolation = isolation();
        isolation.denied_egress_cidrs = cidrs(&["10.0.0.0/8", "::/0"]);
        let found = blocks(&policy_for(&pod(false), &isolation));
        assert_eq!(found[0], ("0.0.0.0/0".to_owned(), vec!["10.0.0.0/8".to_owned()]));
        assert!(found.iter().all(|(cidr, _)| cidr != "::/0"), "{found:?}");
        isolation.denied_egress_cidrs = Vec::new();
        let found = blocks(&policy_for(&pod(false), &isolation));
        assert_eq!(found[0], ("0.0.0.0/0".to_owned(), vec![]));
        assert_eq!(found[1], ("::/0".to_owned(), vec![]));
    }

    #[test]
    fn the_silo_and_allowed_ranges_are_let_through_the_denied_ranges() {
        let mut isolation = isolation();
        isolation.allowed_egress_cidrs = cidrs(&["10.5.0.0/16", "fd00::1/64"]);
        let found = blocks(&policy_for(&pod(false), &isolation));
        let allowed: Vec<&str> = found[2..].iter().map(|(cidr, _)| cidr.as_str()).collect();
        // The silo as the request came from it, and its data-network address (HOME_SERVER_IP).
        assert_eq!(
            allowed,
            ["10.5.0.0/16", "fd00::/64", "10.0.0.11/32", "10.2.0.11/32"]
        );
        assert!(found[2..].iter().all(|(_, except)| except.is_empty()));

        let mut ipv6_silo = pod(false);
        ipv6_silo.metadata.annotations = Some(BTreeMap::from([(
            keys::ANNOTATION_SILO_IP.to_owned(),
            "fd00::11".to_owned(),
        )]));
        let found = blocks(&policy_for(&ipv6_silo, &self::isolation()));
        assert_eq!(found[2].0, "fd00::11/128");
        assert_eq!(found.len(), 3);
    }

    #[test]
    fn no_silo_and_nothing_allowed_makes_no_allow_rule() {
        let mut pod = pod(false);
        pod.metadata.annotations = None;
        let egress = policy_for(&pod, &isolation()).spec.unwrap().egress.unwrap();
        assert_eq!(egress.len(), 3, "DNS, IPv4 and IPv6");
    }

    #[test]
    fn the_policy_is_owned_by_its_pod() {
        let pod = pod(false);
        let owner = objects::owned_by(&pod).unwrap();
        let policy = network_policy(&pod, &owner, &isolation());
        let owners = policy.metadata.owner_references.unwrap();
        assert_eq!(owners, vec![owner]);
        assert_eq!(owners[0].uid, "uid-1");
        assert_eq!(owners[0].kind, "Pod");
        assert_eq!(owners[0].controller, Some(true));
    }

    #[test]
    fn long_pod_names_give_fitting_policy_names() {
        let mut pod = pod(false);
        let long = "w".repeat(250);
        pod.metadata.name = Some(long.clone());
        let policy = policy_for(&pod, &isolation());
        let name = policy.metadata.name.unwrap();
        assert!(name.len() <= names::MAX_SUBDOMAIN, "{}", name.len());
        assert!(name.starts_with("www"));
        // Selects by the label, which the backend fits to a pod name already.
        assert_eq!(
            policy.spec.unwrap().pod_selector,
            Some(match_labels([(keys::LABEL_POD_NAME, "jupyter-alice-dtu-dk")]))
        );
    }
}
