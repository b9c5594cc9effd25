//! The operations behind deic-dk's API (§1.2 of the reference), one method each, free of HTTP:
//! they work on the default cluster only (deic-dk knows of one), reads come from its watch cache,
//! writes go to its API server, and long polls wait on the cache's changes. `create_pod` is with
//! the native API's launch in `create.rs`.

use std::{net::IpAddr, time::Duration};

use jiff::Timestamp;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{
        config::StorageStrategy,
        names,
        user::{UserId, belongs_to, owner_of},
    },
    workspace::{
        home,
        info::{self, PodInfo},
        progress::{self, Status},
    },
};
use tokio::time::Instant;

use super::Backend;
use crate::{
    backend::{
        cluster_workspaces::{Seeker, delete::Deletion},
        request::{CreateOutcome, RequestError},
    },
    io::{cache::OWN_WRITE_VISIBLE, calls::ClusterCalls},
};

impl<C: ClusterCalls> Backend<C> {
    /// `get_pods`: the user's pods, from the default cluster's cache.
    pub fn get_pods(&self, user_id: &str) -> Result<Vec<PodInfo>, RequestError> {
        let here = self.default_cluster();
        let user = UserId::parse(user_id)?;
        let now = Timestamp::now();
        Ok(here
            .cache
            .pods_of(&user)
            .iter()
            .map(|pod| info::pod_info(pod, &here.config, now))
            .collect())
    }

    /// `watch_create_pod`: waits until the user's pod is ready, its create failed, or its
    /// deadline passed. Asked about a pod the user does not own, it answers not ready at once and
    /// says nothing more (deic-dk's no-leak default).
    pub async fn watch_create(&self, user_id: &str, pod_name: &str) -> Result<CreateOutcome, RequestError> {
        let here = self.default_cluster();
        let user = UserId::parse(user_id)?;
        names::check_pod_name(pod_name)?;
        let not_yours = CreateOutcome {
            ready: false,
            reason: None,
        };
        let pod = match here.cache.owned_pod(&user, pod_name) {
            Some(pod) => pod,
            None => match here.unseen_pod(pod_name, Seeker::user(&user)).await? {
                Some(pod) => pod,
                None => return Ok(not_yours),
            },
        };
        // The lifecycle fails a pod at its deadline; allow it a moment to say why.
        let deadline = progress::deadline(&pod)
            .map(|d| {
                let left = d.duration_since(Timestamp::now()).as_secs().max(0) as u64;
                Instant::now() + Duration::from_secs(left) + OWN_WRITE_VISIBLE
            })
            .unwrap_or_else(Instant::now);
        // The same reading of the cache as the progress stream's.
        let uid = pod.uid().unwrap_or_default();
        let outcome = here
            .cache
            .wait_for(deadline, |_| {
                let report = self.report(pod_name, &uid);
                let (ready, reason) = match report.status {
                    // Unknown is the native API's word for a cluster that can't be reached; the
                    // default cluster's own report never says it.
                    Status::Creating | Status::Unknown => return None,
                    Status::Ready => (true, None),
                    Status::Failed => (false, Some(report.message)),
                    Status::Deleting | Status::Stopping => {
                        (false, Some("the pod is being deleted".to_owned()))
                    }
                    Status::Deleted | Status::Stopped => {
                        (false, Some("the pod was deleted before it was ready".to_owned()))
                    }
                };
                Some(CreateOutcome { ready, reason })
            })
            .await;
        Ok(outcome.unwrap_or(CreateOutcome {
            ready: false,
            reason: Some("not ready by the create deadline".to_owned()),
        }))
    }

    /// `delete_pod`: asks the default cluster's API server to delete the user's pod and its
    /// Workspace.
    pub async fn delete_pod(&self, user_id: &str, pod_name: &str) -> Result<(), RequestError> {
        let here = self.default_cluster();
        let user = UserId::parse(user_id)?;
        names::check_pod_name(pod_name)?;
        let no_such_pod = || RequestError::NoSuchPod {
            user: user.to_string(),
            pod: pod_name.to_owned(),
        };
        match here.delete(pod_name, Seeker::user(&user)).await? {
            // A create's Workspace whose pod is not made yet (no leader): it goes, and no pod
            // comes.
            Deletion::None => match here
                .cache
                .workspace(pod_name)
                .filter(|record| record.spec.owner == user.as_str())
            {
                Some(record) => {
                    here.cluster
                        .delete_workspace(pod_name, record.uid().as_deref())
                        .await?;
                    here.await_record_deleting(&record).await;
                    Ok(())
                }
                None => Err(no_such_pod()),
            },
            Deletion::Already(_) => Err(RequestError::AlreadyDeleting(pod_name.to_owned())),
            Deletion::Requested(pod) => {
                tracing::info!(pod = pod_name, user = %user, "pod deletion requested");
                here.await_deleting(&pod).await;
                Ok(())
            }
        }
    }

    /// `watch_delete_pod`: waits until the user's pod is gone, up to `timeoutDelete`. About a
    /// pod the user does not own it answers deleted at once (deic-dk's no-leak default).
    pub async fn watch_delete(&self, user_id: &str, pod_name: &str) -> Result<bool, RequestError> {
        let here = self.default_cluster();
        let user = UserId::parse(user_id)?;
        names::check_pod_name(pod_name)?;
        let Some(pod) = here.cache.owned_pod(&user, pod_name) else {
            return Ok(true);
        };
        let uid = pod.uid();
        let deadline = Instant::now() + here.config.timeout_delete;
        let gone = here
            .cache
            .wait_for(deadline, |cache| {
                cache
                    .owned_pod(&user, pod_name)
                    .filter(|p| p.uid() == uid)
                    .is_none()
                    .then_some(())
            })
            .await;
        Ok(gone.is_some())
    }

    /// `delete_all_user`: deletes every pod of the user (and the Workspaces of their native
    /// workspaces, stopped ones included, first: else the controller would make their pods again)
    /// and their storage, and waits (up to `timeoutDelete` + 30 s, as deic-dk) until all of it is
    /// gone.
    pub async fn delete_all_user(&self, user_id: &str) -> Result<bool, RequestError> {
        let here = self.default_cluster();
        let user = UserId::parse(user_id)?;
        let deadline = Instant::now() + here.config.timeout_delete + Duration::from_secs(30);
        // Every home saved before any goes (a per-workspace one goes with its Workspace).
        let homes: Vec<String> = here
            .cache
            .claims()
            .iter()
            .filter(|c| belongs_to(c.as_ref(), &user))
            .filter(|c| home::strategy_of(c) != StorageStrategy::Nfs)
            .map(|c| c.name_any())
            .collect();
        here.save_all(&homes, &user).await?;
        for record in here.cache.workspaces_of(&user) {
            here.cluster
                .delete_workspace(&record.name_any(), record.uid().as_deref())
                .await?;
        }
        for pod in here.cache.pods_of(&user) {
            if pod.metadata.deletion_timestamp.is_none() {
                here.cluster
                    .delete_pod(&pod.name_any(), pod.uid().as_deref())
                    .await?;
            }
        }
        let pods_gone = here
            .cache
            .wait_for(deadline, |cache| cache.pods_of(&user).is_empty().then_some(()))
            .await;
        if pods_gone.is_none() {
            return Ok(false);
        }
        let claims: Vec<String> = here
            .cache
            .claims()
            .iter()
            .filter(|c| belongs_to(c.as_ref(), &user))
            .map(|c| c.name_any())
            .collect();
        for name in &claims {
            here.cluster.delete_storage(name, None).await?;
        }
        let storage_gone = here
            .cache
            .wait_for(deadline, |cache| {
                claims.iter().all(|n| cache.claim(n).is_none()).then_some(())
            })
            .await;
        Ok(storage_gone.is_some())
    }

    /// `get_podip_owner`: the owner of the pod with address `ip`, waiting up to 4.5 s for one to
    /// appear (deic-dk tries 9 times, 0.5 s apart). Only addresses in `podSubnetCidr` are asked.
    pub async fn podip_owner(&self, ip: &str) -> Result<Option<String>, RequestError> {
        let here = self.default_cluster();
        let address: IpAddr = ip
            .parse()
            .map_err(|_| RequestError::BadAddress(format!("ip {ip:?} is not an IP address")))?;
        if !here.config.pod_subnet_cidr.contains(address) {
            return Err(RequestError::BadAddress(format!(
                "ip {ip} is outside podSubnetCidr {}",
                here.config.pod_subnet_cidr
            )));
        }
        let deadline = Instant::now() + Duration::from_millis(4500);
        Ok(here
            .cache
            .wait_for(deadline, |cache| {
                cache
                    .pods()
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .find(|p| {
                        let pod_ip = p.status.as_ref().and_then(|s| s.pod_ip.as_deref());
                        pod_ip.and_then(|i| i.parse::<IpAddr>().ok()) == Some(address)
                    })
                    .and_then(|p| owner_of(p.as_ref()).map(str::to_owned))
            })
            .await)
    }
}
