//! Fetching an operator's manifest: only from a whitelisted URL (matched from its first
//! character), within a time limit and a size cap, without following redirects (a redirect could
//! lead off the whitelist). deic-dk's fetch has none of these limits.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Empty};
use hyper::{StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use regex::Regex;

/// Why a manifest could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL is not whitelisted.
    #[error("yaml_url {url:?} does not match whitelistManifestRegex {regex:?} from its start")]
    NotWhitelisted {
        /// The URL.
        url: String,
        /// The configured pattern.
        regex: String,
    },
    /// Not a URL.
    #[error("yaml_url {url:?} is not an http(s) URL: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The server answered with something other than 200.
    #[error("fetching {url}: the server answered {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: StatusCode,
    },
    /// The connection failed.
    #[error("fetching {url}: {reason}")]
    Transport {
        /// The URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// It took too long.
    #[error("fetching {url}: no complete answer within {limit:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The limit.
        limit: Duration,
    },
    /// It is too large.
    #[error("fetching {url}: the manifest is larger than {limit} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The cap.
        limit: usize,
    },
    /// Not UTF-8 text.
    #[error("fetching {url}: the manifest is not UTF-8 text")]
    NotText {
        /// The URL.
        url: String,
    },
}

impl FetchError {
    /// What went wrong, without the URL or the connection's detail: for callers who chose a
    /// catalogue entry, to whom the manifest's (possibly internal) address is none of their
    /// business.
    pub fn reason(&self) -> String {
        match self {
            Self::NotWhitelisted { .. } => "its URL does not match whitelistManifestRegex".to_owned(),
            Self::BadUrl { .. } => "its URL is not an http(s) URL".to_owned(),
            Self::Status { status, .. } => format!("the manifest server answered {status}"),
            Self::Transport { .. } => "the manifest server could not be reached".to_owned(),
            Self::Timeout { limit, .. } => format!("no complete answer within {limit:?}"),
            Self::TooLarge { limit, .. } => format!("the manifest is larger than {limit} bytes"),
            Self::NotText { .. } => "the manifest is not UTF-8 text".to_owned(),
        }
    }
}

/// Fetches whitelisted manifests.
#[derive(Clone)]
pub struct Fetcher {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    whitelist: Regex,
    timeout: Duration,
    max_bytes: usize,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("whitelist", &self.whitelist.as_str())
            .field("timeout", &self.timeout)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher for URLs matching `whitelist` (already anchored), with the system's CA roots.
    pub fn new(whitelist: Regex, timeout: Duration, max_bytes: usize) -> Self {
        let connector = https_connector("https manifests");
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Self {
            client,
            whitelist,
            timeout,
            max_bytes,
        }
    }

    /// Checks `url` against the whitelist.
    pub fn check(&self, url: &str) -> Result<Uri, FetchError> {
        if !self.whitelist.is_match(url) {
            return Err(FetchError::NotWhitelisted {
                url: url.to_owned(),
                regex: self.whitelist.as_str().to_owned(),
            });
        }
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| FetchError::BadUrl {
                url: url.to_owned(),
                reason: e.to_string(),
            })?;
        match uri.scheme_str() {
            Some("http" | "https") if uri.host().is_some() => Ok(uri),
            _ => Err(FetchError::BadUrl {
                url: url.to_owned(),
                reason: "expected http:// or https:// and a host".to_owned(),
            }),
        }
    }

    /// Fetches the manifest at `url`.
    pub async fn fetch(&self, url: &str) -> Result<String, FetchError> {
        let uri = self.check(url)?;
        match tokio::time::timeout(self.timeout, self.get(uri, url)).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout {
                url: url.to_owned(),
                limit: self.timeout,
            }),
        }
    }

    async fn get(&self, uri: Uri, url: &str) -> Result<String, FetchError> {
        let transport = |reason: String| FetchError::Transport {
            url: url.to_owned(),
            reason,
        };
        let response = self
            .client
            .get(uri)
            .await
            .map_err(|e| transport(error_chain(&e)))?;
        if response.status() != StatusCode::OK {
            return Err(FetchError::Status {
                url: url.to_owned(),
                status: response.status(),
            });
        }
        let mut body = response.into_body();
        let mut text = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| transport(e.to_string()))?;
            if let Some(data) = frame.data_ref() {
                if text.len() + data.len() > self.max_bytes {
                    return Err(FetchError::TooLarge {
                        url: url.to_owned(),
                        limit: self.max_bytes,
                    });
                }
                text.extend_from_slice(data);
            }
        }
        String::from_utf8(text.to_vec()).map_err(|_| FetchError::NotText { url: url.to_owned() })
    }
}

/// A connector for http:// and https:// (HTTP/1.1) with the system's CA roots; without any,
/// https:// fails, as the warning says of `what` once, at start.
pub(crate) fn https_connector(what: &str) -> HttpsConnector<HttpConnector> {
    match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
        Ok(builder) => builder.https_or_http().enable_http1().build(),
        Err(error) => {
            tracing::warn!(%error, "no system CA certificates: {what} will fail");
            let tls = rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .build()
        }
    }
}

/// An error with its causes, as one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn fetcher(max_bytes: usize, timeout: Duration) -> Fetcher {
        Fetcher::new(
            Regex::new(r"^(?:http://127\.0\.0\.1:\d+/ok/)").unwrap(),
            timeout,
            max_bytes,
        )
    }

    /// A one-shot HTTP server on loopback answering `response` to the first request.
    async fn serve_once(response: Vec<u8>, delay: Duration) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = tcp.read(&mut request).await;
            tokio::time::sleep(delay).await;
            let _ = tcp.write_all(&response).await;
        });
        port
    }

    fn http(status: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn fetches_a_whitelisted_manifest() {
        let port = serve_once(http("200 OK", "kind: Pod\n"), Duration::ZERO).await;
        let text = fetcher(1024, Duration::from_secs(5))
            .fetch(&format!("http://127.0.0.1:{port}/ok/pod.yaml"))
            .await
            .unwrap();
        assert_eq!(text, "kind: Pod\n");
    }

    #[tokio::test]
    async fn refuses_urls_that_only_contain_the_whitelisted_prefix() {
        let err = fetcher(1024, Duration::from_secs(5))
            .fetch("http://evil.example/?http://127.0.0.1:1/ok/pod.yaml")
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::NotWhitelisted { .. }), "{err}");
    }

    #[tokio::test]
    async fn non_200_answers_are_errors_with_the_status() {
        let port = serve_once(http("302 Found", ""), Duration::ZERO).await;
        let err = fetcher(1024, Duration::from_secs(5))
            .fetch(&format!("http://127.0.0.1:{port}/ok/pod.yaml"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("302"), "{err}");
    }

    #[tokio::test]
    async fn large_manifests_are_refused() {
        let port = serve_once(http("200 OK", &"x".repeat(100)), Duration::ZERO).await;
        let err = fetcher(10, Duration::from_secs(5))
            .fetch(&format!("http://127.0.0.1:{port}/ok/pod.yaml"))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::TooLarge { limit: 10, .. }), "{err}");
    }

    #[tokio::test]
    async fn slow_servers_time_out() {
        let port = serve_once(http("200 OK", "x"), Duration::from_secs(30)).await;
        let limit = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let err = fetcher(1024, limit)
            .fetch(&format!("http://127.0.0.1:{port}/ok/pod.yaml"))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Timeout { .. }), "{err}");
        // The limit, not the server (30 s), ended the wait, and not before it was up; the upper
        // bound leaves room for a loaded machine.
        let took = started.elapsed();
        assert!(
            took >= limit && took < Duration::from_secs(5),
            "gave up after {took:?} with a limit of {limit:?}"
        );
    }
}
