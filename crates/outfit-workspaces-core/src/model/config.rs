//! The backend's configuration: deic-dk's `config.yaml` keys and defaults (§1.8 of the
//! reference), each overridable by `BACKEND_<KEY UPPERCASED>`, plus outfit's own keys.
//!
//! [`settings`] declares the keys (serde derive, unknown keys refused, defaults and a reader for
//! each), [`layers`] lays the environment over the file in one pass, and [`Config::load`] adds
//! the checks across keys. Unlike viper, an environment override applies whether or not the file
//! names the key, and a key the backend does not know is an error, so a typo never silently falls
//! back to a default.

use std::{collections::BTreeMap, net::IpAddr, net::SocketAddr, path::Path, path::PathBuf, time::Duration};

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use self::{
    layers::{LayerError, Layers},
    settings::Settings,
};
use crate::{
    cidr::Cidr,
    model::{isolation::NetworkIsolation, limits::Limits},
};

/// A configuration that could not be read, naming the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not a YAML mapping.
    #[error("{path}: {reason}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key has a value the backend can't use.
    #[error("{origin}: key {key}: {reason}")]
    Key {
        /// Where the value came from: the file, or the environment variable.
        origin: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The file names a key the backend does not know.
    #[error("{path}: unknown key {key:?} (known keys: {known})")]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The keys the backend reads.
        known: String,
    },
}

/// Everything `outfit workspaces` is configured with.
#[derive(Debug, Clone)]
pub struct Config {
    /// `restartPolicy` for manifests that set none.
    pub default_restart_policy: String,
    /// How long a create may take from request to ready pod with its Services and tokens.
    pub timeout_create: Duration,
    /// How long a delete may take until the pod is gone.
    pub timeout_delete: Duration,
    /// The namespace of every workspace pod and its objects.
    pub namespace: String,
    /// Manifest URLs must match this, from their first character.
    pub whitelist_manifest_regex: Regex,
    /// The most bytes copied for one token.
    pub token_byte_limit: usize,
    /// NFS path prefix of user storage: `<root>/<user id>`.
    pub nfs_storage_root: String,
    /// The silo address used for requests from loopback.
    pub testing_host: IpAddr,
    /// Replaces `LOCALREGISTRY` in images.
    pub local_registry_url: String,
    /// The image pull secret for rewritten images (none when empty).
    pub local_registry_secret: String,
    /// Hosts are `<pod>.<ingressDomain>`.
    pub ingress_domain: String,
    /// The wildcard TLS secret of the Ingresses.
    pub ingress_wildcard_secret: String,
    /// `get_podip_owner` answers only for addresses here.
    pub pod_subnet_cidr: Cidr,
    /// Silo address → host name.
    pub hostname_list: Vec<HostnameEntry>,

    /// outfit: the API's address.
    pub listen: SocketAddr,
    /// outfit: the admin port (`/livez`, `/readyz`, `/metrics`), if any.
    pub admin_listen: Option<SocketAddr>,
    /// outfit: callers must come from one of these networks.
    pub allowed_source_cidrs: Vec<Cidr>,
    /// outfit: if set, callers must send `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// outfit: where a workspace's home lives ([`StorageStrategy`]).
    pub storage_strategy: StorageStrategy,
    /// outfit: the storage class of user PVs and PVCs; for `per-user`, empty leaves it to the
    /// cluster's default class.
    pub storage_class_name: String,
    /// outfit: the access modes of `per-user` claims (ReadWriteOnce when the config names none;
    /// `nfs` claims are ReadWriteMany, as deic-dk's).
    pub storage_access_modes: Vec<String>,
    /// outfit: the capacity of user PVs and PVCs.
    pub storage_size: String,
    /// outfit: the VolumeSnapshotClass homes are snapshotted with (on every stop and before a
    /// claim is removed); `None` takes no snapshots.
    pub snapshot_class_name: Option<String>,
    /// outfit: how many ready snapshots are kept per claim.
    pub snapshots_kept: usize,
    /// outfit: how long a snapshot may take to turn ready before it is reported as timed out
    /// (a claim waiting to be removed is then kept).
    pub snapshot_timeout: Duration,
    /// outfit: the `ingressClassName` of pod Ingresses (deic-dk sets none).
    pub ingress_class_name: Option<String>,
    /// outfit: how long a manifest fetch may take.
    pub manifest_fetch_timeout: Duration,
    /// outfit: the largest manifest accepted.
    pub manifest_max_bytes: usize,
    /// outfit: the largest request body accepted.
    pub max_body_bytes: usize,
    /// outfit: creates under way at once (both APIs); past it a create is answered 429, so that
    /// memory stays bounded when the API server falls behind.
    pub max_creates_in_flight: usize,
    /// outfit: how long in-flight requests get to finish once shutdown starts.
    pub shutdown_grace: Duration,
    /// outfit: the exposure of the API port to hostile callers: `maxConnections` (open at once;
    /// the oldest idle one makes room), `maxStreamsPerUser` (progress streams one user holds
    /// open at once), `maxStreams` (progress streams open at once over all users; half of
    /// `maxConnections` by default), `maxStreamsPerSource` (progress streams one client address
    /// holds open at once; half of `maxStreams` by default), `requestsPerUserPerSecond` and `requestBurstPerUser` (each
    /// user's pace on the native API), `bodyReadTimeout` (a request body must arrive within it)
    /// and `allowedOrigins` (other sites whose pages may change workspaces).
    pub exposure: Exposure,
    /// outfit: serve the API over HTTPS with this certificate and key (PEM files, reloaded when
    /// they change); plain HTTP, as deic-dk, when unset.
    pub tls: Option<TlsFiles>,
    /// outfit: the native API believes `X-Forwarded-User` only from these networks (an
    /// authenticating proxy's); none by default.
    pub trusted_proxy_cidrs: Vec<Cidr>,
    /// outfit: proxies (an ingress) whose `X-Forwarded-For` is believed for the client's address,
    /// which `maxStreamsPerSource` counts by, and for nothing else (who the caller is stays
    /// `trusted_proxy_cidrs`' to say); none by default. Behind an ingress every peer is the
    /// ingress, so without it every caller is one source.
    pub client_address_from_cidrs: Vec<Cidr>,
    /// outfit: members of these groups may list and delete every user's workspaces.
    pub admin_groups: Vec<String>,
    /// outfit: sign-in with the site's OpenID provider (issue 42); none by default.
    pub oidc: Option<Oidc>,
    /// outfit: the domain under which the backend serves each workspace itself, signed-in users
    /// only (issue 42): `<workspace>.<proxyDomain>` and `<port>-<workspace>.<proxyDomain>`
    /// (lower-case, no leading dot); none by default. Needs `oidc`.
    pub proxy_domain: Option<String>,
    /// outfit: a native caller's user name with upper-case letters owns as its lower-case form
    /// (for an identity provider whose names are one user whatever their case); off, such a
    /// name is refused, since Kubernetes user names are case-sensitive and owner ids are not.
    pub fold_user_case: bool,
    /// outfit: `false` runs every workspace in a user namespace of its own (`hostUsers: false`,
    /// Kubernetes 1.33+), root in the container without root on the node, unless its manifest
    /// sets `hostUsers` itself. `true` (the default) leaves the pod as its manifest says: a user
    /// namespace needs Linux 6.3+, a runtime that supports it, and idmapped mounts on every
    /// volume's filesystem, which NFS, the default home, does not offer.
    pub host_users: bool,
    /// outfit: a launch prefers the nodes that already hold its images (issue 35).
    pub image_placement: bool,
    /// outfit: pods that hold capacity ahead of launches (issue 35).
    pub placeholders: Placeholders,
    /// outfit: the catalogue's images pulled ahead onto the nodes (issue 35).
    pub pre_pull: PrePull,
    /// outfit: the manifests the native API and the page offer.
    pub catalogue: Vec<CatalogueEntry>,
    /// outfit: workspaces are culled this long after they started, unless their manifest says
    /// otherwise; never when unset.
    pub max_lifetime: Option<Duration>,
    /// outfit: workspaces are culled after this long without activity, unless their manifest
    /// says otherwise; never when unset.
    pub idle_timeout: Option<Duration>,
    /// outfit: how often a workspace's activity endpoint is asked.
    pub activity_check_interval: Duration,
    /// outfit: how long a user's storage outlives their last workspace before the sweep removes
    /// it, so a user who launches again at once keeps the claim instead of waiting for its
    /// delete to finish.
    pub storage_grace_period: Duration,
    /// outfit: what culling does to a workspace that has a Workspace resource (`stop`: its pod
    /// goes, its record and storage stay; `delete`: it goes); a manifest's `outfit.dev/cull-action`
    /// annotation says otherwise for its own. deic-dk's pods are deleted either way.
    pub cull_action: CullAction,
    /// outfit: how long a stopped workspace's record is kept before it is deleted (with an
    /// Event), its storage then going as after any delete; `None` (`0`): forever.
    pub stopped_retention: Option<Duration>,
    /// outfit: what each user may have at once: `maxWorkspacesPerUser` (`0`: no limit),
    /// `maxCpuPerUser` and `maxMemoryPerUser` (Kubernetes quantities of the pods' requests;
    /// empty or `0`: no limit), `maxResourcesPerUser` (any other resource, such as
    /// `nvidia.com/gpu`), all counting started workspaces; `maxStoppedWorkspacesPerUser`.
    pub limits: Limits,
    /// outfit: each workspace's NetworkPolicy: `networkPolicy` (make one), `ingressNamespaces`
    /// (whose pods may reach a workspace), `backendNamespace` (where the backend runs, also let
    /// in), `deniedEgressCidrs` (where a workspace may not connect; the private, shared and
    /// link-local ranges, cloud metadata among them, by default) and `allowedEgressCidrs`
    /// (exceptions to those; the user's silo always is one).
    pub network: NetworkIsolation,
    /// outfit: what the default cluster (in-cluster, or `KUBECONFIG`'s) is called.
    pub default_cluster: String,
    /// outfit: the clusters beside the default one, each with its kubeconfig, context and
    /// namespace; none by default.
    pub clusters: Vec<ClusterEntry>,
}

/// The API's serving certificate and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// deic-dk keys that outfit accepts and ignores: its pod cache lives in the cluster here, and the
/// test keys belong to deic-dk's own test suite.
const IGNORED_KEYS: &[&str] = &["podCacheDir", "testSshKey", "testUser"];

/// The mapping of keys to values in the file at `path`, without the keys outfit ignores (each
/// warned about in `warnings`).
fn read_file(path: &Path, warnings: &mut Vec<String>) -> Result<Map<String, Value>, ConfigError> {
    let syntax = |reason: String| ConfigError::Syntax {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    let Value::Object(mut file) = serde_saphyr::from_str(&text).map_err(|e| syntax(e.to_string()))? else {
        return Err(syntax("expected a mapping of keys to values".to_owned()));
    };
    for key in IGNORED_KEYS {
        if file.remove(*key).is_some() {
            warnings.push(format!("{}: key {key} is ignored by outfit", path.display()));
        }
    }
    Ok(file)
}

impl Config {
    /// Reads `path` (or only the defaults when `None`), then the `BACKEND_*` variables of `env`.
    /// Returns the configuration and warnings about keys that are accepted but ignored.
    pub fn load(
        path: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let file = match path {
            Some(path) => read_file(path, &mut warnings)?,
            None => Map::new(),
        };
        let file_origin = path.map(|p| p.display().to_string()).unwrap_or_default();
        let mut origins = BTreeMap::new();
        let layers = Layers {
            file,
            file_origin: &file_origin,
            env,
            origins: &mut origins,
        };
        let settings = Settings::deserialize(layers).map_err(|error| {
            let path = path.map(Path::to_owned).unwrap_or_default();
            match error {
                LayerError::Key { origin, key, reason } => ConfigError::Key { origin, key, reason },
                LayerError::Unknown { key, known } => ConfigError::UnknownKey {
                    path,
                    key,
                    known: known.join(", "),
                },
                LayerError::Other(reason) => ConfigError::Syntax { path, reason },
            }
        })?;
        let origin = |key: &str| origins.get(key).cloned().unwrap_or_else(|| "default".to_owned());
        Self::from_settings(settings, origin).map(|config| (config, warnings))
    }

    /// The configuration of checked `settings`, after the checks across keys; `origin` names
    /// where a key's value came from.
    fn from_settings(s: Settings, origin: impl Fn(&str) -> String) -> Result<Self, ConfigError> {
        let error = |key: &str, reason: String| ConfigError::Key {
            origin: origin(key),
            key: key.to_owned(),
            reason,
        };
        let tls = match (s.tls_cert_file.is_empty(), s.tls_key_file.is_empty()) {
            (true, true) => None,
            (false, false) => Some(TlsFiles {
                cert: s.tls_cert_file.into(),
                key: s.tls_key_file.into(),
            }),
            // The missing key is named, from where its partner was set.
            (cert_missing, _) => {
                let (missing, set) = if cert_missing {
                    ("tlsCertFile", "tlsKeyFile")
                } else {
                    ("tlsKeyFile", "tlsCertFile")
                };
                return Err(ConfigError::Key {
                    origin: origin(set),
                    key: missing.to_owned(),
                    reason: "tlsCertFile and tlsKeyFile go together: set both or neither".to_owned(),
                });
            }
        };
        let proxy_domain = match s.proxy_domain.trim().trim_start_matches('.').to_ascii_lowercase() {
            domain if domain.is_empty() => None,
            _ if s.oidc.is_none() => {
                let reason = "the workspaces' hosts let in signed-in users only: set oidc too".to_owned();
                return Err(error("proxyDomain", reason));
            }
            domain => {
                let valid = domain.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
                if !valid || !domain.contains('.') {
                    return Err(error(
                        "proxyDomain",
                        format!("{domain:?} is not a DNS domain such as ws.example.org"),
                    ));
                }
                if let Some(label) = s
                    .oidc
                    .as_ref()
                    .map(Oidc::host)
                    .and_then(|h| h.strip_suffix(&format!(".{domain}")).map(str::to_owned))
                    && !label.contains('.')
                {
                    // The backend's session would be on a workspace's host.
                    let reason = format!(
                        "the backend's host (oidc.redirectUrl's) would be the host of a workspace {label:?}: choose a domain of the workspaces' own"
                    );
                    return Err(error("proxyDomain", reason));
                }
                Some(domain)
            }
        };
        // Half the port by default: many identities (any token the cluster accepts is one) could
        // otherwise fill every connection with streams, each within its own maxStreamsPerUser.
        let max_streams = s.max_streams.unwrap_or(s.max_connections / 2);
        if max_streams >= s.max_connections {
            let reason = format!(
                "{max_streams} is not below maxConnections ({}): requests need connections that streams cannot take",
                s.max_connections
            );
            return Err(error("maxStreams", reason));
        }
        let max_streams_per_source =
            exposure::streams_per_source(s.max_streams_per_source, s.max_streams_per_user, max_streams)
                .map_err(|reason| error("maxStreamsPerSource", reason))?;
        let mut clusters = std::collections::BTreeSet::from([s.default_cluster.as_str()]);
        for (index, entry) in s.clusters.iter().enumerate() {
            if !clusters.insert(entry.name.as_str()) {
                let reason = format!(
                    "entry {index}: the name {:?} is taken (defaultCluster or an earlier entry)",
                    entry.name
                );
                return Err(error("clusters", reason));
            }
        }
        if let Some(cluster) = s
            .placeholders
            .clusters
            .keys()
            .find(|c| !clusters.contains(c.as_str()))
        {
            let known: Vec<&str> = clusters.iter().copied().collect();
            let reason = format!("clusters: {cluster:?} is not one of {}", known.join(", "));
            return Err(error("placeholders", reason));
        }
        let mut names = std::collections::BTreeSet::new();
        for entry in &s.catalogue {
            if let Some(cluster) = entry.cluster.as_deref().filter(|c| !clusters.contains(c)) {
                let known: Vec<&str> = clusters.iter().copied().collect();
                let reason = format!(
                    "entry {:?}: cluster {cluster:?} is not one of {}",
                    entry.name,
                    known.join(", ")
                );
                return Err(error("catalogue", reason));
            }
            if !names.insert(entry.name.as_str()) {
                return Err(error(
                    "catalogue",
                    format!("two entries are named {:?}", entry.name),
                ));
            }
            if !s.whitelist_manifest_regex.is_match(&entry.url) {
                let reason = format!(
                    "entry {:?}: url {} does not match whitelistManifestRegex",
                    entry.name, entry.url
                );
                return Err(error("catalogue", reason));
            }
        }
        // Other users' workspaces are never reachable, whatever deniedEgressCidrs says.
        let mut denied_egress_cidrs = s.denied_egress_cidrs;
        if !denied_egress_cidrs.contains(&s.pod_subnet_cidr) {
            denied_egress_cidrs.push(s.pod_subnet_cidr);
        }
        Ok(Self {
            default_restart_policy: s.default_restart_policy,
            timeout_create: s.timeout_create,
            timeout_delete: s.timeout_delete,
            namespace: s.namespace,
            whitelist_manifest_regex: s.whitelist_manifest_regex,
            token_byte_limit: s.token_byte_limit,
            nfs_storage_root: s.nfs_storage_root,
            testing_host: s.testing_host,
            local_registry_url: s.local_registry_url,
            local_registry_secret: s.local_registry_secret,
            ingress_domain: s.ingress_domain,
            ingress_wildcard_secret: s.ingress_wildcard_secret,
            pod_subnet_cidr: s.pod_subnet_cidr,
            hostname_list: s.hostname_list,
            listen: s.listen,
            admin_listen: s.admin_listen,
            allowed_source_cidrs: s.allowed_source_cidrs,
            bearer_token: s.bearer_token,
            storage_strategy: s.storage_strategy,
            storage_class_name: s.storage_class_name,
            storage_access_modes: if s.storage_access_modes.is_empty() {
                s.storage_strategy
                    .default_access_modes()
                    .iter()
                    .map(|mode| (*mode).to_owned())
                    .collect()
            } else {
                s.storage_access_modes
            },
            storage_size: s.storage_size,
            snapshot_class_name: (!s.snapshot_class_name.is_empty()).then_some(s.snapshot_class_name),
            snapshots_kept: s.snapshots_kept,
            snapshot_timeout: s.snapshot_timeout,
            ingress_class_name: s.ingress_class_name,
            manifest_fetch_timeout: s.manifest_fetch_timeout,
            manifest_max_bytes: s.manifest_max_bytes,
            max_body_bytes: s.max_body_bytes,
            max_creates_in_flight: s.max_creates_in_flight,
            shutdown_grace: s.shutdown_grace,
            exposure: Exposure {
                max_connections: s.max_connections,
                max_streams_per_user: s.max_streams_per_user,
                max_streams,
                max_streams_per_source,
                requests_per_user_per_second: s.requests_per_user_per_second,
                request_burst_per_user: s.request_burst_per_user,
                body_read_timeout: s.body_read_timeout,
                allowed_origins: s.allowed_origins,
            },
            tls,
            trusted_proxy_cidrs: s.trusted_proxy_cidrs,
            client_address_from_cidrs: s.client_address_from_cidrs,
            admin_groups: s.admin_groups,
            oidc: s.oidc,
            proxy_domain,
            fold_user_case: s.fold_user_case,
            host_users: s.host_users,
            image_placement: s.image_placement,
            placeholders: s.placeholders,
            pre_pull: s.pre_pull,
            catalogue: s.catalogue,
            max_lifetime: s.max_lifetime,
            idle_timeout: s.idle_timeout,
            activity_check_interval: s.activity_check_interval,
            storage_grace_period: s.storage_grace_period,
            cull_action: s.cull_action,
            stopped_retention: (!s.stopped_retention.is_zero()).then_some(s.stopped_retention),
            limits: Limits {
                max_workspaces: s.max_workspaces_per_user,
                max_cpu_millis: s.max_cpu_per_user,
                max_memory_bytes: s.max_memory_per_user,
                max_resources: s.max_resources_per_user,
                max_stopped: s.max_stopped_workspaces_per_user,
            },
            network: NetworkIsolation {
                enabled: s.network_policy,
                ingress_namespaces: s.ingress_namespaces,
                backend_namespace: s.backend_namespace,
                denied_egress_cidrs,
                allowed_egress_cidrs: s.allowed_egress_cidrs,
            },
            default_cluster: s.default_cluster,
            clusters: s.clusters,
        })
    }

    /// Every cluster's name, the default one's first.
    pub fn cluster_names(&self) -> Vec<&str> {
        std::iter::once(self.default_cluster.as_str())
            .chain(self.clusters.iter().map(|c| c.name.as_str()))
            .collect()
    }

    /// The host name of the silo at `silo_ip` or at its data-network address, as deic-dk looks
    /// it up.
    pub fn hostname_of(&self, silo_ip: &str) -> Option<&str> {
        let data_net = data_network_address(silo_ip);
        self.hostname_list
            .iter()
            .find(|e| e.address == silo_ip)
            .or_else(|| self.hostname_list.iter().find(|e| e.address == data_net))
            .map(|e| e.hostname.as_str())
    }
}

/// deic-dk's "data network" address of a silo: the first `10.0.` replaced by `10.2.`.
pub fn data_network_address(silo_ip: &str) -> String {
    silo_ip.replacen("10.0.", "10.2.", 1)
}

mod cull_action;
mod exposure;
mod layers;
mod oidc;
mod placeholders;
mod pre_pull;
mod settings;
mod storage_strategy;
#[cfg(test)]
mod tests;

pub use self::{
    cull_action::CullAction,
    exposure::Exposure,
    oidc::{MIN_COOKIE_KEY_BYTES, Oidc},
    placeholders::Placeholders,
    pre_pull::PrePull,
    settings::{CatalogueEntry, ClusterEntry, HostnameEntry},
    storage_strategy::StorageStrategy,
};
