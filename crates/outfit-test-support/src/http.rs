//! The one small HTTP client of the tests and tools (hyper's HTTP/1 client): one request on a
//! connection of its own, plain or over TLS, bounded in time, and the TLS client configuration
//! that trusts a test CA. Only a test that must send malformed bytes writes them by hand.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Request, client::conn::http1};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// What went wrong with a request, naming where it went.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the TLS handshake with {addr}: {source}")]
    Tls {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{method} {path} on {addr}: {source}")]
    Exchange {
        method: String,
        path: String,
        addr: SocketAddr,
        source: hyper::Error,
    },
    #[error("{method} {path} on {addr}: no answer within {timeout:?}")]
    Timeout {
        method: String,
        path: String,
        addr: SocketAddr,
        timeout: Duration,
    },
    #[error("the request {method} {path}: {source}")]
    Request {
        method: String,
        path: String,
        source: hyper::http::Error,
    },
    #[error("the CA file {}: {reason}", path.display())]
    Ca {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("the answer to {what} is not JSON: {source}")]
    NotJson { what: String, source: serde_json::Error },
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, HttpError> {
        serde_json::from_slice(&self.body).map_err(|source| HttpError::NotJson {
            what: format!("an answer with status {}", self.status),
            source,
        })
    }
}

/// One request to be sent: method, path, headers and body.
#[derive(Debug, Clone, Default)]
pub struct Call<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Bytes,
    /// `content-type`, if the body has one.
    pub content_type: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// `method path` without headers or body.
    pub fn new(method: &'a str, path: &'a str) -> Self {
        Self {
            method,
            path,
            ..Self::default()
        }
    }

    /// With these headers.
    pub fn headers(self, headers: &'a [(&'a str, &'a str)]) -> Self {
        Self { headers, ..self }
    }

    /// With this JSON body (and `content-type: application/json`).
    pub fn json(self, body: &Value) -> Self {
        Self {
            body: Bytes::from(body.to_string()),
            content_type: Some("application/json"),
            ..self
        }
    }

    /// With this `content-type`.
    pub fn content_type(self, content_type: &'a str) -> Self {
        Self {
            content_type: Some(content_type),
            ..self
        }
    }

    /// With this body as it is.
    pub fn body(self, body: impl Into<Bytes>) -> Self {
        Self {
            body: body.into(),
            ..self
        }
    }

    fn request(&self) -> Result<Request<Full<Bytes>>, HttpError> {
        let mut request = Request::builder().method(self.method).uri(self.path);
        // `localhost` unless the call names its own host.
        if !self
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            request = request.header("host", "localhost");
        }
        if let Some(content_type) = self.content_type {
            request = request.header("content-type", content_type);
        }
        for (name, value) in self.headers {
            request = request.header(*name, *value);
        }
        request
            .body(Full::new(self.body.clone()))
            .map_err(|source| HttpError::Request {
                method: self.method.to_owned(),
                path: self.path.to_owned(),
                source,
            })
    }

    /// Sends the request on a new plain connection to `addr` and reads the answer whole, within
    /// `timeout`.
    pub async fn send(&self, addr: SocketAddr, timeout: Duration) -> Result<Answer, HttpError> {
        let exchange = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|source| HttpError::Connect { addr, source })?;
            self.exchange(addr, TokioIo::new(tcp)).await
        };
        self.bounded(addr, timeout, exchange).await
    }

    /// Sends the request over TLS (server name `localhost`) to `addr`, within `timeout`.
    pub async fn send_tls(
        &self,
        addr: SocketAddr,
        tls: &Arc<ClientConfig>,
        timeout: Duration,
    ) -> Result<Answer, HttpError> {
        let exchange = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|source| HttpError::Connect { addr, source })?;
            let stream = TlsConnector::from(tls.clone())
                .connect(ServerName::try_from("localhost").expect("a DNS name"), tcp)
                .await
                .map_err(|source| HttpError::Tls { addr, source })?;
            self.exchange(addr, TokioIo::new(stream)).await
        };
        self.bounded(addr, timeout, exchange).await
    }

    /// [`Self::send`] to `127.0.0.1:port` from synchronous code (inside or outside a runtime):
    /// on a thread and a runtime of its own.
    pub fn send_blocking(&self, port: u16, timeout: Duration) -> Result<Answer, HttpError> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a current-thread runtime")
                        .block_on(self.send(loopback(port), timeout))
                })
                .join()
                .expect("the request thread does not panic")
        })
    }

    async fn bounded(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        exchange: impl Future<Output = Result<Answer, HttpError>>,
    ) -> Result<Answer, HttpError> {
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| HttpError::Timeout {
                method: self.method.to_owned(),
                path: self.path.to_owned(),
                addr,
                timeout,
            })?
    }

    async fn exchange<S>(&self, addr: SocketAddr, stream: TokioIo<S>) -> Result<Answer, HttpError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let failed = |source| HttpError::Exchange {
            method: self.method.to_owned(),
            path: self.path.to_owned(),
            addr,
            source,
        };
        let request = self.request()?;
        let (mut sender, connection) = http1::handshake(stream).await.map_err(failed)?;
        tokio::spawn(connection);
        let response = sender.send_request(request).await.map_err(failed)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.map_err(failed)?.to_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A TLS client configuration (ring, HTTP/1.1 by ALPN as the API server speaks to webhooks off
/// loopback) that trusts the certificates of the PEM file `ca`.
pub fn tls_client_config(ca: &Path) -> Result<Arc<ClientConfig>, HttpError> {
    let bad = |reason: String| HttpError::Ca {
        path: ca.to_owned(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))? {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
