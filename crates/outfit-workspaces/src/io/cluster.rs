//! Every call the backend makes to the API server, each named by what it does to which object, so
//! that an error says which step failed.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        core::v1::{Event as CoreEvent, PersistentVolume, PersistentVolumeClaim, Pod, Service},
        networking::v1::{Ingress, NetworkPolicy},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Client, Resource,
    api::{AttachParams, DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::events::{Recorder, Reporter},
};
use outfit_workspaces_core::{
    model::{keys, names},
    workspace::{placeholder, pre_pull},
};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::io::AsyncReadExt;

/// A call to the API server that failed.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {source}")]
pub struct ClusterError {
    /// What the backend was doing ("creating Service ws/x-ssh").
    pub action: String,
    /// What the API server or the connection said.
    #[source]
    pub source: kube::Error,
}

impl ClusterError {
    /// Whether the API server answered 404.
    pub fn is_not_found(&self) -> bool {
        status_code(&self.source) == Some(404)
    }

    /// Whether the object acted on is gone: 404, or 422 on `metadata.uid` (another object of
    /// the same name took its place, see [`Cluster::annotate_pod`]).
    pub fn is_gone(&self) -> bool {
        match &self.source {
            kube::Error::Api(status) if status.code == 404 => true,
            kube::Error::Api(status) if status.code == 422 => status
                .details
                .as_ref()
                .is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid")),
            _ => false,
        }
    }

    /// Whether trying again later may succeed: the API server was unreachable, overloaded or
    /// failed (5xx, 429), rather than refusing the request.
    pub fn is_transient(&self) -> bool {
        match &self.source {
            kube::Error::Api(status) => status.code >= 500 || status.code == 429,
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
            _ => false,
        }
    }

    /// Whether the API server answered 409 (the name is taken, or a precondition failed).
    pub fn is_conflict(&self) -> bool {
        status_code(&self.source) == Some(409)
    }

    /// Whether the API server answered 422 (the object is invalid), other than for a uid
    /// precondition ([`Self::is_gone`]).
    pub fn is_invalid(&self) -> bool {
        status_code(&self.source) == Some(422) && !self.is_gone()
    }

    /// Whether the API server answered 403 (RBAC grants no such thing).
    pub fn is_forbidden(&self) -> bool {
        status_code(&self.source) == Some(403)
    }

    /// What a caller is told: the step and the API server's verdict, without kube-rs's dump of
    /// the error or the URLs it reached (the log keeps those). The verdict is kept whole up to
    /// 1,000 characters: an admission policy's refusal names the policy, the rule and, for the
    /// install's guard, the webhook's policies that changed the pod.
    pub fn public_message(&self) -> String {
        match &self.source {
            kube::Error::Api(status) if status.code < 500 => format!(
                "{}: the API server refused it ({} {}): {}",
                self.action,
                status.code,
                status.reason,
                truncate(status.message.clone(), 1000)
            ),
            kube::Error::Api(status) => format!(
                "{}: the API server failed ({} {}); try again",
                self.action, status.code, status.reason
            ),
            _ => format!("{}: the API server could not be reached; try again", self.action),
        }
    }
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

mod events;
mod leases;
pub mod made;
mod snapshots;
pub(crate) mod workspaces;

/// The API server, as the backend uses it: one namespace, plus the cluster-scoped volumes.
#[derive(Clone)]
pub struct Cluster {
    namespace: String,
    pods: Api<Pod>,
    services: Api<Service>,
    ingresses: Api<Ingress>,
    network_policies: Api<NetworkPolicy>,
    claims: Api<PersistentVolumeClaim>,
    volumes: Api<PersistentVolume>,
    /// Whether the storage strategy writes PersistentVolumes (`nfs`); otherwise the backend may
    /// hold no rights on them, and deleting a user's storage deletes the claim alone (its class's
    /// reclaim policy decides the volume's fate).
    writes_volumes: bool,
    events: Api<CoreEvent>,
    recorder: Recorder,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// How long one token read may take.
const EXEC_TIMEOUT: Duration = Duration::from_secs(5);

/// The name the backend's Events are reported under.
pub const REPORTER: &str = "outfit-workspaces";

impl Cluster {
    /// The backend's calls in `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        let instance = std::env::var("POD_NAME").ok();
        Self {
            namespace: namespace.to_owned(),
            pods: Api::namespaced(client.clone(), namespace),
            services: Api::namespaced(client.clone(), namespace),
            ingresses: Api::namespaced(client.clone(), namespace),
            network_policies: Api::namespaced(client.clone(), namespace),
            claims: Api::namespaced(client.clone(), namespace),
            volumes: Api::all(client.clone()),
            writes_volumes: true,
            events: Api::namespaced(client.clone(), namespace),
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: REPORTER.to_owned(),
                    instance,
                },
            ),
        }
    }

    /// The same, writing PersistentVolumes or not (`storageStrategy`).
    pub fn writing_volumes(self, writes_volumes: bool) -> Self {
        Self {
            writes_volumes,
            ..self
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn error(&self, action: impl std::fmt::Display, source: kube::Error) -> ClusterError {
        ClusterError {
            action: action.to_string(),
            source,
        }
    }

    /// Creates `pod`.
    pub async fn create_pod(&self, pod: &Pod) -> Result<Pod, ClusterError> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.pods
            .create(&PostParams::default(), pod)
            .await
            .map_err(|e| self.error(format_args!("creating Pod {}/{name}", self.namespace), e))
    }

    /// The pod `name` as the API server has it now, if any.
    pub async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ClusterError> {
        self.pods
            .get_opt(name)
            .await
            .map_err(|e| self.error(format_args!("reading Pod {}/{name}", self.namespace), e))
    }

    /// The placeholder pods (issue 35), which the watches leave out.
    pub async fn placeholders(&self) -> Result<Vec<Pod>, ClusterError> {
        self.pods_labelled(placeholder::LABEL, "the placeholders").await
    }

    /// The pods pulling images ahead (issue 35), which the watches leave out too.
    pub async fn pull_pods(&self) -> Result<Vec<Pod>, ClusterError> {
        self.pods_labelled(pre_pull::LABEL, "the pull pods").await
    }

    /// The pods labelled `label=true` (`what` names them in an error).
    async fn pods_labelled(&self, label: &str, what: &str) -> Result<Vec<Pod>, ClusterError> {
        let params = kube::api::ListParams::default().labels(&format!("{label}=true"));
        self.pods
            .list(&params)
            .await
            .map(|list| list.items)
            .map_err(|e| self.error(format_args!("listing {what} in {}", self.namespace), e))
    }

    /// Deletes the pod `name` if it still has `uid` (so a newer pod of the same name is never
    /// hit). `Ok(false)` when it was already gone.
    pub async fn delete_pod(&self, name: &str, uid: Option<&str>) -> Result<bool, ClusterError> {
        let params = only_uid(uid.map(str::to_owned));
        match self.pods.delete(name, &params).await {
            Ok(deleted) => {
                let going = deleted.left().and_then(|pod| pod.metadata.uid);
                if let Some(uid) = uid.map(str::to_owned).or(going) {
                    self.delete_made_for(name, &uid).await;
                }
                Ok(true)
            }
            Err(e) if status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.error(format_args!("deleting Pod {}/{name}", self.namespace), e)),
        }
    }

    /// Deletes what the backend made for the pod `pod` of `uid` (its Services, Ingress and
    /// NetworkPolicy), as deic-dk's delete does, rather than leaving them to the garbage
    /// collector alone: the workspaces soak saw kube-controller-manager's collector stall for
    /// minutes after an API server restart. One of the same name that another pod owns is left
    /// alone; a failure is logged and left to the collector (the owner reference stays).
    pub async fn delete_made_for(&self, pod: &str, uid: &str) {
        let (ssh, http, ingress, policy) = tokio::join!(
            delete_if_owned(&self.services, names::ssh_service(pod), uid),
            delete_if_owned(&self.services, names::http_service(pod), uid),
            delete_if_owned(&self.ingresses, names::ingress(pod), uid),
            delete_if_owned(&self.network_policies, names::network_policy(pod), uid),
        );
        for (kind, result) in [
            ("Service", ssh),
            ("Service", http),
            ("Ingress", ingress),
            ("NetworkPolicy", policy),
        ] {
            if let Err(error) = result {
                tracing::warn!(pod, kind, %error, "could not delete what was made for the pod; the garbage collector will");
            }
        }
    }

    /// Merges `annotations` into `pod`'s (a `null` value removes one), only if the pod of that
    /// name is still this one.
    pub async fn annotate_pod(
        &self,
        pod: &Pod,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> Result<Pod, ClusterError> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        // The uid makes the patch a precondition: a pod deleted and made anew under the same name
        // (the user's next launch) is refused (422, uid immutable), never marked for this one.
        let patch = json!({"metadata": {"uid": pod.metadata.uid, "annotations": annotations}});
        self.pods
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.error(format_args!("annotating Pod {}/{name}", self.namespace), e))
    }

    /// The Service `name`, if any.
    pub async fn service(&self, name: &str) -> Result<Option<Service>, ClusterError> {
        self.services
            .get_opt(name)
            .await
            .map_err(|e| self.error(format_args!("reading Service {}/{name}", self.namespace), e))
    }

    /// Creates `object` unless one of its name owned by `owner` exists (a second replica, or a
    /// restarted backend, got there first); removes one left by an earlier pod of the same name.
    pub async fn ensure_service(
        &self,
        object: &Service,
        owner: &OwnerReference,
    ) -> Result<Service, ClusterError> {
        ensure_owned(&self.services, object, owner, "Service", &self.namespace).await
    }

    /// As [`Self::ensure_service`], for an Ingress.
    pub async fn ensure_ingress(
        &self,
        object: &Ingress,
        owner: &OwnerReference,
    ) -> Result<Ingress, ClusterError> {
        ensure_owned(&self.ingresses, object, owner, "Ingress", &self.namespace).await
    }

    /// As [`Self::ensure_service`], for a workspace's NetworkPolicy.
    pub async fn ensure_network_policy(
        &self,
        policy: &NetworkPolicy,
        owner: &OwnerReference,
    ) -> Result<(), ClusterError> {
        ensure_owned(
            &self.network_policies,
            policy,
            owner,
            "NetworkPolicy",
            &self.namespace,
        )
        .await
        .map(|_| ())
    }

    /// Reads `/tmp/<key>` in `container` of pod `pod` (`cat` through `pods/exec`), keeping at most
    /// `limit` bytes. An empty file counts as not there yet.
    pub async fn read_token(
        &self,
        pod: &str,
        container: &str,
        key: &str,
        limit: usize,
    ) -> Result<String, String> {
        // A kubelet that never answers must not hold up the start jobs.
        match tokio::time::timeout(EXEC_TIMEOUT, self.exec_cat(pod, container, key, limit)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "exec cat /tmp/{key} in {pod}/{container}: no answer within {EXEC_TIMEOUT:?}"
            )),
        }
    }

    async fn exec_cat(&self, pod: &str, container: &str, key: &str, limit: usize) -> Result<String, String> {
        let params = AttachParams::default()
            .container(container)
            .stdin(false)
            .stdout(true)
            .stderr(false);
        let path = format!("/tmp/{key}");
        let mut process = self
            .pods
            .exec(pod, ["cat", path.as_str()], &params)
            .await
            .map_err(|e| format!("exec cat {path} in {pod}/{container}: {e}"))?;
        let stdout = process.stdout().ok_or("exec gave no stdout")?;
        let mut value = Vec::new();
        // Never more than the cap, however large the file (a user can write to it).
        stdout
            .take(limit as u64)
            .read_to_end(&mut value)
            .await
            .map_err(|e| format!("reading {path} from {pod}: {e}"))?;
        drop(process);
        let value = String::from_utf8_lossy(&value)
            .trim_end_matches(['\n', '\r'])
            .to_owned();
        if value.is_empty() {
            return Err(format!("{path} in {pod}/{container} is empty or missing"));
        }
        Ok(value)
    }

    /// The storage claim `name`, read from the API server (not the cache: a create must see its
    /// own writes).
    pub async fn claim(&self, name: &str) -> Result<Option<PersistentVolumeClaim>, ClusterError> {
        self.claims.get_opt(name).await.map_err(|e| {
            self.error(
                format_args!("reading PersistentVolumeClaim {}/{name}", self.namespace),
                e,
            )
        })
    }

    /// The volume `name`.
    pub async fn volume(&self, name: &str) -> Result<Option<PersistentVolume>, ClusterError> {
        self.volumes
            .get_opt(name)
            .await
            .map_err(|e| self.error(format_args!("reading PersistentVolume {name}"), e))
    }

    /// Creates the volume.
    pub async fn create_volume(&self, volume: &PersistentVolume) -> Result<(), ClusterError> {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        match self.volumes.create(&PostParams::default(), volume).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.error(format_args!("creating PersistentVolume {name}"), e)),
        }
    }

    /// Creates the claim.
    pub async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), ClusterError> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        match self.claims.create(&PostParams::default(), claim).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.error(
                format_args!("creating PersistentVolumeClaim {}/{name}", self.namespace),
                e,
            )),
        }
    }

    /// Merge-patches the claim `name` (`doing`, for the error).
    async fn patch_claim(
        &self,
        name: &str,
        patch: &serde_json::Value,
        doing: &str,
    ) -> Result<(), ClusterError> {
        self.claims
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                self.error(
                    format_args!("{doing} PersistentVolumeClaim {}/{name}", self.namespace),
                    e,
                )
            })
    }

    /// Asks the claim `name` for `size`.
    pub async fn grow_claim(&self, name: &str, size: &str) -> Result<(), ClusterError> {
        let patch = json!({"spec": {"resources": {"requests": {"storage": size}}}});
        self.patch_claim(name, &patch, "growing").await
    }

    /// Marks the user's storage as wanted by a create now: the storage sweep leaves it alone
    /// until this create's deadline has passed.
    pub async fn claim_storage(&self, name: &str, until: &str) -> Result<(), ClusterError> {
        let patch = json!({"metadata": {"annotations": {keys::ANNOTATION_STORAGE_WANTED_UNTIL: until}}});
        self.patch_claim(name, &patch, "annotating").await
    }

    /// Writes `mark` as the claim `name`'s use mark (issue 46), only at its version `seen` when
    /// given (409 when it changed since).
    pub async fn mark_home_use(
        &self,
        name: &str,
        mark: &str,
        seen: Option<&str>,
    ) -> Result<(), ClusterError> {
        let mut patch = json!({"metadata": {"annotations": {keys::ANNOTATION_HOME_USE: mark}}});
        if let Some(seen) = seen {
            patch["metadata"]["resourceVersion"] = json!(seen);
        }
        self.patch_claim(name, &patch, "marking the use of").await
    }

    /// Deletes the user's claim and, when the strategy writes volumes, the volume `name` (not
    /// found counts as done). The NFS data stays: the volume's reclaim policy is Retain. With `seen` (a resourceVersion of the claim), only
    /// that version is deleted: a claim a create has marked as wanted since then is answered 409
    /// ([`ClusterError::is_conflict`]) and kept.
    pub async fn delete_storage(&self, name: &str, seen: Option<&str>) -> Result<(), ClusterError> {
        let ok_if_gone = |result: Result<_, kube::Error>| match result {
            Err(e) if status_code(&e) != Some(404) => Err(e),
            _ => Ok(()),
        };
        let params = DeleteParams {
            preconditions: seen.map(|version| Preconditions {
                resource_version: Some(version.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        ok_if_gone(self.claims.delete(name, &params).await.map(|_| ())).map_err(|e| {
            self.error(
                format_args!("deleting PersistentVolumeClaim {}/{name}", self.namespace),
                e,
            )
        })?;
        if !self.writes_volumes {
            return Ok(());
        }
        ok_if_gone(
            self.volumes
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )
        .map_err(|e| self.error(format_args!("deleting PersistentVolume {name}"), e))
    }

    /// Waits until the claim `name` is gone, up to `limit`. `Ok(false)` when it is still there.
    pub async fn wait_claim_gone(&self, name: &str, limit: Duration) -> Result<bool, ClusterError> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.claim(name).await?.is_none() {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Whether the object with `meta` has an owner of `uid`.
fn owned_by(meta: &kube::core::ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|owner| owner.uid == uid)
}

/// A delete of the object only while it has `uid` (an object made anew under its name is spared).
fn only_uid(uid: Option<String>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// Deletes the object `name` if `owner_uid` owns it (and it is still the object read).
async fn delete_if_owned<K>(api: &Api<K>, name: String, owner_uid: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(existing) = api.get_opt(&name).await? else {
        return Ok(());
    };
    if !owned_by(existing.meta(), owner_uid) {
        return Ok(());
    }
    let params = only_uid(existing.meta().uid.clone());
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn ensure_owned<K>(
    api: &Api<K>,
    object: &K,
    owner: &OwnerReference,
    kind: &str,
    namespace: &str,
) -> Result<K, ClusterError>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let error = |verb: &str, source| ClusterError {
        action: format!("{verb} {kind} {namespace}/{name}"),
        source,
    };
    for _ in 0..3 {
        match api.create(&PostParams::default(), object).await {
            Ok(created) => return Ok(created),
            Err(e) if status_code(&e) == Some(409) => {}
            Err(e) => return Err(error("creating", e)),
        }
        let Some(existing) = api.get_opt(&name).await.map_err(|e| error("reading", e))? else {
            continue;
        };
        if owned_by(existing.meta(), &owner.uid) {
            return Ok(existing);
        }
        // Left by an earlier pod of the same name (deic-dk's start jobs delete these too).
        let params = only_uid(existing.meta().uid.clone());
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => {}
            Err(e) => return Err(error("deleting the leftover", e)),
        }
        // Services go at once; wait briefly for the name to free up.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ClusterError {
        action: format!("creating {kind} {namespace}/{name}"),
        source: kube::Error::Api(
            kube::core::Status::failure(
                "the name stays taken by an object another pod owns",
                "AlreadyExists",
            )
            .with_code(409)
            .boxed(),
        ),
    })
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(status: serde_json::Value) -> ClusterError {
        ClusterError {
            action: "annotating Pod ws/p".into(),
            source: kube::Error::Api(serde_json::from_value(status).expect("a Status")),
        }
    }

    #[test]
    fn callers_get_the_verdict_without_the_dump() {
        let invalid = api_error(json!({
            "status": "Failure", "code": 422, "reason": "Invalid",
            "message": "Pod \"p\" is invalid: metadata.name: Invalid value",
            "details": {"name": "p", "kind": "Pod", "causes": [{"field": "metadata.name"}]},
        }));
        let told = invalid.public_message();
        assert_eq!(
            told,
            "annotating Pod ws/p: the API server refused it (422 Invalid): Pod \"p\" is invalid: metadata.name: Invalid value"
        );
        let failed = api_error(
            json!({"status": "Failure", "code": 500, "reason": "InternalError",
                                       "message": "etcdserver: https://10.0.0.1:2379 timed out"}),
        );
        assert!(
            !failed.public_message().contains("10.0.0.1"),
            "{}",
            failed.public_message()
        );
        let unreachable = ClusterError {
            action: "getting Pod ws/p".into(),
            source: kube::Error::Service("error trying to connect: https://10.96.0.1:443/api/v1/x".into()),
        };
        let told = unreachable.public_message();
        assert!(
            !told.contains("10.96.0.1") && told.contains("could not be reached"),
            "{told}"
        );
    }

    #[test]
    fn a_replaced_pod_is_gone_as_a_deleted_one_is() {
        // What kube-apiserver 1.34 answers a merge patch whose metadata.uid is not the pod's.
        let replaced = api_error(json!({
            "status": "Failure", "code": 422, "reason": "Invalid",
            "message": "Pod \"p\" is invalid: metadata.uid: Invalid value: \"0000\": field is immutable",
            "details": {"name": "p", "kind": "Pod", "causes": [
                {"reason": "FieldValueInvalid", "message": "field is immutable", "field": "metadata.uid"},
            ]},
        }));
        assert!(replaced.is_gone() && !replaced.is_transient());
        let deleted = api_error(json!({"status": "Failure", "code": 404, "reason": "NotFound"}));
        assert!(deleted.is_gone());
        // Any other invalid patch is a real error, not a vanished pod.
        let invalid = api_error(json!({
            "status": "Failure", "code": 422, "reason": "Invalid",
            "details": {"causes": [{"field": "metadata.annotations"}]},
        }));
        assert!(!invalid.is_gone());
    }

    #[test]
    fn only_an_unreachable_or_failing_api_server_is_transient() {
        for (code, transient) in [(500, true), (503, true), (429, true), (409, false), (403, false)] {
            let error = api_error(json!({"status": "Failure", "code": code}));
            assert_eq!(error.is_transient(), transient, "{code}");
        }
        let refused = ClusterError {
            action: "creating Pod ws/p".into(),
            source: kube::Error::Service("client error (Connect)".into()),
        };
        assert!(refused.is_transient() && !refused.is_gone());
    }
}
