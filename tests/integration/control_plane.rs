//! The test cluster, shared with the soaks and benchmarks (`outfit_test_support::control_plane`):
//! a real kube-apiserver and etcd started once per test binary with `hack/control-plane/up.sh`
//! and stopped when the test binary exits.

pub(crate) use outfit_test_support::control_plane::{
    ControlPlane, api, client_from, create, pod_namespace, resource,
};
