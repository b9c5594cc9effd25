//! Users' homes through the native API (issue 32): `GET /api/v1/storage` lists the caller's (an
//! admin's choice of user's) on every cluster, and their snapshots, from the watch caches (the
//! snapshots asked of the API server while their watch can't say); `DELETE /api/v1/storage` removes the ones that outlive
//! workspaces (`per-user` and `nfs`), the explicit call a home waits for, refused while the user
//! has any workspace, stopped ones included, each saved first when snapshots are configured. A
//! `per-workspace` home goes with its Workspace, never here.

use std::sync::Arc;

use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{
        config::StorageStrategy,
        user::{UserId, belongs_to},
    },
    workspace::{
        home::{self, Home},
        snapshot::{self, SnapshotView},
    },
};

use super::Backend;
use crate::{
    backend::request::RequestError,
    io::{auth::Identity, calls::ClusterCalls},
};

impl<C: ClusterCalls> Backend<C> {
    /// Whose homes `identity` asks about: their own, or as an admin, `user`'s.
    fn home_owner(identity: &Identity, user: Option<&str>) -> Result<UserId, RequestError> {
        match user {
            None => Ok(identity.user.clone()),
            Some(_) if !identity.admin => Err(RequestError::Forbidden(
                "only members of adminGroups may name another user's storage".to_owned(),
            )),
            Some(id) => UserId::parse(id).map_err(RequestError::User),
        }
    }

    /// The homes of `identity` (or, for an admin, of `user`) on every cluster, in name order,
    /// and their snapshots, newest first.
    pub async fn homes(
        &self,
        identity: &Identity,
        user: Option<&str>,
    ) -> Result<(Vec<Home>, Vec<SnapshotView>), RequestError> {
        let owner = Self::home_owner(identity, user)?;
        let mut homes: Vec<Home> = self
            .members
            .iter()
            .flat_map(|member| {
                member
                    .cache
                    .claims()
                    .iter()
                    .filter(|claim| belongs_to(claim.as_ref(), &owner))
                    .map(|claim| home::home_of(claim, &member.name))
                    .collect::<Vec<_>>()
            })
            .collect();
        homes.sort_by(|a, b| (&a.cluster, &a.name).cmp(&(&b.cluster, &b.name)));
        let mut snapshots = Vec::new();
        for member in self.members.iter() {
            if member.config.snapshot_class_name.is_none() {
                continue;
            }
            // From the watch where it can say (issue 46: a LIST per request), else asked.
            let of_owner = match member.cache.snapshots_of(&owner) {
                Some(watched) => watched,
                None => (member.cluster.snapshots_of(&owner).await?)
                    .into_iter()
                    .map(Arc::new)
                    .collect(),
            };
            // One being deleted (past snapshotsKept) restores nothing any more.
            snapshots.extend(
                of_owner
                    .iter()
                    .filter(|s| s.metadata.deletion_timestamp.is_none())
                    .map(|s| snapshot::view(s, &member.name)),
            );
        }
        snapshots.sort_by(|a, b| (&b.created, &b.name).cmp(&(&a.created, &a.name)));
        Ok((homes, snapshots))
    }

    /// Removes the homes of `identity` (or, for an admin, of `user`) that outlive workspaces;
    /// their names. Refused while the user has a workspace on the cluster, so that no running or
    /// stopped workspace loses its home.
    pub async fn remove_homes(
        &self,
        identity: &Identity,
        user: Option<&str>,
    ) -> Result<Vec<String>, RequestError> {
        let owner = Self::home_owner(identity, user)?;
        for member in self.members.iter() {
            let workspaces = member.cache.pods_of(&owner).len() + member.cache.workspaces_of(&owner).len();
            if workspaces > 0 {
                return Err(RequestError::InUse(format!(
                    "{owner} has {workspaces} workspaces on cluster {}; delete them first (stopped ones keep their home)",
                    member.name
                )));
            }
        }
        let mut removed = Vec::new();
        for member in self.members.iter() {
            let claims: Vec<(String, StorageStrategy)> = member
                .cache
                .claims()
                .iter()
                .filter(|claim| belongs_to(claim.as_ref(), &owner))
                .map(|claim| (claim.name_any(), home::strategy_of(claim), claim))
                .filter(|(_, strategy, _)| *strategy != StorageStrategy::PerWorkspace)
                .filter(|(_, _, claim)| claim.metadata.deletion_timestamp.is_none())
                .map(|(name, strategy, _)| (name, strategy))
                .collect();
            for (name, strategy) in claims {
                // Saved first: a claim is never removed before its snapshot is ready (an `nfs`
                // home, a volume outfit wrote by hand, has no CSI driver to take one).
                if strategy == StorageStrategy::PerUser {
                    member.snapshot_before_removal(&name, &owner).await?;
                }
                member.cluster.delete_storage(&name, None).await?;
                tracing::info!(storage = name, user = %owner, "removed storage as asked");
                removed.push(name);
            }
        }
        Ok(removed)
    }
}
