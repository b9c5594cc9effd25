//! The serving certificate: loading, reloading without a restart, and a self-signed CA for local
//! use.
//!
//! rustls asks a [`ResolvesServerCert`] for the certificate on every handshake; ours answers from
//! an `ArcSwap`, so a handshake does no I/O. The PEM files are polled and compared by content
//! (Kubernetes Secret volumes rotate by swapping a `..data` symlink, which inotify on the file
//! paths misses after the first rotation), and SIGHUP reloads at once. A new pair that does not
//! parse or whose key does not match the certificate is logged and the old one kept.
//!
//! Each reload attempt on changed files is reported to the owner's [`OnReload`] callback (the
//! webhook counts them in its metrics) and in [`CertStore::reloads`].

use std::{
    fmt, fs,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use arc_swap::ArcSwap;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::{
    ServerConfig,
    crypto::CryptoProvider,
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// How many reloads succeeded and failed so far; tests and callers wait on changes of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Reloads that swapped in new content.
    pub succeeded: u64,
    /// Reloads whose new content was rejected (the previous content keeps serving).
    pub failed: u64,
}

/// How a certificate reload attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new pair is serving.
    Success,
    /// The files could not be read, or the new pair was rejected; the previous one keeps serving.
    Error,
}

/// Called after each reload attempt on changed (or unreadable) files, on the polling thread,
/// before [`CertStore::reloads`] changes; it should be quick, like incrementing a counter.
pub type OnReload = Arc<dyn Fn(ReloadOutcome) + Send + Sync>;

/// A certificate problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The PEM does not hold what is needed.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls rejected the pair (unsupported key, key not matching the certificate).
    #[error("certificate {cert} with key {key}: {source}")]
    Rustls {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// Generating the self-signed certificates failed.
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// The crypto provider outfit uses: ring only.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM certificate chain and private key into a key rustls can serve.
pub fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert: &Path,
    key: &Path,
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert.display().to_string(),
            message: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.display().to_string(),
            message: "no CERTIFICATE block".to_owned(),
        });
    }
    let private_key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key.display().to_string(),
        message: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, private_key, &provider()).map_err(|source| TlsError::Rustls {
        cert: cert.display().to_string(),
        key: key.display().to_string(),
        source,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The serving certificate and key, reloaded from their PEM files, or handed over in memory (from
/// a Kubernetes Secret outfit watches: [`CertStore::from_pem`], [`CertStore::offer`]).
pub struct CertStore {
    current: ArcSwap<CertifiedKey>,
    /// Where the pair is read from, or, held in memory, what to call it in messages.
    cert_path: PathBuf,
    key_path: PathBuf,
    /// Whether the pair comes from the files (polled) or from [`CertStore::offer`].
    from_files: bool,
    /// The file contents last tried, good or bad, so a bad pair is reported once.
    last: Mutex<(Vec<u8>, Vec<u8>)>,
    on_reload: OnReload,
    reloads: watch::Sender<ReloadCounts>,
    trigger: Notify,
}

impl CertStore {
    /// Loads the pair; fails when it is unusable. `on_reload` hears of every later reload.
    pub fn load(cert_path: PathBuf, key_path: PathBuf, on_reload: OnReload) -> Result<Self, TlsError> {
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let key = certified_key(&cert_pem, &key_pem, &cert_path, &key_path)?;
        Ok(Self {
            current: ArcSwap::from_pointee(key),
            cert_path,
            key_path,
            from_files: true,
            last: Mutex::new((cert_pem, key_pem)),
            on_reload,
            reloads: watch::Sender::new(ReloadCounts::default()),
            trigger: Notify::new(),
        })
    }

    /// A store of a pair held in memory, named `origin` in messages (`secret outfit-system/outfit-tls`);
    /// [`offer`](Self::offer) replaces it.
    pub fn from_pem(
        cert_pem: &[u8],
        key_pem: &[u8],
        origin: &str,
        on_reload: OnReload,
    ) -> Result<Self, TlsError> {
        let cert_path = PathBuf::from(format!("{origin} tls.crt"));
        let key_path = PathBuf::from(format!("{origin} tls.key"));
        let key = certified_key(cert_pem, key_pem, &cert_path, &key_path)?;
        Ok(Self {
            current: ArcSwap::from_pointee(key),
            cert_path,
            key_path,
            from_files: false,
            last: Mutex::new((cert_pem.to_vec(), key_pem.to_vec())),
            on_reload,
            reloads: watch::Sender::new(ReloadCounts::default()),
            trigger: Notify::new(),
        })
    }

    /// A rustls server configuration serving this store's certificate, offering h2 and
    /// HTTP/1.1 (the API server uses HTTP/1.1 except towards loopback addresses).
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, rustls::Error> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Reload results so far; `changed()` fires after each attempt on changed files.
    pub fn reloads(&self) -> watch::Receiver<ReloadCounts> {
        self.reloads.subscribe()
    }

    /// Asks the poll loop to read the files now (SIGHUP).
    pub fn reload_now(&self) {
        self.trigger.notify_one();
    }

    fn poll_once(&self) {
        if !self.from_files {
            return;
        }
        let files = read(&self.cert_path).and_then(|cert| Ok((cert, read(&self.key_path)?)));
        let (cert_pem, key_pem) = match files {
            Ok(files) => files,
            Err(error) => {
                tracing::error!(%error, "cannot read the serving certificate; the previous one keeps serving");
                (self.on_reload)(ReloadOutcome::Error);
                self.reloads.send_modify(|counts| counts.failed += 1);
                return;
            }
        };
        self.offer(cert_pem, key_pem);
    }

    /// Serves `cert_pem` and `key_pem` from now on, if they differ from the pair last offered and
    /// make a usable pair; a bad pair is logged and reported, and the previous one keeps serving.
    pub fn offer(&self, cert_pem: Vec<u8>, key_pem: Vec<u8>) {
        {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            if last.0 == cert_pem && last.1 == key_pem {
                return;
            }
            *last = (cert_pem.clone(), key_pem.clone());
        }
        match certified_key(&cert_pem, &key_pem, &self.cert_path, &self.key_path) {
            Ok(key) => {
                self.current.store(Arc::new(key));
                tracing::info!(cert = %self.cert_path.display(), "serving a new certificate");
                (self.on_reload)(ReloadOutcome::Success);
                self.reloads.send_modify(|counts| counts.succeeded += 1);
            }
            Err(error) => {
                tracing::error!(%error, "rejected the new certificate; the previous one keeps serving");
                (self.on_reload)(ReloadOutcome::Error);
                self.reloads.send_modify(|counts| counts.failed += 1);
            }
        }
    }

    /// Polls the files every `interval` (or at once on [`reload_now`](Self::reload_now)) until
    /// `shutdown`.
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
                () = self.trigger.notified() => {}
            }
            let store = self.clone();
            if let Err(error) = tokio::task::spawn_blocking(move || store.poll_once()).await {
                tracing::error!(%error, "the certificate reload task failed");
            }
        }
    }
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore")
            .field("current", &self.current)
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("reloads", &*self.reloads.borrow())
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The files of a `--self-signed` directory.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// `DIR/ca.crt`: the CA clients should trust.
    pub ca_cert: PathBuf,
    /// `DIR/ca.key`: the CA's key, kept to sign new leaves.
    pub ca_key: PathBuf,
    /// `DIR/tls.crt`: the serving certificate.
    pub cert: PathBuf,
    /// `DIR/tls.key`: the serving key.
    pub key: PathBuf,
}

impl SelfSigned {
    /// The file names in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    /// Uses the certificates in `dir` when present; otherwise generates what is missing: a CA
    /// (unless `ca.crt` and `ca.key` exist) and a leaf signed by it for `localhost`, `127.0.0.1`,
    /// `::1` and `dns_names`.
    pub fn ensure(dir: &Path, dns_names: &[String]) -> Result<Self, TlsError> {
        let files = Self::in_dir(dir);
        if [&files.ca_cert, &files.cert, &files.key]
            .iter()
            .all(|p| p.exists())
        {
            tracing::info!(dir = %dir.display(), "using the existing self-signed certificates");
            return Ok(files);
        }
        fs::create_dir_all(dir).map_err(|source| TlsError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let ca_key = if files.ca_cert.exists() && files.ca_key.exists() {
            let pem = String::from_utf8_lossy(&read(&files.ca_key)?).into_owned();
            KeyPair::from_pem(&pem)?
        } else {
            let ca_key = KeyPair::generate()?;
            let ca_cert = ca_params().self_signed(&ca_key)?;
            write(&files.ca_key, &ca_key.serialize_pem(), true)?;
            write(&files.ca_cert, &ca_cert.pem(), false)?;
            ca_key
        };
        let (cert, key) = issue_leaf(&ca_key, dns_names)?;
        write(&files.key, &key, true)?;
        write(&files.cert, &cert, false)?;
        tracing::info!(dir = %dir.display(), "generated self-signed certificates; clients should trust ca.crt");
        Ok(files)
    }
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "outfit local CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Signs a new serving certificate with the CA key (PEM) of a `--self-signed` directory, for
/// `localhost`, `127.0.0.1`, `::1` and `dns_names`. Returns the certificate and key PEMs.
pub fn issue_leaf_with_ca_pem(ca_key_pem: &str, dns_names: &[String]) -> Result<(String, String), TlsError> {
    issue_leaf(&KeyPair::from_pem(ca_key_pem)?, dns_names)
}

fn issue_leaf(ca_key: &KeyPair, dns_names: &[String]) -> Result<(String, String), TlsError> {
    // The issuer's name and key identifier are all a leaf takes from it, so parameters rebuilt
    // identically stand in for the CA certificate.
    let issuer = Issuer::new(ca_params(), ca_key);
    let key = KeyPair::generate()?;
    let cert = leaf_params(dns_names)?.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate's parameters, for `localhost`, `127.0.0.1`, `::1` and `dns_names` (the
/// first of them its common name), valid as long as rcgen's default unless the caller says.
pub(crate) fn leaf_params(dns_names: &[String]) -> Result<CertificateParams, TlsError> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    names.extend(dns_names.iter().cloned());
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(
        DnType::CommonName,
        dns_names.first().map_or("localhost", String::as_str),
    );
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    Ok(params)
}

fn write(path: &Path, contents: &str, secret: bool) -> Result<(), TlsError> {
    let io = |source| TlsError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    use std::io::Write;
    options
        .open(path)
        .and_then(|mut file| file.write_all(contents.as_bytes()))
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(store: &CertStore) -> CertificateDer<'static> {
        store.current.load().cert[0].clone()
    }

    #[test]
    fn a_changed_pair_is_reported_and_a_bad_one_keeps_the_previous() {
        let dir = std::env::temp_dir().join(format!("outfit-http-tls-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let files = SelfSigned::ensure(&dir, &[]).expect("generate");
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let on_reload: OnReload = {
            let outcomes = outcomes.clone();
            Arc::new(move |outcome| outcomes.lock().expect("lock").push(outcome))
        };
        let store = CertStore::load(files.cert.clone(), files.key.clone(), on_reload).expect("load");
        let first = leaf(&store);

        // Unchanged files are not a reload.
        store.poll_once();
        assert!(outcomes.lock().expect("lock").is_empty());
        assert_eq!(*store.reloads().borrow(), ReloadCounts::default());

        let ca_key = String::from_utf8(fs::read(&files.ca_key).expect("CA key")).expect("PEM");
        let (cert, key) = issue_leaf_with_ca_pem(&ca_key, &[]).expect("new leaf");
        fs::write(&files.cert, &cert).expect("write cert");
        fs::write(&files.key, &key).expect("write key");
        store.poll_once();
        let second = leaf(&store);
        assert_ne!(second, first);
        assert_eq!(
            CertificateDer::from_pem_slice(cert.as_bytes()).expect("parse"),
            second
        );

        // A key not matching the certificate: rejected once, the previous pair keeps serving.
        let (_, other_key) = issue_leaf_with_ca_pem(&ca_key, &[]).expect("another key");
        fs::write(&files.key, &other_key).expect("write key");
        store.poll_once();
        store.poll_once();
        assert_eq!(leaf(&store), second);

        // Unreadable files fail on every poll.
        fs::remove_file(&files.key).expect("remove key");
        store.poll_once();
        store.poll_once();
        assert_eq!(leaf(&store), second);

        assert_eq!(
            *outcomes.lock().expect("lock"),
            [
                ReloadOutcome::Success,
                ReloadOutcome::Error,
                ReloadOutcome::Error,
                ReloadOutcome::Error
            ]
        );
        assert_eq!(
            *store.reloads().borrow(),
            ReloadCounts {
                succeeded: 1,
                failed: 3
            }
        );
        fs::remove_dir_all(&dir).expect("remove dir");
    }
}
