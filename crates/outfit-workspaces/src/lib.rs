//! `outfit workspaces`: the workspace backend. It creates, watches and deletes per-user workspace
//! pods with their storage, Services and Ingresses, behind deic-dk's user-pods API
//! (`../shared/seeds/004`), and keeps every bit of its state in the cluster.
//!
//! The folders are the layers, read bottom-up; a file imports only from its own layer or below.
//! The pure ones are the crate [`outfit_workspaces_core`] (no tokio, no Kubernetes client),
//! imported by their own paths:
//! - [`cidr`](outfit_workspaces_core::cidr): address ranges; [`model`](outfit_workspaces_core::model):
//!   the plain data (labels and annotations, users, names, durations, the settings and the
//!   configuration that holds them).
//! - [`policy`](outfit_workspaces_core::policy): the rules a workspace is held to: per-user limits,
//!   and when its time is up.
//! - [`workspace`](outfit_workspaces_core::workspace): one workspace, pure: the pod a create makes,
//!   its storage, Services, Ingress and NetworkPolicy, the plan of what it needs once ready, what
//!   `get_pods` answers, and its progress (where a start or delete stands).
//! - [`resource`](outfit_workspaces_core::resource): the `Workspace` resource, the record of a
//!   workspace that outlives its pod, and what its reconcile decides.
//!
//! The rest talks, and lives here:
//! - [`io`]: what talks to the outside: the API server's calls (and the trait of those the backend
//!   and the lifecycle make, which their unit tests fake), the watches, manifests fetched,
//!   callers' identity, what the native API offers, and the counters `/metrics` serves.
//! - [`lifecycle`] and [`backend`], side by side (neither imports the other): what follows a create
//!   (a start's plan applied, deadlines), culling, the storage sweep and the workspaces' own
//!   activity endpoints, run by the replica that holds the Lease; and the operations (create,
//!   list, delete): one cluster's `ClusterWorkspaces` and the set of clusters' `Backend`, a folder
//!   each. Both run over [`io::calls::ClusterCalls`].
//! - [`api`]: HTTP: the page, the native API, deic-dk's API; one folder for `Api` and its `impl`s.
//! - [`run`]: the process. [`install`] prints what a cluster needs; it imports nothing here.

pub mod io;

pub mod backend;
pub mod lifecycle;

pub mod api;

pub mod install;
pub mod run;

pub use crate::run::Server;

pub use outfit_workspaces_core::model::config::Config;
