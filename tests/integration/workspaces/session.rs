//! Whole sessions through the API, as a frontend drives them.

use std::{collections::BTreeMap, time::Instant};

use k8s_openapi::api::{
    core::v1::{PersistentVolumeClaim, Pod, Service},
    networking::v1::Ingress,
};
use kube::Api;
use serde_json::json;

use super::support::*;
use crate::control_plane::ControlPlane;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_session_creates_serves_and_removes_everything() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-session";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let token_key = format!("outfit-e2e-token-{}", std::process::id());
    std::fs::write(format!("/tmp/{token_key}"), "/?token=s3cret\n").unwrap();
    let url = manifests.put("jupyter.yaml", &JUPYTER.replace("TOKEN_KEY", &token_key));
    // With the permissions `outfit manifests --workspaces` gives it, and no more.
    let kubeconfig = least_privilege(plane, &client, "ws-session-system", ns).await;
    let backend = Backend::start_as(plane, ns, &manifests, "", kubeconfig).await;

    let (status, created) = backend
        .post(
            "/create_pod",
            json!({"yaml_url": url, "user_id": "alice@dtu.dk",
                   "settings": {"jupyter": {"FILE": "notebook.ipynb", "UNDECLARED": "x"}}}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["pod_name"], "jupyter-alice-dtu-dk");
    // deic-dk drops settings the manifest does not declare without a word; outfit says so.
    assert!(
        created["warnings"].to_string().contains("UNDECLARED"),
        "{created}"
    );

    let started = Instant::now();
    let (status, ready) = backend
        .post(
            "/watch_create_pod",
            json!({"user_id": "alice@dtu.dk", "pod_name": "jupyter-alice-dtu-dk"}),
        )
        .await;
    assert_eq!(
        (status, &ready),
        (200, &json!({"ready": true})),
        "after {:?}",
        started.elapsed()
    );

    // The pod as stored: deic-dk's labels, env, image rewrite and storage volume.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get("jupyter-alice-dtu-dk").await.unwrap();
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(
        (labels["user"].as_str(), labels["domain"].as_str()),
        ("alice", "dtu.dk")
    );
    assert!(!labels.contains_key("app"), "the manifest's labels are replaced");
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("registry.test:5000/jupyter:1"));
    let env: BTreeMap<_, _> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(env["FILE"], "notebook.ipynb");
    assert_eq!(env["SD_UID"], "alice@dtu.dk");
    // Loopback stands for testingHost 10.0.0.20; the data network is 10.2.
    assert_eq!(env["HOME_SERVER_IP"], "10.2.0.20");
    assert_eq!(env["HOME_SERVER_HOSTNAME"], "silo1.test");
    assert!(!env.contains_key("UNDECLARED"));
    let uid = pod.metadata.uid.clone().unwrap();

    // get_pods: every field the frontend reads.
    let (status, listed) = backend
        .post("/get_pods", json!({"user_id": "alice@dtu.dk"}))
        .await;
    assert_eq!(status, 200);
    let info = &listed.as_array().expect("an array")[0];
    assert_eq!(info["pod_name"], "jupyter-alice-dtu-dk");
    assert_eq!(info["container_name"], "jupyter");
    assert_eq!(info["image_name"], "registry.test:5000/jupyter:1");
    assert_eq!(info["owner"], "alice@dtu.dk");
    assert_eq!(info["url"], "https://jupyter-alice-dtu-dk.pods.test");
    assert!(
        info["status"].as_str().unwrap().starts_with("Running:20"),
        "{info}"
    );
    assert_eq!(info["age"].as_str().unwrap().split(':').count(), 3, "{info}");
    let ssh_port = info["k8s_pod_info"]["sshPort"]
        .as_str()
        .expect("an ssh port")
        .to_owned();
    assert_eq!(info["ssh_url"], format!("ssh://root@pods.test:{ssh_port}"));
    // The file ends with a newline; the token comes trimmed (deic-dk returns the file as it is:
    // a deliberate difference, docs/workspaces/deic-dk-api.md "What differs from deic-dk").
    assert_eq!(
        info["tokens"],
        json!({token_key.as_str(): "/?token=s3cret"}),
        "{info}"
    );
    let pod_ip = info["pod_ip"].as_str().unwrap().to_owned();
    assert!(
        !pod_ip.is_empty() && !info["node_ip"].as_str().unwrap().is_empty(),
        "{info}"
    );

    // The objects made for the pod, owned by it.
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    for name in ["jupyter-alice-dtu-dk-ssh", "jupyter-alice-dtu-dk-http"] {
        let service = services.get(name).await.unwrap();
        assert_eq!(service.metadata.owner_references.unwrap()[0].uid, uid, "{name}");
    }
    let ingress = Api::<Ingress>::namespaced(client.clone(), ns)
        .get("jupyter-alice-dtu-dk-ingress")
        .await
        .unwrap();
    let spec = ingress.spec.unwrap();
    assert_eq!(
        spec.rules.unwrap()[0].host.as_deref(),
        Some("jupyter-alice-dtu-dk.pods.test")
    );
    assert_eq!(
        spec.tls.unwrap()[0].secret_name.as_deref(),
        Some("user-pods-wildcard")
    );
    let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .get("user-storage-alice-dtu-dk")
        .await
        .unwrap();
    assert_eq!(claim.spec.unwrap().storage_class_name.as_deref(), Some("nfs"));
    assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));

    // get_podip_owner: text, the exact id.
    let (status, owner) = http(backend.port, "GET", &format!("/get_podip_owner?ip={pod_ip}"), "").await;
    assert_eq!((status, owner.as_str()), (200, "alice@dtu.dk"));

    // Another user sees nothing and can do nothing, and learns nothing either.
    let bob = json!({"user_id": "bob@dtu.dk", "pod_name": "jupyter-alice-dtu-dk"});
    assert_eq!(
        backend.post("/get_pods", json!({"user_id": "bob@dtu.dk"})).await,
        (200, json!([]))
    );
    assert_eq!(
        backend.post("/watch_create_pod", bob.clone()).await,
        (200, json!({"ready": false}))
    );
    assert_eq!(
        backend.post("/watch_delete_pod", bob.clone()).await,
        (200, json!({"deleted": true}))
    );
    let (status, refused) = backend.post("/delete_pod", bob).await;
    assert_eq!((status, &refused["requested"]), (400, &json!(false)), "{refused}");
    assert!(pods.get_opt("jupyter-alice-dtu-dk").await.unwrap().is_some());

    // Delete, watch it go, and nothing is left behind.
    let alice = json!({"user_id": "alice@dtu.dk", "pod_name": "jupyter-alice-dtu-dk"});
    assert_eq!(
        backend.post("/delete_pod", alice.clone()).await,
        (200, json!({"requested": true}))
    );
    assert_eq!(
        backend.post("/watch_delete_pod", alice).await,
        (200, json!({"deleted": true}))
    );
    assert!(pods.get_opt("jupyter-alice-dtu-dk").await.unwrap().is_none());
    nothing_left(&client, ns, "user-storage-alice-dtu-dk").await;
    let _ = std::fs::remove_file(format!("/tmp/{token_key}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_whose_ids_share_a_name_string_or_are_long_stay_apart() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-names";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let backend = Backend::start(plane, ns, &manifests, "").await;

    // deic-dk maps both ids to "a-b-x" and checks ownership on labels, so each sees the other's.
    let mut names = Vec::new();
    for user in ["a.b@x", "a-b@x"] {
        let (status, created) = backend
            .post("/create_pod", json!({"yaml_url": url, "user_id": user}))
            .await;
        assert_eq!(status, 200, "{created}");
        names.push(created["pod_name"].as_str().unwrap().to_owned());
    }
    assert_eq!(names, ["web-a-b-x", "web-a-b-x-1"]);
    for (user, own) in [("a.b@x", &names[0]), ("a-b@x", &names[1])] {
        let (_, listed) = backend.post("/get_pods", json!({"user_id": user})).await;
        let listed: Vec<_> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pod_name"].clone())
            .collect();
        assert_eq!(listed, [json!(own)], "{user}");
    }
    let (status, _) = backend
        .post("/delete_pod", json!({"user_id": "a-b@x", "pod_name": names[0]}))
        .await;
    assert_eq!(status, 400, "a-b@x must not delete a.b@x's pod");

    // A long id: every name it gives stays within 63 characters, and the API server takes them.
    let long = format!("{}@{}.example.org", "l".repeat(50), "d".repeat(40));
    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": long}))
        .await;
    assert_eq!(status, 200, "{created}");
    let pod = created["pod_name"].as_str().unwrap().to_owned();
    assert!(pod.len() <= 63 - "-ingress".len(), "{pod}");
    let watch = json!({"user_id": long, "pod_name": pod});
    assert_eq!(
        backend.post("/watch_create_pod", watch).await,
        (200, json!({"ready": true}))
    );
    let (_, listed) = backend.post("/get_pods", json!({"user_id": long})).await;
    assert_eq!(listed[0]["owner"], json!(long));
    assert_eq!(listed[0]["url"], format!("https://{pod}.pods.test"));
    let ingress = Api::<Ingress>::namespaced(client.clone(), ns)
        .get(&format!("{pod}-ingress"))
        .await
        .expect("the long id's Ingress");
    let host = ingress.spec.unwrap().rules.unwrap()[0].host.clone().unwrap();
    assert!(host.split('.').next().unwrap().len() <= 63, "{host}");
}

/// A client written from deic-dk's documentation alone (`tests/compat/`, Python, no code shared
/// with outfit) drives a whole session and checks every shape, status and rule of the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_written_from_the_documentation_drives_a_full_session() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-compat";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let token_key = format!("outfit-compat-token-{}", std::process::id());
    std::fs::write(format!("/tmp/{token_key}"), "?token=compat\n").unwrap();
    let url = manifests.put("jupyter.yaml", &JUPYTER.replace("TOKEN_KEY", &token_key));
    let backend = Backend::start(plane, ns, &manifests, "").await;
    let script = crate::support::repo_root().join("tests/compat/deic_session.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .args(["--url", &format!("http://127.0.0.1:{}", backend.port)])
        .args(["--manifest-url", &url])
        .args(["--token-key", &token_key, "--token-value", "?token=compat"])
        .args(["--ingress-domain", "pods.test"])
        .args([
            "--user",
            "alice@compat.example",
            "--other-user",
            "bob@compat.example",
        ])
        .args(["--pod-cidr", &plane.env("POD_CIDR")])
        .output()
        .await
        .expect("python3 runs the compatibility session");
    let _ = std::fs::remove_file(format!("/tmp/{token_key}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failures: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        output.status.success() && failures.is_empty(),
        "{}\n{}\nstderr: {}",
        failures.join("\n"),
        stdout.lines().last().unwrap_or_default(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.lines().last().unwrap_or_default().ends_with(" 0 failed"),
        "{stdout}"
    );
}
