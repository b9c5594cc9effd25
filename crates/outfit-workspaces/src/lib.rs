//! `outfit workspaces`: the workspace backend. It creates, watches and deletes per-user workspace
//! pods with their storage, Services and Ingresses, behind deic-dk's user-pods API
//! (`../shared/seeds/004`), and keeps every bit of its state in the cluster.
//!
//! The pure part, read bottom-up: [`keys`] (labels and annotations), [`user`], [`duration`],
//! [`cidr`], [`names`], [`config`], [`manifest`] (the pod a create makes), [`objects`] (its
//! storage, Services and Ingress), [`info`] (what `get_pods` answers), [`progress`] (where a
//! start stands).
//!
//! The part that talks: [`fetch`] (manifests), [`cluster`] (the API server's calls), [`cache`]
//! (the watches), [`lifecycle`] (what follows a create), [`backend`] (the operations),
//! [`metrics`], [`api`] (HTTP), [`run`] (the process); [`install`] prints what a cluster needs.

pub mod cidr;
pub mod config;
pub mod duration;
pub mod info;
pub mod keys;
pub mod manifest;
pub mod names;
pub mod objects;
pub mod progress;
pub mod user;

pub mod api;
pub mod backend;
pub mod cache;
pub mod cluster;
pub mod fetch;
pub mod install;
pub mod lifecycle;
pub mod metrics;
pub mod run;

pub use crate::{config::Config, run::Server};
