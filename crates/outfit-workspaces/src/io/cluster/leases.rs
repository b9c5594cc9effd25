//! The per-user Leases' calls (see [`crate::backend`]'s `user_lease`): read, create and replace
//! one by name, and, for the lifecycle's sweep, list and delete them.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, PostParams, Preconditions},
};

use super::{Cluster, ClusterError, status_code};
use crate::model::keys;

impl Cluster {
    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.pods.clone().into_client(), &self.namespace)
    }

    /// The Lease `name`, if there is one.
    pub async fn get_lease(&self, name: &str) -> Result<Option<Lease>, ClusterError> {
        self.leases()
            .get_opt(name)
            .await
            .map_err(|e| self.error(format_args!("reading Lease {}/{name}", self.namespace), e))
    }

    /// Creates `lease`; 409 when its name is taken.
    pub async fn create_lease(&self, lease: &Lease) -> Result<Lease, ClusterError> {
        let name = lease.name_any();
        self.leases()
            .create(&PostParams::default(), lease)
            .await
            .map_err(|e| self.error(format_args!("creating Lease {}/{name}", self.namespace), e))
    }

    /// Replaces `lease`, only at the `resourceVersion` it carries (409 when it changed since).
    pub async fn replace_lease(&self, lease: &Lease) -> Result<Lease, ClusterError> {
        let name = lease.name_any();
        self.leases()
            .replace(&name, &PostParams::default(), lease)
            .await
            .map_err(|e| self.error(format_args!("updating Lease {}/{name}", self.namespace), e))
    }

    /// The per-user Leases (labelled managed by outfit-workspaces).
    pub async fn user_leases(&self) -> Result<Vec<Lease>, ClusterError> {
        let selector = format!("{}={}", keys::LABEL_MANAGED_BY, keys::MANAGED_BY);
        self.leases()
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|list| list.items)
            .map_err(|e| self.error(format_args!("listing Leases in {}", self.namespace), e))
    }

    /// Deletes the Lease `name`, only at version `seen` (409 when it changed since); gone is
    /// fine.
    pub async fn delete_lease(&self, name: &str, seen: &str) -> Result<(), ClusterError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(seen.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.leases().delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(self.error(format_args!("deleting Lease {}/{name}", self.namespace), e)),
        }
    }
}
