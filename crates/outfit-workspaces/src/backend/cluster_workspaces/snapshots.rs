//! Snapshots of homes on one cluster (issue 32, `snapshotClassName`): one taken, waited for as
//! long as `snapshotTimeout` allows and no longer, the oldest past `snapshotsKept` let go; one
//! before a claim is removed, which keeps the claim unless it turns ready; and the newest ready
//! one a lost home is made again from.
//!
//! A removal takes no snapshot it need not (issue 46): it keeps a ready one, or waits for a
//! pending one, taken after the home's last use, as the claim's use mark says
//! ([`removal::for_removal`] has the rule and why it loses nothing); with [`removal::PENDING_CAP`]
//! pending it takes none, and ones never ready are pruned after [`PENDING_STALE`] (or ten
//! `snapshotTimeout`s); removals of one claim asked meanwhile in this process share one.

use std::{
    collections::hash_map::RandomState,
    hash::BuildHasher,
    sync::{
        OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use jiff::Timestamp;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, names, user::UserId},
    resource::{Workspace, reconcile},
    workspace::{
        progress::storage_claim_of,
        snapshot::{
            self, Occasion, State, VolumeSnapshot,
            removal::{self, Next},
        },
    },
};
use tokio::time::Instant;

use super::{
    ClusterWorkspaces,
    removals::{Removal, Saved},
};
use crate::{
    backend::request::RequestError,
    io::{cache::OWN_WRITE_VISIBLE, calls::ClusterCalls, cluster::ClusterError},
};

/// The least time a snapshot that never turned ready is kept before a removal prunes it (ten
/// `snapshotTimeout`s when that is longer): real CSI snapshots of large homes take minutes, and
/// one pruned too soon is one a removal must take again.
pub(crate) const PENDING_STALE: Duration = Duration::from_secs(3600);
/// How long after a create marked a claim as making a pod ([`removal::making_mark`]) a snapshot
/// may settle the mark when no pod uses the claim, beyond `timeoutCreate`: the create makes its
/// pod right after the mark, and has given up by then.
const SETTLE_AFTER_MAKING: Duration = Duration::from_secs(60);
/// How long after a create said it made its pod ([`removal::used_mark`]) a snapshot may settle
/// the mark when no pod uses the claim: longer than a cache takes to show a pod made.
const SETTLE_AFTER_USED: Duration = Duration::from_secs(10);

/// A number this process has not given before (a counter from a random start, so that two
/// replicas do not count alike): a snapshot name's salt, a use mark.
pub(crate) fn salt() -> u64 {
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    NEXT.get_or_init(|| AtomicU64::new(RandomState::new().hash_one("outfit")))
        .fetch_add(1, Ordering::Relaxed)
}

/// The first look at a snapshot being taken, after it is asked for; each next one waits twice as
/// long, up to [`POLL_MAX`], so that many snapshots at once (a morning's culls) cost the API
/// server a few reads a second, not one per snapshot every moment.
const POLL_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between two looks.
const POLL_MAX: Duration = Duration::from_secs(5);

/// How the wait for a snapshot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Ready: the home can be made again from it.
    Ready,
    /// The snapshot controller or the driver said it failed.
    Failed(String),
    /// Not ready within `snapshotTimeout`.
    TimedOut(String),
}

impl<C: ClusterCalls> ClusterWorkspaces<C> {
    /// Takes a snapshot of `user`'s claim `claim` for `occasion` (on a stop, of `workspace`);
    /// its name. It carries the claim's settled use mark when no pod uses the claim.
    pub(crate) async fn take_snapshot(
        &self,
        (claim, user): (&str, &UserId),
        (occasion, workspace): (Occasion, Option<&str>),
    ) -> Result<String, ClusterError> {
        let home_use = self.settled_use(claim).await?;
        let name = snapshot::snapshot_name(claim, Timestamp::now(), salt32());
        self.snapshot_named(name, (claim, user), (occasion, workspace), home_use.as_deref())
            .await
    }

    /// [`Self::take_snapshot`] under `name`, with the use mark `home_use` found. A snapshot of
    /// that name already there is taken as this one: another replica's removal of the home at
    /// the same moment named it alike ([`removal::removal_name`]), and this one waits for it.
    async fn snapshot_named(
        &self,
        name: String,
        (claim, user): (&str, &UserId),
        (occasion, workspace): (Occasion, Option<&str>),
        home_use: Option<&str>,
    ) -> Result<String, ClusterError> {
        let class = self.config.snapshot_class_name.as_deref().unwrap_or_default();
        let object = snapshot::volume_snapshot(name, (claim, user), class, (occasion, workspace), home_use);
        let taken = match self.cluster.create_snapshot(&object).await {
            Ok(()) => "snapshot taken",
            Err(error) if error.is_conflict() => "snapshot of that name taken already: shared",
            Err(error) => return Err(error),
        };
        tracing::info!(snapshot = object.name(), claim, user = %user, occasion = occasion.as_str(), home_use, "{taken}");
        Ok(object.name().to_owned())
    }

    /// The settled use mark of `claim` a snapshot taken now may carry: none while a pod uses it
    /// (as the cache sees it) or a create marked it lately ([`removal::may_settle`]); a claim
    /// unmarked, or marked by a create long enough ago, is marked settled first (at the version read,
    /// so a create's mark meanwhile wins and the snapshot carries none).
    async fn settled_use(&self, claim: &str) -> Result<Option<String>, ClusterError> {
        let Some(fresh) = self.cluster.claim(claim).await? else {
            return Ok(None);
        };
        // Read after the claim: a pod made since has marked it in use already.
        if !self.claim_idle(claim) {
            return Ok(None);
        }
        let settle_after = removal::SettleAfter {
            making: self.config.timeout_create + SETTLE_AFTER_MAKING,
            used: SETTLE_AFTER_USED,
        };
        let mark = removal::home_use(&fresh);
        if let removal::HomeUse::Settled(settled) = mark {
            return Ok(Some(settled.to_owned()));
        }
        if !removal::may_settle(mark, Timestamp::now(), settle_after) {
            return Ok(None);
        }
        let settled = removal::settled_mark(salt());
        let seen = fresh.resource_version();
        match self.cluster.mark_home_use(claim, &settled, seen.as_deref()).await {
            Ok(()) => Ok(Some(settled)),
            Err(error) => {
                // Changed meanwhile: settled by another replica's removal at the same moment
                // (its mark is as good, and naming its snapshot alike shares it), or a create's
                // mark (the snapshot carries none).
                tracing::debug!(%error, claim, "could not mark the claim settled");
                let again = self.cluster.claim(claim).await?;
                let mark = again.as_ref().map(removal::home_use);
                Ok(match mark {
                    Some(removal::HomeUse::Settled(settled)) if self.claim_idle(claim) => {
                        Some(settled.to_owned())
                    }
                    _ => None,
                })
            }
        }
    }

    /// Whether no pod uses `claim`, as this cluster's cache sees it (reachable).
    fn claim_idle(&self, claim: &str) -> bool {
        self.cache.unreachable().is_none()
            && !self
                .cache
                .pods()
                .iter()
                .any(|pod| storage_claim_of(pod) == Some(claim))
    }

    /// How old a snapshot that never turned ready gets before a removal prunes it.
    fn pending_stale(&self) -> Duration {
        PENDING_STALE.max(self.config.snapshot_timeout * 10)
    }

    /// Waits for the snapshot `name` to turn ready, until `snapshotTimeout` after `since`. An
    /// error the snapshot controller reports is waited through (it retries, and some are
    /// passing); at the bound, the last one is the failure's reason.
    pub(crate) async fn await_snapshot(&self, name: &str, since: Instant) -> Outcome {
        let timeout = self.config.snapshot_timeout;
        let deadline = since + timeout;
        let mut pause = POLL_FIRST;
        let mut last_error = None;
        loop {
            match self.cluster.get_snapshot(name).await {
                Ok(Some(snapshot)) => match snapshot.state() {
                    State::Ready => return Outcome::Ready,
                    State::Failed(why) => last_error = Some(why),
                    State::Pending => {}
                },
                Ok(None) => return Outcome::Failed("it was deleted before it turned ready".to_owned()),
                Err(error) => tracing::debug!(%error, "reading a snapshot failed; trying again"),
            }
            let now = Instant::now();
            if now >= deadline {
                let bound = model::duration::format(timeout);
                return match last_error {
                    Some(why) => Outcome::Failed(format!("{why} (not ready after {bound}, snapshotTimeout)")),
                    None => Outcome::TimedOut(format!("not ready after {bound} (snapshotTimeout)")),
                };
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// Waits (briefly) until the snapshots' watch, where there is one, shows `name` ready: the
    /// storage list answers from it, and one right after a removal must show what it kept.
    async fn await_shown_ready(&self, name: &str) {
        if !self.cache.watches_snapshots() {
            return;
        }
        let deadline = Instant::now() + OWN_WRITE_VISIBLE;
        self.cache
            .wait_for(deadline, |cache| {
                let shown = cache.snapshot(name)?;
                matches!(shown.state(), State::Ready).then_some(())
            })
            .await;
    }

    /// Lets go of `claim`'s snapshots past the newest `snapshotsKept` ready ones (and failed ones
    /// a ready one has replaced). A failure is logged: the next stop tries again.
    pub(crate) async fn prune_snapshots(&self, claim: &str, user: &UserId) {
        let snapshots = match self.cluster.snapshots_of(user).await {
            Ok(snapshots) => snapshots,
            Err(error) => {
                tracing::warn!(%error, claim, "could not list snapshots to keep the last snapshotsKept");
                return;
            }
        };
        for name in snapshot::to_prune(&snapshots, claim, self.config.snapshots_kept) {
            match self.cluster.delete_snapshot(&name).await {
                Ok(()) => tracing::info!(snapshot = name, claim, "snapshot let go (snapshotsKept)"),
                Err(error) => tracing::warn!(%error, snapshot = name, "could not delete an old snapshot"),
            }
        }
    }

    /// Before `user`'s claim `claim` is removed: a snapshot of it, ready (its name), or the
    /// refusal that keeps the claim. `None` when snapshots are not configured. A removal of the
    /// same claim under way in this process shares its snapshot with this one; else one taken
    /// since the home's last use is kept or waited for ([`removal::for_removal`]).
    pub(crate) async fn snapshot_before_removal(
        &self,
        claim: &str,
        user: &UserId,
    ) -> Result<Option<String>, RequestError> {
        if self.config.snapshot_class_name.is_none() {
            return Ok(None);
        }
        let saved = match self.removals.join(claim) {
            Removal::First(leading, sender) => {
                let result = self.snapshot_alone(claim, user).await;
                drop(leading);
                sender.send_replace(Some(match &result {
                    Ok(name) => Saved::Ready(name.clone()),
                    Err(RequestError::SnapshotNotReady(why)) => Saved::NotReady(why.clone()),
                    Err(_) => Saved::Failed,
                }));
                result
            }
            Removal::Sharing(mut outcome) => {
                tracing::debug!(claim, "a removal's snapshot of this claim is under way: shared");
                let saved = outcome
                    .wait_for(Option::is_some)
                    .await
                    .ok()
                    .and_then(|saved| saved.clone());
                match saved {
                    Some(Saved::Ready(name)) => Ok(name),
                    Some(Saved::NotReady(why)) => Err(RequestError::SnapshotNotReady(why)),
                    // Failed, or the first removal was dropped (its caller went) before it ended.
                    Some(Saved::Failed) | None => self.snapshot_alone(claim, user).await,
                }
            }
        };
        saved.map(Some)
    }

    /// [`Self::snapshot_before_removal`], this removal's own: a ready one taken after the home's
    /// last use, one pending of those waited for, else one taken (unless
    /// [`removal::PENDING_CAP`] are pending); its name, ready.
    async fn snapshot_alone(&self, claim: &str, user: &UserId) -> Result<String, RequestError> {
        let since = Instant::now();
        let home_use = self.settled_use(claim).await?;
        let snapshots = self.cluster.snapshots_of(user).await?;
        let now = Timestamp::now();
        let plan = removal::for_removal(
            &snapshots,
            claim,
            home_use.as_deref(),
            (now, self.pending_stale()),
        );
        for name in &plan.prune {
            match self.cluster.delete_snapshot(name).await {
                Ok(()) => tracing::info!(snapshot = name, claim, "snapshot never ready let go"),
                Err(error) => {
                    tracing::warn!(%error, snapshot = name, "could not delete a snapshot never ready")
                }
            }
        }
        let (name, asked) = match plan.next {
            Next::Keep(ready) => {
                tracing::info!(
                    snapshot = ready.name(),
                    claim,
                    "removal keeps a snapshot taken since the home's last use"
                );
                return Ok(ready.name().to_owned());
            }
            Next::Await(pending) => {
                tracing::info!(
                    snapshot = pending.name(),
                    claim,
                    "removal waits for a snapshot taken since the home's last use"
                );
                (pending.name().to_owned(), pending.created().unwrap_or(now))
            }
            Next::Refuse(pending) => {
                return Err(RequestError::SnapshotNotReady(format!(
                    "the home {claim} is kept: {} of its snapshots are not ready, the newest {} {}; no other is taken until one is ready (a removal then keeps one taken since the home's last use) or, never ready, is let go after {}",
                    removal::PENDING_CAP,
                    pending.name(),
                    asked_ago(pending.created().unwrap_or(now), now),
                    model::duration::format(self.pending_stale()),
                )));
            }
            Next::Take => {
                let name = match home_use.as_deref() {
                    Some(mark) => removal::removal_name(&snapshots, claim, mark),
                    None => snapshot::snapshot_name(claim, now, salt32()),
                };
                let taken = self
                    .snapshot_named(
                        name,
                        (claim, user),
                        (Occasion::Removal, None),
                        home_use.as_deref(),
                    )
                    .await?;
                (taken, now)
            }
        };
        match self.await_snapshot(&name, since).await {
            Outcome::Ready => {
                self.prune_snapshots(claim, user).await;
                self.await_shown_ready(&name).await;
                Ok(name)
            }
            Outcome::Failed(why) | Outcome::TimedOut(why) => Err(RequestError::SnapshotNotReady(format!(
                "the home {claim} is kept: its snapshot {name} before removal, {}, is not ready ({why}); a removal once it is ready keeps it, unless the home is used meanwhile",
                asked_ago(asked, Timestamp::now()),
            ))),
        }
    }

    /// Before the Workspace `record` is deleted (its own `per-workspace` home goes with it): that
    /// home saved, unless the snapshot of its last stop is ready and it has not run since. The
    /// refusal keeps the Workspace and its home.
    pub(crate) async fn save_before_delete(&self, record: &Workspace) -> Result<(), RequestError> {
        if self.config.snapshot_class_name.is_none() || reconcile::stop_snapshot_ready(record) {
            return Ok(());
        }
        let Some(claim) = self.own_home(record) else {
            return Ok(());
        };
        let user = UserId::parse(&record.spec.owner)?;
        self.snapshot_before_removal(&claim, &user).await.map(drop)
    }

    /// The claim of `record`'s own home (`per-workspace`, owned by it), as the cache shows it.
    pub(crate) fn own_home(&self, record: &Workspace) -> Option<String> {
        let claim = names::home_claim(&record.name_any());
        let owned = self.cache.claim(&claim).is_some_and(|c| {
            c.owner_references()
                .iter()
                .any(|owner| Some(&owner.uid) == record.metadata.uid.as_ref())
        });
        owned.then_some(claim)
    }

    /// Before all of `user`'s claims `claims` are removed (deic-dk's `delete_all_user`): each
    /// one's snapshot, ready, or the refusal that keeps them all.
    pub(crate) async fn save_all(&self, claims: &[String], user: &UserId) -> Result<(), RequestError> {
        for claim in claims {
            self.snapshot_before_removal(claim, user).await?;
        }
        Ok(())
    }

    /// The snapshot to make `user`'s missing claim `claim` from: `named` when the request names
    /// one (it must be `user`'s and ready), else the newest ready one of `user`'s of that home,
    /// if any.
    pub(crate) async fn restore_source(
        &self,
        claim: &str,
        user: &UserId,
        named: Option<&str>,
    ) -> Result<Option<VolumeSnapshot>, RequestError> {
        if self.config.snapshot_class_name.is_none() && named.is_none() {
            return Ok(None);
        }
        let Some(named) = named else {
            // Keyed by the owner, whose snapshots these are: a `per-user` home has two names,
            // and the first may be another user's by now (ids sharing a user string), so the
            // owner's snapshots of either name count, whichever the home has this time.
            let snapshots = self.cluster.snapshots_of(user).await?;
            let (plain, own) = (names::storage_name(user), names::storage_name_for(user));
            let claims = if claim == plain || claim == own {
                vec![plain.as_str(), own.as_str()]
            } else {
                vec![claim]
            };
            return Ok(snapshot::newest_ready_of(&snapshots, &claims).cloned());
        };
        self.named_snapshot(user, named).await.map(Some)
    }

    /// The snapshot `named`, if it is `user`'s and ready to make a home from; else why not.
    pub(crate) async fn named_snapshot(
        &self,
        user: &UserId,
        named: &str,
    ) -> Result<VolumeSnapshot, RequestError> {
        let snapshots = self.cluster.snapshots_of(user).await?;
        let found = snapshots.into_iter().find(|s| s.name() == named);
        match found {
            None => Err(RequestError::UnknownSnapshot(format!(
                "{user} has no snapshot {named:?} on cluster {}",
                self.name
            ))),
            Some(snapshot) => match snapshot.state() {
                State::Ready => Ok(snapshot),
                State::Pending => Err(RequestError::SnapshotNotReady(format!(
                    "snapshot {named} is not ready yet"
                ))),
                State::Failed(why) => Err(RequestError::SnapshotNotReady(format!(
                    "snapshot {named} failed: {why}"
                ))),
            },
        }
    }
}

/// A snapshot name's salt: [`salt`]'s low 32 bits (unique for 2^32 names in a row).
pub(crate) fn salt32() -> u32 {
    u32::try_from(salt() % (1 << 32)).unwrap_or_default()
}

/// `asked for 12s ago (2026-11-29T12:00:00Z)`: when a snapshot was asked for, as a refusal says.
fn asked_ago(asked: Timestamp, now: Timestamp) -> String {
    let age = Duration::try_from(now.duration_since(asked)).unwrap_or_default();
    let age = Duration::from_secs(age.as_secs());
    format!("asked for {} ago ({asked:.0})", model::duration::format(age))
}
