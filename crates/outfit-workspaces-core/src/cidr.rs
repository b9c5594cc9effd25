//! IP networks in CIDR form, for the caller allow-list, deic-dk's `podSubnetCidr` and the
//! workspaces' egress rules.
//!
//! The network arithmetic is `ipnet`'s; what is outfit's own is the reading (a bare address is
//! its own network, the address goes through the standard library's parser, and the messages name
//! the text) and the rule that an IPv4-mapped IPv6 caller counts as its IPv4 form.

use std::{fmt, net::IpAddr, str::FromStr};

use ipnet::IpNet;

/// An IPv4 or IPv6 network such as `10.128.0.0/15`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl Cidr {
    /// The network of the single address `ip`: `/32` for IPv4, `/128` for IPv6.
    pub fn host(ip: IpAddr) -> Self {
        Self(IpNet::from(ip))
    }

    /// Whether the network is IPv4.
    pub fn is_ipv4(&self) -> bool {
        matches!(self.0, IpNet::V4(_))
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.0.prefix_len()
    }

    /// The same network with the host bits cleared (`10.0.0.20/8` is `10.0.0.0/8`): the form
    /// the API server keeps without a warning.
    pub fn network(&self) -> Self {
        Self(self.0.trunc())
    }

    /// Whether `ip` is inside the network. An IPv4-mapped IPv6 address counts as its IPv4 form.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        self.0.contains(&ip)
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (address, prefix) = text.split_once('/').unwrap_or((text, ""));
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an IP network (such as 10.0.0.0/8)"))?;
        if prefix.is_empty() && !text.contains('/') {
            return Ok(Self::host(address));
        }
        let max = if address.is_ipv4() { 32 } else { 128 };
        prefix
            .parse::<u8>()
            .ok()
            .and_then(|prefix| IpNet::new(address, prefix).ok())
            .map(Self)
            .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().unwrap()
    }

    #[test]
    fn contains_addresses_inside_the_prefix() {
        let pods = cidr("10.128.0.0/15");
        assert!(pods.contains("10.128.0.1".parse().unwrap()));
        assert!(pods.contains("10.129.255.255".parse().unwrap()));
        assert!(!pods.contains("10.130.0.0".parse().unwrap()));
        assert!(cidr("0.0.0.0/0").contains("8.8.8.8".parse().unwrap()));
        assert!(cidr("::1/128").contains("::1".parse().unwrap()));
        assert!(cidr("127.0.0.0/8").contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!cidr("127.0.0.0/8").contains("::1".parse().unwrap()));
        assert!(cidr("10.0.0.20").contains("10.0.0.20".parse().unwrap()));
    }

    #[test]
    fn networks_know_their_family_and_clear_host_bits() {
        assert_eq!(cidr("10.0.0.20/8").network().to_string(), "10.0.0.0/8");
        assert_eq!(cidr("fd12::1/7").network().to_string(), "fc00::/7");
        assert_eq!(cidr("0.0.0.0/0").network(), cidr("0.0.0.0/0"));
        assert_eq!(cidr("10.1.2.3").network().to_string(), "10.1.2.3/32");
        assert!(cidr("10.0.0.0/8").is_ipv4());
        assert!(!cidr("::/0").is_ipv4());
        assert_eq!(cidr("10.0.0.0/8").prefix(), 8);
        assert_eq!(
            Cidr::host("10.0.0.11".parse().unwrap()).to_string(),
            "10.0.0.11/32"
        );
        assert_eq!(Cidr::host("fd00::1".parse().unwrap()).to_string(), "fd00::1/128");
    }

    #[test]
    fn refuses_bad_networks() {
        for bad in [
            "10.0.0.0/33",
            "10.0.0/8",
            "x/1",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "010.0.0.1/8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        assert_eq!(
            "x/1".parse::<Cidr>().unwrap_err(),
            "\"x/1\" is not an IP network (such as 10.0.0.0/8)"
        );
        assert_eq!(
            "::/129".parse::<Cidr>().unwrap_err(),
            "\"::/129\": the prefix length must be 0 to 128"
        );
        // The prefix is read as a number, as before: a leading zero or plus is still that number.
        assert_eq!(cidr("10.0.0.0/08"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("10.0.0.0/+8"), cidr("10.0.0.0/8"));
    }
}
