//! A closed-loop configuration: the server the measurement drives and the names the report gives
//! it. At the bottom, so the report names targets without importing the binary's root, which
//! starts the servers and prints the report.

use std::net::SocketAddr;

/// A closed-loop configuration: its name in the table, its short name and its server.
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) short: String,
    pub(crate) addr: SocketAddr,
}

impl Target {
    pub(crate) fn new(name: &str, short: &str, addr: SocketAddr) -> Self {
        let (name, short) = (name.to_owned(), short.to_owned());
        Self { name, short, addr }
    }
}
