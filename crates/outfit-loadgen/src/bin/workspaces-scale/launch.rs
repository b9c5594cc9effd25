//! One user's create, wait and delete through either API: deic-dk's (`create_pod`, then
//! `watch_create_pod`) or the native one (`POST /api/v1/workspaces` as an authenticating proxy's
//! user, then its progress stream).

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use outfit_loadgen::workspaces::{call, follow_progress, open_progress};
use serde_json::json;

/// Which API a workspace is made through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    Compat,
    Native,
}

impl Way {
    /// Every other create goes each way.
    pub(crate) fn of(index: usize) -> Self {
        if index.is_multiple_of(2) {
            Self::Compat
        } else {
            Self::Native
        }
    }

    pub(crate) fn other(self) -> Self {
        match self {
            Self::Compat => Self::Native,
            Self::Native => Self::Compat,
        }
    }
}

/// Creates the backend answered 429 (`maxCreatesInFlight` under way), each tried again after its
/// `Retry-After` (1 s); the time to ready includes the waits.
pub(crate) static REFUSED_BUSY: AtomicUsize = AtomicUsize::new(0);
/// The backend's `Retry-After` on a 429.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// `call` of a create, tried again while the backend answers 429.
async fn admitted(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Result<(u16, serde_json::Value)> {
    loop {
        let (status, answer) = call(port, "POST", path, headers, Some(body)).await?;
        if status != 429 {
            return Ok((status, answer));
        }
        REFUSED_BUSY.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(RETRY_AFTER).await;
    }
}

/// User `u`'s id, the same in both APIs.
pub(crate) fn user(u: usize) -> String {
    format!("u{u}@scale.example")
}

/// Creates a workspace from catalogue entry `manifest` (served at
/// `http://127.0.0.1:{manifests}/{manifest}.yaml`) and waits until it is ready; its name and
/// the time from the first request to ready.
pub(crate) async fn create(
    port: u16,
    manifests: u16,
    way: Way,
    user: &str,
    manifest: &str,
) -> Result<(String, Duration)> {
    let started = Instant::now();
    match way {
        Way::Compat => {
            let url = format!("http://127.0.0.1:{manifests}/{manifest}.yaml");
            let body = json!({"yaml_url": url, "user_id": user});
            let (status, created) = admitted(port, "/create_pod", &[], &body).await?;
            let pod = created["pod_name"].as_str().unwrap_or_default().to_owned();
            if status != 200 || pod.is_empty() {
                bail!("create_pod for {user} answered {status}: {created}");
            }
            let body = json!({"user_id": user, "pod_name": pod});
            let (status, ready) = call(port, "POST", "/watch_create_pod", &[], Some(&body)).await?;
            if status != 200 || ready["ready"] != json!(true) {
                bail!("watch_create_pod of {pod} answered {status}: {ready}");
            }
            Ok((pod, started.elapsed()))
        }
        Way::Native => {
            let (name, mut stream) = launch(port, user, manifest).await?;
            let last = follow_progress(&mut stream, |_, _| {}).await?;
            if last != "ready" {
                bail!("workspace {name} of {user} ended with {last}");
            }
            Ok((name, started.elapsed()))
        }
    }
}

/// `POST /api/v1/workspaces` as `user`, then its progress stream opened: the name and the stream.
pub(crate) async fn launch(
    port: u16,
    user: &str,
    manifest: &str,
) -> Result<(String, hyper::Response<hyper::body::Incoming>)> {
    let headers = [("x-forwarded-user", user)];
    let body = json!({"manifest": manifest, "settings": {}});
    let (status, workspace) = admitted(port, "/api/v1/workspaces", &headers, &body).await?;
    if status != 201 {
        bail!("POST /api/v1/workspaces for {user} answered {status}: {workspace}");
    }
    let name = workspace["name"]
        .as_str()
        .context("a workspace without a name")?
        .to_owned();
    let stream = open_progress(port, &name, &headers).await?;
    Ok((name, stream))
}

/// Deletes `user`'s workspace `name`; the time to the answer (the delete is accepted, not done).
pub(crate) async fn delete(port: u16, way: Way, user: &str, name: &str) -> Result<Duration> {
    let started = Instant::now();
    let (status, answer) = match way {
        Way::Compat => {
            let body = json!({"user_id": user, "pod_name": name});
            call(port, "POST", "/delete_pod", &[], Some(&body)).await?
        }
        Way::Native => {
            let path = format!("/api/v1/workspaces/{name}");
            call(port, "DELETE", &path, &[("x-forwarded-user", user)], None).await?
        }
    };
    if !(200..300).contains(&status) {
        bail!("deleting {name} of {user} answered {status}: {answer}");
    }
    Ok(started.elapsed())
}
