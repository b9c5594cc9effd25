//! The keys that shape what hostile callers meet on the API port: the connection cap, the
//! shares of the progress streams, the body deadline, and the other sites whose pages may change
//! workspaces.

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
    /// Progress streams open at once from one client address (an IPv6 /64): any token the
    /// cluster accepts is an identity, so without this one machine with many identities could
    /// still hold every one of `max_streams`.
    pub max_streams_per_source: usize,
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

/// `maxStreamsPerSource` as given, or by default half of `maxStreams` (though never below
/// `maxStreamsPerUser`, so one user alone at an address is held by their own cap first); never
/// above `maxStreams`, which it shares out.
pub(super) fn streams_per_source(
    given: Option<usize>,
    per_user: usize,
    max_streams: usize,
) -> Result<usize, String> {
    match given {
        Some(given) if given > max_streams => Err(format!(
            "{given} is above maxStreams ({max_streams}): one client address cannot hold more than the port"
        )),
        Some(given) => Ok(given),
        None => Ok((max_streams / 2).max(per_user).min(max_streams)),
    }
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
    fn a_source_shares_half_the_streams_unless_set_and_never_more_than_all() {
        assert_eq!(streams_per_source(None, 16, 512), Ok(256));
        // Never below one user's own cap, nor above the port's.
        assert_eq!(streams_per_source(None, 16, 20), Ok(16));
        assert_eq!(streams_per_source(None, 16, 10), Ok(10));
        assert_eq!(streams_per_source(None, 1, 1), Ok(1));
        assert_eq!(streams_per_source(Some(30), 16, 30), Ok(30));
        assert_eq!(streams_per_source(Some(3), 16, 30), Ok(3));
        let error = streams_per_source(Some(31), 16, 30).unwrap_err();
        assert!(error.contains("above maxStreams (30)"), "{error}");
    }

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
