//! The workspace proxy's connections to workspace pods (issue 42): plain HTTP/1.1 to the pod's
//! address, straight from the watch cache (no Service, no DNS), each connect on a deadline, idle
//! connections kept a while for the next request; and a switched connection (a WebSocket)
//! joined to the pod's, closed after [`TUNNEL_IDLE`] without a byte either way.

use std::{net::IpAddr, time::Duration};

use hyper::{Request, Response, body::Incoming};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long a connection to a pod may take to open.
pub const CONNECT_TIME: Duration = Duration::from_secs(5);
/// How long a pod may take to begin its answer.
pub const ANSWER_TIME: Duration = Duration::from_secs(60);
/// How long an idle connection to a pod is kept for the next request.
const IDLE_KEPT: Duration = Duration::from_secs(30);
/// Idle connections kept per pod: as many as a busy page keeps requests in flight, so that a
/// burst does not open and close a connection per request.
const IDLE_PER_POD: usize = 256;
/// How long a tunnel (a WebSocket) stays open without a byte either way.
pub const TUNNEL_IDLE: Duration = Duration::from_secs(30 * 60);
/// Bytes read at a time on each side of a tunnel.
const TUNNEL_CHUNK: usize = 8 << 10;

/// Why a pod's answer could not be had.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The connection or the exchange failed.
    #[error("the workspace did not answer: {0}")]
    Failed(String),
    /// No answer began in time.
    #[error("the workspace did not answer within {0:?}")]
    Timeout(Duration),
}

/// The connections to workspace pods.
#[derive(Clone, Debug)]
pub struct Upstreams {
    client: Client<HttpConnector, Incoming>,
}

impl Default for Upstreams {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIME));
        connector.set_nodelay(true);
        let client = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(IDLE_KEPT)
            .pool_max_idle_per_host(IDLE_PER_POD)
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(connector);
        Self { client }
    }
}

impl Upstreams {
    /// Sends `request` (its URI's path and query) to the pod at `ip`:`port`.
    pub async fn send(
        &self,
        ip: IpAddr,
        port: u16,
        mut request: Request<Incoming>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let authority = std::net::SocketAddr::new(ip, port);
        *request.uri_mut() = format!("http://{authority}{path}")
            .parse()
            .map_err(|e| UpstreamError::Failed(format!("the address {authority}{path}: {e}")))?;
        match tokio::time::timeout(ANSWER_TIME, self.client.request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => Err(UpstreamError::Failed(super::fetch::error_chain(&error))),
            Err(_) => Err(UpstreamError::Timeout(ANSWER_TIME)),
        }
    }
}

/// Copies bytes both ways between `client` and `pod` until either side ends, a write fails, or
/// `idle` passes without a byte; then closes both.
pub async fn tunnel<A, B>(mut client: A, mut pod: B, idle: Duration)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let mut from_client = vec![0u8; TUNNEL_CHUNK];
    let mut from_pod = vec![0u8; TUNNEL_CHUNK];
    loop {
        // Reads are cancel-safe: the side not chosen loses nothing.
        let step = async {
            tokio::select! {
                read = client.read(&mut from_client) => match read {
                    Ok(0) | Err(_) => false,
                    Ok(n) => pod.write_all(&from_client[..n]).await.is_ok(),
                },
                read = pod.read(&mut from_pod) => match read {
                    Ok(0) | Err(_) => false,
                    Ok(n) => client.write_all(&from_pod[..n]).await.is_ok(),
                },
            }
        };
        if !matches!(tokio::time::timeout(idle, step).await, Ok(true)) {
            break;
        }
    }
    let _ = client.shutdown().await;
    let _ = pod.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tunnel_carries_both_ways_and_closes_when_idle() {
        let (client, mut browser) = tokio::io::duplex(64);
        let (pod, mut app) = tokio::io::duplex(64);
        let joined = tokio::spawn(tunnel(client, pod, Duration::from_millis(300)));
        browser.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        app.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        app.write_all(b"pong").await.unwrap();
        browser.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        // Then nothing either way: the tunnel closes both sides.
        tokio::time::timeout(Duration::from_secs(5), joined)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(browser.read(&mut got).await.unwrap(), 0);
        assert_eq!(app.read(&mut got).await.unwrap(), 0);
    }
}
