//! One server process's shell: the accept loop of its port, the admin port, readiness, the drain
//! on shutdown, and the signals that start it. `outfit serve` (the webhook) and `outfit workspaces`
//! (the workspace backend) both run in a [`Shell`], so they start, report and stop alike.
//!
//! ```text
//!  run ──▶ admin port up: /livez 200, /readyz 503 ──▶ readiness future done: /readyz 200
//!  shutdown ──▶ /readyz 503, the listener closed, idle connections closed
//!           ──▶ drain: requests in flight answered, within the grace period
//!           ──▶ after the drain (the server's own: watchers stopped, Leases given up)
//!           ──▶ the admin port closed; run returns
//! ```
//!
//! The admin port stays up through the drain and what follows it, so that the kubelet's probes
//! and load balancers see "not ready" (and stop sending) rather than a refused connection.
//! [`shutdown_on_signals`] turns SIGTERM and SIGINT into the shutdown (a second one exits at once)
//! and SIGHUP into the server's own action; a test drives the same shutdown with its token.

use std::{fmt, future::Future, net::SocketAddr, pin::Pin, sync::Arc, time::Duration};

use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    accept::{self, Handler, Port, Timeouts},
    admin::{Admin, Exposition},
};

/// How long the admin port's last connections get once the drain and what follows it are done.
const ADMIN_CLOSE: Duration = Duration::from_secs(1);

type Step<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A server process: its port, the handler each connection gets, and how it reports and stops.
/// Built with [`Shell::new`] and the methods after it, then [`run`](Shell::run).
pub struct Shell<C> {
    port: Port,
    connection: C,
    timeouts: Timeouts,
    grace: Duration,
    admin: Option<(Port, Exposition)>,
    ready: Arc<watch::Sender<bool>>,
    ready_when: Option<Step<bool>>,
    after_drain: Option<Step<()>>,
}

impl<C> fmt::Debug for Shell<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shell")
            .field("port", &self.port)
            .field("timeouts", &self.timeouts)
            .field("grace", &self.grace)
            .field("admin", &self.admin.as_ref().map(|(port, _)| port))
            .field("ready", &*self.ready.borrow())
            .finish_non_exhaustive()
    }
}

impl<H, C> Shell<C>
where
    H: Handler,
    C: Fn(SocketAddr, &CancellationToken) -> H + Send + 'static,
{
    /// Serves `port`, each connection with the handler `connection` makes for its peer; the token
    /// it is given fires when that connection is to close (shutdown, or its place taken at the
    /// cap), so that a handler can end its streams. Without the methods below: the default
    /// [`Timeouts`], no admin port, ready once serving, and 15 s for the drain.
    pub fn new(port: Port, connection: C) -> Self {
        Self {
            port,
            connection,
            timeouts: Timeouts::default(),
            grace: Duration::from_secs(15),
            admin: None,
            ready: Arc::new(watch::Sender::new(false)),
            ready_when: None,
            after_drain: None,
        }
    }

    /// The connection timeouts, of the port and the admin port alike.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// How long requests in flight get to finish once shutdown starts.
    #[must_use]
    pub fn drain(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Serves `/livez`, `/readyz` and `/metrics` (what `metrics` renders) on `port`, when given.
    #[must_use]
    pub fn admin(mut self, port: Option<Port>, metrics: Exposition) -> Self {
        self.admin = port.map(|port| (port, metrics));
        self
    }

    /// Readiness (`/readyz`) is kept in `ready`: true once `when` answers true (unless shutdown
    /// came first), false again once shutdown starts.
    #[must_use]
    pub fn readiness(
        mut self,
        ready: Arc<watch::Sender<bool>>,
        when: impl Future<Output = bool> + Send + 'static,
    ) -> Self {
        self.ready = ready;
        self.ready_when = Some(Box::pin(when));
        self
    }

    /// Runs `step` once the drain is over (or its grace period), while the admin port still
    /// answers: the server's own stopping, such as waiting for its watchers or giving up a Lease.
    #[must_use]
    pub fn after_drain(mut self, step: impl Future<Output = ()> + Send + 'static) -> Self {
        self.after_drain = Some(Box::pin(step));
        self
    }

    /// Serves until `shutdown` fires, then drains: readiness turns false, no new connection is
    /// accepted, idle connections close, requests in flight get the grace period to finish; then
    /// the step after the drain runs, and last the admin port closes.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            port,
            connection,
            timeouts,
            grace,
            admin,
            ready,
            ready_when,
            after_drain,
        } = self;
        // The admin port has its own shutdown: it outlives the drain.
        let admin_shutdown = CancellationToken::new();
        let admin_tasks = TaskTracker::new();
        if let Some((admin_port, metrics)) = admin {
            let admin = Admin::new(ready.clone(), metrics);
            admin_tasks.spawn(accept::serve(
                admin_port,
                move |_, _| admin.clone(),
                timeouts,
                admin_shutdown.clone(),
                admin_tasks.clone(),
            ));
        }
        let ready_when = ready_when.unwrap_or_else(|| Box::pin(async { true }));
        {
            let (ready, shutdown) = (ready.clone(), shutdown.clone());
            admin_tasks.spawn(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    is_ready = ready_when => {
                        if is_ready && !shutdown.is_cancelled() {
                            ready.send_replace(true);
                        }
                    }
                }
            });
        }

        let connections = TaskTracker::new();
        accept::serve(port, connection, timeouts, shutdown, connections.clone()).await;

        // Not ready any more: load balancers stop sending while requests in flight finish.
        ready.send_replace(false);
        connections.close();
        tracing::info!(
            connections = connections.len(),
            "shutting down: draining connections"
        );
        if tokio::time::timeout(grace, connections.wait()).await.is_err() {
            tracing::warn!(
                connections = connections.len(),
                ?grace,
                "connections still open after the grace period; closing them"
            );
        }
        if let Some(step) = after_drain {
            step.await;
        }
        admin_shutdown.cancel();
        admin_tasks.close();
        let _ = tokio::time::timeout(ADMIN_CLOSE, admin_tasks.wait()).await;
        tracing::info!("stopped");
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT, and exits the process at once (status 1) on a second
/// one; calls `on_hangup` on SIGHUP (the server's own action: `outfit serve` reloads). Needs a
/// running tokio runtime.
#[cfg(unix)]
pub fn shutdown_on_signals(
    shutdown: CancellationToken,
    on_hangup: impl Fn() + Send + 'static,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
                _ = hangup.recv() => {
                    on_hangup();
                    continue;
                }
            }
            if shutdown.is_cancelled() {
                // Straight to stderr: a background log writer would not get to write it before
                // the process exits.
                eprintln!("second signal: exiting without waiting for the drain");
                std::process::exit(1);
            }
            tracing::info!("shutdown signal: draining");
            shutdown.cancel();
        }
    });
    Ok(())
}

/// Cancels `shutdown` on Ctrl-C.
#[cfg(not(unix))]
pub fn shutdown_on_signals(
    shutdown: CancellationToken,
    _on_hangup: impl Fn() + Send + 'static,
) -> std::io::Result<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            shutdown.cancel();
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::Full;
    use hyper::{Request, Response, body::Incoming};
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::{TcpListener, TcpStream},
        sync::{Notify, oneshot},
    };

    use super::*;

    /// Answers once the test lets it, after saying that a request is in flight.
    #[derive(Clone)]
    struct Held {
        arrived: Arc<Notify>,
        release: Arc<Notify>,
    }

    impl Handler for Held {
        type Body = Full<Bytes>;

        async fn call(&self, _request: Request<Incoming>) -> Response<Full<Bytes>> {
            self.arrived.notify_one();
            self.release.notified().await;
            Response::new(Full::new(Bytes::from_static(b"answered")))
        }
    }

    async fn bound() -> (TcpListener, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        (listener, address)
    }

    /// The response to one GET on `address`, or the error of connecting.
    async fn get(address: SocketAddr, path: &str) -> std::io::Result<String> {
        let mut tcp = TcpStream::connect(address).await?;
        tcp.write_all(format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").as_bytes())
            .await?;
        let mut response = String::new();
        tcp.read_to_string(&mut response).await?;
        Ok(response)
    }

    async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), future)
            .await
            .unwrap_or_else(|_| panic!("{what} within 10 s"))
    }

    #[tokio::test]
    async fn the_admin_port_says_not_ready_through_the_drain_and_what_follows_it() {
        let (listener, address) = bound().await;
        let (admin_listener, admin) = bound().await;
        let held = Held {
            arrived: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
        };
        let ready = Arc::new(watch::Sender::new(false));
        let (synced, synced_now) = oneshot::channel::<()>();
        let (after_drain_began, after_drain_seen) = oneshot::channel::<()>();
        let (finish_after_drain, after_drain_may_finish) = oneshot::channel::<()>();
        let shutdown = CancellationToken::new();
        let shell = Shell::new(Port::new(listener), {
            let held = held.clone();
            move |_, _| held.clone()
        })
        .drain(Duration::from_secs(10))
        .admin(Some(Port::new(admin_listener)), Arc::new(|| "# EOF\n".to_owned()))
        .readiness(ready.clone(), async move { synced_now.await.is_ok() })
        .after_drain(async move {
            let _ = after_drain_began.send(());
            let _ = after_drain_may_finish.await;
        });
        let running = tokio::spawn(shell.run(shutdown.clone()));

        assert!(
            within("/readyz", get(admin, "/readyz"))
                .await
                .expect("admin up")
                .starts_with("HTTP/1.1 503")
        );
        let _ = synced.send(());
        within("ready", ready.subscribe().wait_for(|ready| *ready))
            .await
            .expect("ready");
        assert!(
            within("/readyz", get(admin, "/readyz"))
                .await
                .expect("admin up")
                .starts_with("HTTP/1.1 200")
        );

        // A request in flight when shutdown starts.
        let in_flight = tokio::spawn(get(address, "/work"));
        within("the request to arrive", held.arrived.notified()).await;
        shutdown.cancel();
        within("not ready", ready.subscribe().wait_for(|ready| !*ready))
            .await
            .expect("not ready");
        let during_drain = within("/readyz in the drain", get(admin, "/readyz")).await;
        assert!(
            during_drain
                .expect("admin up in the drain")
                .starts_with("HTTP/1.1 503")
        );
        assert!(
            within("/livez in the drain", get(admin, "/livez"))
                .await
                .expect("admin up")
                .starts_with("HTTP/1.1 200")
        );
        assert!(
            TcpStream::connect(address).await.is_err(),
            "the listener is closed"
        );

        held.release.notify_one();
        let answered = within("the answer", in_flight)
            .await
            .expect("joined")
            .expect("answered");
        assert!(answered.ends_with("answered"), "{answered}");

        within("the step after the drain", after_drain_seen)
            .await
            .expect("after the drain");
        assert!(
            within("/readyz after the drain", get(admin, "/readyz"))
                .await
                .expect("admin up")
                .starts_with("HTTP/1.1 503")
        );
        let _ = finish_after_drain.send(());
        within("run to return", running).await.expect("joined");
        assert!(
            TcpStream::connect(admin).await.is_err(),
            "the admin port is closed at the end"
        );
    }
}
