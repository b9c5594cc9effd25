//! The names and ports of outfit's objects in a cluster, which the manifests and `outfit serve`'s
//! defaults share.

/// Name of outfit's objects (ServiceAccount, ClusterRole, Deployment, Service, webhook config).
pub const NAME: &str = "outfit";
/// Port of the webhook's HTTPS listener in the pod.
pub const WEBHOOK_PORT: u16 = 8443;
/// Port of the plain-HTTP admin listener (`/livez`, `/readyz`, `/metrics`).
pub const ADMIN_PORT: u16 = 9090;
/// Secret holding outfit's serving certificate (`tls.crt`, `tls.key`), and with
/// `Certificates::Managed` its CA (`ca.crt`, `ca.key`).
pub const TLS_SECRET: &str = "outfit-tls";
/// The Lease that elects the replica that writes the webhook configuration and rotates the
/// certificate; named after the configuration (`serve --webhook-configuration`), in outfit's
/// namespace.
pub const LEASE: &str = NAME;

/// The DNS names of outfit's Service in `namespace`, the serving certificate's names.
pub fn service_dns_names(namespace: &str) -> [String; 2] {
    [
        format!("{NAME}.{namespace}.svc"),
        format!("{NAME}.{namespace}.svc.cluster.local"),
    ]
}
