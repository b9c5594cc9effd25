//! The keys that shape what hostile callers meet on the API port: the connection cap, the body
//! deadline, and the other sites whose pages may change workspaces.

use std::time::Duration;

/// The API port's exposure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    /// Connections open at once, at most.
    pub max_connections: usize,
    /// Progress streams one user may hold open at once: a stream is busy, never evicted as idle
    /// at the connection cap, so without this one user could hold every connection.
    pub max_streams_per_user: usize,
    /// Progress streams open at once over every user: below `max_connections`, so that however
    /// many identities open streams, requests keep connections to be answered on.
    pub max_streams: usize,
    /// Requests of the native API one user may make a second, on average.
    pub requests_per_user_per_second: usize,
    /// Requests of the native API one user may make at once after a quiet spell.
    pub request_burst_per_user: usize,
    /// How long a request body may take to arrive.
    pub body_read_timeout: Duration,
    /// Origins (`https://portal.example.org`) besides the API's own whose pages may send
    /// state-changing requests; lower-case, without a trailing `/`.
    pub allowed_origins: Vec<String>,
}

/// A list of origins such as `["https://portal.example.org"]`, each as browsers send it.
pub(super) fn parse_origins(texts: &[String]) -> Result<Vec<String>, String> {
    texts.iter().map(|t| parse_origin(t)).collect()
}

/// An origin as browsers send it: `scheme://host[:port]`, nothing after.
fn parse_origin(text: &str) -> Result<String, String> {
    let origin = text.trim().trim_end_matches('/').to_ascii_lowercase();
    let Some((scheme, host)) = origin.split_once("://") else {
        return Err(format!(
            "{text:?} is not an origin (expected https://host[:port])"
        ));
    };
    if !matches!(scheme, "http" | "https") || host.is_empty() || host.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "{text:?} is not an origin (expected https://host[:port], no path)"
        ));
    }
    Ok(origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert_eq!(
            parse_origin("https://Portal.Example.org/"),
            Ok("https://portal.example.org".to_owned())
        );
        assert_eq!(
            parse_origin("http://localhost:8080"),
            Ok("http://localhost:8080".to_owned())
        );
        for bad in ["portal.example.org", "https://x/path", "ftp://x", "https://", "*"] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}
