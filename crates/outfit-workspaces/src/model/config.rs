//! The backend's configuration: deic-dk's `config.yaml` keys and defaults (§1.8 of the
//! reference), each overridable by `BACKEND_<KEY UPPERCASED>`, plus outfit's own keys.
//!
//! Unlike viper, an environment override applies whether or not the file names the key, and a key
//! the backend does not know is an error, so a typo never silently falls back to a default.

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

use regex::Regex;
use serde_json::Value;

use crate::{
    cidr::Cidr,
    model::{duration, isolation::NetworkIsolation, limits::Limits},
    quantity,
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
        key: &'static str,
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

/// One `hostnameList` entry: the silo at `address` is called `hostname`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct HostnameEntry {
    /// The silo's host name, set as `HOME_SERVER_HOSTNAME`.
    pub hostname: String,
    /// The silo's address, as requests come from it.
    pub address: String,
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
    /// outfit: the storage class of user PVs and PVCs.
    pub storage_class_name: String,
    /// outfit: the capacity of user PVs and PVCs.
    pub storage_size: String,
    /// outfit: the `ingressClassName` of pod Ingresses (deic-dk sets none).
    pub ingress_class_name: Option<String>,
    /// outfit: how long a manifest fetch may take.
    pub manifest_fetch_timeout: Duration,
    /// outfit: the largest manifest accepted.
    pub manifest_max_bytes: usize,
    /// outfit: the largest request body accepted.
    pub max_body_bytes: usize,
    /// outfit: how long in-flight requests get to finish once shutdown starts.
    pub shutdown_grace: Duration,
    /// outfit: the exposure of the API port to hostile callers: `maxConnections` (open at once;
    /// the oldest idle one makes room), `bodyReadTimeout` (a request body must arrive within it)
    /// and `allowedOrigins` (other sites whose pages may change workspaces).
    pub exposure: Exposure,
    /// outfit: serve the API over HTTPS with this certificate and key (PEM files, reloaded when
    /// they change); plain HTTP, as deic-dk, when unset.
    pub tls: Option<TlsFiles>,
    /// outfit: the native API believes `X-Forwarded-User` only from these networks (an
    /// authenticating proxy's); none by default.
    pub trusted_proxy_cidrs: Vec<Cidr>,
    /// outfit: members of these groups may list and delete every user's workspaces.
    pub admin_groups: Vec<String>,
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
    /// outfit: what each user may have at once: `maxWorkspacesPerUser` (`0`: no limit),
    /// `maxCpuPerUser` and `maxMemoryPerUser` (Kubernetes quantities of the pods' requests;
    /// empty or `0`: no limit).
    pub limits: Limits,
    /// outfit: each workspace's NetworkPolicy: `networkPolicy` (make one), `ingressNamespaces`
    /// (whose pods may reach a workspace), `backendNamespace` (where the backend runs, also let
    /// in), `deniedEgressCidrs` (where a workspace may not connect; the private, shared and
    /// link-local ranges, cloud metadata among them, by default) and `allowedEgressCidrs`
    /// (exceptions to those; the user's silo always is one).
    pub network: NetworkIsolation,
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
}

/// The API's serving certificate and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// Every key the backend reads, with its default as YAML would give it.
const KEYS: &[(&str, &str)] = &[
    ("defaultRestartPolicy", "Never"),
    ("timeoutCreate", "1m30s"),
    ("timeoutDelete", "1m30s"),
    ("namespace", "sciencedata-dev"),
    (
        "whitelistManifestRegex",
        r"https:\/\/raw[.]githubusercontent[.]com\/deic-dk\/pod_manifests",
    ),
    ("tokenByteLimit", "4096"),
    ("nfsStorageRoot", "/tank/storage"),
    ("testingHost", "10.0.0.20"),
    ("localRegistryURL", ""),
    ("localRegistrySecret", "docker-registry-auth"),
    ("ingressDomain", ""),
    ("ingressWildcardSecret", "user-pods-wildcard"),
    ("podSubnetCidr", "10.128.0.0/15"),
    ("hostnameList", "[]"),
    ("listen", "0.0.0.0:8080"),
    ("adminListen", "0.0.0.0:8081"),
    ("allowedSourceCidrs", r#"["127.0.0.0/8", "::1/128"]"#),
    ("bearerTokenFile", ""),
    ("storageClassName", "nfs"),
    ("storageSize", "10Gi"),
    ("ingressClassName", ""),
    ("manifestFetchTimeout", "10s"),
    ("manifestMaxBytes", "1048576"),
    ("maxBodyBytes", "65536"),
    ("shutdownGrace", "15s"),
    ("maxConnections", "1024"),
    ("bodyReadTimeout", "30s"),
    ("allowedOrigins", "[]"),
    ("tlsCertFile", ""),
    ("tlsKeyFile", ""),
    ("trustedProxyCidrs", "[]"),
    ("adminGroups", "[]"),
    ("catalogue", "[]"),
    ("maxLifetime", ""),
    ("idleTimeout", ""),
    ("activityCheckInterval", "1m"),
    ("maxWorkspacesPerUser", "0"),
    ("maxCpuPerUser", ""),
    ("maxMemoryPerUser", ""),
    ("networkPolicy", "true"),
    ("ingressNamespaces", r#"["ingress-nginx"]"#),
    ("backendNamespace", "outfit-workspaces"),
    (
        "deniedEgressCidrs",
        // RFC 1918, the RFC 6598 shared range, IPv4 link-local (holding the clouds' metadata
        // service, 169.254.169.254), IPv6 unique-local and link-local.
        r#"["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10"]"#,
    ),
    ("allowedEgressCidrs", "[]"),
];

/// deic-dk keys that outfit accepts and ignores: its pod cache lives in the cluster here, and the
/// test keys belong to deic-dk's own test suite.
const IGNORED_KEYS: &[&str] = &["podCacheDir", "testSshKey", "testUser"];

/// The values as read, before they are checked: from the file, then the environment.
struct Values {
    values: BTreeMap<&'static str, (Value, String)>,
}

impl Values {
    fn text(&self, key: &'static str) -> Result<String, ConfigError> {
        let (value, origin) = &self.values[key];
        match value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Null => Ok(String::new()),
            _ => Err(error(origin, key, "expected a string")),
        }
    }

    fn parse<T>(
        &self,
        key: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let text = self.text(key)?;
        parse(text.trim()).map_err(|reason| error(&self.values[key].1, key, reason))
    }

    fn list<T: serde::de::DeserializeOwned>(&self, key: &'static str) -> Result<T, ConfigError> {
        let (value, origin) = &self.values[key];
        // From the environment a list is JSON text.
        let value = match value {
            Value::String(text) => serde_json::from_str(text)
                .map_err(|e| error(origin, key, format!("expected a JSON list: {e}")))?,
            other => other.clone(),
        };
        serde_json::from_value(value).map_err(|e| error(origin, key, e.to_string()))
    }
}

fn error(origin: &str, key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        origin: origin.to_owned(),
        key,
        reason: reason.into(),
    }
}

/// `maxWorkspacesPerUser`, `maxCpuPerUser` and `maxMemoryPerUser`. Zero is no limit for each, as
/// a limit of no workspaces, or of no CPU at all, would be no service.
fn limits(v: &Values) -> Result<Limits, ConfigError> {
    let quantity = |key, parse: fn(&str) -> Result<u64, quantity::QuantityError>| {
        v.parse(key, |t| match t {
            "" => Ok(None),
            t => parse(t)
                .map(|n| Some(n).filter(|n| *n > 0))
                .map_err(|e| e.to_string()),
        })
    };
    Ok(Limits {
        max_workspaces: v.parse("maxWorkspacesPerUser", |t| match t {
            "" => Ok(None),
            t => t
                .parse::<usize>()
                .map(|n| Some(n).filter(|n| *n > 0))
                .map_err(|_| format!("expected a whole number (0 for no limit), got {t:?}")),
        })?,
        max_cpu_millis: quantity("maxCpuPerUser", quantity::cpu_millis)?,
        max_memory_bytes: quantity("maxMemoryPerUser", quantity::bytes)?,
    })
}

/// `networkPolicy` and the keys that shape the policy.
fn network(v: &Values) -> Result<NetworkIsolation, ConfigError> {
    let ingress_namespaces: Vec<String> = v.list("ingressNamespaces")?;
    if ingress_namespaces.iter().any(|n| n.trim().is_empty()) {
        let origin = &v.values["ingressNamespaces"].1;
        return Err(error(
            origin,
            "ingressNamespaces",
            "a namespace must not be empty",
        ));
    }
    Ok(NetworkIsolation {
        enabled: v.parse("networkPolicy", |t| match t {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(format!("expected true or false, got {t:?}")),
        })?,
        ingress_namespaces,
        backend_namespace: v.parse("backendNamespace", |t| {
            if t.is_empty() {
                Err("must not be empty".to_owned())
            } else {
                Ok(t.to_owned())
            }
        })?,
        denied_egress_cidrs: cidr_list(v, "deniedEgressCidrs")?,
        allowed_egress_cidrs: cidr_list(v, "allowedEgressCidrs")?,
    })
}

/// A list of networks such as `["10.0.0.0/8"]`.
fn cidr_list(v: &Values, key: &'static str) -> Result<Vec<Cidr>, ConfigError> {
    let texts: Vec<String> = v.list(key)?;
    let origin = &v.values[key].1;
    texts
        .iter()
        .map(|t| t.trim().parse().map_err(|e| error(origin, key, e)))
        .collect()
}

impl Config {
    /// Reads `path` (or only the defaults when `None`), then the `BACKEND_*` variables of `env`.
    /// Returns the configuration and warnings about keys that are accepted but ignored.
    pub fn load(
        path: Option<&std::path::Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let mut values = BTreeMap::new();
        for (key, default) in KEYS {
            let value = if default.starts_with('[') {
                serde_json::from_str(default).unwrap_or(Value::Null)
            } else {
                Value::String((*default).to_owned())
            };
            values.insert(*key, (value, "default".to_owned()));
        }
        if let Some(path) = path {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            let file: Value = if text.trim().is_empty() {
                Value::Object(Default::default())
            } else {
                serde_saphyr::from_str(&text).map_err(|e| ConfigError::Syntax {
                    path: path.to_owned(),
                    reason: e.to_string(),
                })?
            };
            let Value::Object(file) = file else {
                return Err(ConfigError::Syntax {
                    path: path.to_owned(),
                    reason: "expected a mapping of keys to values".to_owned(),
                });
            };
            for (key, value) in file {
                if IGNORED_KEYS.contains(&key.as_str()) {
                    warnings.push(format!("{}: key {key} is ignored by outfit", path.display()));
                    continue;
                }
                let Some((known, _)) = KEYS.iter().find(|(k, _)| *k == key) else {
                    return Err(ConfigError::UnknownKey {
                        path: path.to_owned(),
                        known: KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                        key,
                    });
                };
                values.insert(*known, (value, path.display().to_string()));
            }
        }
        for (key, _) in KEYS {
            let var = format!("BACKEND_{}", key.to_uppercase());
            if let Some(value) = env(&var) {
                values.insert(*key, (Value::String(value), var));
            }
        }
        Self::from_values(&Values { values }).map(|config| (config, warnings))
    }

    fn from_values(v: &Values) -> Result<Self, ConfigError> {
        let duration = |key| v.parse(key, |t| duration::parse(t).map_err(|e| e.to_string()));
        let size = |key| {
            v.parse(key, |t| {
                t.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("expected a positive whole number, got {t:?}"))
            })
        };
        let address = |key| {
            v.parse(key, |t| {
                t.parse::<SocketAddr>()
                    .map_err(|_| format!("expected HOST:PORT such as 0.0.0.0:8080, got {t:?}"))
            })
        };
        let optional_duration = |key| {
            v.parse(key, |t| match t {
                "" | "0" => Ok(None),
                t => duration::parse(t).map(Some).map_err(|e| e.to_string()),
            })
        };
        let config = Self {
            default_restart_policy: v.parse("defaultRestartPolicy", |t| match t {
                "" => Ok("Never".to_owned()),
                "Always" | "OnFailure" | "Never" => Ok(t.to_owned()),
                _ => Err(format!("expected Always, OnFailure or Never, got {t:?}")),
            })?,
            timeout_create: duration("timeoutCreate")?,
            timeout_delete: duration("timeoutDelete")?,
            namespace: v.parse("namespace", |t| {
                if t.is_empty() {
                    Err("must not be empty".to_owned())
                } else {
                    Ok(t.to_owned())
                }
            })?,
            whitelist_manifest_regex: v.parse("whitelistManifestRegex", |t| {
                // Anchored: deic-dk's unanchored match passes any URL that merely contains the
                // allowed prefix (https://evil.example/?https://raw.githubusercontent.com/...).
                Regex::new(&format!("^(?:{t})")).map_err(|e| format!("not a regex: {e}"))
            })?,
            token_byte_limit: size("tokenByteLimit")?,
            nfs_storage_root: v.text("nfsStorageRoot")?,
            testing_host: v.parse("testingHost", |t| {
                t.parse()
                    .map_err(|_| format!("expected an IP address, got {t:?}"))
            })?,
            local_registry_url: v.text("localRegistryURL")?,
            local_registry_secret: v.text("localRegistrySecret")?,
            ingress_domain: v.text("ingressDomain")?,
            ingress_wildcard_secret: v.text("ingressWildcardSecret")?,
            pod_subnet_cidr: v.parse("podSubnetCidr", str::parse)?,
            hostname_list: v.list("hostnameList")?,
            listen: address("listen")?,
            admin_listen: v.parse("adminListen", |t| match t {
                "" => Ok(None),
                t => t
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("expected HOST:PORT or empty, got {t:?}")),
            })?,
            allowed_source_cidrs: cidr_list(v, "allowedSourceCidrs")?,
            bearer_token: v.parse("bearerTokenFile", |t| {
                if t.is_empty() {
                    return Ok(None);
                }
                let token = std::fs::read_to_string(t)
                    .map_err(|e| format!("reading {t}: {e}"))?
                    .trim()
                    .to_owned();
                if token.is_empty() {
                    return Err(format!("{t} is empty"));
                }
                Ok(Some(token))
            })?,
            storage_class_name: v.text("storageClassName")?,
            storage_size: v.parse("storageSize", |t| {
                if t.is_empty() {
                    Err("must not be empty".to_owned())
                } else {
                    Ok(t.to_owned())
                }
            })?,
            ingress_class_name: Some(v.text("ingressClassName")?).filter(|t| !t.is_empty()),
            manifest_fetch_timeout: duration("manifestFetchTimeout")?,
            manifest_max_bytes: size("manifestMaxBytes")?,
            max_body_bytes: size("maxBodyBytes")?,
            shutdown_grace: duration("shutdownGrace")?,
            exposure: Exposure {
                max_connections: size("maxConnections")?,
                body_read_timeout: duration("bodyReadTimeout")?,
                allowed_origins: exposure::parse_origins(&v.list::<Vec<String>>("allowedOrigins")?)
                    .map_err(|reason| error(&v.values["allowedOrigins"].1, "allowedOrigins", reason))?,
            },
            tls: match (v.text("tlsCertFile")?, v.text("tlsKeyFile")?) {
                (cert, key) if cert.is_empty() && key.is_empty() => None,
                (cert, key) if !cert.is_empty() && !key.is_empty() => Some(TlsFiles {
                    cert: cert.into(),
                    key: key.into(),
                }),
                (cert, _) => {
                    let (key, origin) = if cert.is_empty() {
                        ("tlsCertFile", &v.values["tlsKeyFile"].1)
                    } else {
                        ("tlsKeyFile", &v.values["tlsCertFile"].1)
                    };
                    return Err(error(
                        origin,
                        key,
                        "tlsCertFile and tlsKeyFile go together: set both or neither",
                    ));
                }
            },
            trusted_proxy_cidrs: cidr_list(v, "trustedProxyCidrs")?,
            admin_groups: v.list("adminGroups")?,
            catalogue: v.list("catalogue")?,
            max_lifetime: optional_duration("maxLifetime")?,
            idle_timeout: optional_duration("idleTimeout")?,
            activity_check_interval: v.parse("activityCheckInterval", |t| match duration::parse(t) {
                Ok(d) if d.is_zero() => Err("must be above 0".to_owned()),
                Ok(d) => Ok(d),
                Err(e) => Err(e.to_string()),
            })?,
            limits: limits(v)?,
            network: network(v)?,
        };
        // Other users' workspaces are never reachable, whatever deniedEgressCidrs says.
        let mut config = config;
        if !config
            .network
            .denied_egress_cidrs
            .contains(&config.pod_subnet_cidr)
        {
            config.network.denied_egress_cidrs.push(config.pod_subnet_cidr);
        }
        let mut names = std::collections::BTreeSet::new();
        for entry in &config.catalogue {
            let origin = &v.values["catalogue"].1;
            if !names.insert(entry.name.as_str()) {
                return Err(error(
                    origin,
                    "catalogue",
                    format!("two entries are named {:?}", entry.name),
                ));
            }
            if !config.whitelist_manifest_regex.is_match(&entry.url) {
                return Err(error(
                    origin,
                    "catalogue",
                    format!(
                        "entry {:?}: url {} does not match whitelistManifestRegex",
                        entry.name, entry.url
                    ),
                ));
            }
        }
        if config.timeout_create.is_zero() {
            return Err(error(
                &v.values["timeoutCreate"].1,
                "timeoutCreate",
                "must be above 0",
            ));
        }
        Ok(config)
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

    /// The keys and defaults, for the docs and `--help`.
    pub fn keys() -> impl Iterator<Item = (&'static str, &'static str)> {
        KEYS.iter().copied()
    }
}

/// deic-dk's "data network" address of a silo: the first `10.0.` replaced by `10.2.`.
pub fn data_network_address(silo_ip: &str) -> String {
    silo_ip.replacen("10.0.", "10.2.", 1)
}

mod exposure;
#[cfg(test)]
mod tests;

pub use self::exposure::Exposure;
