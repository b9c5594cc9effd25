//! Measurements once the workspaces are there: lists over keep-alive connections, and a fresh
//! replica's time to its first full read.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use outfit_loadgen::workspaces::KeepAlive;
use outfit_test_support::http::{Call, loopback};
use serde_json::{Value, json};

use crate::{cluster::usage, launch::user};

/// Timed lists at scale.
#[derive(Debug)]
pub(crate) struct Lists {
    pub(crate) get_pods: Vec<Duration>,
    pub(crate) native: Vec<Duration>,
    /// An admin's `GET /api/v1/workspaces?all=true` (every workspace).
    pub(crate) all: Vec<Duration>,
}

/// `requests` `get_pods` and as many `GET /api/v1/workspaces`, users in turn, each list on one
/// keep-alive connection; every answer must hold exactly the user's workspaces, `owned(user)`:
/// (those with a pod, which `get_pods` shows; all, which the native list shows, stopped ones
/// included). Then `requests / 20` (at least one) admin lists of all `total`.
pub(crate) async fn lists(
    port: u16,
    users: usize,
    requests: usize,
    owned: impl Fn(usize) -> (usize, usize),
    total: usize,
) -> Result<Lists> {
    let mut compat = KeepAlive::connect(port).await?;
    let mut native = KeepAlive::connect(port).await?;
    let mut lists = Lists {
        get_pods: Vec::with_capacity(requests),
        native: Vec::with_capacity(requests),
        all: Vec::new(),
    };
    for turn in 0..requests {
        let u = turn.wrapping_mul(7_919) % users;
        let owner = user(u);
        let body = Bytes::from(json!({"user_id": owner}).to_string());
        let (status, body, took) = compat.send("POST", "/get_pods", &[], Some(body)).await?;
        let pods: Value = serde_json::from_slice(&body)?;
        check(
            "get_pods",
            &owner,
            status,
            pods.as_array().map(Vec::len),
            owned(u).0,
        )?;
        lists.get_pods.push(took);
        let headers = [("x-forwarded-user", owner.as_str())];
        let (status, body, took) = native.send("GET", "/api/v1/workspaces", &headers, None).await?;
        let answer: Value = serde_json::from_slice(&body)?;
        let count = answer["items"].as_array().map(Vec::len);
        check("GET /api/v1/workspaces", &owner, status, count, owned(u).1)?;
        lists.native.push(took);
    }
    let admin = [
        ("x-forwarded-user", "admin@scale.example"),
        ("x-forwarded-groups", "scale-admins"),
    ];
    for _ in 0..(requests / 20).max(1) {
        let (status, body, took) = native
            .send("GET", "/api/v1/workspaces?all=true", &admin, None)
            .await?;
        let answer: Value = serde_json::from_slice(&body)?;
        let count = answer["items"].as_array().map(Vec::len);
        check(
            "GET /api/v1/workspaces?all=true",
            "an admin",
            status,
            count,
            total,
        )?;
        lists.all.push(took);
    }
    Ok(lists)
}

fn check(list: &str, owner: &str, status: u16, count: Option<usize>, want: usize) -> Result<()> {
    if status != 200 || count != Some(want) {
        bail!("{list} of {owner} answered {status} with {count:?} workspaces, not {want}");
    }
    Ok(())
}

/// A fresh replica's start.
#[derive(Debug)]
pub(crate) struct Replica {
    /// From starting the process to its API port listening.
    pub(crate) listening: Duration,
    /// From starting the process to `/readyz` answering 200 (every watch's first full read).
    pub(crate) ready: Duration,
    /// Its RSS then.
    pub(crate) rss: u64,
}

/// Polls `/readyz` on `admin_port` of the backend `pid`, started at `started`, until it answers
/// 200 (at most two minutes).
pub(crate) async fn wait_ready(
    pid: u32,
    admin_port: u16,
    started: Instant,
    listening: Duration,
) -> Result<Replica> {
    let deadline = started + Duration::from_secs(120);
    loop {
        let answer = Call::new("GET", "/readyz")
            .send(loopback(admin_port), Duration::from_secs(5))
            .await;
        if answer.is_ok_and(|a| a.status == 200) {
            let ready = started.elapsed();
            return Ok(Replica {
                listening,
                ready,
                rss: usage(pid, 100.0)?.rss,
            });
        }
        if Instant::now() > deadline {
            bail!("a fresh replica not ready within 2 minutes");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
