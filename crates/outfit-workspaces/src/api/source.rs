//! Where a request comes from, as `maxStreamsPerSource` counts it (issue 46): the client's
//! address, grouped as one host holds addresses (an IPv4 address alone, an IPv6 address by its
//! /64, since one host usually has a whole /64 to pick from).
//!
//! The address is the TCP peer's, unless the peer is a proxy of `clientAddressFromCidrs` (an
//! ingress: behind one, every peer is the ingress). Then it is the right-most `X-Forwarded-For`
//! entry that is not itself such a proxy: each proxy appends the address it was reached from, so
//! entries to the left of it are the client's own to write and never believed. A header that
//! can't be read there counts as the peer's, never as an error: the header decides only whose
//! share a stream takes, and only a misbehaving proxy writes a bad entry on the right.

use std::{
    fmt,
    net::{IpAddr, Ipv6Addr, SocketAddr},
};

use axum::http::{HeaderMap, HeaderValue};
use outfit_workspaces_core::cidr::Cidr;

use super::extract::canonical;

/// The bits of an IPv6 address that name its /64, the network one host usually holds.
const IPV6_HOST_NETWORK: u128 = !0 << 64;

/// A client source: an IPv4 address, or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Source(IpAddr);

impl Source {
    /// The source the address `ip` belongs to (an IPv4-mapped IPv6 address as its IPv4 form).
    pub(super) fn of(ip: IpAddr) -> Self {
        match canonical(ip) {
            IpAddr::V6(v6) => Self(IpAddr::V6(Ipv6Addr::from(v6.to_bits() & IPV6_HOST_NETWORK))),
            v4 => Self(v4),
        }
    }

    /// The source of a request from `peer` with `headers`, reading `X-Forwarded-For` when the
    /// peer is in `proxies` (`clientAddressFromCidrs`).
    pub(super) fn of_request(peer: IpAddr, headers: &HeaderMap, proxies: &[Cidr]) -> Self {
        let forwarded = headers.get_all("x-forwarded-for").iter();
        Self::of(client_address(peer, forwarded, proxies))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => v4.fmt(f),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// The client's address: `peer`, or when `peer` is in `proxies`, the right-most address of
/// `forwarded` (every `X-Forwarded-For` header's entries, in order) not in `proxies`; the
/// left-most when every one is. An entry that is no address stops the walk at `peer`.
fn client_address<'a>(
    peer: IpAddr,
    forwarded: impl DoubleEndedIterator<Item = &'a HeaderValue>,
    proxies: &[Cidr],
) -> IpAddr {
    let peer = canonical(peer);
    let proxy = |ip: IpAddr| proxies.iter().any(|cidr| cidr.contains(ip));
    if !proxy(peer) {
        return peer;
    }
    let mut client = peer;
    for value in forwarded.rev() {
        let Ok(text) = value.to_str() else {
            return peer;
        };
        for entry in text.rsplit(',') {
            let Some(ip) = forwarded_address(entry) else {
                return peer;
            };
            client = canonical(ip);
            if !proxy(client) {
                return client;
            }
        }
    }
    client
}

/// One `X-Forwarded-For` entry's address: `203.0.113.7`, `2001:db8::1`, or either with a port
/// (`203.0.113.7:41234`, `[2001:db8::1]:41234`), as some proxies write it.
fn forwarded_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|address| address.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn cidrs(texts: &[&str]) -> Vec<Cidr> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    /// The source of a request from `peer` with one `X-Forwarded-For` line per item of
    /// `forwarded`, behind an ingress at 10.0.0.0/24.
    fn source(peer: &str, forwarded: &[&str]) -> String {
        let mut headers = HeaderMap::new();
        for line in forwarded {
            headers.append("x-forwarded-for", HeaderValue::from_str(line).unwrap());
        }
        Source::of_request(ip(peer), &headers, &cidrs(&["10.0.0.0/24"])).to_string()
    }

    #[test]
    fn ipv6_sources_are_their_64_and_ipv4_sources_their_address() {
        assert_eq!(
            Source::of(ip("2001:db8:1:2:aaaa::1")),
            Source::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        );
        assert_ne!(
            Source::of(ip("2001:db8:1:2::1")),
            Source::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(Source::of(ip("2001:db8:1:2::7")).to_string(), "2001:db8:1:2::/64");
        assert_ne!(Source::of(ip("203.0.113.7")), Source::of(ip("203.0.113.8")));
        assert_eq!(
            Source::of(ip("::ffff:203.0.113.7")),
            Source::of(ip("203.0.113.7"))
        );
        assert_eq!(Source::of(ip("203.0.113.7")).to_string(), "203.0.113.7");
    }

    #[test]
    fn behind_a_proxy_the_client_is_the_right_most_address_not_a_proxy() {
        // The ingress appends the client it was reached from.
        assert_eq!(source("10.0.0.5", &["203.0.113.7"]), "203.0.113.7");
        // A client that writes addresses of its own on the left is not believed for them.
        assert_eq!(
            source("10.0.0.5", &["198.51.100.1, 198.51.100.2, 203.0.113.7"]),
            "203.0.113.7"
        );
        // Proxies in a row (a load balancer in front of the ingress) are passed over, on one
        // line or several.
        assert_eq!(source("10.0.0.5", &["203.0.113.7, 10.0.0.9"]), "203.0.113.7");
        assert_eq!(
            source("10.0.0.5", &["198.51.100.1", "203.0.113.7", "10.0.0.9"]),
            "203.0.113.7"
        );
        // Entries with ports, as some proxies write them.
        assert_eq!(source("10.0.0.5", &["203.0.113.7:41234"]), "203.0.113.7");
        assert_eq!(
            source("10.0.0.5", &["[2001:db8:1:2::7]:41234"]),
            "2001:db8:1:2::/64"
        );
        // Only proxies: the left-most, the first the chain saw.
        assert_eq!(source("10.0.0.5", &["10.0.0.7, 10.0.0.9"]), "10.0.0.7");
    }

    #[test]
    fn the_header_is_the_peers_own_unless_from_a_proxy_and_readable() {
        // From anyone else the header is ignored: a client cannot name itself another source.
        assert_eq!(source("203.0.113.7", &["198.51.100.1"]), "203.0.113.7");
        assert_eq!(source("::ffff:203.0.113.7", &["198.51.100.1"]), "203.0.113.7");
        // From a proxy without the header, or with one that can't be read where it is read:
        // the proxy's own address.
        assert_eq!(source("10.0.0.5", &[]), "10.0.0.5");
        for bad in ["203.0.113.7, unknown", "203.0.113.7,", "not an address", ""] {
            assert_eq!(source("10.0.0.5", &[bad]), "10.0.0.5", "{bad:?}");
        }
        // Garbage on the left, the client's own to write, changes nothing.
        assert_eq!(source("10.0.0.5", &["unknown, 203.0.113.7"]), "203.0.113.7");
        let mut headers = HeaderMap::new();
        headers.append("x-forwarded-for", HeaderValue::from_bytes(b"\xff").unwrap());
        let proxies = cidrs(&["10.0.0.0/24"]);
        assert_eq!(
            Source::of_request(ip("10.0.0.5"), &headers, &proxies),
            Source::of(ip("10.0.0.5"))
        );
    }
}
