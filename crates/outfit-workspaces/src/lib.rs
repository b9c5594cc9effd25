//! `outfit workspaces`: the workspace backend. It creates, watches and deletes per-user workspace
//! pods with their storage, Services and Ingresses, behind deic-dk's user-pods API
//! (`../shared/seeds/004`), and keeps every bit of its state in the cluster.
//!
//! The folders are the layers, read bottom-up; a file imports only from its own layer or below:
//! - [`cidr`] and [`quantity`]: the two Kubernetes primitives (address ranges, CPU and memory
//!   amounts), at the top of the tree only because they are being replaced by `ipnet` and
//!   outfit-core's parser; everything may use them.
//! - [`model`]: the plain data: labels and annotations, users, names, durations, the settings
//!   (isolation, limits) and the configuration that holds them.
//! - [`policy`]: the rules a workspace is held to: per-user limits, and when its time is up.
//! - [`workspace`]: one workspace, pure: the pod a create makes, its storage, Services, Ingress and
//!   NetworkPolicy, what `get_pods` answers, and its progress (where a start or delete stands).
//! - [`io`]: what talks to the outside: the API server's calls, the watches, manifests fetched,
//!   callers' identity, what the native API offers, and the counters `/metrics` serves.
//! - [`lifecycle`]: what follows a create (a start's jobs, deadlines) and culling, and the
//!   workspaces' own activity endpoints.
//! - [`backend`]: the operations (create, list, delete, the storage sweep), one folder for
//!   `Backend`; above the lifecycle because a create hands its pod on to it.
//! - [`api`]: HTTP: the page, the native API, deic-dk's API; one folder for `Api`.
//! - [`run`]: the process. [`install`] prints what a cluster needs; it imports nothing here.

pub mod cidr;
pub mod quantity;

pub mod model;
pub mod policy;
pub mod workspace;

pub mod io;

pub mod lifecycle;

pub mod backend;

pub mod api;

pub mod install;
pub mod run;

pub use crate::{model::config::Config, run::Server};
