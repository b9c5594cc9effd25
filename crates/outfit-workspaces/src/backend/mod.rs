//! The operations behind deic-dk's API (§1.2 of the reference), one method each, free of HTTP:
//! reads come from the watch cache, writes go to the API server, and long polls wait on the
//! cache's changes.
//!
//! This folder is [`Backend`]'s: the type and its errors in `types.rs`, its operations here, the
//! native API's in `native.rs`, the user's storage in `storage.rs`. It runs over any
//! [`ClusterCalls`]: the API server's [`Cluster`](crate::io::cluster::Cluster), or the unit tests'
//! fake.

use std::{net::IpAddr, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::time::Instant;

mod clusters;
mod native;
mod storage;
mod types;
mod user_lease;

pub use self::{
    native::Launch,
    types::{Backend, CreateOutcome, CreateRequest, Created, Member, RequestError},
};

use self::types::{CreateSlots, Deletion, Holders, Released, Turns};
use crate::{
    io::{
        cache::{Cache, OWN_WRITE_VISIBLE},
        calls::ClusterCalls,
        catalogue::Catalogue,
        cluster::ClusterError,
        fetch::Fetcher,
    },
    model::{config::Config, keys, names, user::UserId},
    policy::limits,
    workspace::{
        info::{self, PodInfo},
        manifest,
        manifest::{Requester, Settings},
        progress::Status,
        start,
    },
};

/// How long a create's mark keeps the storage sweep off the user's storage: enough for the
/// moments between making the storage and creating the pod, whatever the API server's pace.
const STORAGE_WANTED: Duration = Duration::from_secs(30);
/// How often the delete of a failed create's pod is tried while the API server is away.
const UNDO_RETRY: Duration = Duration::from_secs(2);

impl<C: ClusterCalls> Backend<C> {
    /// A backend over `cluster`, answering from `cache`.
    pub fn new(config: Arc<Config>, cluster: C, cache: Cache) -> Self {
        let fetcher = Fetcher::new(
            config.whitelist_manifest_regex.clone(),
            config.manifest_fetch_timeout,
            config.manifest_max_bytes,
        );
        let catalogue = Catalogue::new(&config.catalogue, fetcher.clone());
        let default = Member {
            name: config.default_cluster.clone(),
            config: config.clone(),
            cluster: cluster.clone(),
            cache: cache.clone(),
        };
        Self {
            creates: CreateSlots::new(config.max_creates_in_flight),
            config,
            cluster,
            cache,
            members: Arc::from([default]),
            fetcher,
            catalogue,
            turns: Turns::default(),
            released: Released::default(),
        }
    }

    /// Waits until the cache has read the cluster once.
    pub async fn synced(&self) {
        self.cache.synced().await;
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `get_pods`: the user's pods, from the cache.
    pub fn get_pods(&self, user_id: &str) -> Result<Vec<PodInfo>, RequestError> {
        let user = UserId::parse(user_id)?;
        let now = Timestamp::now();
        Ok(self
            .cache
            .pods_of(&user)
            .iter()
            .map(|pod| info::pod_info(pod, &self.config, now))
            .collect())
    }

    /// `create_pod`: fetches the manifest, makes the user's storage and the pod, and answers once
    /// the pod is created; the lifecycle does the rest.
    pub async fn create_pod(
        &self,
        request: &CreateRequest,
        silo_ip: IpAddr,
    ) -> Result<Created, RequestError> {
        let user = UserId::parse(&request.user_id)?;
        let empty = Settings::new();
        let settings = request.settings.as_ref().unwrap_or(&empty);
        self.create(&user, &request.yaml_url, settings, silo_ip).await
    }

    /// A create for either API: fetches the manifest at `url`, checks the user's limits, makes the
    /// user's storage, the pod and its NetworkPolicy, and answers once the pod is created.
    async fn create(
        &self,
        user: &UserId,
        url: &str,
        settings: &Settings,
        silo_ip: IpAddr,
    ) -> Result<Created, RequestError> {
        // Held to the end of the create, refused past `maxCreatesInFlight`.
        let _slot = self.creates.take()?;
        let manifest_text = self.fetcher.fetch(url).await?;
        let silo_ip = silo_ip.to_string();
        let requester = Requester {
            user,
            silo_ip: &silo_ip,
        };
        let mut prepared = manifest::prepare(&manifest_text, requester, settings, &self.config)?;
        crate::policy::culling::lifetimes(&prepared.pod, &self.config).map_err(RequestError::Annotation)?;
        prepared.pod.annotations_mut().insert(
            crate::model::keys::ANNOTATION_MANIFEST_NAME.to_owned(),
            prepared.manifest_name.clone(),
        );
        // One create of a user's at a time, so two at once can't both fit under a limit: in this
        // process (so its creates don't contend for the Lease), then across replicas.
        let _turn = self.turns.take(user).await;
        // The default cluster arbitrates every create of a user, whichever cluster it goes to.
        let arbiter = &self.members[0];
        let turn = user_lease::take(&arbiter.cluster, &self.released, user).await?;
        let created = self
            .create_in_turn(turn.as_ref(), user, url, prepared, silo_ip)
            .await;
        if let Some(turn) = turn {
            turn.release(created.as_ref().ok().map(|c| &c.pod)).await;
        }
        created
    }

    /// The rest of a create, in the user's turn: checks the limits, makes the storage and the pod.
    async fn create_in_turn(
        &self,
        turn: Option<&user_lease::UserTurn<C>>,
        user: &UserId,
        url: &str,
        prepared: manifest::Prepared,
        silo_ip: String,
    ) -> Result<Created, RequestError> {
        let requester = Requester {
            user,
            silo_ip: &silo_ip,
        };
        // The pod the last turn made counts before the default cluster's cache shows it, and
        // limits count the user's workspaces on every cluster.
        let mut existing = match turn {
            Some(turn) => turn.pods_to_count(&self.members[0].cache, user).await?,
            None => Vec::new(),
        };
        for pod in self.pods_everywhere(user) {
            if !existing.iter().any(|seen| seen.uid() == pod.uid()) {
                existing.push(pod);
            }
        }
        let existing: Vec<&Pod> = existing.iter().map(AsRef::as_ref).collect();
        limits::check(&self.config.limits, &existing, &prepared.pod)?;
        let deadline = Timestamp::now() + self.config.timeout_create;
        let deadline_text = deadline.to_string();
        let storage_claim = if prepared.needs_user_storage {
            // Until the pod exists, only this mark keeps the storage sweep away; once it exists,
            // the pod does, so the mark need not last to the deadline (which would hold unused
            // storage that long after a quick delete).
            let wanted_until = (Timestamp::now() + STORAGE_WANTED).to_string();
            self.ensure_storage(user, &silo_ip, &wanted_until).await?
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
        if let Some(created) = self.create_named(&plain, user, &mut holders, &placed).await? {
            return Ok(Created {
                warnings: prepared.warnings,
                ..created
            });
        }
        // Another id with the same user string holds deic-dk's names: the user's own names.
        if holders.others > 0 {
            let own = names::own_pod_name_candidates(&prepared.manifest_name, user);
            if let Some(created) = self.create_named(&own, user, &mut holders, &placed).await? {
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

    /// Creates the pod `pod_of` makes, under the first of `names` that is free; `None` when
    /// every one is taken, counted in `holders` by who holds it.
    async fn create_named(
        &self,
        names: &[String],
        user: &UserId,
        holders: &mut Holders,
        pod_of: impl Fn(&str) -> Pod,
    ) -> Result<Option<Created>, RequestError> {
        for name in names {
            // Names are unique across clusters, so that a name says which workspace it is. Chosen
            // from what the caches show (and this process made), not by trying: each name tried
            // and taken is a create answered 409.
            if let Some(holder) = self.name_holder(name) {
                holders.count(crate::model::user::belongs_to(holder.as_ref(), user));
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

    /// `watch_create_pod`: waits until the user's pod is ready, its create failed, or its
    /// deadline passed. Asked about a pod the user does not own, it answers not ready at once and
    /// says nothing more (deic-dk's no-leak default).
    pub async fn watch_create(&self, user_id: &str, pod_name: &str) -> Result<CreateOutcome, RequestError> {
        let user = UserId::parse(user_id)?;
        names::check_pod_name(pod_name)?;
        let not_yours = CreateOutcome {
            ready: false,
            reason: None,
        };
        let pod = match self.cache.owned_pod(&user, pod_name) {
            Some(pod) => pod,
            None => match self
                .unseen_pod(pod_name, |pod| crate::model::user::belongs_to(pod, &user))
                .await?
            {
                Some(pod) => pod,
                None => return Ok(not_yours),
            },
        };
        // The lifecycle fails a pod at its deadline; allow it a moment to say why.
        let deadline = crate::workspace::progress::deadline(&pod)
            .map(|d| {
                let left = d.duration_since(Timestamp::now()).as_secs().max(0) as u64;
                Instant::now() + Duration::from_secs(left) + OWN_WRITE_VISIBLE
            })
            .unwrap_or_else(Instant::now);
        // The same reading of the cache as the progress stream's.
        let uid = pod.uid().unwrap_or_default();
        let outcome = self
            .cache
            .wait_for(deadline, |_| {
                let report = self.report(pod_name, &uid);
                let (ready, reason) = match report.status {
                    // Unknown is the native API's word for a cluster that can't be reached; the
                    // default cluster's own report never says it.
                    Status::Creating | Status::Unknown => return None,
                    Status::Ready => (true, None),
                    Status::Failed => (false, Some(report.message)),
                    Status::Deleting => (false, Some("the pod is being deleted".to_owned())),
                    Status::Deleted => (false, Some("the pod was deleted before it was ready".to_owned())),
                };
                Some(CreateOutcome { ready, reason })
            })
            .await;
        Ok(outcome.unwrap_or(CreateOutcome {
            ready: false,
            reason: Some("not ready by the create deadline".to_owned()),
        }))
    }

    /// `delete_pod`: asks the API server to delete the user's pod.
    pub async fn delete_pod(&self, user_id: &str, pod_name: &str) -> Result<(), RequestError> {
        let user = UserId::parse(user_id)?;
        names::check_pod_name(pod_name)?;
        let no_such_pod = || RequestError::NoSuchPod {
            user: user.to_string(),
            pod: pod_name.to_owned(),
        };
        match self
            .delete_current(pod_name, |pod| crate::model::user::belongs_to(pod, &user))
            .await?
        {
            Deletion::None => Err(no_such_pod()),
            Deletion::Already(_) => Err(RequestError::AlreadyDeleting(pod_name.to_owned())),
            Deletion::Requested(pod) => {
                tracing::info!(pod = pod_name, user = %user, "pod deletion requested");
                self.await_deleting(&pod).await;
                Ok(())
            }
        }
    }

    /// Deletes the pod `name` if `allowed` accepts it. The pod is the cache's, or the API
    /// server's when the cache does not show it or shows an older pod of that name (the
    /// cache can be seconds behind, after an API server outage): a delete must never answer
    /// "no such workspace" for one that exists, nor delete a newer pod than the one it judged.
    async fn delete_current(
        &self,
        name: &str,
        allowed: impl Fn(&Pod) -> bool,
    ) -> Result<Deletion, RequestError> {
        let mut cached = self.cache.pod(name).filter(|pod| allowed(pod));
        for _ in 0..2 {
            let pod = match cached.take() {
                Some(pod) => pod,
                None => match self.cluster.get_pod(name).await? {
                    Some(pod) if allowed(&pod) => Arc::new(pod),
                    _ => return Ok(Deletion::None),
                },
            };
            if pod.metadata.deletion_timestamp.is_some() {
                return Ok(Deletion::Already(pod));
            }
            match self.cluster.delete_pod(name, pod.uid().as_deref()).await {
                Ok(true) => return Ok(Deletion::Requested(pod)),
                Ok(false) => return Ok(Deletion::None),
                // The uid precondition failed: another pod has the name now; judge that one.
                Err(error) if error.is_conflict() => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Deletion::None)
    }

    /// Waits (briefly) until the cache shows `pod` being deleted or gone, so that a request right
    /// after a delete sees it.
    async fn await_deleting(&self, pod: &Pod) {
        let deadline = Instant::now() + OWN_WRITE_VISIBLE;
        let (name, uid) = (pod.name_any(), pod.uid());
        self.cache
            .wait_for(deadline, |cache| {
                match cache.pod(&name).filter(|p| p.uid() == uid) {
                    Some(current) => current.metadata.deletion_timestamp.is_some().then_some(()),
                    None => Some(()),
                }
            })
            .await;
    }

    /// The outfit pod `name` as the API server has it, if `visible` to the asker, for a name the
    /// cache does not show yet (made a moment ago through another replica, whose creates this
    /// one's watch shows moments later); once found, the cache is given a moment to show it,
    /// since the reports read the cache. One GET, made only for a name the cache does not hold.
    async fn unseen_pod(
        &self,
        name: &str,
        visible: impl Fn(&Pod) -> bool,
    ) -> Result<Option<Arc<Pod>>, RequestError> {
        let Some(pod) = self.cluster.get_pod(name).await? else {
            return Ok(None);
        };
        let outfits = pod.labels().get(keys::LABEL_MANAGED_BY).map(String::as_str) == Some(keys::MANAGED_BY);
        if !outfits || !visible(&pod) {
            return Ok(None);
        }
        let uid = pod.uid();
        self.cache
            .wait_for(Instant::now() + OWN_WRITE_VISIBLE, |cache| {
                cache
                    .pod(name)
                    .is_some_and(|shown| shown.uid() == uid)
                    .then_some(())
            })
            .await;
        Ok(Some(Arc::new(pod)))
    }

    /// `watch_delete_pod`: waits until the user's pod is gone, up to `timeoutDelete`. About a
    /// pod the user does not own it answers deleted at once (deic-dk's no-leak default).
    pub async fn watch_delete(&self, user_id: &str, pod_name: &str) -> Result<bool, RequestError> {
        let user = UserId::parse(user_id)?;
        names::check_pod_name(pod_name)?;
        let Some(pod) = self.cache.owned_pod(&user, pod_name) else {
            return Ok(true);
        };
        let uid = pod.uid();
        let deadline = Instant::now() + self.config.timeout_delete;
        let gone = self
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

    /// `delete_all_user`: deletes every pod of the user and their storage, and waits (up to
    /// `timeoutDelete` + 30 s, as deic-dk) until all of it is gone.
    pub async fn delete_all_user(&self, user_id: &str) -> Result<bool, RequestError> {
        let user = UserId::parse(user_id)?;
        let deadline = Instant::now() + self.config.timeout_delete + Duration::from_secs(30);
        for pod in self.cache.pods_of(&user) {
            if pod.metadata.deletion_timestamp.is_none() {
                self.cluster
                    .delete_pod(&pod.name_any(), pod.uid().as_deref())
                    .await?;
            }
        }
        let pods_gone = self
            .cache
            .wait_for(deadline, |cache| cache.pods_of(&user).is_empty().then_some(()))
            .await;
        if pods_gone.is_none() {
            return Ok(false);
        }
        let claims: Vec<String> = self
            .cache
            .claims()
            .iter()
            .filter(|c| crate::model::user::belongs_to(c.as_ref(), &user))
            .map(|c| c.name_any())
            .collect();
        for name in &claims {
            self.cluster.delete_storage(name, None).await?;
        }
        let storage_gone = self
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
        let address: IpAddr = ip
            .parse()
            .map_err(|_| RequestError::BadAddress(format!("ip {ip:?} is not an IP address")))?;
        if !self.config.pod_subnet_cidr.contains(address) {
            return Err(RequestError::BadAddress(format!(
                "ip {ip} is outside podSubnetCidr {}",
                self.config.pod_subnet_cidr
            )));
        }
        let deadline = Instant::now() + Duration::from_millis(4500);
        Ok(self
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
                    .and_then(|p| crate::model::user::owner_of(p.as_ref()).map(str::to_owned))
            })
            .await)
    }
}

#[cfg(test)]
mod tests;
