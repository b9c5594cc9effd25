//! IP networks in CIDR form, for the caller allow-list, deic-dk's `podSubnetCidr` and the
//! workspaces' egress rules.

use std::{fmt, net::IpAddr, str::FromStr};

/// An IPv4 or IPv6 network such as `10.128.0.0/15`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    address: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The network of the single address `ip`: `/32` for IPv4, `/128` for IPv6.
    pub fn host(ip: IpAddr) -> Self {
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        Self { address: ip, prefix }
    }

    /// Whether the network is IPv4.
    pub fn is_ipv4(&self) -> bool {
        self.address.is_ipv4()
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The same network with the host bits cleared (`10.0.0.20/8` is `10.0.0.0/8`): the form
    /// the API server keeps without a warning.
    pub fn network(&self) -> Self {
        let address = match self.address {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V4((u32::from(v4) & mask).into())
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
        };
        Self {
            address,
            prefix: self.prefix,
        }
    }

    /// Whether `ip` is inside the network. An IPv4-mapped IPv6 address counts as its IPv4 form.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an IP network (such as 10.0.0.0/8)"))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Self { address, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
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
        for bad in ["10.0.0.0/33", "10.0.0/8", "x/1", "::/129"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
