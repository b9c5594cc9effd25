//! The backend's replicas behind the users, and the loop that kills one of them (SIGKILL, as a
//! crash or a node loss would) and starts it again: the leader first, then follower and leader
//! in turn.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::Result;
use outfit_loadgen::harness::Backend;
use outfit_test_support::http::{Call, loopback};

use crate::outages::Outages;

/// The replicas, each with the windows in which it was down.
pub(crate) struct Replicas {
    backends: Vec<Mutex<Backend>>,
    /// Each replica's API port (the same after a restart).
    pub(crate) ports: Vec<u16>,
    admin_ports: Vec<u16>,
    /// When each replica was down: a request to it failing then is expected.
    pub(crate) down: Vec<Outages>,
}

/// A replica kill: which, whether it led, when, and how long until it listened again.
#[derive(Debug)]
pub(crate) struct Kill {
    pub(crate) replica: usize,
    pub(crate) leader: bool,
    pub(crate) down: Duration,
}

impl Replicas {
    /// The replicas in `backends`, each started with an admin port.
    pub(crate) fn new(backends: Vec<Backend>) -> Self {
        let ports = backends.iter().map(|b| b.port).collect();
        let admin_ports = backends
            .iter()
            .map(|b| b.admin_port.unwrap_or_default())
            .collect();
        let down = backends.iter().map(|_| Outages::default()).collect();
        Self {
            backends: backends.into_iter().map(Mutex::new).collect(),
            ports,
            admin_ports,
            down,
        }
    }

    fn backend(&self, index: usize) -> std::sync::MutexGuard<'_, Backend> {
        self.backends[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Each replica's pid now.
    pub(crate) fn pids(&self) -> Vec<u32> {
        (0..self.backends.len())
            .map(|i| self.backend(i).child.id())
            .collect()
    }

    /// Whether every replica is running.
    pub(crate) fn alive(&self) -> bool {
        (0..self.backends.len()).all(|i| self.backend(i).alive())
    }

    /// The replica that says it leads (`outfit_workspaces_leader 1` on its metrics), if one does.
    pub(crate) async fn leader(&self) -> Option<usize> {
        for (index, port) in self.admin_ports.iter().enumerate() {
            let Ok(answer) = Call::new("GET", "/metrics")
                .send(loopback(*port), Duration::from_secs(5))
                .await
            else {
                continue;
            };
            if answer
                .text()
                .lines()
                .any(|l| l.trim() == "outfit_workspaces_leader 1")
            {
                return Some(index);
            }
        }
        None
    }

    /// Kills replica `index`, leaves it down `down`, and starts it again on the same ports.
    async fn kill(&self, index: usize, down: Duration, outages: &Outages) -> Result<Duration> {
        let killed = Instant::now();
        self.down[index].begin(killed);
        outages.begin(killed);
        self.backend(index).kill();
        tokio::time::sleep(down).await;
        let started = tokio::task::block_in_place(|| self.backend(index).start_again());
        let back = Instant::now();
        self.down[index].end(back);
        outages.end(back);
        started?;
        Ok(back - killed)
    }
}

/// Kills a replica every `every` until `deadline` (the first kill the leader's, then follower and
/// leader in turn), each left down `down`; returns the kills. Errors from the survivors within
/// the users' grace after a kill are forgiven through `outages` (a dead replica's per-user Lease
/// holds a user's next create until it expires).
pub(crate) async fn kill_loop(
    replicas: Arc<Replicas>,
    started: Instant,
    every: Duration,
    down: Duration,
    deadline: Instant,
    outages: Arc<Outages>,
) -> Result<Vec<Kill>> {
    let mut kills = Vec::new();
    let mut next = Instant::now() + every;
    while next + down + Duration::from_secs(30) < deadline {
        tokio::time::sleep_until(next.into()).await;
        next += every;
        let leader = replicas.leader().await;
        let want_leader = kills.len() % 2 == 0;
        let replica = match leader {
            Some(l) if want_leader => l,
            Some(l) => (l + 1) % replicas.ports.len(),
            None => kills.len() % replicas.ports.len(),
        };
        let led = leader == Some(replica);
        println!(
            "replica kill: replica {replica}{} killed at t={:.0}s",
            if led { " (the leader)" } else { "" },
            started.elapsed().as_secs_f64()
        );
        let downtime = replicas.kill(replica, down, &outages).await?;
        println!(
            "replica kill: replica {replica} listening again at t={:.0}s, after {:.1} s down",
            started.elapsed().as_secs_f64(),
            downtime.as_secs_f64()
        );
        kills.push(Kill {
            replica,
            leader: led,
            down: downtime,
        });
    }
    Ok(kills)
}
