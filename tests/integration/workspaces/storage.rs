//! Issue 32: a home on any storage. Under `storageStrategy: per-user` a user's home is a claim
//! of a StorageClass that a provisioner fills (here the test cluster's stand-in,
//! `outfit_test_support::provisioner`, as a CSI driver's external-provisioner would); outfit writes
//! no PersistentVolume and holds no right on them; the claim outlives a stop and the user's last
//! workspace and serves the next launch. Under `ephemeral` the home is an emptyDir.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::{Api, Client, api::ListParams};
use outfit_test_support::provisioner;
use serde_json::json;

use super::support::*;
use crate::control_plane::ControlPlane;

/// The claims of `ns`, by name and uid.
pub(super) async fn claims(client: &Client, ns: &str) -> Vec<PersistentVolumeClaim> {
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// The config of a `per-user` backend on `class` (homes of 2Gi), with two catalogue entries:
/// `notebook`, and `big`, whose manifest asks for a 5Gi home (`outfit.dev/storage-size`).
fn per_user_catalogue(manifests: &Manifests, class: &str) -> String {
    let notebook = manifests.put("notebook.yaml", &JUPYTER.replace("TOKEN_KEY", "none"));
    let big = manifests.put(
        "big.yaml",
        &JUPYTER.replace("TOKEN_KEY", "none").replace(
            "annotations:\n",
            "annotations:\n    outfit.dev/storage-size: 5Gi\n",
        ),
    );
    format!(
        "storageStrategy: per-user\nstorageClassName: {class}\nstorageSize: 2Gi\n\
         catalogue: [{{name: notebook, url: '{notebook}'}}, {{name: big, url: '{big}'}}]\n\
         trustedProxyCidrs: [127.0.0.1/32]\n"
    )
}

/// The one claim of `ns`.
pub(super) async fn only_claim(client: &Client, ns: &str) -> PersistentVolumeClaim {
    let [claim] = <[PersistentVolumeClaim; 1]>::try_from(claims(client, ns).await).expect("one claim");
    claim
}

/// Waits (up to a minute) until `ns` holds no claim.
pub(super) async fn claims_gone(client: &Client, ns: &str, what: &str) {
    outfit_test_support::wait::eventually(what, Duration::from_secs(60), || async {
        claims(client, ns).await.is_empty().then_some(())
    })
    .await;
}

/// Launches the catalogue entry `entry` as `caller` and follows it to ready; its name.
pub(super) async fn launched_ready(backend: &Backend, caller: Caller<'_>, entry: &str) -> String {
    let (status, launched) = backend.launch(caller, entry).await;
    assert_eq!(status, 201, "{launched}");
    let name = launched["name"].as_str().unwrap().to_owned();
    backend.follow_to_ready(caller, &name).await;
    name
}

pub(super) fn uid(claim: &PersistentVolumeClaim) -> String {
    claim.metadata.uid.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_user_home_is_provisioned_kept_and_used_again_without_rights_on_volumes() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-per-user";
    namespace(&client, ns).await;
    provisioner::ensure(plane).await;
    let manifests = Manifests::start().await;
    // Rights as `outfit manifests --workspaces --storage-strategy per-user` gives them: none on
    // PersistentVolumes, so a single volume call would fail the launch.
    let kubeconfig = least_privilege_with(
        plane,
        &client,
        "ws-per-user-system",
        ns,
        &[
            "--storage-strategy",
            "per-user",
            "--storage-class",
            provisioner::CLASS,
        ],
    )
    .await;
    let extra = per_user_catalogue(&manifests, provisioner::CLASS);
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;
    let hana = Caller::Proxy("hana", "staff");

    let name = launched_ready(&backend, hana, "notebook").await;
    let home = only_claim(&client, ns).await;
    let spec = home.spec.clone().unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some(provisioner::CLASS));
    assert_eq!(
        home.metadata.annotations.as_ref().unwrap()["outfit.dev/storage-strategy"],
        "per-user"
    );
    // The provisioner's volume, bound by the controller manager: not one outfit wrote.
    let volume_name = spec.volume_name.expect("bound");
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&volume_name)
        .await
        .unwrap();
    assert_eq!(
        volume.metadata.annotations.unwrap()["pv.kubernetes.io/provisioned-by"],
        provisioner::PROVISIONER
    );
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get(&name)
        .await
        .unwrap();
    let mounted = pod.spec.unwrap().volumes.unwrap();
    let mounted = mounted.iter().find(|v| v.name == "sciencedata").unwrap();
    assert_eq!(
        mounted.persistent_volume_claim.as_ref().unwrap().claim_name,
        home.metadata.name.clone().unwrap()
    );

    // Stopped, started, deleted: the home stays (two storage sweeps pass with a grace of 0 s).
    let path = format!("/api/v1/workspaces/{name}");
    let (status, stopped) = backend.call(hana, "POST", &format!("{path}/stop"), None).await;
    assert_eq!(status, 202, "{stopped}");
    let (status, started) = backend.call(hana, "POST", &format!("{path}/start"), None).await;
    assert_eq!(status, 202, "{started}");
    backend.follow_to_ready(hana, &name).await;
    let (status, deleted) = backend.call(hana, "DELETE", &path, None).await;
    assert_eq!(status, 202, "{deleted}");
    tokio::time::sleep(Duration::from_secs(12)).await;
    let kept = claims(&client, ns).await;
    assert_eq!(
        kept.iter().map(uid).collect::<Vec<_>>(),
        [uid(&home)],
        "the home outlives its last workspace"
    );

    // The next launch uses it again, grown to the 5Gi its manifest asks for (the class allows
    // expansion; the stand-in grows the volume as a CSI resizer would).
    let again = launched_ready(&backend, hana, "big").await;
    let now = claims(&client, ns).await;
    assert_eq!(now.iter().map(uid).collect::<Vec<_>>(), [uid(&home)]);

    // The user sees it; removing it is refused while a workspace uses it, done once none does.
    let (status, listed) = backend.call(hana, "GET", "/api/v1/storage", None).await;
    assert_eq!(status, 200, "{listed}");
    let item = &listed["items"][0];
    assert_eq!(
        (
            item["name"].as_str(),
            item["strategy"].as_str(),
            item["phase"].as_str()
        ),
        (home.metadata.name.as_deref(), Some("per-user"), Some("Bound")),
        "{listed}"
    );
    assert_eq!(item["requested"], "5Gi", "{listed}");
    let grown =
        outfit_test_support::wait::eventually("the volume grown", Duration::from_secs(60), || async {
            let volume = Api::<PersistentVolume>::all(client.clone())
                .get(&volume_name)
                .await
                .unwrap();
            let capacity = volume.spec.unwrap().capacity.unwrap()["storage"].0.clone();
            (capacity == "5Gi").then_some(capacity)
        })
        .await;
    assert_eq!(grown, "5Gi");
    let (status, refused) = backend.call(hana, "DELETE", "/api/v1/storage", None).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("InUse")),
        "{refused}"
    );
    let (status, _) = backend
        .call(hana, "DELETE", &format!("/api/v1/workspaces/{again}"), None)
        .await;
    assert_eq!(status, 202);
    let removed = outfit_test_support::wait::eventually(
        "the home removable once no workspace is left",
        Duration::from_secs(60),
        || async {
            let (status, answer) = backend.call(hana, "DELETE", "/api/v1/storage", None).await;
            (status == 202).then_some(answer)
        },
    )
    .await;
    assert_eq!(removed["deleting"], json!([home.metadata.name.clone().unwrap()]));
    outfit_test_support::wait::eventually(
        "the home and its volume gone",
        Duration::from_secs(60),
        || async {
            let volumes = Api::<PersistentVolume>::all(client.clone());
            (claims(&client, ns).await.is_empty() && volumes.get_opt(&volume_name).await.unwrap().is_none())
                .then_some(())
        },
    )
    .await;
    // Another user may not name hana's storage.
    let (status, _) = backend
        .call(
            Caller::Proxy("ivo", "staff"),
            "GET",
            "/api/v1/storage?user=hana",
            None,
        )
        .await;
    assert_eq!(status, 403);
    backend.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_home_is_an_empty_dir_and_makes_no_claim() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-ephemeral";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let notebook = manifests.put("notebook.yaml", &JUPYTER.replace("TOKEN_KEY", "none"));
    let extra = format!(
        "storageStrategy: ephemeral\ncatalogue: [{{name: notebook, url: '{notebook}'}}]\n\
         trustedProxyCidrs: [127.0.0.1/32]\n"
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let ines = Caller::Proxy("ines", "staff");
    let name = launched_ready(&backend, ines, "notebook").await;
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get(&name)
        .await
        .unwrap();
    let volumes = pod.spec.unwrap().volumes.unwrap();
    let home = volumes.iter().find(|v| v.name == "sciencedata").unwrap();
    assert!(home.empty_dir.is_some(), "{home:?}");
    assert!(claims(&client, ns).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_workspace_home_lives_and_goes_with_its_workspace() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-per-workspace";
    namespace(&client, ns).await;
    provisioner::ensure(plane).await;
    let manifests = Manifests::start().await;
    let notebook = manifests.put("notebook.yaml", &JUPYTER.replace("TOKEN_KEY", "none"));
    let kubeconfig = least_privilege_with(
        plane,
        &client,
        "ws-per-workspace-system",
        ns,
        &[
            "--storage-strategy",
            "per-workspace",
            "--storage-class",
            provisioner::CLASS,
        ],
    )
    .await;
    let extra = format!(
        "storageStrategy: per-workspace\nstorageClassName: {}\n\
         catalogue: [{{name: notebook, url: '{notebook}'}}]\ntrustedProxyCidrs: [127.0.0.1/32]\n",
        provisioner::CLASS
    );
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;
    let jana = Caller::Proxy("jana", "staff");

    let name = launched_ready(&backend, jana, "notebook").await;
    let home = only_claim(&client, ns).await;
    assert_eq!(
        home.metadata.name.as_deref(),
        Some(format!("{name}-home").as_str())
    );
    let owner = &home.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Workspace", name.as_str())
    );

    // A stop and a start keep it; the delete of the Workspace takes it.
    let path = format!("/api/v1/workspaces/{name}");
    let (status, _) = backend.call(jana, "POST", &format!("{path}/stop"), None).await;
    assert_eq!(status, 202);
    let (status, _) = backend.call(jana, "POST", &format!("{path}/start"), None).await;
    assert_eq!(status, 202);
    backend.follow_to_ready(jana, &name).await;
    assert_eq!(
        claims(&client, ns).await.iter().map(uid).collect::<Vec<_>>(),
        [uid(&home)]
    );
    let (status, _) = backend.call(jana, "DELETE", &path, None).await;
    assert_eq!(status, 202);
    claims_gone(&client, ns, "the home gone with its Workspace").await;

    // deic-dk's API: its pod has a Workspace too (issue 43), which owns the home and takes it
    // when `delete_pod` deletes it.
    let (status, created) = backend
        .post(
            "/create_pod",
            json!({"yaml_url": notebook, "user_id": "jana@x.dk"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let pod_name = created["pod_name"].as_str().unwrap().to_owned();
    let watch = json!({"user_id": "jana@x.dk", "pod_name": pod_name});
    assert_eq!(
        backend.post("/watch_create_pod", watch.clone()).await,
        (200, json!({"ready": true}))
    );
    let home = only_claim(&client, ns).await;
    assert_eq!(
        home.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Workspace"
    );
    assert_eq!(backend.post("/delete_pod", watch.clone()).await.0, 200);
    claims_gone(&client, ns, "the home gone with its pod").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_that_can_not_grow_says_why_and_the_launch_makes_nothing() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-fixed-home";
    namespace(&client, ns).await;
    provisioner::ensure(plane).await;
    let manifests = Manifests::start().await;
    let extra = per_user_catalogue(&manifests, provisioner::FIXED_CLASS);
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let kai = Caller::Proxy("kai", "staff");
    launched_ready(&backend, kai, "notebook").await;
    let (status, refused) = backend.launch(kai, "big").await;
    assert_ne!(status, 201, "{refused}");
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("smaller than the 5Gi") && error.contains("could not grow"),
        "{refused}"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 1, "no pod for the refused launch");
    let home = only_claim(&client, ns).await;
    let requested = home.spec.unwrap().resources.unwrap().requests.unwrap()["storage"]
        .0
        .clone();
    assert_eq!(requested, "2Gi");
}
