//! Helpers shared by the server tests: fixtures, an in-process webhook, a TLS client that trusts
//! one CA, servers on 127.0.0.1:0, the Go JSON-patch applier, and bounded waits on events.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode, client::conn::http1};
use hyper_util::rt::TokioIo;
use outfit_server::{
    CompileOptions, Config, Handle, Limits, Metrics, PolicyStore, Server, Timeouts, TlsSource, Webhook,
};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt},
    net::TcpStream,
    sync::watch,
    task::JoinHandle,
};
use tokio_rustls::{TlsConnector, client::TlsStream};
use tokio_util::sync::CancellationToken;

/// The longest any test waits for an event before failing.
pub(crate) const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// The TLS handshake timeout of [`test_config`].
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(500);

/// The header read timeout of [`test_config`].
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(500);

/// Asserts that what started at `started` took at least `timeout` (a timeout never fires early)
/// and not much longer: at most 10 times `timeout`, and never less than 5 s, room enough for a
/// loaded 2-core machine yet far below what a missing timeout (the test's own 20 s) would take.
pub(crate) fn assert_timed_out_after(what: &str, started: std::time::Instant, timeout: Duration) {
    let took = started.elapsed();
    let at_most = (timeout * 10).max(Duration::from_secs(5));
    assert!(
        took >= timeout && took <= at_most,
        "{what} took {took:?}; the timeout is {timeout:?}, so between {timeout:?} and {at_most:?} was expected"
    );
}

pub(crate) use outfit_test_support::{repo_root, wait::within};

/// `tests/fixtures/admission`.
pub(crate) fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/admission")
}

/// The body of fixture `name` (without `.json`).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("{name}.json"))).expect("fixture exists")
}

/// Waits until the reload counts satisfy `done`.
pub(crate) async fn wait_reloads(
    what: &str,
    reloads: &mut watch::Receiver<outfit_server::ReloadCounts>,
    done: impl FnMut(&outfit_server::ReloadCounts) -> bool,
) {
    within(what, EVENT_TIMEOUT, reloads.wait_for(done))
        .await
        .expect("the server is running");
}

/// One read from `stream`, failing the test if it takes longer than [`EVENT_TIMEOUT`]; a closed
/// connection reads `Ok(0)` or an error.
pub(crate) async fn read_once(what: &str, stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<usize> {
    let mut buf = [0u8; 64];
    within(what, EVENT_TIMEOUT, stream.read(&mut buf)).await
}

/// A directory removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A webhook handler serving the fixture policies, in process.
pub(crate) fn fixture_webhook() -> (Webhook, Arc<Metrics>) {
    webhook_for(&fixtures().join("policies"), Limits::default())
}

pub(crate) fn webhook_for(policies: &Path, limits: Limits) -> (Webhook, Arc<Metrics>) {
    webhook_with(policies, limits, "default".into())
}

/// As [`webhook_for`], compiling as `options` say (`outfit serve`'s annotation and warnings).
pub(crate) fn webhook_with(
    policies: &Path,
    limits: Limits,
    options: CompileOptions,
) -> (Webhook, Arc<Metrics>) {
    let metrics = Metrics::new();
    let store = PolicyStore::load(vec![policies.to_path_buf()], options, metrics.clone(), None)
        .expect("policies load");
    (Webhook::new(store.current(), metrics.clone(), limits), metrics)
}

/// Sends `body` to the in-process webhook at `path`; returns the status and the JSON body.
pub(crate) async fn post(webhook: &Webhook, path: &str, body: impl Into<Bytes>) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .expect("request");
    let response = webhook.handle(request).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("response is JSON ({e}): {bytes:?}"));
    (status, json)
}

/// A server on 127.0.0.1:0 with its admin port, run until the returned token is cancelled.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) handle: Handle,
    pub(crate) shutdown: CancellationToken,
    pub(crate) task: JoinHandle<()>,
}

/// A configuration for tests: loopback, port 0, fast polling, short timeouts.
pub(crate) fn test_config(policies: &Path, tls: TlsSource) -> Config {
    let mut config = Config::new(vec![policies.to_path_buf()], tls);
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.poll_interval = Duration::from_millis(50);
    config.timeouts = Timeouts {
        handshake: HANDSHAKE_TIMEOUT,
        header_read: HEADER_READ_TIMEOUT,
    };
    config.shutdown_grace = Duration::from_secs(10);
    config
}

impl Running {
    /// Waits until the server reports ready; returns the readiness receiver.
    pub(crate) async fn ready(&self) -> watch::Receiver<bool> {
        let mut readiness = self.handle.readiness();
        within("readiness", EVENT_TIMEOUT, readiness.wait_for(|ready| *ready))
            .await
            .expect("running");
        readiness
    }

    /// Waits for the server task to finish (after [`Running::shutdown`] is cancelled).
    pub(crate) async fn join(self) {
        within("the server to stop", EVENT_TIMEOUT, self.task)
            .await
            .expect("server task");
    }

    /// Cancels the server and waits for it to stop.
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        self.join().await;
    }
}

pub(crate) async fn start(config: Config) -> Running {
    let server = Server::bind(config).await.expect("server binds");
    let addr = server.local_addr();
    let admin = server.admin_addr().expect("admin port");
    let handle = server.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));
    Running {
        addr,
        admin,
        handle,
        shutdown,
        task,
    }
}

/// A server with the fixture policies and a self-signed certificate in `certs` (after `tweak` edits
/// the [`test_config`]), and a client configuration trusting its CA.
pub(crate) async fn start_self_signed(
    certs: &TempDir,
    tweak: impl FnOnce(&mut Config),
) -> (Running, Arc<ClientConfig>) {
    let mut config = test_config(
        &fixtures().join("policies"),
        TlsSource::SelfSigned {
            dir: certs.path().to_path_buf(),
            dns_names: Vec::new(),
        },
    );
    tweak(&mut config);
    let server = start(config).await;
    (server, client_config(&certs.path().join("ca.crt")))
}

/// A TLS client configuration trusting only the CA in `ca_pem_file`.
pub(crate) fn client_config(ca_pem_file: &Path) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_pem_file).expect("CA file") {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let mut config = ClientConfig::builder_with_provider(outfit_server::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// Opens a TLS connection to `addr`, verifying the server as `localhost`.
pub(crate) async fn tls_connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(config.clone())
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
}

/// An HTTP/1.1 keep-alive connection over TLS, as the API server keeps one.
pub(crate) struct Client {
    sender: http1::SendRequest<Full<Bytes>>,
    /// The certificate the server presented.
    pub(crate) peer_certificate: CertificateDer<'static>,
}

impl Client {
    pub(crate) async fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> std::io::Result<Self> {
        let tls = tls_connect(addr, config).await?;
        let peer_certificate = tls.get_ref().1.peer_certificates().expect("server certificate")[0].clone();
        let (sender, connection) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(connection);
        Ok(Self {
            sender,
            peer_certificate,
        })
    }

    /// POSTs `body` to `/mutate?timeout=10s`, as the API server does.
    pub(crate) async fn review(&mut self, body: Bytes) -> Result<(StatusCode, Value), String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let request = Request::post("/mutate?timeout=10s")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body))
            .expect("request");
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let json = serde_json::from_slice(&bytes).map_err(|e| format!("{e}: {bytes:?}"))?;
        Ok((status, json))
    }
}

/// GETs `path` from the plain-HTTP admin port.
pub(crate) async fn admin_get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let tcp = TcpStream::connect(addr).await.expect("admin port accepts");
    let (mut sender, connection) = http1::handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
        .await
        .expect("admin handshake");
    tokio::spawn(connection);
    let request = Request::get(path)
        .header("host", "localhost")
        .body(Full::default())
        .expect("request");
    let response = sender.send_request(request).await.expect("admin answers");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("admin body")
        .to_bytes();
    (status, String::from_utf8(bytes.to_vec()).expect("utf-8"))
}
