//! outfit's integration tests, in one binary so they link once (the machine is small).
//!
//! - `mutate_fixtures`: every case under `tests/fixtures/` and every example under `examples/`
//!   through the real `outfit mutate` binary, with its patches checked by the API server's own
//!   RFC 6902 library;
//! - `mutate_cli`: the CLI contract that scripts rely on (stdin, formats, exit statuses);
//! - `e2e`: a real kube-apiserver and etcd (`hack/control-plane`) calling `outfit serve`;
//! - `requester`: PodPolicies for authorised users, with the userInfo the API server sends;
//! - `helm`: the Helm chart against `outfit manifests`, `helm lint`, and installed, upgraded and
//!   uninstalled on a real API server;
//! - `versions`: the supported Kubernetes range, the same in Cargo.toml, the test cluster, README
//!   and the chart;
//! - `flood`: 10,000 idle connections against `outfit serve` with a connection cap;
//! - `huge_patch`: a review asking for a patch larger than the API server could take, refused in
//!   bounded memory;
//! - `workspaces`: `outfit workspaces` on a cluster whose pods really run (scheduler, controller
//!   manager, kwok nodes), driven through deic-dk's HTTP API;
//! - `snapshots`: VolumeSnapshots in that cluster: the real snapshot-controller and the
//!   provisioner stand-in's driver side (ready, stuck, failing, restored from, deleted);
//! - `image_kubelet`: the stand-in for the kubelet's image side (pulls, shared bandwidth,
//!   `node.status.images`) on nodes of its own, which the start-time benchmark runs on.

mod control_plane;
mod e2e;
mod e2e_cluster;
mod e2e_outage;
mod e2e_registration;
mod filer;
mod flood;
mod helm;
mod huge_patch;
mod image_kubelet;
mod mutate_cli;
mod mutate_fixtures;
mod requester;
mod snapshots;
mod support;
mod versions;
mod workspaces;
