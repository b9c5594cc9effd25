//! The closed-loop measurement, interleaved in short slices so that the three configurations see
//! the same machine.
//!
//! Every configuration has its own `--connections` keep-alive connections, opened up front, one
//! task each. A coordinator makes one configuration *active* at a time, for one slice of
//! `--slice-ms`, and announces it on a `watch` channel with the slice's number. Before each
//! request a connection task reads the channel: if its configuration is active it sends (closed
//! loop: the next request as soon as the previous answer arrives), otherwise it waits for the next
//! change. A request counts for the slice it was sent in, even if its answer arrives in the next
//! slice (*spill*, at most `--connections` requests per slice end, counted and reported).
//!
//! Slices run in cycles of one slice per configuration. The order within each cycle is one of the
//! six permutations, drawn by a fixed-seed SplitMix64 generator, so no configuration always runs
//! right after the same other one (whose spill and cache state it would inherit), and every run
//! uses the same order. A warm-up of about one second of slices, cycling the same way, comes
//! first and is discarded.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Result;
use bytes::Bytes;
use tokio::sync::watch;

use crate::{
    client::{Client, Sender, connect, join_bounded, send},
    phase::Phase,
};

/// The warm-up before the measured cycles, cycling through the configurations like them.
const WARMUP: Duration = Duration::from_secs(1);

/// The six orders of one cycle.
const ORDERS: [[usize; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];

/// What the coordinator tells the connection tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// Connections are still being opened.
    Wait,
    /// Slice number `slice` of the plan, in which only `target`'s connections send.
    Run { target: usize, slice: usize },
    /// The measurement is over.
    Done,
}

/// The closed-loop results.
pub(crate) struct Interleaved {
    /// Per configuration: counted requests over its summed measured slice time.
    pub(crate) phases: [Phase; 3],
    /// Per measured cycle, each configuration's throughput in its slice of that cycle.
    pub(crate) cycles: Vec<[f64; 3]>,
    /// Counted requests whose answer arrived after their slice had ended.
    pub(crate) spill: u64,
    pub(crate) slice: Duration,
    pub(crate) warmup_slices: usize,
    pub(crate) connections: usize,
}

/// The configuration active in each slice: warm-up slices first, then whole measured cycles.
struct Plan {
    targets: Vec<usize>,
    warmup: usize,
    slice: Duration,
}

impl Plan {
    /// Enough cycles for `measured` of active time per configuration, rounded up to whole slices.
    fn new(slice: Duration, measured: Duration) -> Self {
        let slices_in = |d: Duration| (d.as_secs_f64() / slice.as_secs_f64()).ceil().max(1.0) as usize;
        let (warmup, cycles) = (slices_in(WARMUP), slices_in(measured));
        let mut state = 0x6f75_7466_6974_u64; // "outfit"
        let mut cycle = move || ORDERS[(splitmix64(&mut state) % 6) as usize];
        let mut targets: Vec<usize> = std::iter::repeat_with(&mut cycle)
            .flatten()
            .take(warmup)
            .collect();
        targets.extend(std::iter::repeat_with(cycle).take(cycles).flatten());
        Self {
            targets,
            warmup,
            slice,
        }
    }
}

/// SplitMix64: a cheap, well-mixed sequence from a fixed seed.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What one connection task needs besides its connection and the channel.
struct Job {
    target: usize,
    first_body: usize,
    bodies: Arc<Vec<Bytes>>,
    warmup: usize,
    slices: usize,
    cap: usize,
}

/// What one connection task counted.
struct Tally {
    target: usize,
    /// Per slice of the plan, successful requests sent in it.
    ok: Vec<u64>,
    /// Latencies of the successful requests sent in measured slices, in ns.
    latencies: Vec<u64>,
    /// Failed requests sent in measured slices.
    errors: u64,
    spill: u64,
    capped: bool,
}

/// Opens every connection, runs the plan, and returns the counted results.
pub(crate) async fn run(client: &Client<'_>, addrs: [SocketAddr; 3], slice: Duration) -> Result<Interleaved> {
    let args = client.args;
    let plan = Plan::new(slice, Duration::from_secs_f64(args.seconds));
    let (turns, watcher) = watch::channel(Turn::Wait);
    let mut tasks = Vec::new();
    for (target, &addr) in addrs.iter().enumerate() {
        for worker in 0..args.connections {
            let sender = connect(addr, &client.config).await?;
            let job = Job {
                target,
                first_body: worker,
                bodies: client.bodies.clone(),
                warmup: plan.warmup,
                slices: plan.targets.len(),
                cap: (args.max_requests / args.connections as u64) as usize,
            };
            tasks.push(tokio::spawn(connection(sender, job, watcher.clone())));
        }
    }
    drop(watcher);
    let durations = coordinate(&turns, &plan).await;
    let tallies = join_bounded(tasks).await?;
    anyhow::ensure!(
        !tallies.iter().any(|t| t.capped),
        "a connection reached its share of --max-requests, so its configuration stopped sending \
         early; raise --max-requests or lower --seconds"
    );
    Ok(aggregate(&plan, &durations, tallies, args.connections))
}

/// Makes each slice's configuration active in turn; returns each slice's actual duration.
async fn coordinate(turns: &watch::Sender<Turn>, plan: &Plan) -> Vec<Duration> {
    let mut durations = Vec::with_capacity(plan.targets.len());
    let origin = Instant::now();
    let mut start = origin;
    for (slice, &target) in plan.targets.iter().enumerate() {
        turns.send_replace(Turn::Run { target, slice });
        let end = origin + plan.slice * (slice as u32 + 1);
        tokio::time::sleep_until(end.into()).await;
        let now = Instant::now();
        durations.push(now - start);
        start = now;
    }
    turns.send_replace(Turn::Done);
    durations
}

/// One connection: sends while its configuration is active, waits while it is not.
async fn connection(mut sender: Sender, job: Job, mut turns: watch::Receiver<Turn>) -> Tally {
    let mut tally = Tally {
        target: job.target,
        ok: vec![0; job.slices],
        latencies: Vec::new(),
        errors: 0,
        spill: 0,
        capped: false,
    };
    let (mut body, mut sent) = (job.first_body, 0);
    // The measured slice of the request that has just completed, if any.
    let mut last: Option<usize> = None;
    loop {
        let turn = *turns.borrow_and_update();
        if let Some(previous) = last.take()
            && !matches!(turn, Turn::Run { slice, .. } if slice == previous)
        {
            tally.spill += 1;
        }
        match turn {
            Turn::Done => break,
            Turn::Run { target, slice } if target == job.target && sent < job.cap => {
                let start = Instant::now();
                let ok = send(&mut sender, &job.bodies[body % job.bodies.len()])
                    .await
                    .is_ok();
                let latency = start.elapsed().as_nanos() as u64;
                (body, sent) = (body + 1, sent + 1);
                let measured = slice >= job.warmup;
                tally.ok[slice] += u64::from(ok);
                match (measured, ok) {
                    (false, _) => {}
                    (true, true) => tally.latencies.push(latency),
                    (true, false) => tally.errors += 1,
                }
                last = (measured && ok).then_some(slice);
            }
            Turn::Run { target, .. } if target == job.target => {
                tally.capped = true;
                if turns.changed().await.is_err() {
                    break;
                }
            }
            _ => {
                if turns.changed().await.is_err() {
                    break;
                }
            }
        }
    }
    tally
}

/// Sums the tallies per configuration over the measured slices, and per cycle.
fn aggregate(plan: &Plan, durations: &[Duration], tallies: Vec<Tally>, connections: usize) -> Interleaved {
    let mut ok = vec![0u64; plan.targets.len()];
    let mut phases: [Phase; 3] = Default::default();
    let mut spill = 0;
    for tally in tallies {
        for (sum, n) in ok.iter_mut().zip(&tally.ok) {
            *sum += n;
        }
        let phase = &mut phases[tally.target];
        phase.latencies.extend(tally.latencies);
        phase.errors += tally.errors;
        spill += tally.spill;
    }
    for slice in plan.warmup..plan.targets.len() {
        let phase = &mut phases[plan.targets[slice]];
        phase.requests += ok[slice];
        phase.elapsed += durations[slice];
    }
    for phase in &mut phases {
        phase.latencies.sort_unstable();
    }
    let rate = |slice: usize| ok[slice] as f64 / durations[slice].as_secs_f64();
    let cycles = (plan.warmup..plan.targets.len())
        .step_by(3)
        .map(|first| {
            let mut rates = [0.0; 3];
            for slice in first..first + 3 {
                rates[plan.targets[slice]] = rate(slice);
            }
            rates
        })
        .collect();
    Interleaved {
        phases,
        cycles,
        spill,
        slice: plan.slice,
        warmup_slices: plan.warmup,
        connections,
    }
}
