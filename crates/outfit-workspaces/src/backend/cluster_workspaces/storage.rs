//! The user's storage on one cluster, made ready for a create there: made when missing, waited
//! for and made anew when being deleted, never someone else's. Under `storageStrategy: nfs` a PV
//! outfit writes and a claim pinned to it; under `per-user` a claim alone, which the storage
//! class's provisioner fills.

use std::time::Duration;

use k8s_openapi::{api::core::v1::PersistentVolumeClaim, apimachinery::pkg::apis::meta::v1::OwnerReference};
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, names, user::UserId},
    workspace::{manifest::Requester, objects, progress::storage_claim_of, snapshot},
};
use tokio::time::Instant;

use super::ClusterWorkspaces;
use crate::{
    backend::request::RequestError,
    io::{calls::ClusterCalls, cluster::ClusterError},
};

/// How one try at the user's storage ended.
enum Attempt {
    /// The claim and volume are there and the user's.
    Ready,
    /// The name belongs to someone else.
    Taken,
    /// Something changed meanwhile: try the same name again.
    Again,
}

impl<C: ClusterCalls> ClusterWorkspaces<C> {
    /// Makes sure the requesting user's PV and PVC exist and are not being deleted, marked as
    /// wanted until `until`; returns the claim's name. Storage of the user's still being deleted
    /// is waited for and made anew, never taken as ready; storage of the same name that is
    /// someone else's is never used.
    pub(crate) async fn ensure_storage(
        &self,
        requester: Requester<'_>,
        until: &str,
        size: &str,
    ) -> Result<String, RequestError> {
        let Requester {
            user,
            silo_ip,
            restore,
            ..
        } = requester;
        if restore.is_some() && self.config.storage_strategy.writes_volumes() {
            return Err(RequestError::UnknownSnapshot(
                "homes under storageStrategy nfs have no snapshots to restore from".to_owned(),
            ));
        }
        for name in [names::storage_name(user), names::storage_name_for(user)] {
            for _ in 0..3 {
                match self
                    .try_storage(user, (silo_ip, size, restore), until, &name)
                    .await?
                {
                    Attempt::Ready => return Ok(name),
                    Attempt::Taken => break,
                    Attempt::Again => {}
                }
            }
        }
        Err(RequestError::Storage(format!(
            "no storage name is free for {user} ({} and {} belong to others or keep changing)",
            names::storage_name(user),
            names::storage_name_for(user)
        )))
    }

    /// One try at making the storage `name` ready for `user` (from the snapshot `restore` when
    /// one is named).
    async fn try_storage(
        &self,
        user: &UserId,
        (silo_ip, size, restore): (&str, &str, Option<&str>),
        until: &str,
        name: &str,
    ) -> Result<Attempt, RequestError> {
        let storage_error = |e: ClusterError| storage_failure(&e);
        let writes_volumes = self.config.storage_strategy.writes_volumes();
        let Some(claim) = self.cluster.claim(name).await.map_err(storage_error)? else {
            if writes_volumes && !self.ensure_volume(user, silo_ip, name).await? {
                return Ok(Attempt::Taken);
            }
            let storage = objects::Storage::new(user, silo_ip, name.to_owned(), &self.config);
            let mut claim = if writes_volumes {
                storage.claim(user, &self.config)
            } else {
                let mut claim = storage.provisioned_claim(user, &self.config, size);
                self.restore_missing(&mut claim, user, restore).await?;
                claim
            };
            claim.annotations_mut().insert(
                model::keys::ANNOTATION_STORAGE_WANTED_UNTIL.to_owned(),
                until.to_owned(),
            );
            return match self.cluster.create_claim(&claim).await {
                Ok(()) => Ok(Attempt::Ready),
                Err(e) if e.is_conflict() => Ok(Attempt::Again),
                Err(e) => Err(storage_error(e)),
            };
        };
        match model::user::owner_of(&claim) {
            // Another user's (their ids share deic-dk's user string): use the other name.
            Some(owner) if owner != user.as_str() => return Ok(Attempt::Taken),
            // Made by deic-dk (no owner mark): the user's only if its volume is theirs; outfit
            // marks every claim it provisions, so an unmarked one is never a `per-user` home.
            None if !writes_volumes || !self.volume_is_users(user, name).await? => {
                return Ok(Attempt::Taken);
            }
            _ => {}
        }
        if claim.metadata.deletion_timestamp.is_some() {
            self.wait_claim_gone(name).await?;
            return Ok(Attempt::Again);
        }
        if let Some(snapshot) = restore
            && !restored_from(&claim, snapshot)
        {
            self.replace_home(&claim, user, snapshot).await?;
            return Ok(Attempt::Again);
        }
        self.cluster
            .claim_storage(name, until)
            .await
            .map_err(storage_error)?;
        // The claim may have started to go away in between: look again.
        let claim = self.cluster.claim(name).await.map_err(storage_error)?;
        let Some(claim) = claim.filter(|c| c.metadata.deletion_timestamp.is_none()) else {
            return Ok(Attempt::Again);
        };
        if writes_volumes && !self.ensure_volume(user, silo_ip, name).await? {
            return Ok(Attempt::Taken);
        }
        // A provisioned home grows to what the workspace asks (an NFS one has no real size).
        if !writes_volumes {
            self.grow(&claim, size).await?;
        }
        Ok(Attempt::Ready)
    }

    /// Whether the volume `name` is `user`'s (by outfit's mark, or deic-dk's NFS path).
    async fn volume_is_users(&self, user: &UserId, name: &str) -> Result<bool, RequestError> {
        let volume = self.cluster.volume(name).await.map_err(|e| storage_failure(&e))?;
        Ok(volume.is_some_and(|v| objects::Storage::belongs_to(&v, user, &self.config)))
    }

    /// Makes sure the user's volume `name` exists; `false` when a volume of that name is someone
    /// else's (the caller then uses another name).
    async fn ensure_volume(&self, user: &UserId, silo_ip: &str, name: &str) -> Result<bool, RequestError> {
        let storage_error = |e: ClusterError| storage_failure(&e);
        if let Some(volume) = self.cluster.volume(name).await.map_err(storage_error)? {
            if !objects::Storage::belongs_to(&volume, user, &self.config) {
                return Ok(false);
            }
            if volume.metadata.deletion_timestamp.is_none() {
                return Ok(true);
            }
            // A Released volume being deleted: wait for it to go, then make it anew.
            let deadline = Instant::now() + self.config.timeout_create;
            while self.cluster.volume(name).await.map_err(storage_error)?.is_some() {
                if Instant::now() >= deadline {
                    return Err(RequestError::Storage(format!(
                        "volume {name} is still being deleted"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let storage = objects::Storage::new(user, silo_ip, name.to_owned(), &self.config);
        match self
            .cluster
            .create_volume(&storage.volume(user, &self.config))
            .await
        {
            Ok(()) => Ok(true),
            // Made meanwhile (a second replica): it is the user's if its mark says so.
            Err(e) if e.is_conflict() => self.volume_is_users(user, name).await,
            Err(e) => Err(storage_error(e)),
        }
    }

    /// Makes sure workspace `name`'s own home (`storageStrategy: per-workspace`) exists, owned by
    /// `owner`: kept when it is already theirs (a start), waited for and made anew when being
    /// deleted; a claim of the name that another owner holds is refused.
    pub(crate) async fn ensure_home(
        &self,
        (name, size, restore): (&str, &str, Option<&str>),
        user: &UserId,
        owner: &OwnerReference,
    ) -> Result<(), RequestError> {
        let storage_error = |e: ClusterError| storage_failure(&e);
        let claim_name = names::home_claim(name);
        for _ in 0..3 {
            match self.cluster.claim(&claim_name).await.map_err(storage_error)? {
                Some(claim) if claim.metadata.deletion_timestamp.is_some() => {
                    self.wait_claim_gone(&claim_name).await?;
                }
                Some(claim) => {
                    let owned = claim
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|reference| reference.uid == owner.uid);
                    if owned
                        && let Some(snapshot) = restore
                        && !restored_from(&claim, snapshot)
                    {
                        self.replace_home(&claim, user, snapshot).await?;
                        continue;
                    }
                    return if owned {
                        self.grow(&claim, size).await
                    } else {
                        Err(RequestError::Storage(format!(
                            "claim {claim_name} belongs to another workspace"
                        )))
                    };
                }
                None => {
                    let mut home = objects::workspace_home(name, user, owner, &self.config, size);
                    self.restore_missing(&mut home, user, restore).await?;
                    match self.cluster.create_claim(&home).await {
                        Ok(()) => return Ok(()),
                        Err(e) if e.is_conflict() => {}
                        Err(e) => return Err(storage_error(e)),
                    }
                }
            }
        }
        Err(RequestError::Storage(format!(
            "claim {claim_name} keeps changing"
        )))
    }

    /// Makes `claim`, missing, from a snapshot: `restore` when the request names one, else the
    /// newest ready snapshot of a claim of its name (a home lost since), if any.
    async fn restore_missing(
        &self,
        claim: &mut PersistentVolumeClaim,
        user: &UserId,
        restore: Option<&str>,
    ) -> Result<(), RequestError> {
        let name = claim.name_any();
        if let Some(source) = self.restore_source(&name, user, restore).await? {
            tracing::info!(storage = name, snapshot = source.name(), user = %user, "home made from a snapshot");
            snapshot::restore_into(claim, &source);
        }
        Ok(())
    }

    /// Replaces `user`'s home `claim` with one made from the snapshot `restore`: refused while a
    /// pod uses it; the home as it is saved first when snapshots are configured (a claim is
    /// never removed before its snapshot is ready), then removed, for the caller to make anew.
    async fn replace_home(
        &self,
        claim: &PersistentVolumeClaim,
        user: &UserId,
        restore: &str,
    ) -> Result<(), RequestError> {
        let name = claim.name_any();
        let users: Vec<String> = self
            .cache
            .pods_of(user)
            .iter()
            .filter(|pod| storage_claim_of(pod) == Some(name.as_str()))
            .map(|pod| pod.name_any())
            .collect();
        if !users.is_empty() {
            return Err(RequestError::InUse(format!(
                "the home {name} cannot be replaced by snapshot {restore} while {} use it; stop them first",
                users.join(", ")
            )));
        }
        // Named but unusable: refused before anything is removed.
        self.restore_source(&name, user, Some(restore)).await?;
        self.snapshot_before_removal(&name, user).await?;
        // No version precondition: the snapshot controller marks the claim while it is the
        // source of a snapshot being taken, and no pod uses it (checked above).
        self.cluster
            .delete_storage(&name, None)
            .await
            .map_err(|e| storage_failure(&e))?;
        tracing::info!(storage = name, snapshot = restore, user = %user, "home removed to be made from a snapshot");
        self.wait_claim_gone(&name).await
    }

    /// Waits for the claim `name`, being deleted, to be gone. It goes once the controller manager
    /// sees no pod using it, which can take longer than 30 s while it catches up after an API
    /// server outage (the soak saw it): a create may wait as long as it may take in all.
    async fn wait_claim_gone(&self, name: &str) -> Result<(), RequestError> {
        let limit = self.config.timeout_create;
        let gone = self
            .cluster
            .wait_claim_gone(name, limit)
            .await
            .map_err(|e| storage_failure(&e))?;
        if gone {
            Ok(())
        } else {
            Err(RequestError::Storage(format!(
                "claim {name} is still being deleted after {limit:?}"
            )))
        }
    }

    /// Grows the provisioned home `claim` to `size` when it asks for less; where its class does
    /// not allow expansion the API server refuses, and the launch says so.
    async fn grow(&self, claim: &PersistentVolumeClaim, size: &str) -> Result<(), RequestError> {
        if !objects::smaller_than(claim, size) {
            return Ok(());
        }
        let name = claim.name_any();
        self.cluster.grow_claim(&name, size).await.map_err(|error| {
            tracing::warn!(%error, "growing a home failed");
            let why = format!(
                "the home {name} is smaller than the {size} this workspace asks for and could not grow: {}",
                error.public_message()
            );
            // The API server's verdict (its class does not expand) stands; an outage passes.
            if error.is_transient() {
                RequestError::Storage(why)
            } else {
                RequestError::StorageRefused(why)
            }
        })?;
        tracing::info!(storage = name, size, "home grown");
        Ok(())
    }
}

/// Whether `claim` was made from the snapshot `name` (a restore asked again is not redone).
fn restored_from(claim: &PersistentVolumeClaim, name: &str) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(model::keys::ANNOTATION_RESTORED_FROM))
        .is_some_and(|from| from == name)
}

/// A storage step the API server failed: its verdict for the caller, the whole error in the log.
fn storage_failure(error: &ClusterError) -> RequestError {
    tracing::warn!(%error, "storage step failed");
    RequestError::Storage(error.public_message())
}
