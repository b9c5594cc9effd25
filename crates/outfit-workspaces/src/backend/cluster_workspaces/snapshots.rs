//! Snapshots of homes on one cluster (issue 32, `snapshotClassName`): one taken, waited for as
//! long as `snapshotTimeout` allows and no longer, the oldest past `snapshotsKept` let go; one
//! taken before a claim is removed, which keeps the claim unless it turns ready (removals of one
//! claim asked meanwhile share it); and the newest ready one a lost home is made again from.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, names, user::UserId},
    resource::{Workspace, reconcile},
    workspace::snapshot::{self, Occasion, State, VolumeSnapshot},
};
use tokio::time::Instant;

use super::{
    ClusterWorkspaces,
    removals::{Removal, Saved},
};
use crate::{
    backend::request::RequestError,
    io::{calls::ClusterCalls, cluster::ClusterError},
};

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
    /// its name. A name taken already (the same second) is that snapshot.
    pub(crate) async fn take_snapshot(
        &self,
        (claim, user): (&str, &UserId),
        (occasion, workspace): (Occasion, Option<&str>),
    ) -> Result<String, ClusterError> {
        let class = self.config.snapshot_class_name.as_deref().unwrap_or_default();
        let object = snapshot::volume_snapshot(claim, user, class, (occasion, workspace), Timestamp::now());
        match self.cluster.create_snapshot(&object).await {
            Ok(()) => {}
            Err(error) if error.is_conflict() => {}
            Err(error) => return Err(error),
        }
        tracing::info!(snapshot = object.name(), claim, user = %user, occasion = occasion.as_str(), "snapshot taken");
        Ok(object.name().to_owned())
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
    /// same claim under way in this process shares its snapshot with this one.
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

    /// [`Self::snapshot_before_removal`], this removal's own snapshot: its name, ready.
    async fn snapshot_alone(&self, claim: &str, user: &UserId) -> Result<String, RequestError> {
        let since = Instant::now();
        let name = self
            .take_snapshot((claim, user), (Occasion::Removal, None))
            .await?;
        match self.await_snapshot(&name, since).await {
            Outcome::Ready => {
                self.prune_snapshots(claim, user).await;
                Ok(name)
            }
            Outcome::Failed(why) | Outcome::TimedOut(why) => Err(RequestError::SnapshotNotReady(format!(
                "the home {claim} is kept: its snapshot {name} before removal is not ready ({why})"
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
