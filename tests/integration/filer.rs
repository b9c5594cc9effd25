//! End to end: `outfit serve --from-cluster` as StatCan's filer injector on a real API server. The
//! injector's ConfigMaps, a user namespace's `existing-shares` (two shares on two SVMs) and its
//! `-conn-secret` Secrets are ordinary objects of the cluster, read through watches; a notebook pod
//! created there is stored with two native sidecars, their volumes, and the mounts and env vars on
//! its notebook container (not the first one), the S3 keys as `secretKeyRef`s. A namespace missing
//! one SVM's Secret gets that SVM skipped with a warning, as StatCan does, until the Secret is
//! created. outfit runs as a ServiceAccount bound to the ClusterRole `outfit manifests
//! --filers-list` prints, so the test also shows that role is enough (ConfigMaps and the SVMs'
//! Secrets listed and watched by `resourceNames`) and no more (no other Secret is readable).

use serde_json::{Value, json};

use std::time::{Duration, Instant};

use crate::{
    control_plane::{ControlPlane, api, client_from, create, pod_namespace, resource},
    e2e::{Webhook, register},
    support::repo_root,
};

/// The example's ConfigMaps and Secrets (`examples/filer/policies`), created in the cluster: the
/// injector's in `das` (unless `injector` is false), the user's in `user_namespace` but those
/// `keep` refuses.
async fn create_inputs(
    client: &kube::Client,
    user_namespace: &str,
    injector: bool,
    keep: impl Fn(&Value) -> bool,
) {
    let policies = repo_root().join("examples/filer/policies");
    let documents = outfit_core::source::read_paths(&[policies]).expect("the example's inputs");
    let config_maps = resource("", "v1", "ConfigMap", "configmaps");
    let secrets = resource("", "v1", "Secret", "secrets");
    for document in documents {
        let mut object = document.value;
        let namespace = match object["metadata"]["namespace"].as_str() {
            Some("das") if injector => "das".to_owned(),
            Some("das") => continue,
            _ if !keep(&object) => continue,
            _ => user_namespace.to_owned(),
        };
        object["metadata"]["namespace"] = json!(namespace);
        let kind = if object["kind"] == "Secret" {
            &secrets
        } else {
            &config_maps
        };
        create(client, Some(&namespace), kind, object)
            .await
            .expect("create a filer input");
    }
}

/// The example's `fld9svm-conn-secret`, in `namespace`.
fn fld9_secret(namespace: &str) -> Value {
    let policies = repo_root().join("examples/filer/policies");
    let documents = outfit_core::source::read_paths(&[policies]).expect("the example's inputs");
    let mut secret = documents
        .into_iter()
        .map(|d| d.value)
        .find(|o| o["metadata"]["name"] == "fld9svm-conn-secret")
        .expect("the example's fld9svm Secret");
    secret["metadata"]["namespace"] = json!(namespace);
    secret
}

/// The identity outfit runs as here, bound to the ClusterRole of `outfit manifests` under a name of
/// its own (several tests share the API server).
const ACCOUNT: &str = "outfit-filer-e2e";

/// Binds `ACCOUNT` (in `das`) to a copy of outfit's ClusterRole, and returns a kubeconfig that acts
/// as it (the admin's token, impersonating the ServiceAccount).
async fn outfit_identity(client: &kube::Client, plane: &ControlPlane) -> std::path::PathBuf {
    let filers_list = "examples/filer/policies/injector.yaml";
    for mut object in crate::support::manifests(&["--filers-list", filers_list])
        .into_iter()
        .map(|d| d.value)
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "ClusterRoleBinding")
    {
        object["metadata"]["name"] = json!(ACCOUNT);
        let plural = if object["kind"] == "ClusterRole" {
            "clusterroles"
        } else {
            object["roleRef"]["name"] = json!(ACCOUNT);
            object["subjects"] = json!([{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "das"}]);
            "clusterrolebindings"
        };
        let kind = object["kind"].as_str().unwrap().to_owned();
        create(
            client,
            None,
            &resource("rbac.authorization.k8s.io", "v1", &kind, plural),
            object,
        )
        .await
        .expect("grant outfit's ClusterRole");
    }
    let admin = std::fs::read_to_string(plane.kubeconfig()).expect("the admin kubeconfig");
    let token_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .expect("a token");
    let impersonating = admin.replace(
        token_line,
        &format!("{token_line}\n    as: system:serviceaccount:das:{ACCOUNT}"),
    );
    let path = plane.state_dir.join("kubeconfig-filer-e2e");
    std::fs::write(&path, impersonating).expect("write the kubeconfig");
    path
}

/// Creates a pod with a raw request, for the `Warning` headers of the API server's answer (kubectl
/// prints them as `Warning: ...`): the HTTP status and the warnings.
async fn create_telling_warnings(client: &kube::Client, namespace: &str, pod: Value) -> (u16, Vec<String>) {
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
        .create(
            &kube::api::PostParams::default(),
            serde_json::to_vec(&pod).unwrap(),
        )
        .expect("a request");
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("the API server answers");
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|w| w.to_str().expect("ASCII").to_owned())
        .collect();
    (response.status().as_u16(), warnings)
}

fn notebook(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": {"notebook-name": "analysis"}},
           "spec": {"containers": [
               {"name": "helper", "image": "busybox"},
               {"name": "analysis", "image": "jupyter",
                "env": [{"name": "NB_PREFIX", "value": "/notebook/x/analysis"}]}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notebook_pod_gets_a_working_sidecar_per_share_with_secret_key_refs() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    let (shares, bare, broken) = ("e2e-filer-alice", "e2e-filer-bare", "e2e-filer-broken");
    let partial = "e2e-filer-partial";
    pod_namespace(&client, "das", json!({})).await;
    for namespace in [shares, bare, broken, partial] {
        pod_namespace(&client, namespace, json!({})).await;
    }
    create_inputs(&client, shares, true, |_| true).await;
    // The same shares, but fld9svm's Secret is missing.
    create_inputs(&client, partial, false, |o| {
        o["metadata"]["name"] != "fld9svm-conn-secret"
    })
    .await;
    // A share list naming an SVM the injector's filers-list does not have.
    let broken_shares = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing-shares"},
                               "data": {"fld0nosuch": "[\"projects/alpha\"]"}});
    create(
        &client,
        Some(broken),
        &resource("", "v1", "ConfigMap", "configmaps"),
        broken_shares,
    )
    .await
    .expect("create a broken share list");
    // A ConfigMap and a Secret of other names, which are not inputs (the ConfigMap is not even
    // watched: the watches select by name).
    for (kind, plural) in [("ConfigMap", "configmaps"), ("Secret", "secrets")] {
        let other = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "unrelated"}});
        create(&client, Some(shares), &resource("", "v1", kind, plural), other)
            .await
            .expect("create an unrelated object");
    }
    let kubeconfig = outfit_identity(&client, plane).await;
    // Ready once the watches have listed: the inputs are in the first snapshot.
    let webhook = Webhook::start_with(&["--from-cluster"], &[("KUBECONFIG", kubeconfig.clone())]);
    register(&client, &webhook, "filer", shares).await;
    register(&client, &webhook, "filer-bare", bare).await;
    register(&client, &webhook, "filer-broken", broken).await;
    register(&client, &webhook, "filer-partial", partial).await;

    let pods = resource("", "v1", "Pod", "pods");
    let stored = create(&client, Some(shares), &pods, notebook("analysis-0"))
        .await
        .expect("the notebook pod is admitted");
    let spec = &stored["spec"];
    let sidecars = spec["initContainers"].as_array().expect("initContainers");
    assert_eq!(sidecars.len(), 2, "one sidecar per share: {sidecars:?}");
    for sidecar in sidecars {
        assert_eq!(sidecar["restartPolicy"], "Always", "a native sidecar");
        let env = sidecar["env"].as_array().unwrap();
        let access = env.iter().find(|e| e["name"] == "AWS_ACCESS_KEY_ID").unwrap();
        assert_eq!(access["valueFrom"]["secretKeyRef"]["key"], "S3_ACCESS");
        let host = env.iter().find(|e| e["name"] == "BUCKET_HOST").unwrap();
        assert!(host["value"].as_str().unwrap().ends_with(".s3.example.ca"));
    }
    let volume_names: Vec<&str> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .filter(|n| n.starts_with("fuse-"))
        .collect();
    assert_eq!(volume_names.len(), 4, "two volumes per share: {volume_names:?}");

    assert!(
        spec["containers"][0]["env"].is_null(),
        "the helper at index 0 is left alone"
    );
    let notebook_container = &spec["containers"][1];
    let mounts: Vec<&str> = notebook_container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .filter(|p| p.starts_with("/home/jovyan/filers/"))
        .collect();
    assert_eq!(
        mounts,
        [
            "/home/jovyan/filers/fld5filersvm/projects/alpha",
            "/home/jovyan/filers/fld9svm/dir/share2"
        ]
    );
    let env = notebook_container["env"].as_array().unwrap();
    let secret = env.iter().find(|e| e["name"] == "fld9svm_secret").unwrap();
    assert_eq!(
        secret["valueFrom"]["secretKeyRef"],
        json!({"name": "fld9svm-conn-secret", "key": "S3_SECRET"})
    );
    assert!(
        !stored.to_string().contains("example-secret"),
        "no plain secret value in the stored pod"
    );
    assert_eq!(
        stored["metadata"]["annotations"]["filer-injector-webhook.das-zone.statcan/inject"],
        "injected"
    );

    // A namespace without existing-shares: the same pod is stored as it came.
    let untouched = create(&client, Some(bare), &pods, notebook("analysis-0"))
        .await
        .expect("admitted");
    assert!(untouched["spec"]["initContainers"].is_null());
    assert!(untouched["metadata"]["annotations"].is_null());
    // A broken share list: the pod is created, unchanged, and the user is told why.
    let (status, warnings) = create_telling_warnings(&client, broken, notebook("analysis-0")).await;
    assert_eq!(status, 201, "created");
    assert_eq!(
        warnings,
        [
            "299 - \"filer SVM fld0nosuch not mounted: no vserver \\\"fld0nosuch\\\" in ConfigMap das/filers-list\""
        ]
    );

    // The inputs in force: the injector's two ConfigMaps and the two existing-shares, not the
    // unrelated ConfigMap; the three SVM Secrets (of whether their keys are set), not the
    // unrelated one.
    let metrics = webhook.metrics();
    assert!(
        metrics.contains("outfit_policies{kind=\"ConfigMap\"} 5"),
        "{metrics}"
    );
    assert!(
        metrics.contains("outfit_policies{kind=\"Secret\"} 3"),
        "{metrics}"
    );
    assert!(
        !webhook.log().contains("not allowed to watch"),
        "outfit's ClusterRole lets it watch its inputs:\n{}",
        webhook.log()
    );

    a_missing_secret_skips_its_svm_until_it_is_created(&client, partial).await;
    outfit_may_read_no_other_secret(&kubeconfig, shares).await;
}

/// StatCan: "If any of these key values are empty then the sidecar will skip as the mounting would
/// just fail." The pod is admitted with fld5svm's filer and a warning naming fld9svm's Secret (where
/// outfit used to inject it, and the kubelet refused to start the pod); once the Secret is
/// created, the next pods get both.
async fn a_missing_secret_skips_its_svm_until_it_is_created(client: &kube::Client, namespace: &str) {
    let (status, warnings) = create_telling_warnings(client, namespace, notebook("partial-0")).await;
    assert_eq!(status, 201, "created");
    assert_eq!(
        warnings,
        ["299 - \"filer SVM fld9svm not mounted: Secret fld9svm-conn-secret not found\""]
    );
    let pods = resource("", "v1", "Pod", "pods");
    let stored = api(client, Some(namespace), &pods)
        .get("partial-0")
        .await
        .expect("the pod is stored");
    let stored = serde_json::to_value(stored).unwrap();
    assert_eq!(sidecars(&stored), ["fld5f"], "fld5svm's filer alone");
    let env = stored["spec"]["containers"][1]["env"].to_string();
    assert!(!env.contains("fld9svm"), "nor fld9svm's env vars: {env}");

    create(
        client,
        Some(namespace),
        &resource("", "v1", "Secret", "secrets"),
        fld9_secret(namespace),
    )
    .await
    .expect("create fld9svm's Secret");
    // The Secret reaches outfit through its watch: pods are created until one has both filers.
    let start = Instant::now();
    let deadline = start + Duration::from_secs(30);
    let mut attempt = 1;
    let stored = loop {
        let stored = create(
            client,
            Some(namespace),
            &pods,
            notebook(&format!("partial-{attempt}")),
        )
        .await
        .expect("admitted");
        if sidecars(&stored).len() == 2 || Instant::now() > deadline {
            break stored;
        }
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Reported, not asserted: how long the new Secret took to reach a stored pod.
    eprintln!(
        "the created Secret was seen after {:?} ({attempt} pods)",
        start.elapsed()
    );
    assert_eq!(sidecars(&stored), ["fld5f", "fld9s"]);
}

/// The first 5 characters (the SVM's) of the names of the pod's sidecars.
fn sidecars(pod: &Value) -> Vec<String> {
    pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .map(|name| name.chars().take(5).collect())
        .collect()
}

/// The ClusterRole of `outfit manifests --filers-list` lets outfit read its SVMs' Secrets, by
/// name, and no other Secret: RBAC refuses the rest, so outfit cannot read what it should not.
async fn outfit_may_read_no_other_secret(kubeconfig: &std::path::Path, namespace: &str) {
    let outfit = client_from(kubeconfig).await;
    let secrets = api(&outfit, Some(namespace), &resource("", "v1", "Secret", "secrets"));
    secrets
        .get("fld5filersvm-conn-secret")
        .await
        .expect("outfit may read an SVM's Secret");
    let refused = |result: Result<_, kube::Error>| match result {
        Err(kube::Error::Api(status)) => status.code == 403,
        _ => false,
    };
    assert!(
        refused(secrets.get("unrelated").await.map(drop)),
        "another Secret"
    );
    assert!(
        refused(secrets.list(&Default::default()).await.map(drop)),
        "every Secret of a namespace"
    );
    let everywhere = api(&outfit, None, &resource("", "v1", "Secret", "secrets"));
    assert!(
        refused(everywhere.list(&Default::default()).await.map(drop)),
        "every Secret of the cluster"
    );
}
