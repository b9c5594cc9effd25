//! What outfit's servers share: the webhook (`outfit serve`) and the workspace backend
//! (`outfit workspaces`) accept connections, time out slow clients, drain on shutdown and serve
//! their probes and metrics the same way, from here.
//!
//! - [`shell`]: a server process: its port's accept loop and its admin port, readiness, the
//!   drain on shutdown (the admin port kept up through it), and SIGTERM/SIGINT; the one way in;
//! - [`accept`]: the accept loop, one task per connection, TLS or plain HTTP, header-read and
//!   handshake timeouts, graceful drain;
//! - [`limit`]: the cap on open connections, which closes the oldest idle one to make room;
//! - [`admin`]: the plain-HTTP admin port, `/livez`, `/readyz` and `/metrics`;
//! - [`tls`]: the serving certificate, reloaded from its PEM files (polled, and at once on
//!   request) without a restart, the owner told of each reload; and a self-signed CA and leaf for
//!   local use;
//! - [`authority`]: outfit's own CA and serving certificate as a Kubernetes Secret holds them, and
//!   when to renew them (the rotation that fails no admission).

pub mod accept;
pub mod admin;
pub mod authority;
pub mod limit;
pub mod shell;
pub mod tls;
