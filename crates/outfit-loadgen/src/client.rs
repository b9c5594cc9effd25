//! The client side shared by both measurements: what every client phase needs, its keep-alive
//! HTTPS connections, one request on one of them, and waiting for the client tasks. At the bottom,
//! so the interleaved closed loop and the open loop in the binary's root both import it and not
//! each other.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Result;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::{net::TcpStream, runtime::Runtime, task::JoinHandle};
use tokio_rustls::TlsConnector;

use crate::args::Args;

/// How long client tasks may take to finish their last request once a phase has ended.
const JOIN_GRACE: Duration = Duration::from_secs(15);

/// What every client phase needs.
pub(crate) struct Client<'a> {
    pub(crate) rt: &'a Runtime,
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) bodies: Arc<Vec<Bytes>>,
    pub(crate) args: &'a Args,
}

pub(crate) type Sender = http1::SendRequest<Full<Bytes>>;

pub(crate) async fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Result<Sender> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = TlsConnector::from(config.clone())
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let (sender, connection) = http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

pub(crate) async fn send(sender: &mut Sender, body: &Bytes) -> Result<()> {
    sender.ready().await?;
    let request = Request::post("/mutate?timeout=10s")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let _ = response.into_body().collect().await?;
    anyhow::ensure!(status == hyper::StatusCode::OK, "status {status}");
    Ok(())
}

/// Waits for client tasks that have been told to stop, for at most [`JOIN_GRACE`] in all: a
/// request that never gets an answer must not keep the run alive.
pub(crate) async fn join_bounded<T>(tasks: Vec<JoinHandle<T>>) -> Result<Vec<T>> {
    let all = async {
        let mut out = Vec::with_capacity(tasks.len());
        for task in tasks {
            out.push(task.await?);
        }
        Ok::<_, tokio::task::JoinError>(out)
    };
    match tokio::time::timeout(JOIN_GRACE, all).await {
        Ok(joined) => Ok(joined?),
        Err(_) => {
            anyhow::bail!("client connections still waiting for an answer {JOIN_GRACE:?} after the end")
        }
    }
}
