//! `outfit serve`: the mutating admission webhook around [`outfit_core`].
//!
//! ```text
//!  API server ──HTTPS──▶ accept (TLS: CertStore) ──▶ webhook (POST /mutate) ──▶ PolicySet::apply
//!                                                        │ ArcSwap load           ▲ ArcSwap store
//!  policy files ──poll──▶ PolicyStore (compile off the request path) ─────────────┘
//!  cert files   ──poll──▶ CertStore (swap the CertifiedKey)
//!  kubelet, Prometheus ──HTTP──▶ admin (/livez /readyz /metrics)
//!  with --from-cluster: Lease ◀──▶ leader ──▶ registration (webhook configuration's rules, caBundle)
//!                       cert Secret ◀──▶ certificates (serve, rotate) ──▶ CertStore
//! ```
//!
//! [`Server::bind`] loads everything and binds both ports (so a caller can learn the addresses
//! before serving); [`Server::run`] serves them in outfit-http's [`Shell`] (the one the workspace
//! backend runs in too) until its `shutdown` token fires, then stops accepting, lets in-flight
//! requests finish within the grace period, stops its reloads and controllers, and returns; the
//! admin port answers (`/readyz` 503) until then.

pub mod admission;
pub mod controllers;
pub mod metrics;
pub mod policies;
pub use outfit_http::{authority, tls};
pub mod webhook;

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use outfit_http::{accept::Port, limit::ConnectionLimit, shell::Shell};
use tokio::{net::TcpListener, sync::watch};
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use outfit_http::accept::Timeouts;

pub use crate::{
    controllers::{CertificateError, Election, Registration, SecretSettings},
    metrics::Metrics,
    policies::{CompileOptions, LoadError, PolicyStore, ReloadCounts},
    tls::{CertStore, SelfSigned, TlsError},
    webhook::{Limits, Webhook},
};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, reloaded when they change.
    Files {
        /// Certificate chain, leaf first.
        cert: PathBuf,
        /// Private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
    /// A CA and a leaf generated into `dir` when absent and reused when present.
    SelfSigned {
        /// Where `ca.crt`, `ca.key`, `tls.crt` and `tls.key` live.
        dir: PathBuf,
        /// DNS names for the leaf besides localhost, 127.0.0.1 and ::1.
        dns_names: Vec<String>,
    },
    /// A Secret in the cluster ([`Config::cluster`]) that outfit creates when absent, watches,
    /// and (on the replica that holds the Lease) renews.
    Secret(SecretSettings),
}

/// Everything `outfit serve` is configured with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Policy files or directories.
    pub policies: Vec<PathBuf>,
    /// Namespace of namespaced policies whose documents name none, and whether admissions carry
    /// outfit's annotation and warnings.
    pub compile: CompileOptions,
    /// The webhook's HTTPS address.
    pub listen: SocketAddr,
    /// The admin port's plain-HTTP address, if any.
    pub admin_listen: Option<SocketAddr>,
    /// The serving certificate.
    pub tls: TlsSource,
    /// How often policy and certificate files are checked for changes.
    pub poll_interval: Duration,
    /// Request limits.
    pub limits: Limits,
    /// Connection timeouts.
    pub timeouts: Timeouts,
    /// How long in-flight requests may take to finish once shutdown starts.
    pub shutdown_grace: Duration,
    /// The most connections open at once on the webhook port; at the cap the oldest idle one is
    /// closed to make room.
    pub max_connections: usize,
    /// Also read policies and namespace labels from this API server (watched).
    pub cluster: Option<ClusterClient>,
    /// Keep this webhook configuration in step (with [`Config::cluster`]).
    pub registration: Option<Registration>,
}

/// A client of the API server policies are read from.
#[derive(Clone)]
pub struct ClusterClient(pub kube::Client);

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterClient")
    }
}

impl Config {
    /// A configuration with the defaults for everything but the policies and the certificate.
    pub fn new(policies: Vec<PathBuf>, tls: TlsSource) -> Self {
        Self {
            policies,
            compile: CompileOptions {
                annotate: true,
                ..CompileOptions::from("default")
            },
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            admin_listen: Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
            tls,
            poll_interval: Duration::from_secs(2),
            limits: Limits::default(),
            timeouts: Timeouts::default(),
            shutdown_grace: Duration::from_secs(15),
            // An API server keeps a few connections per replica; this leaves room for many.
            max_connections: 1024,
            cluster: None,
            registration: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The policies could not be loaded.
    #[error("loading policies: {0}")]
    Policies(#[from] LoadError),
    /// The certificate could not be loaded or generated.
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The certificate Secret could not be read or created.
    #[error("TLS: {0}")]
    Secret(#[from] CertificateError),
    /// A certificate Secret was asked for without a cluster to keep it in.
    #[error("TLS: a certificate Secret needs --from-cluster")]
    SecretWithoutCluster,
    /// A port could not be bound.
    #[error("binding {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A bound, loaded server, ready to [`run`](Self::run).
#[derive(Debug)]
pub struct Server {
    config: Config,
    listener: TcpListener,
    admin_listener: Option<TcpListener>,
    handle: Handle,
    tls_config: Arc<rustls::ServerConfig>,
    /// The cluster watches, when reading from the cluster; they stop when the server does.
    cluster: Option<outfit_k8s::cluster::ClusterSource>,
    /// The PEM bundle of the CAs of the certificate served, when outfit knows it.
    ca_bundle: Arc<watch::Sender<Option<String>>>,
}

/// What a running server exposes to its owner: reloads, readiness and metrics.
#[derive(Debug, Clone)]
pub struct Handle {
    policies: Arc<PolicyStore>,
    certs: Arc<CertStore>,
    metrics: Arc<Metrics>,
    ready: Arc<watch::Sender<bool>>,
}

impl Handle {
    /// Re-reads the policy and certificate files now, as SIGHUP does.
    pub fn reload_now(&self) {
        self.policies.reload_now();
        self.certs.reload_now();
    }

    /// Policy reload results; `changed()` fires after each attempt on changed files.
    pub fn policy_reloads(&self) -> watch::Receiver<ReloadCounts> {
        self.policies.reloads()
    }

    /// Certificate reload results; `changed()` fires after each attempt on changed files.
    pub fn tls_reloads(&self) -> watch::Receiver<ReloadCounts> {
        self.certs.reloads()
    }

    /// The metrics, as `/metrics` serves them.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Readiness changes: true once serving, false again once shutdown begins.
    pub fn readiness(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }
}

impl Server {
    /// Loads the policies and the certificate and binds the ports.
    pub async fn bind(config: Config) -> Result<Self, ServerError> {
        let metrics = Metrics::new();
        let cluster = config.cluster.clone().map(|c| {
            let options = outfit_k8s::cluster::WatchOptions {
                families: config.compile.families,
                values: config.compile.filer_plain_secrets,
                filer_namespace: config.compile.filer_namespace.clone(),
            };
            outfit_k8s::cluster::ClusterSource::start(c.0, options)
        });
        let policies = Arc::new(PolicyStore::load(
            config.policies.clone(),
            config.compile.clone(),
            metrics.clone(),
            cluster
                .as_ref()
                .map(outfit_k8s::cluster::ClusterSource::subscribe),
        )?);
        let (certs, ca_bundle) = load_certificate(&config, &metrics).await?;
        let tls_config = certs.server_config()?;
        let listener = bind(config.listen).await?;
        let admin_listener = match config.admin_listen {
            Some(address) => Some(bind(address).await?),
            None => None,
        };
        Ok(Self {
            config,
            listener,
            admin_listener,
            handle: Handle {
                policies,
                certs,
                metrics,
                ready: Arc::new(watch::Sender::new(false)),
            },
            tls_config,
            cluster,
            ca_bundle: Arc::new(watch::Sender::new(ca_bundle)),
        })
    }

    /// The webhook's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        // A bound listener always has an address.
        self.listener.local_addr().unwrap_or(self.config.listen)
    }

    /// The admin port's bound address.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The handle for reloads, readiness and metrics.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Serves until `shutdown` fires, then drains (in the [`Shell`] both servers share):
    /// readiness turns false, no new connection is accepted, idle connections close, and
    /// in-flight requests get `shutdown_grace` to finish; the admin port answers until the
    /// reloads and controllers have stopped too.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            config,
            listener,
            admin_listener,
            handle,
            tls_config,
            cluster,
            ca_bundle,
        } = self;
        // The cluster watches stop with the server.
        let _cluster = cluster;
        let webhook = Webhook::new(handle.policies.current(), handle.metrics.clone(), config.limits);
        let watchers = TaskTracker::new();
        watchers.spawn(
            handle
                .policies
                .clone()
                .watch(config.poll_interval, shutdown.clone()),
        );
        watchers.spawn(handle.certs.clone().watch(config.poll_interval, shutdown.clone()));
        spawn_controllers(&config, &handle, &ca_bundle, &watchers, &shutdown);

        tracing::info!(address = %listener.local_addr().map_or_else(|_| config.listen.to_string(), |a| a.to_string()), "serving the webhook");
        let limit = ConnectionLimit::new(config.max_connections);
        handle.metrics.watch_connections(limit.clone());
        let port = Port::new(listener)
            .tls(Some(TlsAcceptor::from(tls_config)))
            .limit(limit);
        let metrics = handle.metrics.clone();
        // Ready once the policies are loaded: at once from files, after the first complete read
        // of the cluster when reading from it.
        let mut synced = handle.policies.synced();
        Shell::new(port, move |_, _| webhook.clone())
            .timeouts(config.timeouts)
            .drain(config.shutdown_grace)
            .admin(admin_listener.map(Port::new), Arc::new(move || metrics.encode()))
            .readiness(handle.ready.clone(), async move {
                synced.wait_for(|synced| *synced).await.is_ok()
            })
            .after_drain(async move {
                watchers.close();
                watchers.wait().await;
            })
            .run(shutdown)
            .await;
    }
}

/// The certificate store, and the PEM bundle of its CAs when outfit knows it (a `--self-signed`
/// directory's `ca.crt`, the Secret's `ca.crt`; not files it is only given).
async fn load_certificate(
    config: &Config,
    metrics: &Arc<Metrics>,
) -> Result<(Arc<CertStore>, Option<String>), ServerError> {
    let on_reload: tls::OnReload = {
        let metrics = metrics.clone();
        Arc::new(move |outcome| metrics.tls_reload(outcome.into()))
    };
    Ok(match &config.tls {
        TlsSource::Files { cert, key } => (
            Arc::new(CertStore::load(cert.clone(), key.clone(), on_reload)?),
            None,
        ),
        TlsSource::SelfSigned { dir, dns_names } => {
            let files = SelfSigned::ensure(dir, dns_names)?;
            let ca = std::fs::read_to_string(&files.ca_cert).map_err(|source| TlsError::Io {
                path: files.ca_cert.display().to_string(),
                source,
            })?;
            let store = CertStore::load(files.cert, files.key, on_reload)?;
            (Arc::new(store), Some(ca))
        }
        TlsSource::Secret(settings) => {
            let client = config.cluster.as_ref().ok_or(ServerError::SecretWithoutCluster)?;
            let material = controllers::certificates::ensure(&client.0, settings).await?;
            let origin = format!("secret {}/{}", settings.namespace, settings.name);
            let store = CertStore::from_pem(
                material.cert.as_bytes(),
                material.key.as_bytes(),
                &origin,
                on_reload,
            )?;
            (Arc::new(store), Some(material.ca_bundle))
        }
    })
}

/// Starts the election, the webhook controller and the certificate Secret's loop, as configured.
fn spawn_controllers(
    config: &Config,
    handle: &Handle,
    ca_bundle: &Arc<watch::Sender<Option<String>>>,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) {
    let Some(client) = config.cluster.as_ref().map(|c| c.0.clone()) else {
        return;
    };
    let leading = Arc::new(watch::Sender::new(false));
    let published = Arc::new(watch::Sender::new(None));
    if let Some(registration) = &config.registration {
        let metrics = handle.metrics.clone();
        tasks.spawn(outfit_k8s::election::run(
            client.clone(),
            registration.election.clone(),
            leading.clone(),
            move |leading| metrics.set_leader(leading),
            shutdown.clone(),
        ));
        let inputs = controllers::registration::Inputs {
            policies: handle.policies.current(),
            policy_reloads: handle.policies.reloads(),
            ca_bundle: ca_bundle.subscribe(),
            leading: leading.subscribe(),
            published: published.clone(),
            metrics: handle.metrics.clone(),
        };
        tasks.spawn(controllers::registration::run(
            client.clone(),
            registration.configuration.clone(),
            inputs,
            shutdown.clone(),
        ));
    }
    if let TlsSource::Secret(settings) = &config.tls {
        if config.registration.is_none() {
            tracing::warn!(
                "the certificate Secret is served but not renewed: renewal needs the webhook configuration managed"
            );
        }
        let inputs = controllers::certificates::CertificateLoop {
            store: handle.certs.clone(),
            ca_bundle: ca_bundle.clone(),
            leading: leading.subscribe(),
            published: published.subscribe(),
            metrics: handle.metrics.clone(),
        };
        tasks.spawn(controllers::certificates::run(
            client,
            settings.clone(),
            inputs,
            shutdown.clone(),
        ));
    }
}

async fn bind(address: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| ServerError::Bind { address, source })
}
