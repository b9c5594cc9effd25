//! The pure half of outfit's workspace backend: the model (labels and annotations, users, names,
//! durations, the configuration), the rules a workspace is held to (per-user limits, culling), and
//! one workspace's plans (the pod a create makes, its storage, Services, Ingress and
//! NetworkPolicy, what it needs once ready, what `get_pods` answers, where a start or delete
//! stands). Each is a function of plain data: pods and settings in, objects and decisions out.
//!
//! It is a crate, not only a folder of `outfit-workspaces`, for the reason kube-core stands beside
//! kube-client: by dependency weight. It has no tokio, no Kubernetes client, no HTTP and no
//! network (its one read is the configuration's own files, at load), so its decisions are
//! unit-tested and benchmarked without a cluster or a runtime, and the compiler keeps it
//! that way: I/O can't creep in through an import. The backend (`outfit-workspaces`) re-exports
//! its modules under the same paths and does the talking.
//!
//! The modules are layers, read bottom-up; a file imports only from its own layer or below:
//! - [`cidr`]: address ranges (on `ipnet`), at the bottom so everything may use it; CPU and
//!   memory amounts come from `outfit_core::quantity`.
//! - [`model`]: the plain data: labels and annotations, users, names, durations, the settings
//!   (isolation, limits) and the configuration that holds them.
//! - [`policy`]: the rules a workspace is held to: per-user limits, and when its time is up.
//! - [`workspace`]: one workspace: the pod a create makes, what the pod asks for once it runs,
//!   its storage, Services, Ingress and NetworkPolicy, the plan of what it needs once ready,
//!   what `get_pods` answers, and its progress.
//! - [`resource`]: the `Workspace` resource (its CRD and types), the record of a workspace that
//!   outlives its pod; its spec holds a launch's values, so it sits above `workspace`.

pub mod cidr;

pub mod model;
pub mod policy;
pub mod resource;
pub mod workspace;
