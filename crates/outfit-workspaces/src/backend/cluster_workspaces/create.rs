//! A create's making on one cluster, once the set ([`Backend`](crate::backend::all_clusters::Backend))
//! admitted it (its slot, the user's turn, their limits): the user's storage (`storage.rs`), then
//! the pod under its Workspace's name, owned by it (the controller's start of a launch, deic-dk's
//! `create_pod` included, or of a start), then its NetworkPolicy, all through this cluster's API
//! server. A create answered an error leaves no pod behind. Also the Workspace a launch writes,
//! whose pod the controller then makes.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{config::StorageStrategy, keys, names},
    resource::{Workspace, WorkspaceSpec, reconcile::owner_reference},
    workspace::{
        manifest::{self, Prepared, Requester},
        objects, placement,
        snapshot::removal,
        start,
    },
};
use tokio::time::Instant;

use super::{ClusterWorkspaces, snapshots};
use crate::{
    backend::request::{Created, RequestError},
    io::{cache::OWN_WRITE_VISIBLE, calls::ClusterCalls, cluster::ClusterError},
};

/// How long a create's mark keeps the storage sweep off the user's storage: enough for the
/// moments between making the storage and creating the pod, whatever the API server's pace.
const STORAGE_WANTED: Duration = Duration::from_secs(30);
/// How often the delete of a failed create's pod is tried while the API server is away.
const UNDO_RETRY: Duration = Duration::from_secs(2);

/// Whether a name is held, and whether by the creating user (`Some(true)`) or anyone else.
pub(crate) type Holder = Option<bool>;

impl<C: ClusterCalls> ClusterWorkspaces<C> {
    /// Makes `requester`'s workspace from `prepared` (the manifest at `url`) for its Workspace
    /// `record`: the user's storage when it mounts it, then the pod under the Workspace's name,
    /// owned by it, unless another pod or Workspace holds the name (`name_holder`, as the set of
    /// clusters sees them), then its NetworkPolicy. Answers once the pod exists; the lifecycle
    /// does the rest.
    pub(crate) async fn create(
        &self,
        requester: Requester<'_>,
        url: &str,
        prepared: Prepared,
        name_holder: impl Fn(&str) -> Holder,
        record: &Workspace,
    ) -> Result<Created, RequestError> {
        let user = requester.user;
        let name = record.name_any();
        let mut prepared = prepared;
        if self.config.image_placement {
            // Where its images already are, so that the start needs no pull (issue 35).
            let holders = self.node_images.holders(&placement::images_of(&prepared.pod));
            placement::prefer_nodes(&mut prepared.pod, holders);
        }
        let deadline = (Timestamp::now() + self.config.timeout_create).to_string();
        let strategy = self.config.storage_strategy;
        let size = objects::home_size(&prepared.pod, &self.config).map_err(RequestError::Annotation)?;
        let storage_claim = if prepared.needs_user_storage
            && matches!(strategy, StorageStrategy::Nfs | StorageStrategy::PerUser)
        {
            // Until the pod exists, only this mark keeps the storage sweep away; once it exists,
            // the pod does, so the mark need not last to the deadline (which would hold unused
            // storage that long after a quick delete).
            let wanted_until = (Timestamp::now() + STORAGE_WANTED).to_string();
            Some(self.ensure_storage(requester, &wanted_until, &size).await?)
        } else {
            None
        };
        let home = prepared.needs_user_storage && strategy == StorageStrategy::PerWorkspace;
        if requester.restore.is_some() && storage_claim.is_none() && !home {
            return Err(RequestError::UnknownSnapshot(
                "this workspace has no home to make from a snapshot (its manifest mounts none, or storageStrategy is ephemeral)"
                    .to_owned(),
            ));
        }
        // Names are unique across clusters, so that a name says which workspace it is: a pod of
        // the name still going (or anyone else's) holds it, and the start waits.
        if let Some(own) = name_holder(&name) {
            return Err(RequestError::NamesTaken {
                first: name.clone(),
                last: name,
                own: usize::from(own),
                others: usize::from(!own),
            });
        }
        let owner = owner_reference(record);
        // A Workspace's home is made before its pod, owned by the Workspace.
        if home && let Some(owner) = owner.as_ref() {
            self.ensure_home((&name, &size, requester.restore), user, owner)
                .await?;
        }
        let own_home = home.then(|| names::home_claim(&name));
        let placement = manifest::Placement {
            name: &name,
            storage_claim: storage_claim.as_deref().or(own_home.as_deref()),
            deadline: &deadline,
            manifest_url: url,
        };
        let warnings = prepared.warnings.clone();
        let mut pod = manifest::assemble(prepared, requester, &placement);
        pod.metadata.owner_references = owner.map(|owner| vec![owner]);
        if let Some(claim) = placement.storage_claim {
            self.mark_home_use(claim, removal::making_mark).await?;
        }
        let created = match self.cluster.create_pod(&pod).await {
            Ok(created) => created,
            // Taken since the cache last looked (a pod of the name still being deleted): the
            // start waits, as for a name the caches show held.
            Err(error) if error.is_conflict() => {
                return Err(RequestError::NamesTaken {
                    first: name.clone(),
                    last: name,
                    own: 0,
                    others: 1,
                });
            }
            Err(error) => return Err(error.into()),
        };
        tracing::info!(pod = name, user = %user, "pod created");
        if let Some(claim) = placement.storage_claim
            && let Err(error) = self.mark_home_use(claim, removal::used_mark).await
        {
            // The mark says `making` a while longer: no snapshot settles it meanwhile.
            tracing::warn!(%error, claim, "could not mark the home used");
        }
        self.cache.own_writes().made(&created);
        // Isolated right after the pod is stored, while it waits for a node and its images; the
        // lifecycle makes sure again before it is ready unless this process made it (own_writes).
        if let Err(error) = self.isolate(&created).await {
            self.undo_create(&created);
            return Err(error.into());
        }
        self.await_visible(&created).await;
        Ok(Created {
            pod_name: name,
            warnings,
            pod: created,
        })
    }

    /// Writes `mark` (now) as `claim`'s use mark, when homes are snapshotted (issue 46): before
    /// a pod that mounts it is made ([`removal::making_mark`]; refused, no pod is made) and once
    /// it is ([`removal::used_mark`]). A snapshot taken before, or while a pod may use it, then
    /// carries another mark or none, and no removal keeps it in place of a new one.
    async fn mark_home_use(
        &self,
        claim: &str,
        mark: fn(Timestamp, u64) -> String,
    ) -> Result<(), RequestError> {
        if self.config.snapshot_class_name.is_none() {
            return Ok(());
        }
        let mark = mark(Timestamp::now(), snapshots::salt());
        self.cluster
            .mark_home_use(claim, &mark, None)
            .await
            .map_err(|error| {
                RequestError::Storage(format!("could not mark the home {claim} in use: {error}"))
            })
    }

    /// Makes the Workspace `name` of a launch by `requester`: their groups recorded for its pods,
    /// its home made from the snapshot they name, if any; the controller makes its pod.
    pub(crate) async fn record_workspace(
        &self,
        name: &str,
        spec: &WorkspaceSpec,
        requester: Requester<'_>,
    ) -> Result<Workspace, ClusterError> {
        let mut workspace = Workspace::new(name, &self.config.namespace, spec.clone());
        let mut annotations =
            std::collections::BTreeMap::from([(keys::ANNOTATION_USER_ID.to_owned(), spec.owner.clone())]);
        if let Some(restore) = requester.restore {
            annotations.insert(keys::ANNOTATION_RESTORE_FROM.to_owned(), restore.to_owned());
        }
        if let Some(groups) = requester.groups.filter(|groups| !groups.is_empty()) {
            annotations.insert(keys::ANNOTATION_USER_GROUPS.to_owned(), groups.to_owned());
        }
        workspace.metadata.annotations = Some(annotations);
        workspace.metadata.labels =
            Some([(keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned())].into());
        self.cluster.create_workspace(&workspace).await
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
