//! `outfit workspaces` as a process: binds the API and admin ports, starts the watch caches and
//! the lifecycle, serves until shutdown, then drains.
//!
//! ```text
//!  browser, frontend ──HTTP──▶ accept (outfit-http) ──▶ api (page | v1: auth | deic-dk) ──▶ backend ──▶ API server
//!                                        progress streams ◀──┐                  │ reads    ▲ writes
//!  API server ──watch──▶ cache (pods, claims, Events) ──changes─┴────────────────┘          │
//!                          └──changes──▶ lifecycle (finish, fail, cull, sweep storage) ─────┤
//!                                         (on the replica that holds the Lease: election)
//!  workspaces' status endpoints ◀──HTTP── activity poller (last activity) ──────────────────┘
//!  kubelet, Prometheus ──HTTP──▶ admin (/livez /readyz /metrics)
//! ```

use std::{net::SocketAddr, sync::Arc};

use outfit_http::{
    accept::{self, Timeouts},
    limit::ConnectionLimit,
    tls::CertStore,
};
use tokio::{net::TcpListener, sync::watch};
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use outfit_k8s::{
    election::{self, Election},
    lease::Timing,
};

use crate::{
    api::Api,
    backend::Backend,
    io::{auth::Authenticator, cache::Cache, cluster::Cluster, metrics::Metrics},
    lifecycle::{Lifecycle, activity::ActivityPoller},
    model::{config::Config, keys},
};

/// How long shutdown waits for the Lease to be released.
const LEASE_RELEASE: std::time::Duration = std::time::Duration::from_secs(3);
/// How often the certificate files are checked for changes.
const CERTIFICATE_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The serving certificate could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] outfit_http::tls::TlsError),
    /// A port could not be bound.
    #[error("binding {what} {address}: {source}")]
    Bind {
        /// Which port.
        what: &'static str,
        /// The address.
        address: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// A bound, not yet serving, backend.
pub struct Server {
    config: Arc<Config>,
    client: kube::Client,
    api: TcpListener,
    admin: Option<TcpListener>,
    certificate: Option<Arc<CertStore>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("api", &self.api)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds the ports of `config`.
    pub async fn bind(config: Config, client: kube::Client) -> Result<Self, RunError> {
        let bind = |what, address| async move {
            TcpListener::bind(address).await.map_err(|source| RunError::Bind {
                what,
                address,
                source,
            })
        };
        let api = bind("the API port", config.listen).await?;
        let admin = match config.admin_listen {
            Some(address) => Some(bind("the admin port", address).await?),
            None => None,
        };
        let certificate = match &config.tls {
            Some(files) => {
                let on_reload: outfit_http::tls::OnReload =
                    Arc::new(|outcome| tracing::info!(?outcome, "serving certificate reload"));
                Some(Arc::new(CertStore::load(
                    files.cert.clone(),
                    files.key.clone(),
                    on_reload,
                )?))
            }
            None => None,
        };
        Ok(Self {
            config: Arc::new(config),
            client,
            api,
            admin,
            certificate,
        })
    }

    /// The serving certificate, when the API is served over HTTPS (SIGHUP reloads it now).
    pub fn certificate(&self) -> Option<Arc<CertStore>> {
        self.certificate.clone()
    }

    /// The API's address.
    pub fn api_address(&self) -> std::io::Result<SocketAddr> {
        self.api.local_addr()
    }

    /// Serves until `shutdown`, then lets requests in flight finish within `shutdownGrace`.
    pub async fn run(self, shutdown: CancellationToken) {
        let config = self.config;
        let tracker = TaskTracker::new();
        let (cache, watch_task) = Cache::new(&self.client, &config.namespace);
        let cluster = Cluster::new(self.client.clone(), &config.namespace);
        let metrics = Arc::new(Metrics::default());
        let ready = Arc::new(watch::channel(false).0);

        let watches = tokio::spawn(watch_task);
        let leading = Arc::new(watch::channel(false).0);
        let election = Election {
            namespace: config.namespace.clone(),
            name: keys::LEASE.to_owned(),
            identity: election::identity(),
            timing: Timing::default(),
            duty: "finishes, fails and culls workspaces and sweeps unused storage",
            granted_by: "outfit manifests --workspaces",
            alone_when_forbidden: true,
        };
        let leader_metrics = metrics.clone();
        let election_task = tokio::spawn(election::run(
            self.client.clone(),
            election,
            leading.clone(),
            move |leading| leader_metrics.set_leader(leading),
            shutdown.clone(),
        ));
        let lifecycle = Lifecycle::new(
            config.clone(),
            cluster.clone(),
            cache.clone(),
            metrics.clone(),
            leading.subscribe(),
        );
        let lifecycle_task = tokio::spawn(lifecycle.run(shutdown.clone()));
        let poller = ActivityPoller::new(config.clone(), cluster.clone(), cache.clone());
        let activity_task = tokio::spawn(poller.run(shutdown.clone()));
        let auth = Authenticator::new(self.client.clone(), config.clone());
        {
            let (cache, ready, shutdown) = (cache.clone(), ready.clone(), shutdown.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = cache.synced() => {
                        tracing::info!("watch caches synced; ready");
                        ready.send_replace(true);
                    }
                    () = shutdown.cancelled() => {}
                }
            });
        }
        if let Some(listener) = self.admin {
            let render = metrics.clone();
            let admin = outfit_http::admin::Admin::new(ready.clone(), Arc::new(move || render.render()));
            tracker.spawn(outfit_http::admin::serve_limited(
                listener,
                admin,
                Timeouts::default(),
                ConnectionLimit::new(config.exposure.max_connections),
                shutdown.clone(),
                tracker.clone(),
            ));
        }
        let backend = Backend::new(config.clone(), cluster, cache);
        let acceptor = match &self.certificate {
            Some(store) => {
                tokio::spawn(store.clone().watch(CERTIFICATE_POLL, shutdown.clone()));
                match store.server_config() {
                    Ok(tls) => Some(TlsAcceptor::from(tls)),
                    Err(error) => {
                        tracing::error!(%error, "TLS configuration refused");
                        return;
                    }
                }
            }
            None => None,
        };
        tracing::info!(
            listen = %self.api.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            namespace = config.namespace,
            "serving the workspace API"
        );
        let stop = shutdown.clone();
        let timeouts = Timeouts::default();
        let limit = ConnectionLimit::new(config.exposure.max_connections);
        accept::accept_each(self.api, &stop, &tracker, |tcp, peer| {
            let admitted = limit.admit(&shutdown);
            // Progress streams end when their connection is closed to make room.
            let closing = admitted.as_ref().map(|a| a.slot().closing().clone());
            let api = closing
                .map(|closing| Api::new(backend.clone(), metrics.clone(), auth.clone(), peer, closing));
            let acceptor = acceptor.clone();
            async move {
                let (Some(admitted), Some(api)) = (admitted, api) else {
                    tracing::debug!(%peer, "every connection busy at maxConnections; refused");
                    return;
                };
                let served = accept::serve_admitted(tcp, peer, acceptor, api, timeouts, &admitted).await;
                if let Err(reason) = served {
                    tracing::debug!(%peer, reason, "connection closed");
                }
            }
        })
        .await;
        // Not ready any more: load balancers stop sending while requests in flight finish.
        ready.send_replace(false);
        tracker.close();
        if tokio::time::timeout(config.shutdown_grace, tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(grace = ?config.shutdown_grace, "requests still in flight at the end of the grace period");
        }
        lifecycle_task.abort();
        activity_task.abort();
        watches.abort();
        // The leader gives the Lease up on shutdown, so another replica takes over at once.
        if tokio::time::timeout(LEASE_RELEASE, election_task).await.is_err() {
            tracing::warn!("the Lease was not released in time; another replica takes over once it expires");
        }
    }
}
