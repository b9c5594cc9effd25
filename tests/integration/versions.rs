//! The Kubernetes versions outfit supports are stated once and agree everywhere: the oldest is
//! k8s-openapi's feature (the API outfit is built against) and the one hack/e2e-version.sh tests;
//! the newest is the test cluster's (CI's); README states the range and the chart requires it.

use crate::support::repo_root;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The minor of a `1.MINOR.PATCH` pin in hack/control-plane/versions.env.
fn pinned_minor(versions: &str, key: &str) -> u32 {
    let value = versions
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} is not pinned in versions.env"));
    let mut parts = value.split('.');
    assert_eq!(parts.next(), Some("1"), "{key}={value}");
    parts
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{key}={value}"))
}

#[test]
fn supported_kubernetes_versions_agree_between_cargo_the_test_cluster_readme_and_chart() {
    let versions = read("hack/control-plane/versions.env");
    let (oldest, newest) = (
        pinned_minor(&versions, "KUBERNETES_OLDEST_VERSION"),
        pinned_minor(&versions, "KUBERNETES_VERSION"),
    );
    assert!(oldest <= newest, "1.{oldest} is newer than 1.{newest}");
    let cargo = read("Cargo.toml");
    assert!(
        cargo.contains(&format!("\"v1_{oldest}\"")),
        "Cargo.toml's k8s-openapi feature is not v1_{oldest}, the oldest release tested"
    );
    let readme = read("README.md");
    let range = format!("Kubernetes 1.{oldest} to 1.{newest}");
    assert!(readme.contains(&range), "README.md does not state \"{range}\"");
    let chart = read("charts/outfit/Chart.yaml");
    assert!(
        chart.contains(&format!("kubeVersion: \">= 1.{oldest}.0-0\"")),
        "charts/outfit/Chart.yaml does not require 1.{oldest}"
    );
}
