//! Install choices that put the cluster at risk (issue 33), refused unless the installer accepts
//! the risk by name: `outfit manifests` refuses them as a flag error (`--accept-risk NAME`
//! accepts one), the Helm chart with the same words (`acceptRisks: [NAME]`).

use crate::exemptions::SYSTEM_NAMESPACES;

/// A risk an installer may accept by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Risk {
    /// Fewer than 2 webhook replicas with `failurePolicy: Fail`: while the one replica is down
    /// (a node drain, a crash, a rollout), every pod create in the selected namespaces is refused.
    SingleReplica,
    /// The workspace pods in outfit's own namespace or a system namespace: the webhook never
    /// mutates pods there, so no policy applies to the workspaces, and the backend's rights
    /// there reach outfit's CA key or the control plane's pods.
    WorkspacesInSystemNamespace,
    /// A container without a memory limit (chart only: `outfit manifests` always sets one): a
    /// flood of requests or workspaces grows it until the node runs out of memory.
    NoMemoryLimit,
    /// deic-dk's API without a token (deic-dk's own mode): any caller in `allowedSourceCidrs`
    /// may launch or delete any user's workspaces.
    CompatApiWithoutToken,
}

impl Risk {
    /// Every risk, in the order the help lists them.
    pub const ALL: [Risk; 4] = [
        Risk::SingleReplica,
        Risk::WorkspacesInSystemNamespace,
        Risk::NoMemoryLimit,
        Risk::CompatApiWithoutToken,
    ];

    /// Its name, as `--accept-risk` and the chart's `acceptRisks` take it.
    pub fn name(self) -> &'static str {
        match self {
            Risk::SingleReplica => "single-replica",
            Risk::WorkspacesInSystemNamespace => "workspaces-in-system-namespace",
            Risk::NoMemoryLimit => "no-memory-limit",
            Risk::CompatApiWithoutToken => "compat-api-without-token",
        }
    }

    /// The risk named `name`.
    pub fn parse(name: &str) -> Result<Risk, String> {
        Risk::ALL
            .into_iter()
            .find(|risk| risk.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Risk::ALL.iter().map(|risk| risk.name()).collect();
                format!("no such risk; the risks are {}", names.join(", "))
            })
    }
}

/// An install choice refused: what was chosen, what it risks, what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{chosen}: {consequence}; {instead}, or accept the risk with --accept-risk {}", .risk.name())]
pub struct Refused {
    /// The risk, by which it is accepted.
    pub risk: Risk,
    /// The choice, in the flags' words.
    pub chosen: String,
    /// What it risks.
    pub consequence: &'static str,
    /// What to do instead.
    pub instead: &'static str,
}

/// The webhook's replicas and failure policy.
pub fn check_webhook(replicas: u32, fails_closed: bool, accepted: &[Risk]) -> Result<(), Refused> {
    if replicas < 2 && fails_closed && !accepted.contains(&Risk::SingleReplica) {
        return Err(Refused {
            risk: Risk::SingleReplica,
            chosen: format!("--replicas {replicas} with --failure-policy fail"),
            consequence: "while that replica is down (a node drain, a crash, a rollout), every pod create in the selected namespaces is refused",
            instead: "run 2 replicas or more (the default), or --failure-policy ignore",
        });
    }
    Ok(())
}

/// The workspace pods' namespace, beside the backend's own (`own`, outfit's).
pub fn check_workspace_namespace(namespace: &str, own: &str, accepted: &[Risk]) -> Result<(), Refused> {
    let consequence = if namespace == own {
        "the webhook never mutates pods in outfit's own namespace, so no policy would apply to the workspaces, and it holds outfit's CA key"
    } else if SYSTEM_NAMESPACES.contains(&namespace) {
        "the webhook never mutates pods in a system namespace, so no policy would apply to the workspaces, and the backend's rights there would reach the cluster's own pods"
    } else {
        return Ok(());
    };
    if accepted.contains(&Risk::WorkspacesInSystemNamespace) {
        return Ok(());
    }
    Err(Refused {
        risk: Risk::WorkspacesInSystemNamespace,
        chosen: format!("--workspaces-namespace {namespace}"),
        consequence,
        instead: "give the workspaces a namespace of their own",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_replica_failing_closed_is_refused_unless_accepted() {
        let refused = check_webhook(1, true, &[]).unwrap_err();
        assert_eq!(refused.risk, Risk::SingleReplica);
        assert!(
            refused
                .to_string()
                .starts_with("--replicas 1 with --failure-policy fail: while that replica is down"),
            "{refused}"
        );
        assert!(
            refused
                .to_string()
                .ends_with("or accept the risk with --accept-risk single-replica")
        );
        assert_eq!(check_webhook(1, true, &[Risk::SingleReplica]), Ok(()));
        assert_eq!(
            check_webhook(0, false, &[]),
            Ok(()),
            "ignore: an outage admits pods"
        );
        assert_eq!(check_webhook(2, true, &[]), Ok(()));
    }

    #[test]
    fn workspaces_in_outfit_s_or_a_system_namespace_are_refused_unless_accepted() {
        for namespace in ["outfit-system", "kube-system", "kube-node-lease", "kube-public"] {
            let refused = check_workspace_namespace(namespace, "outfit-system", &[]).unwrap_err();
            assert_eq!(refused.risk, Risk::WorkspacesInSystemNamespace, "{namespace}");
            assert!(
                refused
                    .to_string()
                    .contains(&format!("--workspaces-namespace {namespace}: "))
            );
            let accepted = [Risk::WorkspacesInSystemNamespace];
            assert_eq!(
                check_workspace_namespace(namespace, "outfit-system", &accepted),
                Ok(())
            );
        }
        assert_eq!(
            check_workspace_namespace("sciencedata", "outfit-system", &[]),
            Ok(())
        );
    }

    #[test]
    fn every_risk_parses_from_its_name_and_nothing_else_does() {
        for risk in Risk::ALL {
            assert_eq!(Risk::parse(risk.name()), Ok(risk));
        }
        let error = Risk::parse("all").unwrap_err();
        assert!(
            error.contains("single-replica, workspaces-in-system-namespace, no-memory-limit"),
            "{error}"
        );
    }
}
