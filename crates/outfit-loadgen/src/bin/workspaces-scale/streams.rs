//! Progress streams held open at once: `--streams` workspaces launched (one per user in turn)
//! from a manifest whose pod selects a node label no node has yet, each followed through its
//! stream; once every stream has its first event, the nodes get the label and every stream must
//! go on to `ready`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use kube::Client;
use outfit_loadgen::workspaces::follow_progress;
use tokio::time::MissedTickBehavior;

use crate::{
    cluster::{Processes, Snapshot, open_nodes},
    launch::{launch, user},
};

/// The catalogue entry whose pods wait for the nodes' hold label.
pub(crate) const HELD: &str = "held";

/// What the held streams saw.
#[derive(Debug)]
pub(crate) struct Streams {
    pub(crate) opened: usize,
    /// Streams that ended with `ready`.
    pub(crate) ready: usize,
    /// Events received over all streams.
    pub(crate) events: usize,
    /// Streams that ended otherwise, with why.
    pub(crate) failures: Vec<String>,
    /// Once every stream had its first event, before the release.
    pub(crate) open: Snapshot,
    /// From labelling the nodes to the last stream's `ready`.
    pub(crate) release_to_last: Duration,
}

/// `count` launches of catalogue entry `entry` (the [`HELD`] manifest), users in turn.
pub(crate) async fn held_streams(
    client: &Client,
    port: u16,
    entry: &str,
    count: usize,
    users: usize,
    rate: f64,
    processes: &Processes,
) -> Result<Streams> {
    let first_events = Arc::new(AtomicUsize::new(0));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut followers = Vec::with_capacity(count);
    for s in 0..count {
        tick.tick().await;
        let owner = user(s % users);
        let first_events = Arc::clone(&first_events);
        let (name, mut stream) = launch(port, &owner, entry).await?;
        followers.push(tokio::spawn(async move {
            let mut events = 0usize;
            let mut last_at = Instant::now();
            let last = follow_progress(&mut stream, |_, at| {
                if events == 0 {
                    first_events.fetch_add(1, Ordering::Relaxed);
                }
                events += 1;
                last_at = at;
            })
            .await
            .with_context(|| format!("the stream of {name}"));
            (name, events, last, last_at)
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while first_events.load(Ordering::Relaxed) < count {
        if Instant::now() > deadline {
            bail!(
                "only {} of {count} held streams had their first event within 2 minutes",
                first_events.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let open = processes.snapshot();
    let released = Instant::now();
    open_nodes(client).await?;
    let mut streams = Streams {
        opened: count,
        ready: 0,
        events: 0,
        failures: Vec::new(),
        open,
        release_to_last: Duration::ZERO,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    for follower in followers {
        let (name, events, last, last_at) = tokio::time::timeout_at(deadline, follower)
            .await
            .context("a held stream not done 10 minutes after the release")??;
        streams.events += events;
        match last {
            Ok(kind) if kind == "ready" => {
                streams.ready += 1;
                streams.release_to_last = streams.release_to_last.max(last_at - released);
            }
            Ok(kind) => streams.failures.push(format!("{name} ended with {kind}")),
            Err(error) => streams.failures.push(format!("{error:#}")),
        }
    }
    Ok(streams)
}
