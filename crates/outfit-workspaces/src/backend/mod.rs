//! The operations both APIs share, free of HTTP: reads come from the watch caches, writes go to
//! the API servers, and long polls wait on the caches' changes. Two types, one folder each:
//!
//! - [`ClusterWorkspaces`] (`cluster_workspaces/`): the workspaces of one cluster: its
//!   configuration (its namespace), its calls and its cache, and what is done on that cluster: a
//!   create's making (`create.rs`, with the user's storage in `storage.rs`), a delete
//!   (`delete.rs`), a workspace described and its progress read (`mod.rs`).
//! - [`Backend`] (`all_clusters/`): the set of clusters, the default one first, and what they
//!   share in this process (fetcher, catalogue, creates under way, users' turns). Both APIs call
//!   it: it chooses the cluster and reads every cache together (`mod.rs`), admits a create from
//!   either API (`create.rs`), holds the rest of deic-dk's operations (`compat.rs`, on the
//!   default cluster) and of the native API's (`native.rs`, on every cluster), and runs each
//!   cluster's Workspace controller (`controller.rs`).
//!
//! `request.rs` is what both take and answer, and why a request fails. Imports run one way:
//! `all_clusters/` → `cluster_workspaces/` → `request.rs`. Both run over any [`ClusterCalls`]:
//! the API server's [`Cluster`](crate::io::cluster::Cluster), or the unit tests' fake
//! (`tests/`).
//!
//! [`ClusterCalls`]: crate::io::calls::ClusterCalls

mod all_clusters;
mod cluster_workspaces;
mod request;

pub use self::{
    all_clusters::Backend,
    cluster_workspaces::ClusterWorkspaces,
    request::{CreateOutcome, Created, RequestError},
};

#[cfg(test)]
mod tests;
