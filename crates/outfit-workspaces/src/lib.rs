//! `outfit workspaces`: the workspace backend. It creates, watches and deletes per-user workspace
//! pods with their storage, Services and Ingresses, behind deic-dk's user-pods API
//! (`../shared/seeds/004`), and keeps every bit of its state in the cluster.
//!
//! The pure part, read bottom-up: [`keys`] (labels and annotations), [`user`], [`duration`],
//! [`cidr`], [`names`], [`limits`] (per-user limits, on `outfit_core::quantity`'s amounts),
//! [`isolation`] (pod defaults and NetworkPolicy; its settings at the bottom, the policy itself
//! above [`objects`]), [`config`], [`manifest`] (the pod a create makes), [`objects`] (its storage,
//! Services and Ingress), [`info`] (what `get_pods` answers), [`progress`] (where a start stands),
//! [`report`] (a start's or delete's steps, as the progress stream sends them), [`culling`] (when a
//! workspace's time is up).
//!
//! The part that talks: [`fetch`] (manifests), [`catalogue`] (what the native API offers),
//! [`cluster`] (the API server's calls), [`cache`] (the watches), [`auth`] (who calls the native
//! API), [`lifecycle`] (what follows a create, and culling), [`activity`] (workspaces' own
//! activity endpoints), [`backend`] (the operations), [`metrics`], [`api`] (HTTP: the page, the
//! native API, deic-dk's API), [`run`] (the process); [`install`] prints what a cluster needs.

pub mod cidr;
pub mod config;
pub mod culling;
pub mod duration;
pub mod info;
pub mod isolation;
pub mod keys;
pub mod limits;
pub mod manifest;
pub mod names;
pub mod objects;
pub mod progress;
pub mod report;
pub mod user;

pub mod activity;
pub mod api;
pub mod auth;
pub mod backend;
pub mod cache;
pub mod catalogue;
pub mod cluster;
pub mod fetch;
pub mod install;
pub mod lifecycle;
pub mod metrics;
pub mod run;

pub use crate::{config::Config, run::Server};
