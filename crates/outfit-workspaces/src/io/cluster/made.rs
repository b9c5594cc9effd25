//! The listing of what the backend made for pods (their Services, Ingresses and NetworkPolicies),
//! for the lifecycle's sweep of those whose pod is gone (see `lifecycle::orphans`).

use std::collections::BTreeSet;

use kube::{Api, Resource, api::ListParams};
use outfit_workspaces_core::model::keys;
use serde::de::DeserializeOwned;

use super::{Cluster, ClusterError};

/// A pod something was made for, as the made object's owner reference names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MadeFor {
    /// The pod's name (the made objects' names derive from it).
    pub pod: String,
    /// The pod's uid: a pod made anew under the name is another owner.
    pub uid: String,
}

impl Cluster {
    /// The pods that the namespace's outfit-made Services, Ingresses and NetworkPolicies were
    /// made for (three LISTs, by label).
    pub async fn made_for(&self) -> Result<BTreeSet<MadeFor>, ClusterError> {
        let mut owners = BTreeSet::new();
        owners.extend(self.owners_in(&self.services, "Services").await?);
        owners.extend(self.owners_in(&self.ingresses, "Ingresses").await?);
        owners.extend(self.owners_in(&self.network_policies, "NetworkPolicies").await?);
        Ok(owners)
    }

    async fn owners_in<K>(&self, api: &Api<K>, kinds: &str) -> Result<Vec<MadeFor>, ClusterError>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let selector = format!(
            "{},{}={}",
            keys::LABEL_CREATED_FOR_POD,
            keys::LABEL_MANAGED_BY,
            keys::MANAGED_BY
        );
        let list = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| self.error(format_args!("listing {kinds} in {}", self.namespace), e))?;
        Ok(list
            .items
            .iter()
            .flat_map(|object| object.metadata.owner_references.iter().flatten())
            .filter(|owner| owner.kind == "Pod")
            .map(|owner| MadeFor {
                pod: owner.name.clone(),
                uid: owner.uid.clone(),
            })
            .collect())
    }
}
