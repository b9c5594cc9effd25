//! The backend's configuration: deic-dk's `config.yaml` keys and defaults (§1.8 of the
//! reference), each overridable by `BACKEND_<KEY UPPERCASED>`, plus outfit's own keys.
//!
//! Unlike viper, an environment override applies whether or not the file names the key, and a key
//! the backend does not know is an error, so a typo never silently falls back to a default.

use std::{collections::BTreeMap, net::IpAddr, net::SocketAddr, path::PathBuf, time::Duration};

use regex::Regex;
use serde_json::Value;

use crate::{cidr::Cidr, duration};

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
    /// outfit: serve the API over HTTPS with this certificate and key (PEM files, reloaded when
    /// they change); plain HTTP, as deic-dk, when unset.
    pub tls: Option<TlsFiles>,
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
    ("tlsCertFile", ""),
    ("tlsKeyFile", ""),
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
            allowed_source_cidrs: {
                let texts: Vec<String> = v.list("allowedSourceCidrs")?;
                let origin = &v.values["allowedSourceCidrs"].1;
                texts
                    .iter()
                    .map(|t| t.parse().map_err(|e| error(origin, "allowedSourceCidrs", e)))
                    .collect::<Result<_, _>>()?
            },
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
        };
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file(text: &str) -> tempfile_lite::File {
        tempfile_lite::File::new(text)
    }

    /// A file removed when dropped (the crate has no tempfile dependency).
    mod tempfile_lite {
        use super::Write;

        pub(super) struct File(pub(super) std::path::PathBuf);

        impl File {
            pub(super) fn new(text: &str) -> Self {
                static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let path =
                    std::env::temp_dir().join(format!("outfit-ws-config-{}-{n}.yaml", std::process::id()));
                std::fs::File::create(&path)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .unwrap();
                Self(path)
            }
        }

        impl Drop for File {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn defaults_are_deic_dks() {
        let (config, warnings) = Config::load(None, no_env).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(config.default_restart_policy, "Never");
        assert_eq!(config.timeout_create, Duration::from_secs(90));
        assert_eq!(config.timeout_delete, Duration::from_secs(90));
        assert_eq!(config.namespace, "sciencedata-dev");
        assert_eq!(config.token_byte_limit, 4096);
        assert_eq!(config.nfs_storage_root, "/tank/storage");
        assert_eq!(config.testing_host.to_string(), "10.0.0.20");
        assert_eq!(config.local_registry_secret, "docker-registry-auth");
        assert_eq!(config.ingress_wildcard_secret, "user-pods-wildcard");
        assert_eq!(config.pod_subnet_cidr.to_string(), "10.128.0.0/15");
        assert!(config.hostname_list.is_empty());
        assert_eq!(config.allowed_source_cidrs.len(), 2);
        assert!(config.bearer_token.is_none());
    }

    #[test]
    fn whitelist_is_anchored() {
        let (config, _) = Config::load(None, no_env).unwrap();
        let allowed = "https://raw.githubusercontent.com/deic-dk/pod_manifests/main/jupyter.yaml";
        assert!(config.whitelist_manifest_regex.is_match(allowed));
        // deic-dk's unanchored match lets this through.
        let smuggled = format!("https://evil.example/x?{allowed}");
        assert!(!config.whitelist_manifest_regex.is_match(&smuggled));
    }

    #[test]
    fn file_then_environment() {
        let f = file(
            "namespace: sciencedata\ntimeoutCreate: 2m\ntokenByteLimit: 100\npodCacheDir: /tmp/x\n\
             hostnameList:\n  - hostname: silo1.example\n    address: 10.0.0.11\n",
        );
        let env = |var: &str| match var {
            "BACKEND_NAMESPACE" => Some("from-env".to_owned()),
            "BACKEND_TIMEOUTDELETE" => Some("1h2m3s".to_owned()),
            _ => None,
        };
        let (config, warnings) = Config::load(Some(&f.0), env).unwrap();
        assert_eq!(config.namespace, "from-env");
        assert_eq!(config.timeout_create, Duration::from_secs(120));
        assert_eq!(config.timeout_delete, Duration::from_secs(3723));
        assert_eq!(config.token_byte_limit, 100);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("podCacheDir"));
        assert_eq!(config.hostname_of("10.0.0.11"), Some("silo1.example"));
        // Looked up by the data-network address too, as deic-dk does.
        let f = file("hostnameList:\n  - {hostname: silo2, address: 10.2.0.12}\n");
        let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
        assert_eq!(config.hostname_of("10.0.0.12"), Some("silo2"));
        assert_eq!(config.hostname_of("10.0.0.13"), None);
    }

    #[test]
    fn lists_from_the_environment_are_json() {
        let env = |var: &str| {
            (var == "BACKEND_HOSTNAMELIST")
                .then(|| r#"[{"hostname": "s", "address": "10.0.0.1"}]"#.to_owned())
        };
        let (config, _) = Config::load(None, env).unwrap();
        assert_eq!(config.hostname_list.len(), 1);
    }

    #[test]
    fn bad_values_name_the_key_and_where_they_came_from() {
        let cases: &[(&str, &str, &str)] = &[
            ("timeoutCreate: 90", "timeoutCreate", "unit"),
            (
                "defaultRestartPolicy: Sometimes",
                "defaultRestartPolicy",
                "Always",
            ),
            ("whitelistManifestRegex: '(['", "whitelistManifestRegex", "regex"),
            ("testingHost: silo", "testingHost", "IP"),
            ("podSubnetCidr: 10.0.0.0/40", "podSubnetCidr", "prefix"),
            ("tokenByteLimit: -1", "tokenByteLimit", "positive"),
            ("allowedSourceCidrs: [nope]", "allowedSourceCidrs", "IP network"),
            ("hostnameList: [{hostname: x}]", "hostnameList", "address"),
            ("tlsCertFile: /tls.crt", "tlsKeyFile", "both"),
        ];
        for (text, key, hint) in cases {
            let f = file(text);
            let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(hint), "{text}: {err}");
            assert!(err.contains(&f.0.display().to_string()), "{err}");
        }
        let env = |var: &str| (var == "BACKEND_TIMEOUTCREATE").then(|| "soon".to_owned());
        let err = Config::load(None, env).unwrap_err().to_string();
        assert!(
            err.contains("BACKEND_TIMEOUTCREATE") && err.contains("timeoutCreate"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let f = file("namespce: x\n");
        let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
        assert!(err.contains("unknown key \"namespce\""), "{err}");
    }
}
