//! Half of them stopped (issue 31): every native workspace (each has a `Workspace`; deic-dk's
//! have none) is stopped at `--rate` through `POST .../stop`, until every Workspace's status says
//! `Stopped`; then, after the lists and a fresh replica are measured again, `--starts` of them
//! start again at `--rate`: nine in ten through `POST .../start` and their progress stream to
//! `ready`, one in ten through the controller (`spec.started: true` written with the admin's
//! client, as `kubectl patch` does) to the Workspace's `Running`.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};
use outfit_loadgen::workspaces::{call, follow_progress, open_progress};
use serde_json::json;
use tokio::time::MissedTickBehavior;

/// What stopping them all took.
#[derive(Debug, Default)]
pub(crate) struct Stops {
    /// Each stop request to its 202 (the pod's delete asked for and seen).
    pub(crate) answered: Vec<Duration>,
    /// From the first stop to every Workspace's status saying `Stopped` (the leader's controller).
    pub(crate) settled: Duration,
    /// Stopped workspaces by user number.
    pub(crate) per_user: BTreeMap<usize, usize>,
    pub(crate) failures: Vec<String>,
}

/// What starting `--starts` of them took.
#[derive(Debug, Default)]
pub(crate) struct Starts {
    /// Through the API: from the start request to the `ready` event.
    pub(crate) api: Vec<Duration>,
    /// Through the controller: from the patch to the Workspace's `Running`.
    pub(crate) controller: Vec<Duration>,
    /// From the first start to the last one ready.
    pub(crate) took: Duration,
    pub(crate) failures: Vec<String>,
}

fn workspaces(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "outfit.dev".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "outfit.dev/v1alpha1".to_owned(),
        kind: "Workspace".to_owned(),
        plural: "workspaces".to_owned(),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn phase(workspace: &DynamicObject) -> Option<&str> {
    workspace.data["status"]["phase"].as_str()
}

/// The native workspaces' Workspaces of `ns`: (name, owner, phase).
async fn listed(api: &Api<DynamicObject>) -> Result<Vec<(String, String, Option<String>)>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        // deic-dk's `create_pod` writes a Workspace too (issue 43), which has no stopped state.
        .filter(|w| w.data["spec"]["manifestUrl"].is_null())
        .map(|w| {
            let owner = w.data["spec"]["owner"].as_str().unwrap_or_default().to_owned();
            let phase = phase(&w).map(str::to_owned);
            (w.metadata.name.unwrap_or_default(), owner, phase)
        })
        .collect())
}

/// User `u@scale.example`'s number `u`.
fn user_number(owner: &str) -> Option<usize> {
    owner.strip_prefix('u')?.split('@').next()?.parse().ok()
}

/// Stops every workspace that has a Workspace, `rate` a second, each as its owner.
pub(crate) async fn stop_all(client: &Client, ns: &str, port: u16, rate: f64) -> Result<Stops> {
    let api = workspaces(client, ns);
    let records = listed(&api).await?;
    let seen = Arc::new(Mutex::new(Stops::default()));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(records.len());
    for (name, owner, _) in records {
        tick.tick().await;
        let seen = Arc::clone(&seen);
        tasks.push(tokio::spawn(async move {
            let asked = Instant::now();
            let path = format!("/api/v1/workspaces/{name}/stop");
            let answer = call(
                port,
                "POST",
                &path,
                &[("x-forwarded-user", &owner)],
                Some(&json!({})),
            )
            .await;
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            match answer {
                Ok((202, _)) => {
                    seen.answered.push(asked.elapsed());
                    if let Some(u) = user_number(&owner) {
                        *seen.per_user.entry(u).or_default() += 1;
                    }
                }
                Ok((status, body)) => seen.failures.push(format!("stop {name}: {status} {body}")),
                Err(error) => seen.failures.push(format!("stop {name}: {error:#}")),
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let records = listed(&api).await?;
        if records
            .iter()
            .all(|(_, _, phase)| phase.as_deref() == Some("Stopped"))
        {
            break;
        }
        if Instant::now() > deadline {
            let left = records
                .iter()
                .filter(|r| r.2.as_deref() != Some("Stopped"))
                .count();
            bail!("{left} Workspaces not Stopped 10 minutes after their stops");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut stops = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    stops.settled = started.elapsed();
    Ok(stops)
}

/// Starts `count` stopped workspaces, `rate` a second: one in ten through the controller, the
/// others through the API.
pub(crate) async fn start_some(
    client: &Client,
    ns: &str,
    port: u16,
    rate: f64,
    count: usize,
) -> Result<Starts> {
    let api = workspaces(client, ns);
    let chosen: Vec<(String, String, Option<String>)> = listed(&api).await?.into_iter().take(count).collect();
    // The controller's starts are seen Running through one watch of the namespace's Workspaces.
    let patched: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let running: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let watching = tokio::spawn({
        let (patched, running, api) = (Arc::clone(&patched), Arc::clone(&running), api.clone());
        async move {
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).applied_objects());
            while let Some(Ok(workspace)) = events.next().await {
                if phase(&workspace) != Some("Running") {
                    continue;
                }
                let name = workspace.metadata.name.unwrap_or_default();
                let since = patched.lock().unwrap_or_else(|e| e.into_inner()).remove(&name);
                if let Some(since) = since {
                    running
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(since.elapsed());
                }
            }
        }
    });
    let seen = Arc::new(Mutex::new(Starts::default()));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut tasks = Vec::new();
    let through_controller = chosen.len().div_ceil(10);
    for (index, (name, owner, _)) in chosen.into_iter().enumerate() {
        tick.tick().await;
        if index % 10 == 0 {
            patched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), Instant::now());
            let patch = json!({"spec": {"started": true}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("patching {name}"))?;
            continue;
        }
        let seen = Arc::clone(&seen);
        tasks.push(tokio::spawn(async move {
            let outcome = start_to_ready(port, &name, &owner).await;
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            match outcome {
                Ok(took) => seen.api.push(took),
                Err(error) => seen.failures.push(format!("start {name}: {error:#}")),
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while running.lock().unwrap_or_else(|e| e.into_inner()).len() < through_controller {
        if Instant::now() > deadline {
            bail!("the controller's starts not Running 5 minutes after the last");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watching.abort();
    let mut starts = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    starts.took = started.elapsed();
    starts.controller = std::mem::take(&mut *running.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(starts)
}

/// `POST .../start` as `owner`, then its progress stream to `ready`: the time from the request.
async fn start_to_ready(port: u16, name: &str, owner: &str) -> Result<Duration> {
    let asked = Instant::now();
    let headers = [("x-forwarded-user", owner)];
    let path = format!("/api/v1/workspaces/{name}/start");
    let (status, answer) = call(port, "POST", &path, &headers, Some(&json!({}))).await?;
    if status != 202 {
        bail!("answered {status}: {answer}");
    }
    let mut stream = open_progress(port, name, &headers).await?;
    let last = follow_progress(&mut stream, |_, _| {}).await?;
    if last != "ready" {
        bail!("ended with {last}");
    }
    Ok(asked.elapsed())
}
