//! Sharing a workspace through the workspace proxy (issue 42): its owner (or an admin) sets who
//! else may open it, on its Workspace (`outfit.dev/sharing`); the proxy reads it from the cache
//! on every request, so taking a share back holds from the next request on.

use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{keys, names},
    workspace::sharing::Sharing,
};

use super::{Backend, native::gone_or};
use crate::{
    backend::request::RequestError,
    io::{auth::Identity, calls::ClusterCalls},
};

impl<C: ClusterCalls> Backend<C> {
    /// Sets who besides its owner and the admins may open `identity`'s workspace `name` (any
    /// user's, for an admin); returns the sharing now in force. Only workspaces with a record
    /// (the native API's) are shared.
    pub async fn share(
        &self,
        identity: &Identity,
        name: &str,
        sharing: Sharing,
    ) -> Result<Sharing, RequestError> {
        names::check_pod_name(name)?;
        sharing.check().map_err(RequestError::BadSharing)?;
        let Some((member, record)) = self.find_record(identity, name).await? else {
            return Err(RequestError::NoSuchPod {
                user: identity.user.to_string(),
                pod: name.to_owned(),
            });
        };
        let text = (sharing != Sharing::default())
            .then(|| serde_json::to_string(&sharing).expect("sharing serializes"));
        let annotations = std::collections::BTreeMap::from([(keys::ANNOTATION_SHARING, text)]);
        member
            .cluster
            .annotate_workspace(name, record.uid().as_deref().unwrap_or_default(), annotations)
            .await
            .map_err(|error| gone_or(error, identity, name))?;
        tracing::info!(workspace = name, user = %identity.user, by = identity.username, ?sharing, "workspace sharing set");
        Ok(sharing)
    }

    /// The owner id and sharing of the workspace `name`, as the cache has its record; `None`
    /// for a workspace without one (deic-dk's: its owner alone, by its pod).
    pub fn sharing(&self, name: &str) -> Option<(String, Sharing)> {
        self.members.iter().find_map(|member| {
            let record = member.cache.workspace(name)?;
            let text = record
                .annotations()
                .get(keys::ANNOTATION_SHARING)
                .map(String::as_str);
            Some((record.spec.owner.clone(), Sharing::of_annotation(text)))
        })
    }
}
