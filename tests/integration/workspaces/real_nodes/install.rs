//! outfit installed as a user installs it: `outfit manifests --image …`, applied as
//! `kubectl apply --server-side` applies it, its image pulled from the cluster's registry by the
//! real kubelet, its webhook's pods Ready with the certificate they made themselves, and the
//! API server calling them at their Service's address (kube-proxy) for a workspace's pod.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod},
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
    discovery::{self, Scope},
};
use outfit_test_support::control_plane::{api, resource};
use serde_json::{Value, json};

use super::{super::storage::launched_ready, *};

/// The image of the test build's `outfit`, pushed to the plane's registry (as
/// `tests/tools/node-images/build.py` makes it: the binary and the shared libraries it loads).
fn push_outfit_image(plane: &ControlPlane) -> String {
    push_images(
        plane,
        &[
            "--only",
            "outfit",
            "--outfit-binary",
            env!("CARGO_BIN_EXE_outfit"),
        ],
    );
    format!("{}/outfit-test/outfit:1", plane.env("REGISTRY_HOST"))
}

/// Each object as `kubectl apply --server-side` applies it; the API resource of each, for
/// [`remove`].
async fn apply(client: &Client, objects: &[Value]) -> Vec<(kube::discovery::ApiResource, DynamicObject)> {
    let mut applied = Vec::new();
    for object in objects {
        let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        let gvk = GroupVersionKind::try_from(object.types.as_ref().expect("apiVersion and kind")).unwrap();
        let kind = &gvk.kind;
        let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("discovering {kind}: {e}"));
        let namespace = match capabilities.scope {
            Scope::Namespaced => object.metadata.namespace.as_deref(),
            Scope::Cluster => None,
        };
        let name = object.metadata.name.as_deref().unwrap();
        let params = PatchParams::apply("kubectl").force();
        let stored = api(client, namespace, &resource)
            .patch(name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
        applied.push((resource, stored));
    }
    applied
}

/// What [`apply`] made, deleted in the reverse order (the CRDs stay: other tests' policies are
/// of them), and waited for.
async fn remove(client: &Client, applied: Vec<(kube::discovery::ApiResource, DynamicObject)>) {
    for (resource, object) in applied.iter().rev() {
        if resource.kind == "CustomResourceDefinition" {
            continue;
        }
        let objects = api(client, object.metadata.namespace.as_deref(), resource);
        let name = object.metadata.name.as_deref().unwrap();
        match objects.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => panic!("deleting {} {name}: {error}", resource.kind),
        }
    }
    // Its pods at once (the namespace waits for them, and their grace is the webhook's drain).
    let pods: Api<Pod> = Api::namespaced(client.clone(), "outfit-system");
    let now = DeleteParams::default().grace_period(0);
    let _ = pods.delete_collection(&now, &Default::default()).await;
    let namespaces = resource("", "v1", "Namespace", "namespaces");
    eventually("outfit's namespace gone", Duration::from_secs(90), || async {
        api(client, None, &namespaces)
            .get_opt("outfit-system")
            .await
            .unwrap()
            .is_none()
    })
    .await;
}

/// Waits until outfit's two webhook pods in outfit-system are Ready, and checks that they run
/// `image` as pulled from the registry and that outfit wrote its CA into the webhook
/// configuration.
async fn serving(client: &Client) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "outfit-system");
    eventually("outfit's two pods Ready", Duration::from_secs(120), || async {
        let status = deployments
            .get_opt("outfit")
            .await
            .unwrap()
            .and_then(|d| d.status)
            .unwrap_or_default();
        status.ready_replicas == Some(2)
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "outfit-system");
    for pod in pods.list(&Default::default()).await.unwrap().items {
        let status = serde_json::to_value(pod.status.unwrap()).unwrap();
        let image_id = status["containerStatuses"][0]["imageID"]
            .as_str()
            .unwrap_or_default();
        assert!(
            image_id.starts_with("registry.outfit.test/outfit-test/outfit@sha256:"),
            "{status}"
        );
    }
    let configurations = resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    );
    let configurations = api(client, None, &configurations);
    eventually(
        "outfit's CA in its webhook configuration",
        Duration::from_secs(30),
        || async {
            let configuration = configurations.get("outfit").await.unwrap();
            configuration.data["webhooks"][0]["clientConfig"]["caBundle"]
                .as_str()
                .is_some_and(|b| !b.is_empty())
        },
    )
    .await;
}

/// A PodDefault of `ns` that sets `DATASETS` and mounts a ConfigMap at `/data`.
async fn datasets_pod_default(client: &Client, ns: &str) {
    crate::support::install_crds(client).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let datasets: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "datasets"}, "data": {"README": "mounted by a PodDefault"}
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &datasets)
        .await
        .unwrap();
    let pod_defaults = api(
        client,
        Some(ns),
        &resource("kubeflow.org", "v1alpha1", "PodDefault", "poddefaults"),
    );
    let datasets: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "datasets"},
        "spec": {"selector": {}, "desc": "the site's datasets",
                 "env": [{"name": "DATASETS", "value": "/data"}],
                 "volumes": [{"name": "datasets", "configMap": {"name": "datasets"}}],
                 "volumeMounts": [{"name": "datasets", "mountPath": "/data"}]}
    }))
    .unwrap();
    pod_defaults
        .create(&PostParams::default(), &datasets)
        .await
        .unwrap();
}

/// Waits until a dry run of a pod in `ns` comes back mutated by the PodDefault: the API server
/// reaches outfit at its Service's address (through kube-proxy) and outfit has seen the policy.
/// Until then `--failure-policy ignore` lets pods in as they are.
async fn mutating(client: &Client, ns: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe"},
        "spec": {"containers": [{"name": "c", "image": "registry.outfit.test/outfit-test/web:1"}]}
    }))
    .unwrap();
    eventually("outfit mutating a dry run", Duration::from_secs(60), || async {
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let answered = pods.create(&params, &probe).await.unwrap();
        answered.spec.unwrap().containers[0]
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "DATASETS")
    })
    .await;
}

/// Fails on kwok: no kubelet pulls outfit's image or runs it there, so its pods never make their
/// certificate, the webhook configuration keeps an empty `caBundle`, and no process would answer
/// at the Service's address (kwok runs no kube-proxy). The install asks `--failure-policy ignore`:
/// the plane is shared, and with `fail` every other test's pod would be refused while outfit
/// starts; the test then shows the mutation happened rather than trusting the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outfit_installed_from_its_own_image_mutates_a_workspace_the_node_then_runs() {
    let ns = "rn-install";
    let OnRealNode {
        plane,
        client,
        backend,
        ..
    } = on_real_node(ns, &[("web", WEB)], "").await;
    let image = push_outfit_image(plane);
    datasets_pod_default(&client, ns).await;

    // `outfit manifests | kubectl apply --server-side -f -`.
    let install: Vec<Value> = crate::support::manifests(&["--image", &image, "--failure-policy", "ignore"])
        .into_iter()
        .map(|d| d.value)
        .collect();
    let applied = apply(&client, &install).await;
    serving(&client).await;
    mutating(&client, ns).await;
    // The workspace, mutated on the way in, runs so on the node.
    let name = launched_ready(&backend, ALICE, "web").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let seen = exec(
        &pods,
        &name,
        &["sh", "-c", "echo \"$DATASETS\"; cat /data/README"],
    )
    .await;
    assert_eq!(seen, "/data\nmounted by a PodDefault", "{seen}");
    remove(&client, applied).await;

    // Then the chart, the same image (the CRDs stay from the first install, as a site moving to
    // the chart keeps its policies).
    let helm = crate::helm::Helm::get();
    let kubeconfig = plane.kubeconfig();
    let (repository, tag) = image.rsplit_once(':').unwrap();
    let (repository, tag) = (
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
    );
    let install = [
        "install",
        "outfit",
        "charts/outfit",
        "--namespace",
        "outfit-system",
        "--create-namespace",
        "--set",
        &repository,
        "--set-string",
        &tag,
        "--set",
        "webhook.failurePolicy=Ignore",
        "--set",
        "crds.install=false",
    ];
    helm.ok(&install, Some(&kubeconfig));
    serving(&client).await;
    mutating(&client, ns).await;
    helm.ok(
        &["uninstall", "outfit", "--namespace", "outfit-system", "--wait"],
        Some(&kubeconfig),
    );
}
