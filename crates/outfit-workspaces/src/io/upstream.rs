//! The workspace proxy's connections to workspace pods (issue 42): plain HTTP/1.1 to the pod's
//! address, straight from the watch cache (no Service, no DNS), each connect on a deadline, idle
//! connections kept a while for the next request.

use std::{net::IpAddr, time::Duration};

use hyper::{Request, Response, body::Incoming};
use hyper_util::client::legacy::{Client, connect::HttpConnector};

/// How long a connection to a pod may take to open.
pub const CONNECT_TIME: Duration = Duration::from_secs(5);
/// How long a pod may take to begin its answer.
pub const ANSWER_TIME: Duration = Duration::from_secs(60);
/// How long an idle connection to a pod is kept for the next request.
const IDLE_KEPT: Duration = Duration::from_secs(30);
/// Idle connections kept per pod.
const IDLE_PER_POD: usize = 16;

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
