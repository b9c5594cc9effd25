//! The calls of the lifecycle's sweep of the per-user Leases earlier versions took turns on: list
//! and delete them.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api,
    api::{DeleteParams, ListParams, Preconditions},
};
use outfit_workspaces_core::model::keys;

use super::{Cluster, ClusterError, status_code};

impl Cluster {
    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.pods.clone().into_client(), &self.namespace)
    }

    /// The per-user Leases earlier versions took turns on (labelled managed by
    /// outfit-workspaces).
    pub async fn old_turn_leases(&self) -> Result<Vec<Lease>, ClusterError> {
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
