//! End to end, policies for authorised users (issue 13 point 3): the seed 000 GPU example as
//! PodPolicy and Audience objects in a real API server, `outfit serve --from-cluster` as the
//! webhook, and pods created as different users. The API server authenticates each request
//! (the admin impersonating the user, so the API server itself sends that `userInfo` to the
//! webhook; bob with his own token); every assertion is on the pod it stored.

use std::time::{Duration, Instant};

use kube::{
    Client, Config,
    api::{Api, DynamicObject, Patch, PatchParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};

use crate::{
    control_plane::{ControlPlane, create, pod_namespace, resource},
    e2e::{Webhook, register},
    support::repo_root,
};

const NAMESPACE: &str = "e2e-requester";

/// A client the API server authenticates as `user` with `groups` (the admin impersonating them).
pub(crate) async fn client_as(plane: &ControlPlane, user: &str, groups: &[&str]) -> Client {
    let mut config = config_of(&plane.kubeconfig()).await;
    config.auth_info.impersonate = Some(user.to_owned());
    config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
    Client::try_from(config).expect("client")
}

async fn config_of(kubeconfig: &std::path::Path) -> Config {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig")
}

/// The example's PodPolicy and Audience, the policy confined to this test's namespace (the API
/// server is shared, and a PodPolicy is cluster-wide).
async fn install_example(admin: &Client) {
    let text = std::fs::read_to_string(repo_root().join("examples/gpu-users/policies.yaml")).unwrap();
    for document in outfit_core::document::parse_stream(&text, "gpu-users").unwrap() {
        let (kind, plural) = match document.kind() {
            "PodPolicy" => ("PodPolicy", "podpolicies"),
            _ => ("Audience", "audiences"),
        };
        let mut object = document.value;
        if kind == "PodPolicy" {
            object["spec"]["match"]["namespaces"] = json!([NAMESPACE]);
        }
        create(
            admin,
            None,
            &resource("outfit.dev", "v1alpha1", kind, plural),
            object,
        )
        .await
        .expect("create the example's policy");
    }
}

/// A workspace pod, with Coder's owner label when `owner` is given, created by `client`.
async fn create_pod(client: &Client, name: &str, owner: Option<&str>) -> Value {
    let labels = match owner {
        Some(owner) => json!({"app": "workspace", "com.coder.user.username": owner}),
        None => json!({"app": "workspace"}),
    };
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "dev", "image": "codercom/enterprise-base:ubuntu"}]}
    });
    create(client, Some(NAMESPACE), &resource("", "v1", "Pod", "pods"), pod)
        .await
        .unwrap_or_else(|error| panic!("pod {name} is admitted: {error}"))
}

fn gpus(pod: &Value) -> &Value {
    &pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
}

fn assert_gpu(pod: &Value) {
    assert_eq!(gpus(pod), "1", "{pod}");
    assert_eq!(
        pod["spec"]["nodeSelector"]["nvidia.com/gpu.present"], "true",
        "{pod}"
    );
    assert!(has_gpu_toleration(pod), "{pod}");
}

/// The API server adds tolerations of its own (DefaultTolerationSeconds) before the webhook.
fn has_gpu_toleration(pod: &Value) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .is_some_and(|all| all.iter().any(|t| t["key"] == "nvidia.com/gpu"))
}

fn assert_untouched(pod: &Value) {
    assert!(gpus(pod).is_null(), "{pod}");
    assert!(pod["spec"]["nodeSelector"].is_null(), "{pod}");
    assert!(!has_gpu_toleration(pod), "{pod}");
}

/// Every authenticated user may create pods in the namespace; the webhook decides who gets a GPU.
/// (A Role of its own: the built-in `edit` is filled in by the controller manager, which is not
/// running.)
async fn allow_everyone_to_create_pods(admin: &Client) {
    let rbac = |kind: &str, plural: &str| resource("rbac.authorization.k8s.io", "v1", kind, plural);
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pod-creator"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]}]
    });
    create(admin, Some(NAMESPACE), &rbac("Role", "roles"), role)
        .await
        .expect("create the Role");
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "everyone-creates-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-creator"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]
    });
    create(
        admin,
        Some(NAMESPACE),
        &rbac("RoleBinding", "rolebindings"),
        binding,
    )
    .await
    .expect("bind it");
}

/// One change to the Audience re-targets the policy: carol leaves it, and the next workspace the
/// provisioner creates for her (once the change reaches the webhook's watch) has no GPU.
async fn carol_leaves_the_audience(admin: &Client, coder: &Client) {
    let audiences: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &resource("outfit.dev", "v1alpha1", "Audience", "audiences"),
    );
    audiences
        .patch(
            "gpu-users",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"users": ["alice"]}})),
        )
        .await
        .expect("change the Audience");
    let deadline = Instant::now() + Duration::from_secs(10);
    for attempt in 0.. {
        let pod = create_pod(coder, &format!("carol-later-{attempt}"), Some("carol")).await;
        if gpus(&pod).is_null() {
            assert_untouched(&pod);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Audience change never reached the webhook"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The CRD's schema stops at the API server what outfit would reject at load: a service account
/// that is not `namespace/name`, a policy that adds nothing.
async fn the_schema_refuses_what_outfit_would_reject(admin: &Client) {
    let policies = resource("outfit.dev", "v1alpha1", "PodPolicy", "podpolicies");
    let cases = [
        (
            json!({"match": {"requesters": {"serviceAccounts": ["coder"]}}, "add": {}}),
            "spec.match.requesters.serviceAccounts[0]",
        ),
        (json!({"match": {}}), "spec.add: Required value"),
    ];
    for (spec, expected) in cases {
        let policy = json!({"apiVersion": "outfit.dev/v1alpha1", "kind": "PodPolicy",
                            "metadata": {"name": "invalid"}, "spec": spec});
        let error = create(admin, None, &policies, policy)
            .await
            .expect_err("the API server refuses it");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpus_go_to_authorised_users_only_with_real_user_info() {
    let plane = ControlPlane::get();
    let admin = plane.admin_client().await;
    crate::support::install_crds(&admin).await;
    pod_namespace(&admin, NAMESPACE, json!({})).await;
    allow_everyone_to_create_pods(&admin).await;
    install_example(&admin).await;
    the_schema_refuses_what_outfit_would_reject(&admin).await;
    // Ready only once the cluster's policies are read: the PodPolicy is in force from the start.
    let webhook = Webhook::start_with(&["--from-cluster"], &[("KUBECONFIG", plane.kubeconfig())]);
    register(&admin, &webhook, "requester", NAMESPACE).await;

    let alice = client_as(plane, "alice", &["team-a", "gpu-users"]).await;
    assert_gpu(&create_pod(&alice, "alice-workspace", None).await);

    // Bob is not authorised: refused silently, his pod admitted as it came. Bob signs in with his
    // own token (hack/control-plane's tokens.csv: user bob, group team-b).
    let bob = Client::try_from(config_of(&plane.state_dir.join("kubeconfig-bob")).await).expect("client");
    assert_untouched(&create_pod(&bob, "bob-workspace", None).await);

    // Coder's provisioner creates carol's workspace: the owner label counts, carol is in the
    // gpu-users Audience.
    let coder = client_as(
        plane,
        "system:serviceaccount:coder:coder",
        &["system:serviceaccounts", "system:serviceaccounts:coder"],
    )
    .await;
    assert_gpu(&create_pod(&coder, "carol-workspace", Some("carol")).await);
    // The same label on bob's own pod is not trusted.
    assert_untouched(&create_pod(&bob, "bob-as-carol", Some("carol")).await);
    // The provisioner's pod for someone not in the Audience.
    assert_untouched(&create_pod(&coder, "dave-workspace", Some("dave")).await);

    carol_leaves_the_audience(&admin, &coder).await;
    webhook.assert_running();
}
