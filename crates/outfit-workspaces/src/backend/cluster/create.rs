//! A create's making on one cluster, once the set ([`Backend`](crate::backend::clusters::Backend))
//! admitted it (its slot, the user's turn, their limits): the user's storage (`storage.rs`), then
//! the pod under the first free name, then its NetworkPolicy, all through this cluster's API
//! server. A create answered an error leaves no pod behind.

use std::{sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::time::Instant;

use super::ClusterBackend;
use crate::{
    backend::request::{Created, RequestError},
    io::{cache::OWN_WRITE_VISIBLE, calls::ClusterCalls, cluster::ClusterError},
    model::{
        names,
        user::{UserId, belongs_to},
    },
    workspace::{
        manifest::{self, Prepared, Requester},
        start,
    },
};

/// How long a create's mark keeps the storage sweep off the user's storage: enough for the
/// moments between making the storage and creating the pod, whatever the API server's pace.
const STORAGE_WANTED: Duration = Duration::from_secs(30);
/// How often the delete of a failed create's pod is tried while the API server is away.
const UNDO_RETRY: Duration = Duration::from_secs(2);

/// Who holds the names a create found taken.
#[derive(Debug, Default)]
struct Holders {
    /// Held by the user's own pods.
    own: usize,
    /// Held by anyone else's, or taken before the cache saw it.
    others: usize,
}

impl Holders {
    fn count(&mut self, own: bool) {
        if own {
            self.own += 1;
        } else {
            self.others += 1;
        }
    }
}

impl<C: ClusterCalls> ClusterBackend<C> {
    /// Makes `requester`'s workspace from `prepared` (the manifest at `url`): the user's storage
    /// when it mounts it, then the pod under the first name no cluster holds (`name_holder`: the
    /// pod that holds a name on any cluster, as the set sees them), then its NetworkPolicy.
    /// Answers once the pod exists; the lifecycle does the rest.
    pub(crate) async fn create(
        &self,
        requester: Requester<'_>,
        url: &str,
        prepared: Prepared,
        name_holder: impl Fn(&str) -> Option<Arc<Pod>>,
    ) -> Result<Created, RequestError> {
        let user = requester.user;
        let deadline = Timestamp::now() + self.config.timeout_create;
        let deadline_text = deadline.to_string();
        let storage_claim = if prepared.needs_user_storage {
            // Until the pod exists, only this mark keeps the storage sweep away; once it exists,
            // the pod does, so the mark need not last to the deadline (which would hold unused
            // storage that long after a quick delete).
            let wanted_until = (Timestamp::now() + STORAGE_WANTED).to_string();
            self.ensure_storage(requester, &wanted_until).await?
        } else {
            String::new()
        };
        let placed = |name: &str| {
            let placement = manifest::Placement {
                name,
                storage_claim: &storage_claim,
                deadline: &deadline_text,
                manifest_url: url,
            };
            manifest::assemble(prepared.clone(), requester, &placement)
        };
        let plain = names::pod_name_candidates(&prepared.manifest_name, user);
        let mut holders = Holders::default();
        if let Some(created) = self
            .create_named(&plain, user, &name_holder, &mut holders, &placed)
            .await?
        {
            return Ok(Created {
                warnings: prepared.warnings,
                ..created
            });
        }
        // Another id with the same user string holds deic-dk's names: the user's own names.
        if holders.others > 0 {
            let own = names::own_pod_name_candidates(&prepared.manifest_name, user);
            if let Some(created) = self
                .create_named(&own, user, &name_holder, &mut holders, &placed)
                .await?
            {
                return Ok(Created {
                    warnings: prepared.warnings,
                    ..created
                });
            }
        }
        Err(RequestError::NamesTaken {
            first: plain[0].clone(),
            last: plain[plain.len() - 1].clone(),
            own: holders.own,
            others: holders.others,
        })
    }

    /// Creates the pod `pod_of` makes, under the first of `names` that no pod holds
    /// (`name_holder`); `None` when every one is taken, counted in `holders` by who holds it.
    async fn create_named(
        &self,
        names: &[String],
        user: &UserId,
        name_holder: impl Fn(&str) -> Option<Arc<Pod>>,
        holders: &mut Holders,
        pod_of: impl Fn(&str) -> Pod,
    ) -> Result<Option<Created>, RequestError> {
        for name in names {
            // Names are unique across clusters, so that a name says which workspace it is. Chosen
            // from what the caches show (and this process made), not by trying: each name tried
            // and taken is a create answered 409.
            if let Some(holder) = name_holder(name) {
                holders.count(belongs_to(holder.as_ref(), user));
                continue;
            }
            match self.cluster.create_pod(&pod_of(name)).await {
                Ok(created) => {
                    tracing::info!(pod = name, user = %user, "pod created");
                    self.cache.own_writes().made(&created);
                    // Isolated right after the pod is stored, while it waits for a node and its
                    // images; the lifecycle makes sure again before it is ready unless this
                    // process made it (own_writes).
                    if let Err(error) = self.isolate(&created).await {
                        self.undo_create(&created);
                        return Err(error.into());
                    }
                    self.await_visible(&created).await;
                    return Ok(Some(Created {
                        pod_name: name.clone(),
                        warnings: Vec::new(),
                        pod: created,
                    }));
                }
                // Taken since the cache last looked (another replica, or a pod being deleted).
                Err(error) if error.is_conflict() => holders.count(false),
                Err(error) => return Err(error.into()),
            }
        }
        Ok(None)
    }

    /// Deletes a pod whose create is answered an error, so that an error leaves nothing behind:
    /// retried in the background while the API server is unreachable (the error that got us
    /// here is usually that), for as long as a create may take.
    fn undo_create(&self, pod: &Pod) {
        let (cluster, name, uid) = (self.cluster.clone(), pod.name_any(), pod.uid());
        let until = Instant::now() + self.config.timeout_create;
        tokio::spawn(async move {
            loop {
                match cluster.delete_pod(&name, uid.as_deref()).await {
                    // Deleted, gone, or another pod of the name (409 on the uid precondition).
                    Ok(_) => return,
                    Err(error) if !error.is_transient() => return,
                    Err(error) if Instant::now() >= until => {
                        tracing::warn!(pod = name, %error, "could not remove the pod of a failed create");
                        return;
                    }
                    Err(_) => tokio::time::sleep(UNDO_RETRY).await,
                }
            }
        });
    }

    /// Makes the pod's NetworkPolicy, unless `networkPolicy` is off.
    async fn isolate(&self, pod: &Pod) -> Result<(), ClusterError> {
        match start::isolation(pod, &self.config) {
            Some((policy, owner)) => {
                // The pod may turn ready (and its start look for this) before the answer.
                let own_writes = self.cache.own_writes();
                own_writes.isolating(&owner.uid);
                let made = self.cluster.ensure_network_policy(&policy, &owner).await;
                own_writes.isolated(&owner.uid, made.is_ok());
                made
            }
            None => Ok(()),
        }
    }

    /// Waits (briefly) until the cache shows `pod`, so that a `get_pods` or watch right after the
    /// create sees it.
    async fn await_visible(&self, pod: &Pod) {
        let deadline = Instant::now() + OWN_WRITE_VISIBLE;
        let (name, uid) = (pod.name_any(), pod.uid());
        self.cache
            .wait_for(deadline, |cache| {
                cache.pod(&name).filter(|p| p.uid() == uid).map(|_| ())
            })
            .await;
    }
}
