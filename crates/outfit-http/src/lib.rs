//! What outfit's servers share: the webhook (`outfit serve`) and the workspace backend
//! (`outfit workspaces`) accept connections, time out slow clients, drain on shutdown and serve
//! their probes and metrics the same way, from here.
//!
//! - [`accept`]: the accept loop, one task per connection, TLS or plain HTTP, header-read and
//!   handshake timeouts, graceful drain;
//! - [`admin`]: the plain-HTTP admin port, `/livez`, `/readyz` and `/metrics`.

pub mod accept;
pub mod admin;
