//! The Lease loop: every replica runs it; the one that holds the Lease is the only one that does
//! the election's duty (`outfit serve`: write the webhook configuration and rotate the
//! certificate; `outfit workspaces`: finish, fail and cull workspaces and sweep storage). What to
//! do with the Lease is decided by [`crate::lease::decide`]; this is the reading and writing.

use std::{sync::Arc, time::Instant};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, Client, api::PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    api_error::brief,
    lease::{Record, Step, Timing, decide},
};

/// Who takes part in the election, and where.
#[derive(Debug, Clone)]
pub struct Election {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's `holderIdentity` (its host name and a token of its own).
    pub identity: String,
    /// Durations.
    pub timing: Timing,
    /// What the leader does, for the log ("writes the webhook configuration").
    pub duty: &'static str,
    /// Who may write the Lease, for the warning when it cannot be ("outfit manifests grants
    /// it").
    pub granted_by: &'static str,
    /// Without a grant for the Lease (403), act as the leader, as every replica did before there
    /// was an election (an installation whose RBAC predates it keeps working), rather than never.
    pub alone_when_forbidden: bool,
}

/// This replica's name in the Lease: its host name (the pod's name in a cluster) and a token of
/// its own, as client-go's leader election names candidates, so two processes on one host differ.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "outfit".to_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}_{}_{nanos:08x}", std::process::id())
}

/// What the loop remembers between rounds.
struct State {
    /// The Lease's record as last seen, and when it last changed by our clock.
    observed: Option<(Record, Instant)>,
    /// When we last wrote ourselves in.
    renewed: Option<Instant>,
    leading: bool,
    /// The holder last logged, so a follower logs a change of leader once.
    holder: Option<String>,
}

/// Runs the election until `shutdown`, telling `leading` whether this replica holds the Lease
/// (and `on_change`, on each change: metrics); on shutdown a holder releases it, so another takes
/// over at once.
pub async fn run(
    client: Client,
    election: Election,
    leading: Arc<watch::Sender<bool>>,
    on_change: impl Fn(bool) + Send,
    shutdown: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &election.namespace);
    let mut state = State {
        observed: None,
        renewed: None,
        leading: false,
        holder: None,
    };
    let mut warned = false;
    // Leading without a grant: there is no Lease of ours to release.
    let mut alone = false;
    loop {
        match round(&api, &election, &mut state).await {
            Ok(()) => (warned, alone) = (false, false),
            Err(kube::Error::Api(status)) if status.code == 403 && election.alone_when_forbidden => {
                if !warned {
                    tracing::warn!(lease = %election.name, namespace = %election.namespace, granted_by = election.granted_by,
                                   reason = %status.message, "no grant for the Lease: leading alone, as every replica did before the election");
                    warned = true;
                }
                state.leading = true;
                state.renewed = Some(Instant::now());
                alone = true;
            }
            Err(error) if !warned => {
                tracing::warn!(lease = %election.name, namespace = %election.namespace, error = brief(&error),
                               granted_by = election.granted_by, "cannot read or write the Lease; retrying");
                warned = true;
            }
            Err(error) => tracing::debug!(error = brief(&error), "the Lease is still out of reach"),
        }
        // A holder that could not renew in time stops writing before anyone may take over.
        if state.leading
            && state
                .renewed
                .is_none_or(|at| at.elapsed() >= election.timing.renew_deadline)
        {
            state.leading = false;
            tracing::warn!(lease = %election.name, "could not renew the Lease in time; no longer the leader");
        }
        if *leading.borrow() != state.leading {
            leading.send_replace(state.leading);
            on_change(state.leading);
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(election.timing.retry_period) => {}
        }
    }
    if state.leading {
        leading.send_replace(false);
        on_change(false);
        if alone {
            return;
        }
        match release(&api, &election).await {
            Ok(()) => tracing::info!(lease = %election.name, "released the Lease"),
            Err(error) => {
                tracing::warn!(%error, "could not release the Lease; another replica takes over once it expires")
            }
        }
    }
}

/// One look at the Lease, and the write the decision calls for.
async fn round(api: &Api<Lease>, election: &Election, state: &mut State) -> Result<(), kube::Error> {
    let lease = api.get_opt(&election.name).await?;
    let record = lease.as_ref().map(record);
    if let Some(record) = &record
        && state.observed.as_ref().is_none_or(|(seen, _)| seen != record)
    {
        state.observed = Some((record.clone(), Instant::now()));
    }
    let unchanged_for = state
        .observed
        .as_ref()
        .map_or(std::time::Duration::ZERO, |(_, at)| at.elapsed());
    let won = match (decide(record.as_ref(), &election.identity, unchanged_for), lease) {
        (Step::Create, _) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(election.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(held(election, None, true)),
            };
            conflict_is_lost(api.create(&PostParams::default(), &lease).await)?
        }
        (Step::Take { transition }, Some(mut lease)) => {
            lease.spec = Some(held(election, lease.spec.take(), transition));
            // The resourceVersion read makes the write conditional: of two takers one wins.
            conflict_is_lost(api.replace(&election.name, &PostParams::default(), &lease).await)?
        }
        (Step::Take { .. }, None) => false,
        (Step::Follow { holder }, _) => {
            if state.holder.as_deref() != Some(holder.as_str()) {
                tracing::info!(lease = %election.name, leader = %holder, duty = election.duty, "another replica leads");
                state.holder = Some(holder);
            }
            false
        }
    };
    if won {
        state.renewed = Some(Instant::now());
        if !state.leading {
            tracing::info!(lease = %election.name, identity = %election.identity, duty = election.duty, "became the leader");
            state.holder = Some(election.identity.clone());
        }
        state.leading = true;
    } else if state.leading {
        tracing::warn!(lease = %election.name, "lost the Lease; no longer the leader");
        state.leading = false;
    }
    Ok(())
}

/// A successful write is a win; a conflict (someone wrote first) a loss.
fn conflict_is_lost(result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// What the election's rule ([`decide`]) reads of a Lease.
pub fn record(lease: &Lease) -> Record {
    let spec = lease.spec.clone().unwrap_or_default();
    Record {
        holder: spec.holder_identity,
        renew_time: spec.renew_time.map(|t| t.0.to_string()),
        lease_duration_seconds: spec.lease_duration_seconds,
    }
}

/// The spec with us as holder, renewed now.
fn held(election: &Election, spec: Option<LeaseSpec>, transition: bool) -> LeaseSpec {
    let now = MicroTime(Timestamp::now());
    let mut spec = spec.unwrap_or_default();
    spec.holder_identity = Some(election.identity.clone());
    spec.lease_duration_seconds =
        Some(i32::try_from(election.timing.lease_duration.as_secs()).unwrap_or(i32::MAX));
    spec.renew_time = Some(now.clone());
    if transition || spec.acquire_time.is_none() {
        spec.acquire_time = Some(now);
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + i32::from(transition));
    }
    spec
}

/// Gives the Lease up, as client-go's `ReleaseOnCancel` does: no holder, a one-second duration.
async fn release(api: &Api<Lease>, election: &Election) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&election.name).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    api.replace(&election.name, &PostParams::default(), &lease)
        .await?;
    Ok(())
}
