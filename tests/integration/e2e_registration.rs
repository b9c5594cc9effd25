//! End to end: outfit keeps its own registration in step (issue 22). A real kube-apiserver, outfit
//! outside it as a user's laptop or CI runs it, the webhook configuration `outfit manifests
//! --webhook-url` prints applied without a CA. Every assertion is on what the API server stored
//! or answered. The control plane is this module's own: the rules follow every policy in the
//! cluster, so another test's mutators must not be in it.

use std::{
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use base64::{Engine, prelude::BASE64_STANDARD};
use kube::{
    Client,
    api::{DeleteParams, DynamicObject, PostParams},
};
use outfit_test_support::wait::eventually;
use serde_json::{Value, json};

use crate::{
    control_plane::{ControlPlane, api, create, pod_namespace, resource},
    e2e::{Webhook, pod},
    e2e_cluster::metric,
    support::install_crds,
};

fn plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| ControlPlane::start("registration"))
}

fn configurations() -> kube::discovery::ApiResource {
    resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    )
}

/// `outfit serve --from-cluster` keeping the configuration `name` in step, its Lease in
/// `namespace`; `extra` adds flags (a certificate source, when not `--self-signed`).
fn serve(plane: &ControlPlane, name: &str, namespace: &str, extra: &[&str], self_signed: bool) -> Webhook {
    let mut args = vec![
        "--from-cluster",
        "--webhook-configuration",
        name,
        "--namespace",
        namespace,
    ];
    args.extend_from_slice(extra);
    let env = [("KUBECONFIG", plane.kubeconfig())];
    if self_signed {
        Webhook::start_with(&args, &env)
    } else {
        Webhook::start_without_certs(&args, &env)
    }
}

/// Installs what `outfit manifests --webhook-url` prints for `webhook` without `--ca-file`
/// (checked to hold no `caBundle`), named `name` and narrowed to `namespace`.
async fn install_without_ca(client: &Client, webhook: &Webhook, name: &str, namespace: &str) {
    let url = format!("https://127.0.0.1:{}/mutate", webhook.port());
    let documents = crate::support::manifests(&["--webhook-url", &url]);
    let mut configuration = documents
        .iter()
        .find(|d| d.kind() == "MutatingWebhookConfiguration")
        .expect("a webhook configuration")
        .value
        .clone();
    assert_eq!(
        configuration["webhooks"][0]["clientConfig"],
        json!({"url": url}),
        "no CA given, none printed"
    );
    configuration["metadata"]["name"] = json!(name);
    configuration["webhooks"][0]["namespaceSelector"] =
        json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
    create(client, None, &configurations(), configuration)
        .await
        .expect("install the webhook configuration");
}

async fn configuration(client: &Client, name: &str) -> Value {
    let stored = api(client, None, &configurations())
        .get(name)
        .await
        .expect("the webhook configuration");
    serde_json::to_value(stored).unwrap()
}

/// The `group/resources` of the first webhook's rules, e.g. `["/pods", "/services"]`.
fn rule_resources(configuration: &Value) -> Vec<String> {
    configuration["webhooks"][0]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|rule| {
            let group = rule["apiGroups"][0].as_str().unwrap_or_default().to_owned();
            rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |r| format!("{group}/{}", r.as_str().unwrap_or_default()))
        })
        .collect()
}

/// The metrics once the counter `line` has counted something, which must be exactly one: outfit
/// counts a write when the API server has answered it, a moment after another client can read it.
async fn counted(webhook: &Webhook, line: &str) -> String {
    let text = eventually("the write to be counted", Duration::from_secs(30), || async {
        let text = webhook.metrics();
        metric(&text, line).is_some().then_some(text)
    })
    .await;
    assert_eq!(metric(&text, line), Some(1.0), "{text}");
    text
}

/// A server-side dry run of a pod through admission; the stored object's env, or the error.
async fn dry_run_pod(client: &Client, namespace: &str) -> Result<Value, kube::Error> {
    let pods = api(client, Some(namespace), &resource("", "v1", "Pod", "pods"));
    let object: DynamicObject = serde_json::from_value(pod("probe", json!({}), json!([]))).unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&params, &object)
        .await
        .map(|p| serde_json::to_value(p).unwrap())
}

/// `--no-manage-webhook` with outfit's own certificate would leave a rotated CA out of
/// `caBundle`: refused, naming what to give instead.
#[test]
fn manifests_refuse_an_unmanaged_webhook_without_a_ca() {
    let output = crate::support::outfit(&["manifests", "--no-manage-webhook"], "");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--ca-file or --cert-manager"), "{stderr}");
    let with_cert_manager = crate::support::manifests(&["--no-manage-webhook", "--cert-manager"]);
    assert!(with_cert_manager.iter().any(|d| d.kind() == "Certificate"));
}

/// A fresh install with no CA given: the API server cannot call outfit until outfit writes its
/// CA into `caBundle`; then pods are mutated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_without_a_ca_mutates_pods_once_outfit_injects_it() {
    let plane = plane();
    let client = plane.admin_client().await;
    install_crds(&client).await;
    let namespace = "reg-fresh";
    pod_namespace(&client, namespace, json!({})).await;
    let pod_defaults = resource("kubeflow.org", "v1alpha1", "PodDefault", "poddefaults");
    let proxy = json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "proxy"},
                       "spec": {"selector": {}, "env": [{"name": "HTTPS_PROXY", "value": "http://p:3128"}]}});
    create(&client, Some(namespace), &pod_defaults, proxy)
        .await
        .expect("a PodDefault");
    let webhook = serve(plane, "reg-fresh", namespace, &[], true);
    install_without_ca(&client, &webhook, "reg-fresh", namespace).await;

    let ca = std::fs::read_to_string(webhook.ca_file()).unwrap();
    let stored = eventually("outfit to inject its CA", Duration::from_secs(30), || async {
        let stored = configuration(&client, "reg-fresh").await;
        let bundle = stored["webhooks"][0]["clientConfig"]["caBundle"].as_str()?;
        Some(BASE64_STANDARD.decode(bundle).unwrap())
    })
    .await;
    assert_eq!(String::from_utf8(stored).unwrap(), ca);
    let mutated = eventually("a mutated pod", Duration::from_secs(30), || async {
        dry_run_pod(&client, namespace).await.ok()
    })
    .await;
    assert_eq!(
        mutated["spec"]["containers"][0]["env"][0]["name"], "HTTPS_PROXY",
        "{mutated}"
    );
    // The write is counted once outfit has the API server's answer, which may be a moment after
    // this test sees the stored CA: the count is waited for, then must be exactly one.
    let text = counted(
        &webhook,
        "outfit_webhook_configuration_updates_total{field=\"caBundle\",reason=\"startup\"}",
    )
    .await;
    assert_eq!(metric(&text, "outfit_webhook_leader "), Some(1.0), "{text}");
}

/// A mutator of Services created after the install is applied to the next Service (outfit adds
/// its rule; the seconds it took are printed, and a minute bounds the wait on a loaded machine), a
/// hand edit of the rules is undone, and the rule goes with the last mutator of Services; a mutator
/// of a CRD's kind gets the CRD's resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_mutator_added_after_install_is_called_within_seconds_and_its_rule_kept() {
    let plane = plane();
    let client = plane.admin_client().await;
    install_crds(&client).await;
    let namespace = "reg-services";
    let name = "reg-services";
    pod_namespace(&client, namespace, json!({})).await;
    let webhook = serve(plane, name, namespace, &[], true);
    install_without_ca(&client, &webhook, name, namespace).await;
    eventually(
        "the pods-only rules and the CA",
        Duration::from_secs(30),
        || async {
            let stored = configuration(&client, name).await;
            let ready = stored["webhooks"][0]["clientConfig"]["caBundle"].is_string();
            (ready && rule_resources(&stored) == ["/pods"]).then_some(())
        },
    )
    .await;

    let assign = resource("mutations.gatekeeper.sh", "v1", "Assign", "assign");
    let sticky = json!({
        "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign", "metadata": {"name": "reg-sticky"},
        "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Service"]}],
                 "match": {"scope": "Namespaced", "kinds": [{"apiGroups": [""], "kinds": ["Service"]}],
                           "namespaces": [namespace]},
                 "location": "spec.sessionAffinity", "parameters": {"assign": {"value": "ClientIP"}}}
    });
    let created = Instant::now();
    create(&client, None, &assign, sticky)
        .await
        .expect("create the Assign");
    let services = api(
        &client,
        Some(namespace),
        &resource("", "v1", "Service", "services"),
    );
    let service: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(
        "the next Service to be mutated",
        Duration::from_secs(60),
        || async {
            let stored = serde_json::to_value(services.create(&dry_run, &service).await.ok()?).unwrap();
            (stored["spec"]["sessionAffinity"] == "ClientIP").then_some(())
        },
    )
    .await;
    eprintln!(
        "a new Service mutator applied to Services {:.1} s after it was created",
        created.elapsed().as_secs_f64()
    );

    // A hand edit (the rules back to pods only) is undone.
    let mut edited = configuration(&client, name).await;
    assert_eq!(rule_resources(&edited), ["/pods", "/services"]);
    edited["webhooks"][0]["rules"] = json!([edited["webhooks"][0]["rules"][0]]);
    let edited: DynamicObject = serde_json::from_value(edited).unwrap();
    api(&client, None, &configurations())
        .replace(name, &PostParams::default(), &edited)
        .await
        .expect("edit the rules by hand");
    eventually("the hand edit to be undone", Duration::from_secs(60), || async {
        (rule_resources(&configuration(&client, name).await) == ["/pods", "/services"]).then_some(())
    })
    .await;
    counted(
        &webhook,
        "outfit_webhook_configuration_updates_total{field=\"rules\",reason=\"restored\"}",
    )
    .await;

    api(&client, None, &assign)
        .delete("reg-sticky", &DeleteParams::default())
        .await
        .expect("delete the Assign");
    eventually(
        "the Services rule to go with the mutator",
        Duration::from_secs(60),
        || async { (rule_resources(&configuration(&client, name).await) == ["/pods"]).then_some(()) },
    )
    .await;

    // A mutator of a CRD's kind: outfit does not know its resource, so it asks the API server's
    // discovery, and the rule names the CRD's plural. (In this test: the other tests of the
    // module add no kind, so the rules compare whole.)
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.registration.example.com"},
        "spec": {"group": "registration.example.com", "scope": "Namespaced",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let crds = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    // Before the CRD is served: the rule follows once it is (outfit looks the kind up again).
    let policy = json!({
        "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign", "metadata": {"name": "reg-gizmo"},
        "spec": {"applyTo": [{"groups": ["registration.example.com"], "versions": ["v1"], "kinds": ["Gizmo"]}],
                 "match": {"namespaces": [namespace]},
                 "location": "spec.size", "parameters": {"assign": {"value": 1}}}
    });
    create(&client, None, &assign, policy)
        .await
        .expect("create the Assign");
    create(&client, None, &crds, crd).await.expect("the Gizmo CRD");
    eventually("the Gizmo rule", Duration::from_secs(60), || async {
        let resources = rule_resources(&configuration(&client, name).await);
        (resources == ["/pods", "registration.example.com/gizmos"]).then_some(())
    })
    .await;
    api(&client, None, &assign)
        .delete("reg-gizmo", &DeleteParams::default())
        .await
        .expect("delete the Assign");
}

/// Two replicas: one holds the Lease and writes, the other only serves; when the writer dies
/// (killed, no release), the other takes over once the Lease expires and undoes the next hand
/// edit; when that one is stopped with SIGTERM, it releases the Lease and a third takes over at
/// once (sooner than any expiry could let it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_writer_and_the_other_takes_over_when_it_dies() {
    let plane = plane();
    let client = plane.admin_client().await;
    install_crds(&client).await;
    let namespace = "reg-failover";
    let name = "reg-failover";
    pod_namespace(&client, namespace, json!({})).await;
    let replicas = [
        serve(plane, name, namespace, &[], true),
        serve(plane, name, namespace, &[], true),
    ];
    install_without_ca(&client, &replicas[0], name, namespace).await;
    let leading = |webhook: &Webhook| metric(&webhook.metrics(), "outfit_webhook_leader ") == Some(1.0);
    let leader = eventually("a leader", Duration::from_secs(30), || async {
        replicas.iter().position(leading)
    })
    .await;
    let follower = 1 - leader;
    eventually("the CA to be injected", Duration::from_secs(30), || async {
        configuration(&client, name).await["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .map(drop)
    })
    .await;
    let writes = |webhook: &Webhook| -> f64 {
        webhook
            .metrics()
            .lines()
            .filter(|l| l.starts_with("outfit_webhook_configuration_updates_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert!(!leading(&replicas[follower]), "exactly one leader");
    assert_eq!(writes(&replicas[follower]), 0.0, "the follower never writes");
    assert!(writes(&replicas[leader]) >= 1.0);

    let [first, second] = replicas;
    let (dead, survivor) = if leader == 0 {
        (first, second)
    } else {
        (second, first)
    };
    let killed = Instant::now();
    drop(dead); // SIGKILL: no release of the Lease, as a crash or a lost node.
    // The survivor sees the last renewal up to one look (2 s) after it, waits the Lease's 10 s
    // by its own clock and takes at its next look: up to 14 s after the kill on an idle machine.
    // The slack is for a loaded CI machine; the figure measured is printed below.
    eventually("the survivor to take over", Duration::from_secs(25), || async {
        leading(&survivor).then_some(())
    })
    .await;
    let failover = killed.elapsed();
    // Edited by hand as `kubectl edit` does: read, change, replace, and again on a conflict (the
    // new leader's own first write may land between the read and the replace: seen in CI).
    eventually("an edit by hand", Duration::from_secs(20), || async {
        let mut edited = configuration(&client, name).await;
        edited["webhooks"][0]["rules"][0]["operations"] = json!(["CREATE"]);
        let edited: DynamicObject = serde_json::from_value(edited).unwrap();
        match api(&client, None, &configurations())
            .replace(name, &PostParams::default(), &edited)
            .await
        {
            Ok(_) => Some(()),
            Err(kube::Error::Api(status)) if status.code == 409 => None,
            Err(error) => panic!("edit by hand: {error}"),
        }
    })
    .await;
    eventually(
        "the new leader to undo the edit",
        Duration::from_secs(20),
        || async {
            let stored = configuration(&client, name).await;
            (stored["webhooks"][0]["rules"][0]["operations"] == json!(["CREATE", "UPDATE"])).then_some(())
        },
    )
    .await;
    eprintln!(
        "failover: the survivor led {:.1} s after the leader was killed",
        failover.as_secs_f64()
    );

    // A leader shut down as Kubernetes shuts pods down releases the Lease: a new replica takes
    // over at its next look (2 s), not after the 10 s a dead one leaves.
    let newcomer = serve(plane, name, namespace, &[], true);
    assert!(!leading(&newcomer), "the survivor still leads");
    let stopped = Instant::now();
    assert!(survivor.terminate().success(), "SIGTERM exits 0");
    eventually(
        "the newcomer to take over a released Lease",
        // Under the Lease's 10 s: without the release the newcomer could not lead in time.
        Duration::from_secs(8),
        || async { leading(&newcomer).then_some(()) },
    )
    .await;
    eprintln!(
        "handover: the newcomer led {:.1} s after SIGTERM to the leader",
        stopped.elapsed().as_secs_f64()
    );
}

/// The certificate in a Secret outfit creates, with a 6 s serving certificate (so a CA lives
/// 24 s): under a steady stream of pod admissions through the API server, a CA rotation and the
/// leaves around it fail none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_rotation_under_load_fails_no_admission() {
    let plane = plane();
    let client = plane.admin_client().await;
    let namespace = "reg-rotation";
    let name = "reg-rotation";
    pod_namespace(&client, namespace, json!({})).await;
    let webhook = serve(
        plane,
        name,
        namespace,
        &["--tls-secret", "outfit-tls", "--cert-lifetime", "6"],
        false,
    );
    install_without_ca(&client, &webhook, name, namespace).await;
    eventually("the first admission", Duration::from_secs(30), || async {
        dry_run_pod(&client, namespace).await.ok()
    })
    .await;
    let secret = api(&client, Some(namespace), &resource("", "v1", "Secret", "secrets"))
        .get("outfit-tls")
        .await
        .expect("outfit created its Secret");
    assert_eq!(secret.data["type"], "kubernetes.io/tls");

    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..3)
        .map(|_| {
            let (client, ok, failed, stop) = (client.clone(), ok.clone(), failed.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match dry_run_pod(&client, namespace).await {
                        Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                        Err(error) => {
                            if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                                eprintln!("a failed admission: {error}");
                            }
                            0
                        }
                    };
                }
            })
        })
        .collect();
    let rotations = |what: &str| {
        metric(
            &webhook.metrics(),
            &format!("outfit_certificate_rotations_total{{what=\"{what}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let started = Instant::now();
    // A CA rotation, then a leaf signed by the new CA, then one more leaf.
    let leaves_at_ca = eventually("a CA rotation", Duration::from_secs(60), || async {
        (rotations("ca") >= 1.0).then(|| rotations("leaf"))
    })
    .await;
    eventually("two leaves of the new CA", Duration::from_secs(30), || async {
        (rotations("leaf") >= leaves_at_ca + 2.0).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!(
        "rotation under load: {ok} admissions, {failed} failed, over {:.1} s with {} CA and {} leaf rotations",
        started.elapsed().as_secs_f64(),
        rotations("ca"),
        rotations("leaf")
    );
    assert_eq!(failed, 0, "no admission may fail over a rotation");
    assert!(ok > 50, "the load ran: {ok}");
}

/// The rights `outfit manifests` grants are enough, and bounded: outfit, as its ServiceAccount,
/// creates its certificate Secret, holds its Lease and injects its CA into its configuration (past
/// the registration guard, which the install applies too), and may not touch any other webhook
/// configuration, nor change in its own anything but the rules and the CA bundle: a stolen token
/// cannot point it at a server of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outfit_runs_on_exactly_the_rights_outfit_manifests_grants() {
    let plane = plane();
    let client = plane.admin_client().await;
    install_crds(&client).await;
    let namespace = "reg-rbac";
    pod_namespace(&client, namespace, json!({})).await;
    for document in crate::support::manifests(&["--namespace", namespace]) {
        let (group, version) = match document.value["apiVersion"].as_str().unwrap().split_once('/') {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (String::new(), "v1".to_owned()),
        };
        let (kind, plural) = match document.kind() {
            "ServiceAccount" => ("ServiceAccount", "serviceaccounts"),
            "ClusterRole" => ("ClusterRole", "clusterroles"),
            "ClusterRoleBinding" => ("ClusterRoleBinding", "clusterrolebindings"),
            "Role" => ("Role", "roles"),
            "RoleBinding" => ("RoleBinding", "rolebindings"),
            "ValidatingAdmissionPolicy" => ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
            "ValidatingAdmissionPolicyBinding" => (
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
            ),
            _ => continue,
        };
        let scope = document.value["metadata"]["namespace"].as_str();
        create(
            &client,
            scope,
            &resource(&group, &version, kind, plural),
            document.value.clone(),
        )
        .await
        .unwrap_or_else(|e| panic!("create the {kind}: {e}"));
    }
    let account = format!("system:serviceaccount:{namespace}:outfit");
    let groups = format!("system:serviceaccounts,system:serviceaccounts:{namespace},system:authenticated");
    // The API server's authorizer reads roles and bindings from its own caches: under load a
    // grant just created may still be unknown to it, and outfit's first call would be refused.
    until_granted(&client, &account, &groups, namespace).await;
    let webhook = Webhook::start_without_certs(
        &[
            "--from-cluster",
            "--tls-secret",
            "outfit-tls",
            "--namespace",
            namespace,
        ],
        &[
            ("KUBECONFIG", plane.kubeconfig()),
            ("KUBE_RS_DEBUG_IMPERSONATE_USER", account.clone().into()),
            ("KUBE_RS_DEBUG_IMPERSONATE_GROUP", groups.clone().into()),
        ],
    );
    install_without_ca(&client, &webhook, "outfit", namespace).await;
    eventually(
        "an admission through the injected CA",
        Duration::from_secs(30),
        || async { dry_run_pod(&client, namespace).await.ok() },
    )
    .await;
    let lease = api(
        &client,
        Some(namespace),
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
    )
    .get("outfit")
    .await
    .expect("outfit created its Lease");
    assert!(
        lease.data["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{:?}",
        lease.data
    );
    assert!(!webhook.log().contains("forbidden"), "{}", webhook.log());

    let as_outfit =
        crate::requester::client_as(plane, &account, &groups.split(',').collect::<Vec<_>>()).await;
    install_without_ca(&client, &webhook, "reg-rbac-other", namespace).await;
    let error = api(&as_outfit, None, &configurations())
        .get("reg-rbac-other")
        .await
        .expect_err("another configuration is out of reach");
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 403), "{error}");

    // Its own, as that identity, tried with dry runs (the API server admits a dry run as it
    // would the write, and stores nothing).
    let own = api(&as_outfit, None, &configurations());
    // Its own kind of change passes: a new CA bundle.
    dry_update(&own, |c: &mut Value| {
        c["webhooks"][0]["clientConfig"]["caBundle"] = json!(BASE64_STANDARD.encode("another CA"))
    })
    .await
    .expect("a caBundle change is outfit's own");
    let refused = |result: Result<DynamicObject, kube::Error>, what: &str| match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{what}: {status:?}");
            status.message
        }
        other => panic!("{what} was let through: {other:?}"),
    };
    // The guard, too, is read from a cache: the first refusal may come a moment after it is made.
    let elsewhere = eventually(
        "the registration guard in force",
        Duration::from_secs(30),
        || async {
            dry_update(&own, |c: &mut Value| {
                c["webhooks"][0]["clientConfig"]["url"] = json!("https://attacker.example/mutate");
            })
            .await
            .err()
        },
    )
    .await;
    let message = refused(Err(elsewhere), "pointing the webhook elsewhere");
    assert!(
        message.contains("may change only its webhooks' rules and clientConfig.caBundle"),
        "{message}"
    );
    let ignored = dry_update(&own, |c: &mut Value| {
        c["webhooks"][0]["failurePolicy"] = json!("Ignore")
    })
    .await;
    refused(ignored, "failurePolicy Ignore");
    let narrowed = dry_update(&own, |c: &mut Value| {
        c["webhooks"][0]["rules"] = json!([{"apiGroups": [""], "apiVersions": ["v1"],
                                            "operations": ["CREATE"], "resources": ["services"]}]);
    })
    .await;
    let message = refused(narrowed, "rules without pods");
    assert!(message.contains("seeing pod creates"), "{message}");
    let annotated = dry_update(&own, |c: &mut Value| {
        c["metadata"]["annotations"] = json!({"cert-manager.io/inject-ca-from": "evil/ca"});
    })
    .await;
    refused(annotated, "a new annotation");
}

/// Waits until the API server grants `account` every rule of the Role and ClusterRole that
/// `outfit manifests` gives it (one SubjectAccessReview per rule: its first verb, resource and
/// name).
async fn until_granted(client: &Client, account: &str, groups: &str, namespace: &str) {
    let reviews = resource(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
    );
    for document in crate::support::manifests(&["--namespace", namespace]) {
        let scope = match document.kind() {
            "Role" => Some(namespace),
            "ClusterRole" => None,
            _ => continue,
        };
        for rule in document.value["rules"].as_array().expect("rules") {
            let first = |field: &str| rule[field][0].as_str().unwrap_or_default().to_owned();
            let review = json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": {
                    "user": account,
                    "groups": groups.split(',').collect::<Vec<_>>(),
                    "resourceAttributes": {
                        "namespace": scope.unwrap_or_default(),
                        "group": first("apiGroups"),
                        "resource": first("resources"),
                        "name": first("resourceNames"),
                        "verb": first("verbs"),
                    },
                },
            });
            let what = format!(
                "{} granted by the {}",
                review["spec"]["resourceAttributes"],
                document.kind()
            );
            eventually(&what, Duration::from_secs(30), || async {
                let answer = create(client, None, &reviews, review.clone()).await.ok()?;
                answer["status"]["allowed"].as_bool().filter(|allowed| *allowed)
            })
            .await;
        }
    }
}

/// A dry run of `change` to the configuration `outfit` as stored now. outfit, which leads,
/// writes it too (its CA, its rules): a replace of a version it has just written over is refused
/// as a conflict (409, seen in CI) before the guard is asked, so such a refusal is tried again on
/// the newer version (webhook configurations take no update without a resourceVersion).
async fn dry_update(
    own: &kube::Api<DynamicObject>,
    change: impl Fn(&mut Value),
) -> Result<DynamicObject, kube::Error> {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut tries = 0;
    loop {
        let mut value = serde_json::to_value(own.get("outfit").await.unwrap()).unwrap();
        change(&mut value);
        let changed: DynamicObject = serde_json::from_value(value).unwrap();
        match own.replace("outfit", &dry, &changed).await {
            Err(kube::Error::Api(status)) if status.code == 409 && tries < 10 => tries += 1,
            result => return result,
        }
    }
}
