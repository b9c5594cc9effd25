//! Where the workspace proxy sends a request (issue 42), pure: the workspace and port a host
//! names (`<workspace>.<proxyDomain>` for its main port, `<port>-<workspace>.<proxyDomain>` for
//! another), and the pod's address for it. The main port is the one the pod's
//! `sciencedata.dk/ingress-port` names, else its first container port; another port must be one
//! a container declares, so a host can't reach a port the workspace does not serve on purpose.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

use super::{pod_needs::ingress_port, progress::phase::is_ready};

/// What a host asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoute {
    /// The workspace (its pod's name).
    pub workspace: String,
    /// The port asked for; the main one when none.
    pub port: Option<u16>,
}

/// The route `host` (a `Host` header, perhaps with `:port`) names under `domain`, if it is one
/// of the workspaces' hosts.
pub fn route_of(host: &str, domain: &str) -> Option<HostRoute> {
    let host = host.rsplit_once(':').map_or(host, |(name, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            name
        } else {
            host
        }
    });
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let label = host.strip_suffix(domain)?.strip_suffix('.')?;
    if label.is_empty() || label.contains('.') {
        return None;
    }
    let (port, workspace) = match label.split_once('-') {
        Some((port, rest)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(port.parse().ok().filter(|p| *p > 0)?), rest)
        }
        _ => (None, label),
    };
    Some(HostRoute {
        workspace: workspace.to_owned(),
        port,
    })
}

/// Why a workspace's pod can't take the request now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unroutable {
    /// The pod is not ready (starting, stopping or stopped).
    #[error("the workspace is not running")]
    NotRunning,
    /// The pod serves on no port.
    #[error("the workspace serves on no port")]
    NoPort,
    /// The port asked for is not one the workspace declares.
    #[error("the workspace does not serve on port {0}")]
    UndeclaredPort(u16),
}

/// The address of `pod` for `port` (its main one when `None`).
pub fn upstream(pod: &Pod, port: Option<u16>) -> Result<(IpAddr, u16), Unroutable> {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse().ok())
        .filter(|_| is_ready(pod))
        .ok_or(Unroutable::NotRunning)?;
    let declared: Vec<u16> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .collect();
    let port = match port {
        Some(port) if declared.contains(&port) => port,
        Some(port) => return Err(Unroutable::UndeclaredPort(port)),
        None => match ingress_port(pod)
            .ok()
            .flatten()
            .and_then(|p| u16::try_from(p).ok())
        {
            Some(port) => port,
            None => *declared.first().ok_or(Unroutable::NoPort)?,
        },
    };
    Ok((ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_names_a_workspace_and_perhaps_a_port() {
        let route = |host| route_of(host, "ws.example.org");
        assert_eq!(
            route("web-alice.ws.example.org"),
            Some(HostRoute {
                workspace: "web-alice".to_owned(),
                port: None
            })
        );
        assert_eq!(
            route("8080-web-alice.WS.example.org:443"),
            Some(HostRoute {
                workspace: "web-alice".to_owned(),
                port: Some(8080)
            })
        );
        for other in [
            "ws.example.org",
            "a.b.ws.example.org",
            "web-alice.example.org",
            "xws.example.org",
            "0-web.ws.example.org",
            "99999-web.ws.example.org",
        ] {
            assert_eq!(route(other), None, "{other}");
        }
    }

    fn pod(annotation: Option<&str>, ports: &[i32], ip: Option<&str>, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-alice", "annotations": annotation.map(|p| serde_json::json!({"sciencedata.dk/ingress-port": p}))},
            "spec": {"containers": [{"name": "c", "ports": ports.iter().map(|p| serde_json::json!({"containerPort": p})).collect::<Vec<_>>()}]},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    #[test]
    fn the_main_port_is_the_ingress_port_and_others_must_be_declared() {
        let ip: IpAddr = "10.244.0.7".parse().unwrap();
        let with_ingress = pod(Some("8888"), &[22, 8888], Some("10.244.0.7"), true);
        assert_eq!(upstream(&with_ingress, None), Ok((ip, 8888)));
        assert_eq!(upstream(&with_ingress, Some(22)), Ok((ip, 22)));
        assert_eq!(
            upstream(&with_ingress, Some(6443)),
            Err(Unroutable::UndeclaredPort(6443))
        );
        assert_eq!(
            upstream(&pod(None, &[80], Some("10.244.0.7"), true), None),
            Ok((ip, 80))
        );
        assert_eq!(
            upstream(&pod(None, &[], Some("10.244.0.7"), true), None),
            Err(Unroutable::NoPort)
        );
        assert_eq!(
            upstream(&pod(None, &[80], Some("10.244.0.7"), false), None),
            Err(Unroutable::NotRunning)
        );
        assert_eq!(
            upstream(&pod(None, &[80], None, true), None),
            Err(Unroutable::NotRunning)
        );
    }
}
