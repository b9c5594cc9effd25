//! `outfit workspaces` as a process: binds the API and admin ports, starts the watch caches and
//! the lifecycle, and serves them in outfit-http's [`Shell`] (the one `outfit serve` runs in)
//! until shutdown; then drains, with the admin port up until the Leases are given up.
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

use outfit_http::{accept::Port, limit::ConnectionLimit, shell::Shell, tls::CertStore};
use tokio::{net::TcpListener, sync::watch};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use outfit_k8s::{
    election::{self, Election},
    lease::Timing,
};

use kube::config::{KubeConfigOptions, Kubeconfig};
use outfit_workspaces_core::{
    model::{
        config::{ClusterEntry, Config},
        keys,
    },
    resource,
};

use crate::{
    api::{Api, StreamCaps, StreamSlots, UserRates},
    backend::{Backend, ClusterWorkspaces},
    io::{
        auth::Authenticator, cache::Cache, cluster::Cluster, fetch::Fetcher, metrics::Metrics,
        node_images::NodeImages, upstream::Upstreams,
    },
    lifecycle::{Lifecycle, activity::ActivityPoller, pre_pull::PrePull},
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
    /// One of `clusters` can't be reached through its kubeconfig.
    #[error("clusters: {name}: {reason}")]
    Cluster {
        /// The cluster.
        name: String,
        /// Why.
        reason: String,
    },
    /// A cluster does not serve the Workspace resource: its CRD is not installed.
    #[error(
        "cluster {cluster}: the API server does not serve {}/{} {} ({reason}); install the CRD `outfit manifests --workspaces` prints (the chart ships it)",
        resource::GROUP,
        resource::VERSION,
        resource::PLURAL
    )]
    NoWorkspaceResource {
        /// The cluster.
        cluster: String,
        /// What the API server answered.
        reason: String,
    },
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
    /// The clients of `clusters`, in their order.
    remotes: Vec<kube::Client>,
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
        let mut remotes = Vec::new();
        for entry in &config.clusters {
            remotes.push(remote_client(entry).await?);
        }
        serves_workspaces(&client, &config.default_cluster).await?;
        for (entry, remote) in config.clusters.iter().zip(&remotes) {
            serves_workspaces(remote, &entry.name).await?;
        }
        Ok(Self {
            config: Arc::new(config),
            client,
            remotes,
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

    /// Serves until `shutdown`, then drains in outfit-http's [`Shell`] (the webhook's too): `/readyz`
    /// turns 503 while the admin port stays up, requests in flight get `shutdownGrace` to finish,
    /// then the Leases are given up.
    pub async fn run(self, shutdown: CancellationToken) {
        let config = self.config;
        let metrics = Arc::new(Metrics::default());
        let snapshots = config.snapshot_class_name.is_some();
        let (cache, watch_task) = Cache::new(&self.client, &config.namespace, snapshots);
        let writes_volumes = config.storage_strategy.writes_volumes();
        let cluster = Cluster::new(self.client.clone(), &config.namespace).writing_volumes(writes_volumes);
        let mut tasks = vec![tokio::spawn(watch_task)];
        let leader_metrics = metrics.clone();
        let on_leading = move |leading| leader_metrics.set_leader(leading);
        let default = ClusterWorkspaces::new(
            config.default_cluster.clone(),
            config.clone(),
            cluster,
            cache.clone(),
        );
        let default = placing(default, &self.client, &mut tasks);
        let (election, leading) = tend(
            &self.client,
            &default,
            &metrics,
            on_leading,
            &shutdown,
            &mut tasks,
        );
        let mut elections = vec![election];
        let mut leads = vec![leading];
        let mut backend = Backend::new(default);
        // Each of `clusters`: its own watches, lifecycle and Lease; its changes wake the
        // default cache's waiters, so one progress stream follows every cluster.
        for (entry, client) in config.clusters.iter().zip(&self.remotes) {
            let mut own = (*config).clone();
            if let Some(namespace) = &entry.namespace {
                own.namespace.clone_from(namespace);
            }
            let (remote_cache, remote_watch) = Cache::new_beside(client, &own.namespace, snapshots, &cache);
            tasks.push(tokio::spawn(remote_watch));
            let remote = Cluster::new(client.clone(), &own.namespace).writing_volumes(writes_volumes);
            let member = ClusterWorkspaces::new(entry.name.clone(), Arc::new(own), remote, remote_cache);
            let member = placing(member, client, &mut tasks);
            let (election, leading) = tend(client, &member, &metrics, |_| {}, &shutdown, &mut tasks);
            elections.push(election);
            leads.push(leading);
            backend = backend.with_member(member);
        }
        // Each cluster's Workspaces, controlled by the replica that holds its Lease.
        for (index, leading) in leads.into_iter().enumerate() {
            tasks.push(tokio::spawn(backend.clone().control(
                (index, metrics.clone()),
                leading,
                shutdown.clone(),
            )));
        }
        let auth = Authenticator::new(self.client.clone(), config.clone());
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
        let port = Port::new(self.api)
            .tls(acceptor)
            .limit(ConnectionLimit::new(config.exposure.max_connections));
        let admin = self
            .admin
            .map(|listener| Port::new(listener).limit(ConnectionLimit::new(config.exposure.max_connections)));
        let render = metrics.clone();
        let synced = async move {
            cache.synced().await;
            tracing::info!("watch caches synced; ready");
            true
        };
        // Progress streams end when their connection is to close (shutdown, or making room).
        let exposure = &config.exposure;
        let streams = StreamSlots::new(StreamCaps {
            per_user: exposure.max_streams_per_user,
            per_source: exposure.max_streams_per_source,
            total: exposure.max_streams,
        });
        let upstreams = Upstreams::default();
        let rates = UserRates::new(
            exposure.requests_per_user_per_second,
            exposure.request_burst_per_user,
        );
        let api = Api::new(backend, metrics.clone(), auth, (streams, rates), upstreams);
        let router = api.router();
        let served =
            move |peer, closing: &CancellationToken| api.served(router.clone(), peer, closing.clone());
        Shell::new(port, served)
            .drain(config.shutdown_grace)
            .admin(admin, Arc::new(move || render.render()))
            .readiness(Arc::new(watch::channel(false).0), synced)
            .after_drain(async move {
                for task in &tasks {
                    task.abort();
                }
                // The leader gives the Leases up on shutdown, so another replica takes over at once.
                let released = futures::future::join_all(elections);
                if tokio::time::timeout(LEASE_RELEASE, released).await.is_err() {
                    tracing::warn!(
                        "a Lease was not released in time; another replica takes over once it expires"
                    );
                }
            })
            .run(shutdown)
            .await;
    }
}

/// `member`, knowing its nodes' images when `imagePlacement` or `prePull` is on, with the watch
/// that keeps them current among `tasks`.
fn placing(
    member: ClusterWorkspaces,
    client: &kube::Client,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> ClusterWorkspaces {
    if !member.config.image_placement && !member.config.pre_pull.enabled {
        return member;
    }
    let (node_images, watch) = NodeImages::watch(client);
    tasks.push(tokio::spawn(watch));
    member.with_node_images(node_images)
}

/// Starts `member`'s Lease election, lifecycle and activity poller (pushed to `tasks`); returns
/// the election, which shutdown awaits so that the Lease is given up, and whether it leads.
fn tend(
    client: &kube::Client,
    member: &ClusterWorkspaces,
    metrics: &Arc<Metrics>,
    on_leading: impl Fn(bool) + Send + 'static,
    shutdown: &CancellationToken,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> (tokio::task::JoinHandle<()>, watch::Receiver<bool>) {
    let leading = Arc::new(watch::channel(false).0);
    let election = Election {
        namespace: member.config.namespace.clone(),
        name: keys::LEASE.to_owned(),
        identity: election::identity(),
        timing: Timing::default(),
        duty: "starts and stops Workspaces, finishes, fails and culls workspaces and sweeps unused storage",
        granted_by: "outfit manifests --workspaces",
        alone_when_forbidden: true,
    };
    let election_task = tokio::spawn(election::run(
        client.clone(),
        election,
        leading.clone(),
        on_leading,
        shutdown.clone(),
    ));
    let lifecycle = Lifecycle::new(
        member.config.clone(),
        member.cluster.clone(),
        member.cache.clone(),
        metrics.clone(),
        leading.subscribe(),
    )
    .named(&member.name);
    tasks.push(tokio::spawn(lifecycle.run(shutdown.clone())));
    let poller = ActivityPoller::new(
        member.config.clone(),
        member.cluster.clone(),
        member.cache.clone(),
    );
    tasks.push(tokio::spawn(poller.run(shutdown.clone())));
    let config = &member.config;
    let pre_pull = PrePull {
        cluster_name: member.name.clone(),
        config: config.clone(),
        cluster: member.cluster.clone(),
        cache: member.cache.clone(),
        nodes: member.node_images.clone(),
        fetcher: Fetcher::new(
            config.whitelist_manifest_regex.clone(),
            config.manifest_fetch_timeout,
            config.manifest_max_bytes,
        ),
        metrics: metrics.clone(),
        leading: leading.subscribe(),
    };
    tasks.push(tokio::spawn(pre_pull.run(shutdown.clone())));
    (election_task, leading.subscribe())
}

/// Whether the API server of `client` serves the Workspace resource, asked once at start: without
/// its CRD every watch of Workspaces fails, and the backend would never be ready. Only a 404 says
/// it is missing; any other answer is left to the watches (which retry).
async fn serves_workspaces(client: &kube::Client, cluster: &str) -> Result<(), RunError> {
    let discovery = hyper::Request::get(format!("/apis/{}/{}", resource::GROUP, resource::VERSION))
        .body(Vec::new())
        .expect("a GET of a fixed path is a valid request");
    let answer: Result<serde_json::Value, kube::Error> = client.request(discovery).await;
    let missing = |reason: String| RunError::NoWorkspaceResource {
        cluster: cluster.to_owned(),
        reason,
    };
    match answer {
        Ok(list) => {
            let resources = list["resources"].as_array().cloned().unwrap_or_default();
            if resources.iter().any(|r| r["name"] == resource::PLURAL) {
                Ok(())
            } else {
                Err(missing("the group is served without it".to_owned()))
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Err(missing("404 Not Found".to_owned())),
        Err(error) => {
            tracing::warn!(cluster, %error, "could not ask whether the Workspace resource is served; the watches will");
            Ok(())
        }
    }
}

/// The client of one of `clusters`, from its kubeconfig and context.
async fn remote_client(entry: &ClusterEntry) -> Result<kube::Client, RunError> {
    let failed = |reason: String| RunError::Cluster {
        name: entry.name.clone(),
        reason,
    };
    let file = Kubeconfig::read_from(&entry.kubeconfig)
        .map_err(|e| failed(format!("reading {}: {e}", entry.kubeconfig.display())))?;
    let options = KubeConfigOptions {
        context: entry.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .map_err(|e| failed(format!("{}: {e}", entry.kubeconfig.display())))?;
    kube::Client::try_from(config).map_err(|e| failed(e.to_string()))
}
