//! Workspaces that keep their state, on a fake cluster: a launch records a Workspace that owns
//! its pod; a stop keeps the record (and the name) and the controller removes the pod; a start makes the pod
//! again under the same name; the controller does the same for edits made with kubectl, and
//! writes a refused start to the status once.

use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, user::UserId},
    resource::{self, Phase, StopReason, reconcile},
    workspace::progress::Status,
};

use super::*;
use crate::io::{auth::Identity, fake::FakeCluster};

const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n";

pub(super) async fn with_catalogue() -> (Backend<FakeCluster>, FakeCluster) {
    with_web(&[]).await
}

/// A backend on the fake whose catalogue has `web` (served here), with `env` besides.
async fn with_web(env: &[(&str, &str)]) -> (Backend<FakeCluster>, FakeCluster) {
    let url = serve(WEB).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    let env: Vec<(&str, &str)> = [("BACKEND_CATALOGUE", catalogue.as_str())]
        .into_iter()
        .chain(env.iter().copied())
        .collect();
    on_fake(&env)
}

fn bob() -> Identity {
    Identity {
        username: "bob".to_owned(),
        groups: Vec::new(),
        user: UserId::parse("bob@dtu.dk").unwrap(),
        admin: false,
    }
}

/// `kubectl patch workspace NAME --type merge -p '{"spec":{"started":STARTED}}'`.
fn kubectl_set_started(fake: &FakeCluster, name: &str, started: bool) {
    let record = fake.with(|s| s.workspaces[name].clone());
    fake.put_workspace(resource::Workspace {
        spec: resource::WorkspaceSpec {
            started,
            ..record.spec.clone()
        },
        ..record
    });
}

#[tokio::test]
async fn a_launch_records_a_workspace_that_owns_its_pod_and_a_stop_keeps_it() {
    let (backend, fake) = with_catalogue().await;
    // The controller deletes a stopped workspace's pod.
    let _leader = controlling(&backend).drop_guard();
    let launched = launch_web(&backend, &alice()).await;
    let name = launched.name.clone();
    let (record, pod) = fake.with(|s| (s.workspaces[&name].clone(), s.pods[&name].clone()));
    assert_eq!(record.spec.owner, "alice@dtu.dk");
    assert_eq!(
        (record.spec.entry.as_str(), record.spec.cluster.as_deref()),
        ("web", Some("default"))
    );
    assert!(reconcile::owns(&record, &pod), "the pod is the record's");

    // Another user can neither stop nor start it, and is told it does not exist.
    for refused in [
        backend.stop(&bob(), &name).await,
        backend.start(&bob(), &name, None).await,
    ] {
        assert!(
            matches!(refused, Err(RequestError::NoSuchPod { .. })),
            "{refused:?}"
        );
    }

    let going = backend.stop(&alice(), &name).await.unwrap();
    assert_eq!(going, pod.uid());
    let record = fake.with(|s| s.workspaces[&name].clone());
    assert!(!record.spec.started);
    assert_eq!(
        reconcile::stop_request(&record, jiff::Timestamp::now()).reason,
        StopReason::User
    );
    assert!(fake.with(|s| !s.pods.contains_key(&name)), "the pod is gone");

    // Listed, stopped, with why; the name stays taken: a launch gets another.
    let listed = backend.workspaces(&alice(), false).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, Status::Stopped);
    assert_eq!(listed[0].stopped.as_ref().map(|s| s.reason), Some("user"));
    let second = launch_web(&backend, &alice()).await;
    assert_ne!(second.name, name);

    // A start: the pod again, of the same name, owned by the same record.
    let new_uid = backend.start(&alice(), &name, None).await.unwrap();
    let (record, pod) = fake.with(|s| (s.workspaces[&name].clone(), s.pods[&name].clone()));
    assert!(record.spec.started && reconcile::owns(&record, &pod));
    assert_eq!(new_uid, pod.uid());

    // A delete takes the record first, so nothing makes the pod again.
    backend.remove(&alice(), &name).await.unwrap();
    assert!(fake.with(|s| !s.workspaces.contains_key(&name) && !s.pods.contains_key(&name)));
}

#[tokio::test]
async fn a_pod_without_a_record_can_be_deleted_but_not_stopped() {
    let (backend, fake) = with_catalogue().await;
    fake.put_pod(super::workspace("web-alice", "alice@dtu.dk"));
    let refused = backend.stop(&alice(), "web-alice").await;
    assert!(
        matches!(refused, Err(RequestError::NotStoppable(_))),
        "{refused:?}"
    );
    backend.remove(&alice(), "web-alice").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_controller_follows_edits_made_with_kubectl() {
    let (backend, fake) = with_catalogue().await;
    let launched = launch_web(&backend, &alice()).await;
    let name = launched.name;
    let _leader = controlling(&backend).drop_guard();
    until(&fake, "status Starting", |s| {
        s.workspaces[&name].status.as_ref().and_then(|st| st.phase) == Some(Phase::Starting)
    })
    .await;

    // `kubectl patch ... {"spec":{"started":false}}`: the controller deletes the pod.
    kubectl_set_started(&fake, &name, false);
    until(&fake, "pod deleted", |s| !s.pods.contains_key(&name)).await;
    until(&fake, "status Stopped", |s| {
        let status = s.workspaces[&name].status.clone().unwrap_or_default();
        status.phase == Some(Phase::Stopped) && status.stopped.is_some_and(|st| st.reason == StopReason::User)
    })
    .await;

    // And back: the controller makes the pod under the same name.
    kubectl_set_started(&fake, &name, true);
    until(&fake, "pod made again", |s| s.pods.contains_key(&name)).await;
    let (record, pod) = fake.with(|s| (s.workspaces[&name].clone(), s.pods[&name].clone()));
    assert!(reconcile::owns(&record, &pod));
}

#[tokio::test(start_paused = true)]
async fn a_start_the_catalogue_cannot_make_is_written_to_the_status_once() {
    let (backend, fake) = with_catalogue().await;
    fake.put_workspace(resource::Workspace::new(
        "gone-alice",
        crate::io::fake::NAMESPACE,
        resource::WorkspaceSpec {
            owner: "alice@dtu.dk".into(),
            entry: "no-such-entry".into(),
            ..Default::default()
        },
    ));
    let _leader = controlling(&backend).drop_guard();
    until(&fake, "refused", |s| {
        s.workspaces["gone-alice"].status.as_ref().and_then(|st| st.phase) == Some(Phase::Failed)
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    let writes = fake.count_calls("workspace_status gone-alice");
    assert_eq!(writes, 1, "written once, not retried: {:?}", fake.calls());
    let status = fake.with(|s| s.workspaces["gone-alice"].status.clone().unwrap());
    assert_eq!(status.conditions[0].reason, "UnknownEntry");
    assert!(fake.with(|s| s.pods.is_empty()));
    let listed = backend.workspace(&alice(), "gone-alice").await.unwrap();
    assert_eq!(listed.status, Status::Failed);
}

#[tokio::test(start_paused = true)]
async fn a_workspace_stopped_past_the_retention_is_deleted_with_an_event() {
    let url = serve(WEB).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    let (backend, fake) = on_fake(&[
        ("BACKEND_CATALOGUE", &catalogue),
        ("BACKEND_STOPPEDRETENTION", "1h"),
    ]);
    let spec = resource::WorkspaceSpec {
        owner: "alice@dtu.dk".into(),
        entry: "web".into(),
        started: false,
        ..Default::default()
    };
    let stopped_at = |ago: i64| resource::WorkspaceStatus {
        phase: Some(Phase::Stopped),
        stopped: Some(resource::Stopped {
            at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::now() - jiff::SignedDuration::from_mins(ago),
            ),
            reason: StopReason::Idle,
        }),
        ..Default::default()
    };
    for (name, ago) in [("old-alice", 61), ("new-alice", 59)] {
        let mut record = resource::Workspace::new(name, crate::io::fake::NAMESPACE, spec.clone());
        record.status = Some(stopped_at(ago));
        fake.put_workspace(record);
    }
    let _leader = controlling(&backend).drop_guard();
    until(&fake, "the old one deleted", |s| {
        !s.workspaces.contains_key("old-alice")
    })
    .await;
    assert!(
        fake.with(|s| s.workspaces.contains_key("new-alice")),
        "within the retention"
    );
    assert!(
        fake.calls()
            .contains(&"workspace_event old-alice StoppedRetention".to_owned()),
        "{:?}",
        fake.calls()
    );
}

/// Issue 31: a start is a launch as far as limits go (counted on started workspaces, refused
/// with LimitExceeded, the workspace left stopped), and stopped workspaces have a limit of their
/// own.
#[tokio::test]
async fn limits_refuse_a_start_past_them_and_a_stop_past_the_stopped_limit() {
    let (backend, fake) = with_web(&[
        ("BACKEND_MAXWORKSPACESPERUSER", "1"),
        ("BACKEND_MAXSTOPPEDWORKSPACESPERUSER", "1"),
    ])
    .await;
    let _leader = controlling(&backend).drop_guard();
    let first = launch_web(&backend, &alice()).await;
    backend.stop(&alice(), &first.name).await.unwrap();
    // Stopped workspaces do not count against maxWorkspacesPerUser: a second launch fits.
    let second = launch_web(&backend, &alice()).await;
    let stop_mark = |fake: &FakeCluster| {
        fake.with(|s| {
            s.workspaces[&first.name]
                .annotations()
                .get(model::keys::ANNOTATION_STOP_AT)
                .cloned()
        })
    };
    let stopped_at = stop_mark(&fake);
    assert!(stopped_at.is_some());
    // Refused by the controller, which makes the pod, and read back from the status.
    let refused = backend.start(&alice(), &first.name, None).await;
    assert!(
        matches!(&refused, Err(RequestError::Refused { reason, .. }) if reason == "LimitExceeded"),
        "{refused:?}"
    );
    let record = fake.with(|s| s.workspaces[&first.name].clone());
    assert!(!record.spec.started, "a refused start leaves it stopped");
    // The same stop, to the nanosecond: another would be snapshotted again, and with
    // `snapshotsKept` the oldest snapshot let go (a CI run lost the one a start then named).
    assert_eq!(stop_mark(&fake), stopped_at);
    assert!(fake.with(|s| !s.pods.contains_key(&first.name)));
    // A second stopped one would pass maxStoppedWorkspacesPerUser.
    // Decided by the controller, and read back from its answer on the Workspace.
    let refused = backend.stop(&alice(), &second.name).await;
    let Err(RequestError::Refused { reason, message }) = &refused else {
        panic!("a refusal, got {refused:?}");
    };
    assert_eq!(reason, "LimitExceeded");
    assert!(
        message.starts_with("maxStoppedWorkspacesPerUser is 1"),
        "{message}"
    );
    assert!(
        fake.with(|s| s.workspaces[&second.name].spec.started),
        "still started"
    );
    assert!(
        fake.with(|s| s.pods.contains_key(&second.name)),
        "the refused stop changed nothing"
    );
}

/// Issue 46: two stops at once, asked of two replicas, with room for one more stopped workspace,
/// stop one: the leader's controller decides both, in the owner's turn, and the second counts
/// the stop the first made (issue 43: no per-user Lease).
#[tokio::test]
async fn two_stops_at_once_do_not_both_pass_the_stopped_limit() {
    let (backend, fake) = with_web(&[("BACKEND_MAXSTOPPEDWORKSPACESPERUSER", "1")]).await;
    let _leader = controlling(&backend).drop_guard();
    let replica = replica_of(&backend, &fake);
    let mut names = Vec::new();
    for _ in 0..2 {
        let launched = launch_web(&backend, &alice()).await;
        names.push(launched.name);
    }
    // Each write takes a moment, as on an API server, so that the two interleave.
    fake.with(|s| s.started_latency = std::time::Duration::from_millis(20));
    let alice = alice();
    let (first, second) = tokio::join!(backend.stop(&alice, &names[0]), replica.stop(&alice, &names[1]));
    let refused: Vec<_> = [&first, &second]
        .into_iter()
        .filter_map(|stop| stop.as_ref().err())
        .collect();
    assert!(
        matches!(refused[..], [RequestError::Refused { reason, message }]
            if reason == "LimitExceeded" && message.starts_with("maxStoppedWorkspacesPerUser")),
        "{first:?} {second:?}"
    );
    let stopped = fake.with(|s| s.workspaces.values().filter(|w| !w.spec.started).count());
    assert_eq!(stopped, 1);
}

/// deic-dk's `delete_all_user` takes the user's records too, stopped ones included: else the
/// controller would make their pods again, and the storage with them.
#[tokio::test(start_paused = true)]
async fn delete_all_user_deletes_the_users_records_first() {
    let (backend, fake) = with_catalogue().await;
    let _leader = controlling(&backend).drop_guard();
    let first = launch_web(&backend, &alice()).await;
    let second = launch_web(&backend, &alice()).await;
    backend.stop(&alice(), &second.name).await.unwrap();
    let (bobs, _) = backend.launch(&bob(), &launch("web", None), SILO).await.unwrap();
    assert!(backend.delete_all_user("alice@dtu.dk").await.unwrap());
    let left: Vec<String> = fake.with(|s| s.workspaces.keys().cloned().collect());
    assert_eq!(left, [bobs.name], "alice's records gone, bob's kept");
    assert!(fake.with(|s| !s.pods.contains_key(&first.name)));
}

/// The controller's view is two watches that can disagree for a moment: a start's new pod shown
/// before that start's `spec.started: true`. Its pod is not deleted: the Workspace is read from
/// the API server before anything is made or deleted.
#[tokio::test(start_paused = true)]
async fn the_controller_never_acts_on_a_workspace_its_cache_shows_behind() {
    let (backend, fake) = with_catalogue().await;
    let launched = launch_web(&backend, &alice()).await;
    let name = launched.name;
    // The cache shows it stopped (a stop seen), the API server has it started again since.
    kubectl_set_started(&fake, &name, false);
    fake.with(|s| s.workspaces.get_mut(&name).unwrap().spec.started = true);
    let _leader = controlling(&backend).drop_guard();
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    assert!(fake.with(|s| s.pods.contains_key(&name)), "{:?}", fake.calls());
    assert!(
        fake.calls().iter().any(|c| c == &format!("get_workspace {name}")),
        "it looked"
    );
    assert!(
        !fake.calls().iter().any(|c| c.starts_with("delete_pod")),
        "{:?}",
        fake.calls()
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_create_refused_three_times_is_tried_again_after_doubling_waits() {
    let (backend, fake) = with_catalogue().await;
    fake.with(|s| s.pod_creates_refused = 3);
    fake.put_workspace(resource::Workspace::new(
        "web-alice",
        crate::io::fake::NAMESPACE,
        resource::WorkspaceSpec {
            owner: "alice@dtu.dk".into(),
            entry: "web".into(),
            started: true,
            ..Default::default()
        },
    ));
    let _leader = controlling(&backend).drop_guard();
    until(&fake, "pod made", |s| s.pods.contains_key("web-alice")).await;
    let tried = fake.with(|s| s.pod_creates_at.clone());
    assert_eq!(tried.len(), 4, "three refused, then made: {:?}", fake.calls());
    let waits: Vec<u128> = tried.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
    // The test clock is paused: each wait is the controller's own back-off, to the millisecond.
    assert_eq!(waits, [500, 1000, 2000], "each wait doubles the last");
    let status = fake.with(|s| s.workspaces["web-alice"].status.clone());
    assert_ne!(
        status.and_then(|st| st.phase),
        Some(Phase::Failed),
        "a passing refusal is not written as a failed start"
    );
}

/// Issue 43: deic-dk's `create_pod` writes a Workspace too, which has no stopped state: stopped
/// (here as a cull or kubectl would, `spec.started: false`), its pod goes and then the Workspace,
/// as deic-dk's pod went; and the native API can't stop one.
#[tokio::test(start_paused = true)]
async fn a_deic_dk_workspace_stopped_is_deleted_once_its_pod_is_gone() {
    let (backend, fake) = with_catalogue().await;
    let _leader = controlling(&backend).drop_guard();
    let url = serve(WEB).await;
    let request = CreateRequest {
        yaml_url: url,
        user_id: "alice@dtu.dk".into(),
        settings: None,
    };
    let (name, _) = backend.create_pod(&request, SILO).await.unwrap();
    let error = backend.stop(&alice(), &name).await.unwrap_err();
    assert!(matches!(error, RequestError::NotStoppable(_)), "{error:?}");
    kubectl_set_started(&fake, &name, false);
    until(&fake, "the pod and then the Workspace gone", |s| {
        !s.pods.contains_key(&name) && !s.workspaces.contains_key(&name)
    })
    .await;
}
