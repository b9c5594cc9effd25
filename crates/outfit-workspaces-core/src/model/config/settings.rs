//! The configuration's keys as serde reads them: one field per key of deic-dk's `config.yaml`
//! and outfit's own, each with its default and the reader that checks its value. A scalar is
//! read as text whatever YAML made of it (`tokenByteLimit: 100` is the text `100`, as
//! `BACKEND_TOKENBYTELIMIT=100` is), so the file and the environment are checked alike; a list is
//! a YAML list in the file and JSON text in the environment.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::Duration,
};

use outfit_core::quantity::{self, QuantityError};
use regex::Regex;
use serde::{Deserialize, Deserializer, de::DeserializeOwned, de::Error};
use serde_json::Value;

use super::{
    cull_action::CullAction,
    exposure,
    oidc::{Oidc, OidcGiven},
    placeholders::Placeholders,
    pre_pull::PrePull,
    storage_strategy::StorageStrategy,
};
use crate::{cidr::Cidr, model::duration};

/// Every key the backend reads; a key not here is refused. The field order is the order the
/// "known keys" of an unknown-key error list them in.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub(super) struct Settings {
    #[serde(deserialize_with = "restart_policy")]
    pub(super) default_restart_policy: String,
    #[serde(deserialize_with = "positive_duration")]
    pub(super) timeout_create: Duration,
    #[serde(deserialize_with = "duration")]
    pub(super) timeout_delete: Duration,
    #[serde(deserialize_with = "non_empty")]
    pub(super) namespace: String,
    #[serde(deserialize_with = "anchored_regex")]
    pub(super) whitelist_manifest_regex: Regex,
    #[serde(deserialize_with = "size")]
    pub(super) token_byte_limit: usize,
    #[serde(deserialize_with = "text")]
    pub(super) nfs_storage_root: String,
    #[serde(deserialize_with = "ip_address")]
    pub(super) testing_host: IpAddr,
    #[serde(rename = "localRegistryURL", deserialize_with = "text")]
    pub(super) local_registry_url: String,
    #[serde(deserialize_with = "text")]
    pub(super) local_registry_secret: String,
    #[serde(deserialize_with = "text")]
    pub(super) ingress_domain: String,
    #[serde(deserialize_with = "text")]
    pub(super) ingress_wildcard_secret: String,
    #[serde(deserialize_with = "cidr")]
    pub(super) pod_subnet_cidr: Cidr,
    #[serde(deserialize_with = "list")]
    pub(super) hostname_list: Vec<HostnameEntry>,
    #[serde(deserialize_with = "socket_address")]
    pub(super) listen: SocketAddr,
    #[serde(deserialize_with = "optional_socket_address")]
    pub(super) admin_listen: Option<SocketAddr>,
    #[serde(deserialize_with = "cidr_list")]
    pub(super) allowed_source_cidrs: Vec<Cidr>,
    /// The token the file holds, read when the key is.
    #[serde(rename = "bearerTokenFile", deserialize_with = "token_file")]
    pub(super) bearer_token: Option<String>,
    #[serde(deserialize_with = "storage_strategy")]
    pub(super) storage_strategy: StorageStrategy,
    #[serde(deserialize_with = "text")]
    pub(super) storage_class_name: String,
    #[serde(deserialize_with = "access_modes")]
    pub(super) storage_access_modes: Vec<String>,
    #[serde(deserialize_with = "non_empty")]
    pub(super) storage_size: String,
    #[serde(deserialize_with = "text")]
    pub(super) snapshot_class_name: String,
    #[serde(deserialize_with = "size")]
    pub(super) snapshots_kept: usize,
    #[serde(deserialize_with = "positive_duration")]
    pub(super) snapshot_timeout: Duration,
    #[serde(deserialize_with = "optional_text")]
    pub(super) ingress_class_name: Option<String>,
    #[serde(deserialize_with = "duration")]
    pub(super) manifest_fetch_timeout: Duration,
    #[serde(deserialize_with = "size")]
    pub(super) manifest_max_bytes: usize,
    #[serde(deserialize_with = "size")]
    pub(super) max_body_bytes: usize,
    #[serde(deserialize_with = "size")]
    pub(super) max_creates_in_flight: usize,
    #[serde(deserialize_with = "duration")]
    pub(super) shutdown_grace: Duration,
    #[serde(deserialize_with = "size")]
    pub(super) max_connections: usize,
    #[serde(deserialize_with = "size")]
    pub(super) max_streams_per_user: usize,
    #[serde(deserialize_with = "optional_size")]
    pub(super) max_streams: Option<usize>,
    #[serde(deserialize_with = "optional_size")]
    pub(super) max_streams_per_source: Option<usize>,
    #[serde(deserialize_with = "size")]
    pub(super) requests_per_user_per_second: usize,
    #[serde(deserialize_with = "size")]
    pub(super) request_burst_per_user: usize,
    #[serde(deserialize_with = "duration")]
    pub(super) body_read_timeout: Duration,
    #[serde(deserialize_with = "origins")]
    pub(super) allowed_origins: Vec<String>,
    #[serde(deserialize_with = "text")]
    pub(super) tls_cert_file: String,
    #[serde(deserialize_with = "text")]
    pub(super) tls_key_file: String,
    #[serde(deserialize_with = "cidr_list")]
    pub(super) trusted_proxy_cidrs: Vec<Cidr>,
    #[serde(deserialize_with = "cidr_list")]
    pub(super) client_address_from_cidrs: Vec<Cidr>,
    #[serde(deserialize_with = "list")]
    pub(super) admin_groups: Vec<String>,
    #[serde(deserialize_with = "oidc")]
    pub(super) oidc: Option<Oidc>,
    #[serde(deserialize_with = "text")]
    pub(super) proxy_domain: String,
    #[serde(deserialize_with = "boolean")]
    pub(super) fold_user_case: bool,
    #[serde(deserialize_with = "boolean")]
    pub(super) host_users: bool,
    #[serde(deserialize_with = "boolean")]
    pub(super) image_placement: bool,
    #[serde(deserialize_with = "placeholders")]
    pub(super) placeholders: Placeholders,
    #[serde(deserialize_with = "pre_pull")]
    pub(super) pre_pull: PrePull,
    #[serde(deserialize_with = "list")]
    pub(super) catalogue: Vec<CatalogueEntry>,
    #[serde(deserialize_with = "optional_duration")]
    pub(super) max_lifetime: Option<Duration>,
    #[serde(deserialize_with = "optional_duration")]
    pub(super) idle_timeout: Option<Duration>,
    #[serde(deserialize_with = "positive_duration")]
    pub(super) activity_check_interval: Duration,
    #[serde(deserialize_with = "duration")]
    pub(super) storage_grace_period: Duration,
    #[serde(deserialize_with = "cull_action")]
    pub(super) cull_action: CullAction,
    #[serde(deserialize_with = "duration")]
    pub(super) stopped_retention: Duration,
    #[serde(deserialize_with = "workspace_count")]
    pub(super) max_workspaces_per_user: Option<usize>,
    #[serde(deserialize_with = "cpu_limit")]
    pub(super) max_cpu_per_user: Option<u64>,
    #[serde(deserialize_with = "memory_limit")]
    pub(super) max_memory_per_user: Option<u64>,
    #[serde(deserialize_with = "resource_limits")]
    pub(super) max_resources_per_user: BTreeMap<String, u64>,
    #[serde(deserialize_with = "workspace_count")]
    pub(super) max_stopped_workspaces_per_user: Option<usize>,
    #[serde(deserialize_with = "boolean")]
    pub(super) network_policy: bool,
    #[serde(deserialize_with = "namespaces")]
    pub(super) ingress_namespaces: Vec<String>,
    #[serde(deserialize_with = "non_empty")]
    pub(super) backend_namespace: String,
    #[serde(deserialize_with = "cidr_list")]
    pub(super) denied_egress_cidrs: Vec<Cidr>,
    #[serde(deserialize_with = "cidr_list")]
    pub(super) allowed_egress_cidrs: Vec<Cidr>,
    #[serde(deserialize_with = "cluster_name")]
    pub(super) default_cluster: String,
    #[serde(deserialize_with = "clusters")]
    pub(super) clusters: Vec<ClusterEntry>,
}

/// One `hostnameList` entry: the silo at `address` is called `hostname`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct HostnameEntry {
    /// The silo's host name, set as `HOME_SERVER_HOSTNAME`.
    pub hostname: String,
    /// The silo's address, as requests come from it.
    pub address: String,
}

/// One manifest of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueEntry {
    /// What the API and the page call it.
    pub name: String,
    /// Where the manifest is (it must match `whitelistManifestRegex`).
    pub url: String,
    /// A title for people; the name when unset.
    #[serde(default)]
    pub title: Option<String>,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Only members of these groups may launch it; everyone when empty.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The cluster it is launched on (a name of `clusters` or `defaultCluster`); the user's
    /// choice, else the default cluster, when unset.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Whether its images are pulled ahead when `prePull` is enabled (`false`: a rarely used or
    /// huge image is left to its launches).
    #[serde(default = "yes", rename = "prePull")]
    pub pre_pull: bool,
}

fn yes() -> bool {
    true
}

/// One cluster of `clusters`, beside the default one (in-cluster, or `KUBECONFIG`'s).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterEntry {
    /// What the API, the page and catalogue entries call it.
    pub name: String,
    /// The kubeconfig file that reaches it.
    pub kubeconfig: std::path::PathBuf,
    /// The kubeconfig's context; its current context when unset.
    #[serde(default)]
    pub context: Option<String>,
    /// The namespace of its workspaces; `namespace`'s when unset.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// deic-dk's `whitelistManifestRegex`.
const DEFAULT_WHITELIST: &str = r"https:\/\/raw[.]githubusercontent[.]com\/deic-dk\/pod_manifests";

/// RFC 1918, the RFC 6598 shared range, IPv4 link-local (holding the clouds' metadata service,
/// 169.254.169.254), IPv6 unique-local and link-local.
const DEFAULT_DENIED_EGRESS: &[&str] = &[
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "fc00::/7",
    "fe80::/10",
];

impl Default for Settings {
    /// deic-dk's defaults (§1.8 of the reference), and outfit's for its own keys.
    fn default() -> Self {
        let networks = |texts: &[&str]| -> Vec<Cidr> {
            texts
                .iter()
                .map(|t| t.parse().expect("a default network is valid"))
                .collect()
        };
        let any_address = |port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        Self {
            default_restart_policy: "Never".to_owned(),
            timeout_create: Duration::from_secs(90),
            timeout_delete: Duration::from_secs(90),
            namespace: "sciencedata-dev".to_owned(),
            whitelist_manifest_regex: anchored(DEFAULT_WHITELIST).expect("the default is a regex"),
            token_byte_limit: 4096,
            nfs_storage_root: "/tank/storage".to_owned(),
            testing_host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 20)),
            local_registry_url: String::new(),
            local_registry_secret: "docker-registry-auth".to_owned(),
            ingress_domain: String::new(),
            ingress_wildcard_secret: "user-pods-wildcard".to_owned(),
            pod_subnet_cidr: networks(&["10.128.0.0/15"])[0],
            hostname_list: Vec::new(),
            listen: any_address(8080),
            admin_listen: Some(any_address(8081)),
            allowed_source_cidrs: networks(&["127.0.0.0/8", "::1/128"]),
            bearer_token: None,
            storage_strategy: StorageStrategy::Nfs,
            storage_class_name: "nfs".to_owned(),
            storage_access_modes: Vec::new(),
            storage_size: "10Gi".to_owned(),
            snapshot_class_name: String::new(),
            snapshots_kept: 3,
            snapshot_timeout: Duration::from_secs(120),
            ingress_class_name: None,
            manifest_fetch_timeout: Duration::from_secs(10),
            manifest_max_bytes: 1 << 20,
            max_body_bytes: 64 << 10,
            max_creates_in_flight: 256,
            shutdown_grace: Duration::from_secs(15),
            max_connections: 1024,
            max_streams_per_user: 16,
            max_streams: None,
            max_streams_per_source: None,
            requests_per_user_per_second: 25,
            request_burst_per_user: 100,
            body_read_timeout: Duration::from_secs(30),
            allowed_origins: Vec::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            trusted_proxy_cidrs: Vec::new(),
            client_address_from_cidrs: Vec::new(),
            admin_groups: Vec::new(),
            oidc: None,
            proxy_domain: String::new(),
            fold_user_case: false,
            host_users: true,
            image_placement: true,
            placeholders: Placeholders::default(),
            pre_pull: PrePull::default(),
            catalogue: Vec::new(),
            max_lifetime: None,
            idle_timeout: None,
            activity_check_interval: Duration::from_secs(60),
            storage_grace_period: Duration::from_secs(60),
            cull_action: CullAction::Stop,
            stopped_retention: Duration::ZERO,
            max_workspaces_per_user: None,
            max_cpu_per_user: None,
            max_memory_per_user: None,
            max_resources_per_user: BTreeMap::new(),
            max_stopped_workspaces_per_user: None,
            network_policy: true,
            ingress_namespaces: vec!["ingress-nginx".to_owned()],
            backend_namespace: "outfit-workspaces".to_owned(),
            denied_egress_cidrs: networks(DEFAULT_DENIED_EGRESS),
            allowed_egress_cidrs: Vec::new(),
            default_cluster: "default".to_owned(),
            clusters: Vec::new(),
        }
    }
}

/// A scalar as text: a string as it is, a number or a boolean as YAML wrote it, null as nothing.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok(String::new()),
        _ => Err(D::Error::custom("expected a string")),
    }
}

/// A scalar, trimmed, read by `parse`, whose error is the message.
fn parsed<'de, D: Deserializer<'de>, T>(
    d: D,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error> {
    parse(text(d)?.trim()).map_err(D::Error::custom)
}

fn optional_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Some(text(d)?).filter(|t| !t.is_empty()))
}

fn non_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    parsed(d, |t| match t {
        "" => Err("must not be empty".to_owned()),
        t => Ok(t.to_owned()),
    })
}

fn restart_policy<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    parsed(d, |t| match t {
        "" => Ok("Never".to_owned()),
        "Always" | "OnFailure" | "Never" => Ok(t.to_owned()),
        _ => Err(format!("expected Always, OnFailure or Never, got {t:?}")),
    })
}

fn cull_action<'de, D: Deserializer<'de>>(d: D) -> Result<CullAction, D::Error> {
    parsed(d, CullAction::parse)
}

fn storage_strategy<'de, D: Deserializer<'de>>(d: D) -> Result<StorageStrategy, D::Error> {
    parsed(d, StorageStrategy::parse)
}

/// A claim's access modes, each one Kubernetes knows.
fn access_modes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    const MODES: [&str; 4] = [
        "ReadWriteOnce",
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOncePod",
    ];
    let modes: Vec<String> = list(d)?;
    match modes.iter().find(|mode| !MODES.contains(&mode.as_str())) {
        Some(bad) => Err(D::Error::custom(format!(
            "{bad:?} is not an access mode (expected {})",
            MODES.join(", ")
        ))),
        None => Ok(modes),
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    parsed(d, |t| duration::parse(t).map_err(|e| e.to_string()))
}

fn positive_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    parsed(d, |t| match duration::parse(t) {
        Ok(d) if d.is_zero() => Err("must be above 0".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    })
}

/// Empty or `0`: never.
fn optional_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    parsed(d, |t| match t {
        "" | "0" => Ok(None),
        t => duration::parse(t).map(Some).map_err(|e| e.to_string()),
    })
}

fn size<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    parsed(d, |t| {
        t.parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("expected a positive whole number, got {t:?}"))
    })
}

/// Empty: derived from other keys (the field's doc says how).
fn optional_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    parsed(d, |t| match t {
        "" => Ok(None),
        t => t
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| format!("expected a positive whole number, or empty, got {t:?}")),
    })
}

fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    parsed(d, |t| match t {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false, got {t:?}")),
    })
}

/// Anchored: deic-dk's unanchored match passes any URL that merely contains the allowed prefix
/// (`https://evil.example/?https://raw.githubusercontent.com/...`).
fn anchored(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})")).map_err(|e| format!("not a regex: {e}"))
}

fn anchored_regex<'de, D: Deserializer<'de>>(d: D) -> Result<Regex, D::Error> {
    parsed(d, anchored)
}

fn ip_address<'de, D: Deserializer<'de>>(d: D) -> Result<IpAddr, D::Error> {
    parsed(d, |t| {
        t.parse()
            .map_err(|_| format!("expected an IP address, got {t:?}"))
    })
}

fn socket_address<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    parsed(d, |t| {
        t.parse()
            .map_err(|_| format!("expected HOST:PORT such as 0.0.0.0:8080, got {t:?}"))
    })
}

/// Empty turns the listener off.
fn optional_socket_address<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    parsed(d, |t| match t {
        "" => Ok(None),
        t => t
            .parse()
            .map(Some)
            .map_err(|_| format!("expected HOST:PORT or empty, got {t:?}")),
    })
}

fn cidr<'de, D: Deserializer<'de>>(d: D) -> Result<Cidr, D::Error> {
    parsed(d, str::parse)
}

/// The file's content, trimmed; none when the key is empty.
fn token_file<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    parsed(d, |path| {
        if path.is_empty() {
            return Ok(None);
        }
        let token = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
        match token.trim() {
            "" => Err(format!("{path} is empty")),
            token => Ok(Some(token.to_owned())),
        }
    })
}

/// `maxWorkspacesPerUser`: zero is no limit, as a limit of no workspaces would be no service.
fn workspace_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    parsed(d, |t| match t {
        "" => Ok(None),
        t => t
            .parse::<usize>()
            .map(|n| Some(n).filter(|n| *n > 0))
            .map_err(|_| format!("expected a whole number (0 for no limit), got {t:?}")),
    })
}

/// A per-user quantity limit; empty or zero is no limit.
fn quantity_limit<'de, D: Deserializer<'de>>(
    d: D,
    read: fn(&str) -> Result<u64, QuantityError>,
) -> Result<Option<u64>, D::Error> {
    parsed(d, |t| match t {
        "" => Ok(None),
        t => read(t)
            .map(|n| Some(n).filter(|n| *n > 0))
            .map_err(|e| e.to_string()),
    })
}

/// `prePull`: a mapping in the file, JSON text in the environment.
fn pre_pull<'de, D: Deserializer<'de>>(d: D) -> Result<PrePull, D::Error> {
    let given: PrePull = list(d)?;
    given.check().map_err(D::Error::custom)
}

/// `oidc`: a mapping in the file, JSON text in the environment; empty, none.
fn oidc<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Oidc>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(text) if text.trim().is_empty() => Ok(None),
        Value::String(text) => {
            let given: OidcGiven = serde_json::from_str(&text)
                .map_err(|e| D::Error::custom(format!("expected a JSON object: {e}")))?;
            given.check().map(Some).map_err(D::Error::custom)
        }
        other => {
            let given = OidcGiven::deserialize(other).map_err(D::Error::custom)?;
            given.check().map(Some).map_err(D::Error::custom)
        }
    }
}

/// `placeholders`: a mapping in the file, JSON text in the environment.
fn placeholders<'de, D: Deserializer<'de>>(d: D) -> Result<Placeholders, D::Error> {
    let given: Placeholders = list(d)?;
    given.check().map_err(D::Error::custom)
}

fn cpu_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    quantity_limit(d, quantity::cpu_millis)
}

fn memory_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    quantity_limit(d, quantity::bytes)
}

/// `maxResourcesPerUser`: resource name → quantity (a YAML mapping in the file, JSON text in the
/// environment). CPU and memory have their own keys; a quantity must be a whole amount.
fn resource_limits<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u64>, D::Error> {
    let given: BTreeMap<String, Value> = match Value::deserialize(d)? {
        Value::String(text) if text.trim().is_empty() => BTreeMap::new(),
        Value::String(text) => serde_json::from_str(&text)
            .map_err(|e| D::Error::custom(format!("expected a JSON object of resource to quantity: {e}")))?,
        other => BTreeMap::deserialize(other)
            .map_err(|e| D::Error::custom(format!("expected a mapping of resource name to quantity: {e}")))?,
    };
    let mut limits = BTreeMap::new();
    for (name, value) in given {
        if matches!(name.as_str(), "cpu" | "memory") {
            return Err(D::Error::custom(format!(
                "{name}: set it with maxCpuPerUser or maxMemoryPerUser"
            )));
        }
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(D::Error::custom(format!("{name:?} is not a resource name")));
        }
        let text = match &value {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            other => {
                return Err(D::Error::custom(format!(
                    "{name}: expected a quantity, got {other}"
                )));
            }
        };
        match quantity::bytes(&text) {
            // Zero is no limit, as for the other keys.
            Ok(0) => {}
            Ok(amount) => {
                limits.insert(name, amount);
            }
            Err(e) => {
                return Err(D::Error::custom(format!(
                    "{name}: {text:?} is not a quantity: {e}"
                )));
            }
        }
    }
    Ok(limits)
}

/// A list: a YAML list in the file, JSON text in the environment (or wherever it is a string).
fn list<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<T, D::Error> {
    match Value::deserialize(d)? {
        Value::String(text) => {
            serde_json::from_str(&text).map_err(|e| D::Error::custom(format!("expected a JSON list: {e}")))
        }
        other => T::deserialize(other).map_err(D::Error::custom),
    }
}

/// A list of networks such as `["10.0.0.0/8"]`.
fn cidr_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Cidr>, D::Error> {
    let texts: Vec<String> = list(d)?;
    texts
        .iter()
        .map(|t| t.trim().parse().map_err(D::Error::custom))
        .collect()
}

fn namespaces<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let names: Vec<String> = list(d)?;
    if names.iter().any(|n| n.trim().is_empty()) {
        return Err(D::Error::custom("a namespace must not be empty"));
    }
    Ok(names)
}

fn origins<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    exposure::parse_origins(&list::<D, Vec<String>>(d)?).map_err(D::Error::custom)
}

/// A cluster's name: a DNS label (lowercase letters, digits and `-`, at most 63), as it appears
/// in answers and labels.
pub(super) fn check_cluster_name(name: &str) -> Result<(), String> {
    let label = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if label {
        Ok(())
    } else {
        Err(format!(
            "cluster name {name:?} must be 1 to 63 lowercase letters, digits or '-', not starting or ending with '-'"
        ))
    }
}

fn cluster_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    parsed(d, |t| check_cluster_name(t).map(|()| t.to_owned()))
}

/// `clusters`: each entry read on its own, so that a bad one is named by its index.
fn clusters<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ClusterEntry>, D::Error> {
    let entries: Vec<Value> = list(d)?;
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let at = |reason: String| D::Error::custom(format!("entry {index}: {reason}"));
            let entry = ClusterEntry::deserialize(entry).map_err(|e| at(e.to_string()))?;
            check_cluster_name(&entry.name).map_err(at)?;
            if entry.kubeconfig.as_os_str().is_empty() {
                return Err(at("kubeconfig must not be empty".to_owned()));
            }
            if entry.namespace.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(at("namespace must not be empty when set".to_owned()));
            }
            Ok(entry)
        })
        .collect()
}
