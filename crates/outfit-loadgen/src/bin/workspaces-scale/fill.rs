//! The fill: `--workspaces` creates at `--rate`, each way in turn, each timed to ready, while
//! users list theirs and churn (launch one more and delete it); the backend's and the cluster's
//! CPU and memory recorded every `--sample-every` workspaces.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Result;
use bytes::Bytes;
use outfit_loadgen::workspaces::KeepAlive;
use serde_json::json;
use tokio::{sync::Semaphore, time::MissedTickBehavior};

use crate::{
    args::Args,
    cluster::{Processes, Snapshot},
    launch::{Way, create, delete, user},
};

/// One timed create.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Created {
    /// Its place in the fill (churn creates share their trigger's).
    pub(crate) index: usize,
    pub(crate) way: Way,
    /// From the first request to ready.
    pub(crate) ready: Duration,
}

/// What the fill saw.
#[derive(Debug, Default)]
pub(crate) struct Fill {
    pub(crate) creates: Vec<Created>,
    pub(crate) deletes: Vec<Duration>,
    pub(crate) get_pods: Vec<Duration>,
    pub(crate) native_list: Vec<Duration>,
    pub(crate) failures: Vec<String>,
    /// `(workspaces ready, creates in flight, snapshot)` at the start and every
    /// `--sample-every`.
    pub(crate) samples: Vec<(usize, usize, Snapshot)>,
    pub(crate) took: Duration,
}

/// At most this many creates in flight: past it the fill slows down instead of piling up.
const IN_FLIGHT: usize = 2_000;

pub(crate) async fn fill(args: &Args, port: u16, manifests: u16, processes: &Processes) -> Result<Fill> {
    let seen = Arc::new(Mutex::new(Fill::default()));
    let ready_count = Arc::new(AtomicUsize::new(0));
    let started_count = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let sampler = tokio::spawn(sample(
        Arc::clone(&seen),
        [Arc::clone(&ready_count), Arc::clone(&started_count)],
        Arc::clone(&done),
        processes.clone(),
        args.sample_every.max(1),
    ));
    let lister = tokio::spawn(list_while(
        port,
        args.users,
        args.list_rate,
        Arc::clone(&seen),
        Arc::clone(&done),
    ));
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let entry = args.entry("web");
    let mut tasks = Vec::with_capacity(args.workspaces);
    for index in 0..args.workspaces {
        tick.tick().await;
        let slot = Arc::clone(&slots).acquire_owned().await?;
        started_count.fetch_add(1, Ordering::Relaxed);
        // One user in `churn_every` churns in each round of users, a different one each round,
        // so no user churns twice within `churn_every` rounds (the limit has room for one).
        let churn = args.churn_every > 0
            && (index % args.users) % args.churn_every == (index / args.users) % args.churn_every;
        let (seen, ready_count) = (Arc::clone(&seen), Arc::clone(&ready_count));
        let owner = user(index % args.users);
        let entry = entry.clone();
        tasks.push(tokio::spawn(async move {
            let _slot = slot;
            let way = Way::of(index);
            let outcome = create(port, manifests, way, &owner, &entry).await;
            record(&seen, index, way, outcome.map(|(_, ready)| ready));
            ready_count.fetch_add(1, Ordering::Relaxed);
            if churn {
                let launch = (way.other(), owner.as_str(), entry.as_str());
                churn_once(port, manifests, launch, index, &seen).await;
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    done.store(true, Ordering::Relaxed);
    lister.await??;
    sampler.await?;
    let mut fill = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    fill.took = started.elapsed();
    Ok(fill)
}

fn record(seen: &Mutex<Fill>, index: usize, way: Way, outcome: Result<Duration>) {
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    match outcome {
        Ok(ready) => seen.creates.push(Created { index, way, ready }),
        Err(error) => seen.failures.push(format!("create {index} ({way:?}): {error:#}")),
    }
}

/// The user `owner` launches one more workspace of catalogue entry `entry` through `way` and
/// deletes it once it is ready.
async fn churn_once(
    port: u16,
    manifests: u16,
    (way, owner, entry): (Way, &str, &str),
    index: usize,
    seen: &Mutex<Fill>,
) {
    let outcome = create(port, manifests, way, owner, entry).await;
    let name = outcome.as_ref().ok().map(|(name, _)| name.clone());
    record(seen, index, way, outcome.map(|(_, ready)| ready));
    let Some(name) = name else { return };
    let deleted = delete(port, way, owner, &name).await;
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    match deleted {
        Ok(took) => seen.deletes.push(took),
        Err(error) => seen.failures.push(format!("delete {name}: {error:#}")),
    }
}

/// Records a snapshot at the start and each time `every` more workspaces are ready.
async fn sample(
    seen: Arc<Mutex<Fill>>,
    [ready, started]: [Arc<AtomicUsize>; 2],
    done: Arc<AtomicBool>,
    processes: Processes,
    every: usize,
) {
    let mut next = 0;
    loop {
        let now = ready.load(Ordering::Relaxed);
        if now >= next {
            let snapshot = processes.snapshot();
            seen.lock().unwrap_or_else(|e| e.into_inner()).samples.push((
                now,
                started.load(Ordering::Relaxed).saturating_sub(now),
                snapshot,
            ));
            next = (now / every + 1) * every;
        }
        if done.load(Ordering::Relaxed) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Until `done`: `rate` lists a second, `get_pods` and `GET /api/v1/workspaces` in turn, each
/// of a user in turn, each on its own keep-alive connection. Their answers must be 200.
async fn list_while(
    port: u16,
    users: usize,
    rate: f64,
    seen: Arc<Mutex<Fill>>,
    done: Arc<AtomicBool>,
) -> Result<()> {
    if rate <= 0.0 {
        return Ok(());
    }
    let mut compat = KeepAlive::connect(port).await?;
    let mut native = KeepAlive::connect(port).await?;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut turn = 0usize;
    while !done.load(Ordering::Relaxed) {
        tick.tick().await;
        // A stride prime to the user count visits every user.
        let owner = user(turn.wrapping_mul(7_919) % users);
        let (status, took, failure) = if turn.is_multiple_of(2) {
            let body = Bytes::from(json!({"user_id": owner}).to_string());
            let (status, _, took) = compat.send("POST", "/get_pods", &[], Some(body)).await?;
            (status, took, "get_pods")
        } else {
            let headers = [("x-forwarded-user", owner.as_str())];
            let (status, _, took) = native.send("GET", "/api/v1/workspaces", &headers, None).await?;
            (status, took, "GET /api/v1/workspaces")
        };
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        if status != 200 {
            seen.failures
                .push(format!("{failure} of {owner} answered {status}"));
        } else if turn.is_multiple_of(2) {
            seen.get_pods.push(took);
        } else {
            seen.native_list.push(took);
        }
        turn += 1;
    }
    Ok(())
}
