//! A create, from either API. The native API's launch (of a catalogue entry, on the cluster
//! `choose` picks) and deic-dk's `create_pod` (of a whitelisted manifest URL, on the default
//! cluster) read the manifest for its name and warnings, write a Workspace under the first free
//! name and wait for the leader's controller to make its pod (`records.rs`, `controller.rs`). The
//! controller's start of a Workspace builds the one [`Requester`] and calls [`Backend::create`],
//! which admits the create on behalf of every cluster (a slot among the creates under way, the
//! manifest fetched and read, the user's turn, their limits counted on every cluster) and leaves
//! the making to the chosen cluster's [`ClusterWorkspaces::create`].
//!
//! [`ClusterWorkspaces::create`]: crate::backend::cluster_workspaces::ClusterWorkspaces

use std::net::IpAddr;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, keys, names, user::UserId},
    policy::{culling, limits},
    resource::{self, WorkspaceSpec},
    workspace::{
        info::WorkspaceInfo,
        manifest::{self, Requester, Settings},
        placement,
    },
};

use outfit_workspaces_core::workspace::requests::{CreateRequest, Launch};

use super::Backend;
use crate::{
    backend::{
        cluster_workspaces::ClusterWorkspaces,
        request::{Created, RequestError},
    },
    io::{auth::Identity, calls::ClusterCalls, catalogue},
};

impl<C: ClusterCalls> Backend<C> {
    /// `create_pod`: writes the Workspace of the pod on the default cluster (the manifest's URL
    /// and the silo in its spec, in place of a catalogue entry) and answers the pod's name and
    /// the warnings once the leader's controller made it, as a launch does; refused, the
    /// Workspace goes and the refusal is the answer. deic-dk's answers show pods only.
    pub async fn create_pod(
        &self,
        request: &CreateRequest,
        silo_ip: IpAddr,
    ) -> Result<(String, Vec<String>), RequestError> {
        let user = UserId::parse(&request.user_id)?;
        let empty = Settings::new();
        let settings = request.settings.as_ref().unwrap_or(&empty);
        let silo_ip = silo_ip.to_string();
        let requester = Requester {
            user: &user,
            groups: None,
            silo_ip: &silo_ip,
            restore: None,
        };
        let member = self.default_cluster();
        let (manifest_name, warnings) = self
            .read_manifest(member, &request.yaml_url, requester, settings)
            .await?;
        let spec = WorkspaceSpec {
            owner: user.to_string(),
            entry: String::new(),
            values: settings.clone(),
            cluster: Some(member.name.clone()),
            started: true,
            manifest_url: Some(request.yaml_url.clone()),
            silo_ip: Some(silo_ip.clone()),
        };
        let record = self
            .record_launch(member, &spec, &manifest_name, requester)
            .await?;
        self.await_made_or_undo(member, &record).await?;
        tracing::info!(pod = record.name_any(), user = %user, "pod created");
        Ok((record.name_any(), warnings))
    }

    /// Launches the catalogue entry of `launch` for `identity`, on the cluster the entry names,
    /// else the one `launch` names, else the default one.
    pub async fn launch(
        &self,
        identity: &Identity,
        launch: &Launch,
        silo_ip: IpAddr,
    ) -> Result<(WorkspaceInfo, Vec<String>), RequestError> {
        let entry = self
            .catalogue
            .entry(&launch.manifest)
            .ok_or_else(|| RequestError::UnknownManifest(launch.manifest.clone()))?;
        if !catalogue::may_launch(entry, identity) {
            return Err(RequestError::Forbidden(format!(
                "manifest {:?} is for members of {} only",
                entry.name,
                entry.groups.join(", ")
            )));
        }
        let url = entry.url.clone();
        let member = self.launch_cluster(entry, launch).await?;
        let user = &identity.user;
        // A snapshot that can't be used refuses the launch before anything is written.
        if let Some(named) = launch.snapshot.as_deref() {
            member.named_snapshot(user, named).await?;
        }
        // Read here for the name it gives the workspace and for what the answer says at once (a
        // manifest that can't be fetched or read, a setting it does not take); the controller
        // reads it again to make the pod.
        let silo_ip = silo_ip.to_string();
        let groups = model::user::recorded_groups(&identity.groups);
        let requester = Requester {
            user,
            groups: Some(&groups),
            silo_ip: &silo_ip,
            restore: launch.snapshot.as_deref(),
        };
        let (manifest_name, warnings) = self
            .read_manifest(member, &url, requester, &launch.settings)
            .await?;
        // The Workspace that records it, stopped and started as its owner says; the leader's
        // controller makes its pod (the owner's limits are counted there, once for all replicas).
        let spec = WorkspaceSpec {
            owner: user.to_string(),
            entry: entry.name.clone(),
            values: launch.settings.clone(),
            cluster: Some(member.name.clone()),
            started: true,
            manifest_url: None,
            silo_ip: None,
        };
        let record = self
            .record_launch(member, &spec, &manifest_name, requester)
            .await?;
        let view = self.launched(member, &record, identity).await?;
        Ok((view, warnings))
    }

    /// Reads the manifest at `url` for `requester` with `settings` as `member`'s create will, for
    /// the name it gives the workspace and what the answer says at once (a manifest that can't
    /// be fetched or read, a setting it does not take): its `metadata.name` and the warnings.
    async fn read_manifest(
        &self,
        member: &ClusterWorkspaces<C>,
        url: &str,
        requester: Requester<'_>,
        settings: &Settings,
    ) -> Result<(String, Vec<String>), RequestError> {
        // A slot while the manifest is held (past `maxCreatesInFlight`, 429 before anything is
        // fetched); the wait for the pod after holds no more than the answer's warnings.
        let _slot = self.creates.take()?;
        let text = self.fetcher.fetch(url).await?;
        let prepared = manifest::prepare(&text, requester, settings, &member.config)?;
        culling::lifetimes(&prepared.pod, &member.config).map_err(RequestError::Annotation)?;
        culling::action(&prepared.pod, &member.config).map_err(RequestError::Annotation)?;
        Ok((prepared.manifest_name, prepared.warnings))
    }

    /// The launch's `record` once the controller made its pod (as the API shows it), or, past
    /// `timeoutCreate` without it, as it stands; refused, the record goes and the error is the
    /// answer, so that the launch leaves nothing.
    async fn launched(
        &self,
        member: &ClusterWorkspaces<C>,
        record: &resource::Workspace,
        identity: &Identity,
    ) -> Result<WorkspaceInfo, RequestError> {
        let name = record.name_any();
        let made = self.await_made_or_undo(member, record).await?;
        tracing::info!(workspace = name, user = %identity.user, by = identity.username, "workspace launched");
        let now = Timestamp::now();
        Ok(match made.and_then(|_| member.cache.pod_or_made(&name)) {
            Some(pod) => member.describe(&pod, self.state_of(member), now),
            None => self.record_view(member, record, now),
        })
    }

    /// Waits for the controller to make `record`'s pod ([`Backend::await_made`]); refused, the
    /// record goes and the refusal is the error, so that the request leaves nothing.
    async fn await_made_or_undo(
        &self,
        member: &ClusterWorkspaces<C>,
        record: &resource::Workspace,
    ) -> Result<Option<String>, RequestError> {
        let name = record.name_any();
        match self.await_made(member, record).await {
            Ok(made) => Ok(made),
            Err(error) => {
                if let Err(undo) = member
                    .cluster
                    .delete_workspace(&name, record.uid().as_deref())
                    .await
                {
                    tracing::warn!(workspace = name, %undo, "could not remove the Workspace of a refused create");
                }
                tracing::info!(workspace = name, owner = record.spec.owner, %error, "create refused");
                Err(error)
            }
        }
    }

    /// Makes the Workspace of a launch under the first name no cluster holds: the names deic-dk
    /// gives a pod of `manifest_name` for `user`, then, when others' hold them, the user's own.
    async fn record_launch(
        &self,
        member: &ClusterWorkspaces<C>,
        spec: &WorkspaceSpec,
        manifest_name: &str,
        requester: Requester<'_>,
    ) -> Result<resource::Workspace, RequestError> {
        let user = requester.user;
        let plain = names::pod_name_candidates(manifest_name, user);
        let (mut own, mut others) = (0, 0);
        for candidates in [plain.clone(), names::own_pod_name_candidates(manifest_name, user)] {
            for name in &candidates {
                // Names are unique across clusters, so that a name says which workspace it is.
                // Chosen from what the caches show, not by trying: each name tried and taken is
                // a create answered 409.
                if let Some(users) = self.name_holder(name, user, false) {
                    if users {
                        own += 1
                    } else {
                        others += 1
                    }
                    continue;
                }
                match member.record_workspace(name, spec, requester).await {
                    Ok(made) => return Ok(made),
                    // Taken since the cache last looked (another replica).
                    Err(error) if error.is_conflict() => others += 1,
                    Err(error) => return Err(error.into()),
                }
            }
            if others == 0 {
                break;
            }
        }
        Err(RequestError::NamesTaken {
            first: plain[0].clone(),
            last: plain[plain.len() - 1].clone(),
            own,
            others,
        })
    }

    /// The cluster a launch of `entry` goes to: the one the entry names, else the one `launch`
    /// names, else where its images are (several clusters, `imagePlacement`), else the default.
    async fn launch_cluster(
        &self,
        entry: &model::config::CatalogueEntry,
        launch: &Launch,
    ) -> Result<&ClusterWorkspaces<C>, RequestError> {
        match (entry.cluster.as_deref(), launch.cluster.as_deref()) {
            (None, None) if self.members.len() > 1 && self.config().image_placement => {
                self.where_held(&entry.url, &entry.name).await
            }
            (fixed, chosen) => self.choose(fixed, chosen, &entry.name),
        }
    }

    /// The cluster a launch of the manifest at `url` (entry `entry`) goes to when neither the
    /// entry nor the user chose one (issue 35): the default cluster if one of its nodes holds the
    /// manifest's images or none of any cluster's does, else the first reachable cluster whose
    /// node does, so that the start needs no pull. The manifest is fetched for its images (the
    /// create fetches it again; a manifest that can't be read leaves it to the default cluster,
    /// whose create then says why).
    async fn where_held(&self, url: &str, entry: &str) -> Result<&ClusterWorkspaces<C>, RequestError> {
        let default = self.choose(None, None, entry);
        let Ok(text) = self.fetcher.fetch(url).await else {
            return default;
        };
        let Ok(pod) = manifest::read_pod(&text) else {
            return default;
        };
        let wanted = placement::images_of(&pod);
        if self.default_cluster().node_images.held_anywhere(&wanted) {
            return default;
        }
        let holder = self
            .members
            .iter()
            .find(|member| self.unreachable(member).is_none() && member.node_images.held_anywhere(&wanted));
        match holder {
            Some(member) => {
                tracing::debug!(cluster = member.name, entry, "launched where its images are");
                Ok(member)
            }
            None => default,
        }
    }

    /// The controller's create of `record`'s pod on `member`: fetches the manifest at `url` and
    /// reads it with `settings`, then, in the user's turn, checks their limits against every
    /// cluster and has `member` make the workspace. Answers once the pod is created.
    pub(super) async fn create(
        &self,
        member: &ClusterWorkspaces<C>,
        requester: Requester<'_>,
        url: &str,
        settings: &Settings,
        record: &resource::Workspace,
    ) -> Result<Created, RequestError> {
        // Held to the end of the create, refused past `maxCreatesInFlight`.
        let _slot = self.creates.take()?;
        let manifest_text = self.fetcher.fetch(url).await?;
        let mut prepared = manifest::prepare(&manifest_text, requester, settings, &member.config)?;
        culling::lifetimes(&prepared.pod, &member.config).map_err(RequestError::Annotation)?;
        culling::action(&prepared.pod, &member.config).map_err(RequestError::Annotation)?;
        prepared.pod.annotations_mut().insert(
            keys::ANNOTATION_MANIFEST_NAME.to_owned(),
            prepared.manifest_name.clone(),
        );
        // One create of a user's at a time, so two at once can't both fit under a limit. Only
        // the leader's controller creates pods (every launch, start and deic-dk create writes a
        // Workspace and waits), so this process's turn is the user's turn on every replica.
        let user = requester.user;
        let _turn = self.turns.take(user).await;
        let existing = self.counted_pods(user);
        let existing: Vec<&Pod> = existing.iter().map(AsRef::as_ref).collect();
        limits::check(&member.config.limits, &existing, &prepared.pod)?;
        member
            .create(
                requester,
                url,
                prepared,
                |name| self.name_holder(name, user, true),
                record,
            )
            .await
    }

    /// The pods `user`'s limits count, on every cluster: those the caches show, and those this
    /// process made for the user's Workspaces that a cache does not show yet (the last turn's).
    fn counted_pods(&self, user: &UserId) -> Vec<std::sync::Arc<Pod>> {
        let mut counted = self.pods_everywhere(user);
        for member in self.members.iter() {
            for record in member.cache.workspaces_of(user) {
                let made = member
                    .cache
                    .pod_or_made(&record.name_any())
                    .filter(|pod| model::user::belongs_to(pod.as_ref(), user));
                if let Some(pod) = made
                    && !counted.iter().any(|seen| seen.uid() == pod.uid())
                {
                    counted.push(pod);
                }
            }
        }
        counted
    }
}
