//! A create, from either API. The native API's launch (of a catalogue entry, on the cluster
//! `choose` picks) reads the manifest for its name and warnings, writes a Workspace under the
//! first free name and waits for the leader's controller to make its pod (`records.rs`,
//! `controller.rs`). deic-dk's `create_pod` (on the default cluster), and the controller's start
//! of a Workspace, build the one [`Requester`] and call [`Backend::create`], which admits the
//! create on behalf of every cluster (a slot among the creates under way, the manifest fetched and
//! read, the user's turn, their limits counted on every cluster) and leaves the making to the
//! chosen cluster's [`ClusterBackend::create`](crate::backend::cluster::ClusterBackend).

use std::net::IpAddr;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::Backend;
use crate::{
    backend::{
        cluster::{ClusterBackend, create::Record, user_lease::UserTurn},
        request::{CreateRequest, Created, Launch, RequestError},
    },
    io::{auth::Identity, calls::ClusterCalls, catalogue},
    model::{keys, names, user::UserId},
    policy::{culling, limits},
    resource::{self, WorkspaceSpec},
    workspace::{
        info::Workspace,
        manifest::{self, Prepared, Requester, Settings},
        placement,
    },
};

impl<C: ClusterCalls> Backend<C> {
    /// `create_pod`: fetches the manifest, makes the user's storage and the pod on the default
    /// cluster, and answers once the pod is created; the lifecycle does the rest.
    pub async fn create_pod(
        &self,
        request: &CreateRequest,
        silo_ip: IpAddr,
    ) -> Result<Created, RequestError> {
        let user = UserId::parse(&request.user_id)?;
        let empty = Settings::new();
        let settings = request.settings.as_ref().unwrap_or(&empty);
        let silo_ip = silo_ip.to_string();
        let requester = Requester {
            user: &user,
            silo_ip: &silo_ip,
            restore: None,
        };
        self.create(
            self.default_cluster(),
            requester,
            &request.yaml_url,
            settings,
            Record::None,
        )
        .await
    }

    /// Launches the catalogue entry of `launch` for `identity`, on the cluster the entry names,
    /// else the one `launch` names, else the default one.
    pub async fn launch(
        &self,
        identity: &Identity,
        launch: &Launch,
        silo_ip: IpAddr,
    ) -> Result<(Workspace, Vec<String>), RequestError> {
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
        let requester = Requester {
            user,
            silo_ip: &silo_ip,
            restore: launch.snapshot.as_deref(),
        };
        let (manifest_name, warnings) = {
            // A slot while the manifest is held (past `maxCreatesInFlight`, 429 before anything
            // is fetched); the wait for the pod below holds no more than the answer's warnings.
            let _slot = self.creates.take()?;
            let text = self.fetcher.fetch(&url).await?;
            let prepared = manifest::prepare(&text, requester, &launch.settings, &member.config)?;
            culling::lifetimes(&prepared.pod, &member.config).map_err(RequestError::Annotation)?;
            culling::action(&prepared.pod, &member.config).map_err(RequestError::Annotation)?;
            (prepared.manifest_name, prepared.warnings)
        };
        // The Workspace that records it, stopped and started as its owner says; the leader's
        // controller makes its pod (the owner's limits are counted there, once for all replicas).
        let spec = WorkspaceSpec {
            owner: user.to_string(),
            entry: entry.name.clone(),
            values: launch.settings.clone(),
            cluster: Some(member.name.clone()),
            started: true,
        };
        let record = self
            .record_launch(member, &spec, (&manifest_name, user), requester.restore)
            .await?;
        let view = self.launched(member, &record, identity).await?;
        Ok((view, warnings))
    }

    /// The launch's `record` once the controller made its pod (as the API shows it), or, past
    /// `timeoutCreate` without it, as it stands; refused, the record goes and the error is the
    /// answer, so that the launch leaves nothing.
    async fn launched(
        &self,
        member: &ClusterBackend<C>,
        record: &resource::Workspace,
        identity: &Identity,
    ) -> Result<Workspace, RequestError> {
        let name = record.name_any();
        let made = match self.await_made(member, record).await {
            Ok(made) => made,
            Err(error) => {
                if let Err(undo) = member
                    .cluster
                    .delete_workspace(&name, record.uid().as_deref())
                    .await
                {
                    tracing::warn!(workspace = name, %undo, "could not remove the Workspace of a refused launch");
                }
                tracing::info!(workspace = name, user = %identity.user, %error, "launch refused");
                return Err(error);
            }
        };
        tracing::info!(workspace = name, user = %identity.user, by = identity.username, "workspace launched");
        let now = Timestamp::now();
        Ok(match made.and_then(|_| member.cache.pod_or_made(&name)) {
            Some(pod) => member.describe(&pod, self.state_of(member), now),
            None => self.record_view(member, record, now),
        })
    }

    /// Makes the Workspace of a launch under the first name no cluster holds: the names deic-dk
    /// gives a pod of `manifest_name` for `user`, then, when others' hold them, the user's own.
    async fn record_launch(
        &self,
        member: &ClusterBackend<C>,
        spec: &WorkspaceSpec,
        (manifest_name, user): (&str, &UserId),
        restore: Option<&str>,
    ) -> Result<resource::Workspace, RequestError> {
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
                match member.record_workspace(name, spec, restore).await {
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
        entry: &crate::model::config::CatalogueEntry,
        launch: &Launch,
    ) -> Result<&ClusterBackend<C>, RequestError> {
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
    async fn where_held(&self, url: &str, entry: &str) -> Result<&ClusterBackend<C>, RequestError> {
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

    /// A create for either API, on `member`: fetches the manifest at `url` and reads it with
    /// `settings`, then, in the user's turn, checks their limits against every cluster and has
    /// `member` make the workspace (for `record`'s Workspace). Answers once the pod is created.
    pub(super) async fn create(
        &self,
        member: &ClusterBackend<C>,
        requester: Requester<'_>,
        url: &str,
        settings: &Settings,
        record: Record<'_>,
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
        // One create of a user's at a time, so two at once can't both fit under a limit: in this
        // process (so its creates don't contend for the Lease), then across replicas.
        let user = requester.user;
        let _turn = self.turns.take(user).await;
        // The default cluster arbitrates every create of a user, whichever cluster it goes to.
        let turn = self.default_cluster().take_turn(user).await?;
        let created = self
            .create_in_turn(turn.as_ref(), member, requester, url, prepared, record)
            .await;
        if let Some(turn) = turn {
            turn.release(created.as_ref().ok().map(|c| &c.pod)).await;
        }
        created
    }

    /// The rest of a create, in the user's turn: checks the limits, then `member` makes the
    /// storage and the pod under a name no cluster holds.
    async fn create_in_turn(
        &self,
        turn: Option<&UserTurn<C>>,
        member: &ClusterBackend<C>,
        requester: Requester<'_>,
        url: &str,
        prepared: Prepared,
        record: Record<'_>,
    ) -> Result<Created, RequestError> {
        let user = requester.user;
        // The pod the last turn made counts before the default cluster's cache shows it, and
        // limits count the user's workspaces on every cluster.
        let mut existing = match turn {
            Some(turn) => turn.pods_to_count(&self.default_cluster().cache, user).await?,
            None => Vec::new(),
        };
        for pod in self.pods_everywhere(user) {
            if !existing.iter().any(|seen| seen.uid() == pod.uid()) {
                existing.push(pod);
            }
        }
        let existing: Vec<&Pod> = existing.iter().map(AsRef::as_ref).collect();
        limits::check(&member.config.limits, &existing, &prepared.pod)?;
        member
            .create(
                requester,
                url,
                prepared,
                |name| self.name_holder(name, user, matches!(record, Record::Start(_))),
                record,
            )
            .await
    }
}
