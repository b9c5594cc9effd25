//! End to end: `outfit workspaces` on a realistic cluster (kube-apiserver, etcd, controller
//! manager, scheduler and kwok's simulated nodes, from `hack/control-plane`), driven through its
//! HTTP API as deic-dk's frontend drives it. Every assertion is on an HTTP answer or on what the
//! API server stores, so pods really get scheduled, turn Ready, and are deleted.
//!
//! - `support`: the manifest server, `outfit workspaces` as a child process, the HTTP client and
//!   the cluster helpers;
//! - `cleanup`: what a delete takes with it;
//! - `example`: the backend started from `examples/workspaces/`, as a newcomer starts it;
//! - `clusters`: one backend over two clusters, one of them killed and started again;
//! - `session`: whole sessions (ours, and the documentation-only Python client's), user ids;
//! - `lifecycle`: creates that never turn ready, restarts, a second replica;
//! - `replicas`: several replicas, one leading the lifecycle, failover;
//! - `requests`: bad input, callers, configuration;
//! - `resource`: the `Workspace` resource's CRD on the API server: defaults, rules, columns;
//! - `native`: the native API, its callers and its progress streams;
//! - `page`: the web page in headless Chromium;
//! - `guards`: isolation, per-user limits and culling;
//! - `stolen_token`: what the backend's identity may create, checked by the API server;
//! - `safe_defaults`: a default install's token, Pod Security level and user namespaces, and
//!   the webhook's device paths held to the install's list;
//! - `storage`: homes on any storage: a claim per user from a StorageClass, an emptyDir;
//! - `snapshots`: homes snapshotted on every stop and before removal, restored from them;
//! - `placement`: a launch placed on the node that holds its image;
//! - `placeholders`: capacity held ahead, preempted by a launch and made again;
//! - `pre_pull`: a catalogue entry's image pulled ahead onto nodes the image kubelet stand-in
//!   plays, and a launch that then starts without a pull;
//! - `stop_start`: workspaces that keep their state: stop, start, kubectl's edits, restarts;
//! - `real_nodes`: on the cluster's real node (a kubelet, containerd, the project's images pulled
//!   from the cluster's registry): real pulls, probes, processes and tokens read in containers;
//! - `api_reads`: what the backend asks of the API server per request, counted by the API server;
//! - `attacks`: hostile callers: huge tokens, slow bodies, connection floods, cross-site posts,
//!   names that are paths, squatted names.

mod api_reads;
mod attacks;
mod cleanup;
mod clusters;
mod example;
mod groups_claim;
mod guards;
mod lifecycle;
mod native;
mod page;
mod placeholders;
mod placement;
mod pre_pull;
mod proxy;
mod real_nodes;
mod replicas;
mod requests;
mod resource;
mod safe_defaults;
mod session;
mod sign_in;
mod snapshots;
mod stolen_token;
mod stop_start;
mod storage;
mod support;
