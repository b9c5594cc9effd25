//! Policies reload from their directory: a change is compiled off the request path and swapped
//! in; an invalid policy leaves the last good set serving and is reported in a metric.

use std::{path::Path, sync::Arc, time::Duration};

use hyper::StatusCode;
use outfit_server::{Limits, Metrics, PolicyStore, Webhook};
use tokio_util::sync::CancellationToken;

use crate::support::{TempDir, fixture, fixtures, post, wait_reloads};

const PLAIN_DEFAULT: &str = r#"
apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata:
  name: plain-env
  namespace: team-a
spec:
  desc: Tag plain pods
  selector:
    matchLabels:
      app: plain
  env:
  - name: PLAIN
    value: "yes"
"#;

/// The same policy with an invalid selector operator.
const BROKEN_DEFAULT: &str = r#"
apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata:
  name: plain-env
  namespace: team-a
spec:
  desc: Tag plain pods
  selector:
    matchExpressions:
    - key: app
      operator: Sometimes
      values: [plain]
  env:
  - name: PLAIN
    value: "no"
"#;

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

/// Writes by renaming a hidden file over the target, so a poll never reads half a file (hidden
/// files are not policy files).
fn write_atomically(path: &Path, contents: &str) {
    let staged = path.with_file_name(".staged");
    std::fs::write(&staged, contents).expect("write");
    std::fs::rename(&staged, path).expect("rename");
}

async fn patch_type(webhook: &Webhook) -> serde_json::Value {
    let (status, answer) = post(webhook, "/mutate", fixture("pod-create-no-match")).await;
    assert_eq!(status, StatusCode::OK);
    answer["response"]["patchType"].clone()
}

#[tokio::test]
async fn a_changed_policy_directory_is_swapped_in_and_a_bad_one_is_not() {
    let dir = TempDir::new("policy-reload");
    copy_dir(&fixtures().join("policies"), dir.path());
    let metrics = Metrics::new();
    let store = Arc::new(
        PolicyStore::load(vec![dir.path().to_path_buf()], "default", metrics.clone(), None).expect("load"),
    );
    let webhook = Webhook::new(store.current(), metrics.clone(), Limits::default());
    let shutdown = CancellationToken::new();
    let watcher = tokio::spawn(store.clone().watch(Duration::from_millis(50), shutdown.clone()));
    let mut reloads = store.reloads();

    assert_eq!(
        patch_type(&webhook).await,
        serde_json::Value::Null,
        "no policy matches yet"
    );

    write_atomically(&dir.path().join("plain.yaml"), PLAIN_DEFAULT);
    wait_reloads("the new policy", &mut reloads, |r| r.succeeded == 1).await;
    assert_eq!(patch_type(&webhook).await, "JSONPatch", "the new policy applies");
    assert!(
        metrics
            .encode()
            .contains("outfit_policies{kind=\"PodDefault\"} 7")
    );

    write_atomically(&dir.path().join("plain.yaml"), BROKEN_DEFAULT);
    wait_reloads("the rejected policy", &mut reloads, |r| r.failed == 1).await;
    assert_eq!(
        patch_type(&webhook).await,
        "JSONPatch",
        "the last good set keeps serving"
    );
    let text = metrics.encode();
    assert!(
        text.contains("outfit_policy_reloads_total{result=\"error\"} 1"),
        "{text}"
    );
    assert!(text.contains("outfit_policies{kind=\"PodDefault\"} 7"), "{text}");

    std::fs::remove_file(dir.path().join("plain.yaml")).expect("remove");
    wait_reloads("the removed policy", &mut reloads, |r| r.succeeded == 2).await;
    assert_eq!(
        patch_type(&webhook).await,
        serde_json::Value::Null,
        "the policy is gone"
    );
    let text = metrics.encode();
    assert!(
        text.contains("outfit_policy_reloads_total{result=\"success\"} 2"),
        "{text}"
    );
    assert!(text.contains("outfit_policies{kind=\"PodDefault\"} 6"), "{text}");

    // reload_now (SIGHUP) looks at once: with a long poll interval only the trigger can find it.
    shutdown.cancel();
    watcher.await.expect("watcher stops");
    let shutdown = CancellationToken::new();
    let watcher = tokio::spawn(store.clone().watch(Duration::from_secs(3600), shutdown.clone()));
    write_atomically(&dir.path().join("plain.yaml"), PLAIN_DEFAULT);
    store.reload_now();
    wait_reloads("the triggered reload", &mut reloads, |r| r.succeeded == 3).await;
    assert_eq!(patch_type(&webhook).await, "JSONPatch");
    shutdown.cancel();
    watcher.await.expect("watcher stops");
}

#[test]
fn an_invalid_policy_at_startup_is_an_error_naming_it() {
    let dir = TempDir::new("policy-invalid");
    std::fs::write(dir.path().join("broken.yaml"), BROKEN_DEFAULT).expect("write");
    let error = PolicyStore::load(vec![dir.path().to_path_buf()], "default", Metrics::new(), None)
        .expect_err("invalid");
    let message = error.to_string();
    assert!(message.contains("1 invalid policy"), "{message}");
    assert!(
        message.contains("broken.yaml") && message.contains("plain-env"),
        "{message}"
    );
}
