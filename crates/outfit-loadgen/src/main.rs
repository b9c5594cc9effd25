//! Load generator for `outfit serve`. Run with:
//!
//! ```text
//! cargo run --release -p outfit-loadgen -- --connections 32 --seconds 8
//! ```
//!
//! In one run it drives three servers over HTTPS with keep-alive connections, as the API server
//! does, at fixed concurrency (closed loop): a *ceiling* server on the same rustls/hyper stack
//! that reads the body and returns a fixed allow response (the most this machine can do with
//! this client), outfit with 0 policies and outfit with 1,000 policies. It then runs outfit with
//! 1,000 policies open loop at half of its measured throughput, where latency is the figure that
//! matters. Everything binds 127.0.0.1 and every phase is bounded in time and request count.
//!
//! The speed of a shared or small machine can change by a factor of two within seconds, so the
//! three closed-loop configurations are not measured one after the other but interleaved in short
//! slices (`--slice-ms`, default 100): the three servers start once, each gets `--connections`
//! keep-alive connections up front, and a coordinator lets one configuration's connections send at
//! a time, cycling through the three in an order shuffled per cycle (fixed seed), until each has
//! had `--seconds` of active time, after a discarded warm-up of 1 s (see [`interleave`]). A request
//! counts for the slice it was sent in; a configuration's throughput is its counted requests over
//! its summed slice time. The headline compares outfit with the ceiling twice: pooled over all
//! slices, and as the spread (median, 10th and 90th percentile) of the ratios within each cycle,
//! where both saw the same conditions within a few hundred milliseconds. The open-loop phase runs
//! afterwards on fresh connections against the same outfit server.
//!
//! Servers and client run in one process on this 2-core machine, so the client's cost is inside
//! every figure, equally for the three servers. By default they share one runtime of 2 worker
//! threads, one per core: each request costs what client and server compute for it. With
//! `--two-runtimes` the servers and the client get a 2-worker runtime each, 4 threads on 2 cores,
//! as if the client were another process: then every request also pays for the operating system
//! switching between a client thread and a server thread, and that cost grows with the server's
//! latency, not its work (the client's threads sleep while a slower server computes, and must be
//! woken for every answer); BENCHMARKS.md shows both.

mod args;
mod client;
mod interleave;
mod phase;
mod report;
mod target;

use std::{
    net::SocketAddr,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Result;
use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming};
use outfit_http::{
    accept::{Handler, Port},
    shell::Shell,
};
use outfit_server::{CertStore, Config, SelfSigned, Server, TlsSource};
use outfit_test_support::http::tls_client_config;
use tokio::{net::TcpListener, runtime::Runtime, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use outfit_loadgen::mix;

use crate::{
    args::Args,
    client::{Client, connect, join_bounded, send},
    interleave::Interleaved,
    phase::Phase,
    target::Target,
};

// The same allocator as the `outfit` binary, so the in-process server is the one that ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The ceiling: same accept loop, TLS and HTTP stack; reads the body, answers a fixed allow.
#[derive(Clone)]
struct Ceiling {
    answer: Bytes,
}

impl Handler for Ceiling {
    type Body = Full<Bytes>;

    async fn call(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        // Read as outfit reads it, so that the comparison leaves out nothing but outfit's work.
        let _ = outfit_server::webhook::read_body(request.into_body()).await;
        let mut response = Response::new(Full::new(self.answer.clone()));
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.connections > 0, "--connections must be at least 1");
    anyhow::ensure!(
        args.slice_ms >= 10,
        "--slice-ms must be at least 10 (each slice end spills up to --connections requests)"
    );
    anyhow::ensure!(
        args.seconds.is_finite() && args.seconds > 0.0,
        "--seconds must be a positive number"
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _log_writer = args.logs.then(serve_logs).transpose()?;
    let work = std::env::temp_dir().join(format!("outfit-loadgen-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let result = run(&args, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// The subscriber `outfit serve` installs with its default flags, writing to /dev/null: each
/// mutation and denial formats a line on the request path, a background thread writes it.
fn serve_logs() -> Result<tracing_appender::non_blocking::WorkerGuard> {
    let (writer, guard) = tracing_appender::non_blocking(std::fs::File::create("/dev/null")?);
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new("info")?)
        .with_ansi(false)
        .with_writer(writer)
        .init();
    Ok(guard)
}

fn runtime(name: &str) -> Result<Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()?)
}

fn run(args: &Args, work: &Path) -> Result<()> {
    let certs = SelfSigned::ensure(&work.join("certs"), &[])?;
    let empty = work.join("policies-0");
    std::fs::create_dir_all(&empty)?;
    let large = work.join(format!("policies-{}", args.policies));
    mix::generate_policies(&large, args.policies, args.namespaces)?;
    // Without --two-runtimes, servers and client use the same (single) runtime.
    let runtimes = if args.two_runtimes {
        vec![runtime("server")?, runtime("client")?]
    } else {
        vec![runtime("shared")?]
    };
    let (server_rt, client_rt) = (&runtimes[0], &runtimes[runtimes.len() - 1]);
    let client = Client {
        rt: client_rt,
        config: tls_client_config(&certs.ca_cert)?,
        bodies: Arc::new(mix::review_mix(
            args.namespaces,
            args.policies / args.namespaces.max(1),
        )),
        args,
    };
    print_header(args, client.bodies.len());

    // One token per server; all are cancelled at the end, whether or not the run succeeded.
    let shutdown = [(); 3].map(|()| CancellationToken::new());
    let result = start_targets(server_rt, &certs, &empty, &large, args, &shutdown)
        .and_then(|targets| Ok((measure(&client, &targets)?, targets)));
    for token in &shutdown {
        token.cancel();
    }
    let ((closed, open), targets) = result?;
    report::print(&targets, &closed, &open)
}

fn print_header(args: &Args, bodies: usize) {
    let layout = if args.two_runtimes {
        "servers on one 2-worker runtime, client on another"
    } else {
        "servers and client share one 2-worker runtime"
    };
    let logs = if args.logs {
        "outfit logging at info to /dev/null"
    } else {
        "no logging"
    };
    // The interleaved measurement with its warm-up, then the open-loop phase with its own.
    let estimate = 1.0 + 3.0 * args.seconds + 1.25 * args.seconds;
    println!(
        "outfit-loadgen: {} connections per server, {:.1} s active per configuration in {} ms slices, \
         {bodies} review bodies, {} policies over {} namespaces; {layout}; {logs} (about {estimate:.0} s)",
        args.connections, args.seconds, args.slice_ms, args.policies, args.namespaces,
    );
}

/// Starts the ceiling, outfit with no policies and outfit with the large policy set.
fn start_targets(
    server_rt: &Runtime,
    certs: &SelfSigned,
    empty: &Path,
    large: &Path,
    args: &Args,
    shutdown: &[CancellationToken; 3],
) -> Result<[Target; 3]> {
    let ceiling = server_rt.block_on(start_ceiling(certs, shutdown[0].clone()))?;
    let zero = server_rt.block_on(start_outfit(certs, empty, shutdown[1].clone()))?;
    let many = server_rt.block_on(start_outfit(certs, large, shutdown[2].clone()))?;
    let n = args.policies;
    Ok([
        Target::new("ceiling (fixed allow)", "ceiling", ceiling),
        Target::new("outfit, 0 policies", "outfit-0", zero),
        Target::new(&format!("outfit, {n} policies"), &format!("outfit-{n}"), many),
    ])
}

/// The interleaved closed-loop measurement, then the open-loop phase against the large
/// configuration at half of its closed-loop throughput.
fn measure(client: &Client<'_>, targets: &[Target; 3]) -> Result<(Interleaved, (String, Phase))> {
    let args = client.args;
    let addrs = targets.each_ref().map(|t| t.addr);
    let slice = Duration::from_millis(args.slice_ms);
    let closed = client.rt.block_on(interleave::run(client, addrs, slice))?;
    let half = closed.phases[2].throughput() / 2.0;
    anyhow::ensure!(half > 0.0, "no successful request in the closed-loop measurement");
    let name = format!("outfit, {} policies, {:.0} rps open", args.policies, half);
    let measured = Duration::from_secs_f64(args.seconds);
    let open = client.rt.block_on(open_loop(client, addrs[2], half, measured))?;
    Ok((closed, (name, open)))
}

async fn start_ceiling(certs: &SelfSigned, shutdown: CancellationToken) -> Result<SocketAddr> {
    let store = Arc::new(CertStore::load(
        certs.cert.clone(),
        certs.key.clone(),
        Arc::new(|_| {}),
    )?);
    let tls = store.server_config()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let answer = Bytes::from_static(
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#,
    );
    let ceiling = Ceiling { answer };
    let port = Port::new(listener).tls(Some(tokio_rustls::TlsAcceptor::from(tls)));
    tokio::spawn(Shell::new(port, move |_, _| ceiling.clone()).run(shutdown));
    Ok(addr)
}

async fn start_outfit(
    certs: &SelfSigned,
    policies: &Path,
    shutdown: CancellationToken,
) -> Result<SocketAddr> {
    let mut config = Config::new(
        vec![policies.to_path_buf()],
        TlsSource::Files {
            cert: certs.cert.clone(),
            key: certs.key.clone(),
        },
    );
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin_listen = None;
    config.poll_interval = Duration::from_secs(3600);
    let server = Server::bind(config).await?;
    let addr = server.local_addr();
    tokio::spawn(server.run(shutdown));
    Ok(addr)
}

/// Requests at a fixed total rate, spread over the connections; latency from the actual send.
async fn open_loop(client: &Client<'_>, addr: SocketAddr, rate: f64, measure: Duration) -> Result<Phase> {
    let (config, bodies, args) = (&client.config, &client.bodies, client.args);
    let warmup = measure / 4;
    let period = Duration::from_secs_f64(args.connections as f64 / rate);
    let start = Instant::now() + Duration::from_millis(50);
    let measure_from = start + warmup;
    let deadline = measure_from + measure;
    let per_connection = args.max_requests / args.connections as u64;
    let mut tasks = Vec::new();
    for worker in 0..args.connections {
        let mut sender = connect(addr, config).await?;
        let bodies = bodies.clone();
        // Stagger the connections evenly over one period.
        let offset = period.mul_f64(worker as f64 / args.connections as f64);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut next = start + offset;
            let mut i = worker;
            let mut interval = tokio::time::interval_at(next.into(), period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while latencies.len() < per_connection as usize && next < deadline {
                interval.tick().await;
                let sent = Instant::now();
                let ok = send(&mut sender, &bodies[i % bodies.len()]).await.is_ok();
                i += 1;
                if sent >= measure_from {
                    if ok {
                        latencies.push(sent.elapsed().as_nanos() as u64);
                    } else {
                        errors += 1;
                    }
                }
                next += period;
            }
            (latencies, errors)
        }));
    }
    collect(tasks, measure).await
}

async fn collect(tasks: Vec<JoinHandle<(Vec<u64>, u64)>>, measure: Duration) -> Result<Phase> {
    let mut latencies = Vec::new();
    let mut errors = 0;
    for (mut l, e) in join_bounded(tasks).await? {
        latencies.append(&mut l);
        errors += e;
    }
    latencies.sort_unstable();
    Ok(Phase {
        requests: latencies.len() as u64,
        elapsed: measure,
        latencies,
        errors,
    })
}
