//! Snapshots of homes (issue 32): the `VolumeSnapshot` (snapshot.storage.k8s.io/v1) the backend
//! takes of a workspace's claim when the workspace stops and before a claim is removed, the last
//! `snapshotsKept` of which it keeps per claim, and from which a lost home is made again. Pure:
//! the objects, their state, which to keep and which to restore from.

use std::{borrow::Cow, collections::BTreeMap};

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{PersistentVolumeClaim, TypedLocalObjectReference},
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, Time},
    },
};
use kube_core::{NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};

use crate::model::{
    keys,
    names::{self, MAX_SUBDOMAIN},
    user::UserId,
};

/// The API group.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// The version.
pub const VERSION: &str = "v1";
/// The kind.
pub const KIND: &str = "VolumeSnapshot";
/// The resource (plural).
pub const PLURAL: &str = "volumesnapshots";

pub mod removal;

/// A `VolumeSnapshot`, the fields the backend writes and reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct VolumeSnapshot {
    /// Its name, namespace, labels and annotations.
    pub metadata: ObjectMeta,
    /// What it is a snapshot of.
    #[serde(default)]
    pub spec: VolumeSnapshotSpec,
    /// What the snapshot controller says of it.
    #[serde(default)]
    pub status: Option<VolumeSnapshotStatus>,
}

/// A `VolumeSnapshot`'s `spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSpec {
    /// The snapshot class (`snapshotClassName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_class_name: Option<String>,
    /// The claim it is taken of.
    #[serde(default)]
    pub source: VolumeSnapshotSource,
}

/// Where a snapshot comes from: a claim in its namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSource {
    /// The claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_name: Option<String>,
}

/// A `VolumeSnapshot`'s `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotStatus {
    /// When the storage took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// Whether a claim can be made from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The smallest claim it can be restored to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<Quantity>,
    /// Why taking it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<VolumeSnapshotError>,
}

/// A snapshot's failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeSnapshotError {
    /// What the snapshot controller or the driver said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Written with its `apiVersion` and `kind`, which a create needs.
impl Serialize for VolumeSnapshot {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            api_version: &'static str,
            kind: &'static str,
            metadata: &'a ObjectMeta,
            spec: &'a VolumeSnapshotSpec,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: &'a Option<VolumeSnapshotStatus>,
        }
        Wire {
            api_version: "snapshot.storage.k8s.io/v1",
            kind: KIND,
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

impl Resource for VolumeSnapshot {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        "snapshot.storage.k8s.io/v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Why a snapshot was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    /// Its workspace stopped.
    Stop,
    /// Its claim is about to be removed.
    Removal,
}

impl Occasion {
    /// Its name in the snapshot's `outfit.dev/snapshot-reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Occasion::Stop => "stop",
            Occasion::Removal => "removal",
        }
    }
}

/// What a snapshot of `claim` taken at `at` is called: the claim's name, the time to the
/// millisecond and `salt` in hex (`-20261129t120000123-0a1b2c3d`). The salt is the taker's own
/// (a per-process counter from a random start): four removals within one millisecond once made
/// one name (issue 46), so the time alone does not tell snapshots apart. A claim name too long
/// for that keeps its start and a hash of the whole, so two claims never share one.
pub fn snapshot_name(claim: &str, at: Timestamp, salt: u32) -> String {
    let stamp = at.strftime("-%Y%m%dt%H%M%S%3f").to_string();
    named_after(claim, &format!("{stamp}-{salt:08x}"))
}

/// A snapshot name of `claim` ending in `tail`: the claim's name, shortened with a hash of the
/// whole where the two would not fit a name.
fn named_after(claim: &str, tail: &str) -> String {
    format!("{}{tail}", names::fit(claim, MAX_SUBDOMAIN - tail.len()))
}

/// The snapshot `name` of `claim`, `user`'s home, taken with `class` for `occasion` (and, on a
/// stop, of `workspace`); `home_use` is the claim's settled use mark when no pod used it as it
/// was taken ([`keys::ANNOTATION_HOME_USE`]), which lets a removal keep it.
pub fn volume_snapshot(
    name: String,
    (claim, user): (&str, &UserId),
    class: &str,
    (occasion, workspace): (Occasion, Option<&str>),
    home_use: Option<&str>,
) -> VolumeSnapshot {
    let mut annotations = BTreeMap::from([
        (keys::ANNOTATION_USER_ID.to_owned(), user.as_str().to_owned()),
        (
            keys::ANNOTATION_SNAPSHOT_REASON.to_owned(),
            occasion.as_str().to_owned(),
        ),
    ]);
    if let Some(workspace) = workspace {
        annotations.insert(
            keys::ANNOTATION_SNAPSHOT_WORKSPACE.to_owned(),
            workspace.to_owned(),
        );
    }
    if let Some(home_use) = home_use {
        annotations.insert(keys::ANNOTATION_HOME_USE.to_owned(), home_use.to_owned());
    }
    VolumeSnapshot {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(user_labels(user)),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: VolumeSnapshotSpec {
            volume_snapshot_class_name: Some(class.to_owned()),
            source: VolumeSnapshotSource {
                persistent_volume_claim_name: Some(claim.to_owned()),
            },
        },
        status: None,
    }
}

/// The labels that find `user`'s snapshots (a list by them is then checked by the exact id).
pub fn user_labels(user: &UserId) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::LABEL_USER.to_owned(), names::label_value(user.name())),
        (keys::LABEL_DOMAIN.to_owned(), names::label_value(user.domain())),
        (keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned()),
    ])
}

/// The label selector of [`user_labels`].
pub fn user_selector(user: &UserId) -> String {
    user_labels(user)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Where a snapshot stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not ready yet.
    Pending,
    /// Ready: a claim can be made from it.
    Ready,
    /// Failed, with what the controller or driver said.
    Failed(String),
}

impl VolumeSnapshot {
    /// The claim it was taken of.
    pub fn claim(&self) -> Option<&str> {
        self.spec.source.persistent_volume_claim_name.as_deref()
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// When it was asked for.
    pub fn created(&self) -> Option<Timestamp> {
        self.metadata.creation_timestamp.as_ref().map(|t| t.0)
    }

    /// The claim's use mark it was taken at, if no pod used the claim then.
    pub fn home_use(&self) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(keys::ANNOTATION_HOME_USE)
            .map(String::as_str)
    }

    /// Where it stands: an error is a failure even while the controller retries (it says why).
    pub fn state(&self) -> State {
        let status = self.status.as_ref();
        if status.and_then(|s| s.ready_to_use) == Some(true) {
            return State::Ready;
        }
        match status.and_then(|s| s.error.as_ref()) {
            Some(error) => State::Failed(
                error
                    .message
                    .clone()
                    .unwrap_or_else(|| "the snapshot failed without a message".to_owned()),
            ),
            None => State::Pending,
        }
    }

    /// When it was made, to order a claim's snapshots (its creation; its name's stamp breaks
    /// ties, as both are to the second).
    fn order_key(&self) -> (Option<Timestamp>, &str) {
        (
            self.metadata.creation_timestamp.as_ref().map(|t| t.0),
            self.name(),
        )
    }
}

/// `claim`'s snapshots among `snapshots`, newest first (those being deleted left out).
pub fn of_claim<'a>(snapshots: &'a [VolumeSnapshot], claim: &str) -> Vec<&'a VolumeSnapshot> {
    let mut of: Vec<&VolumeSnapshot> = snapshots
        .iter()
        .filter(|s| s.claim() == Some(claim) && s.metadata.deletion_timestamp.is_none())
        .collect();
    of.sort_by(|a, b| b.order_key().cmp(&a.order_key()));
    of
}

/// The newest ready snapshot of `claim`: what a lost home is made again from.
pub fn newest_ready<'a>(snapshots: &'a [VolumeSnapshot], claim: &str) -> Option<&'a VolumeSnapshot> {
    newest_ready_of(snapshots, &[claim])
}

/// The newest ready snapshot of any of `claims` (the names one home has had).
pub fn newest_ready_of<'a>(snapshots: &'a [VolumeSnapshot], claims: &[&str]) -> Option<&'a VolumeSnapshot> {
    claims
        .iter()
        .flat_map(|claim| of_claim(snapshots, claim))
        .filter(|s| s.state() == State::Ready)
        .max_by(|a, b| a.order_key().cmp(&b.order_key()))
}

/// The snapshots of `claim` to delete when `kept` are kept: ready ones past the newest `kept`
/// ready ones, and failed ones older than the newest ready one (they restore nothing). Pending
/// ones are left to turn ready or fail.
pub fn to_prune(snapshots: &[VolumeSnapshot], claim: &str, kept: usize) -> Vec<String> {
    let mut ready_seen = 0;
    let mut prune = Vec::new();
    for snapshot in of_claim(snapshots, claim) {
        match snapshot.state() {
            State::Ready => {
                ready_seen += 1;
                if ready_seen > kept {
                    prune.push(snapshot.name().to_owned());
                }
            }
            State::Failed(_) if ready_seen > 0 => prune.push(snapshot.name().to_owned()),
            State::Failed(_) | State::Pending => {}
        }
    }
    prune
}

/// Makes `claim` (not created yet) a restore of `snapshot`: its `dataSource`, at least the
/// snapshot's `restoreSize`, and a mark that says where it came from.
pub fn restore_into(claim: &mut PersistentVolumeClaim, snapshot: &VolumeSnapshot) {
    claim
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            keys::ANNOTATION_RESTORED_FROM.to_owned(),
            snapshot.name().to_owned(),
        );
    let spec = claim.spec.get_or_insert_with(Default::default);
    spec.data_source = Some(TypedLocalObjectReference {
        api_group: Some(GROUP.to_owned()),
        kind: KIND.to_owned(),
        name: snapshot.name().to_owned(),
    });
    let Some(restore_size) = snapshot.status.as_ref().and_then(|s| s.restore_size.as_ref()) else {
        return;
    };
    let requests = spec
        .resources
        .get_or_insert_with(Default::default)
        .requests
        .get_or_insert_with(BTreeMap::new);
    let bytes = |q: Option<&Quantity>| q.and_then(|q| outfit_core::quantity::bytes(&q.0).ok());
    if bytes(requests.get("storage")) < bytes(Some(restore_size)) {
        requests.insert("storage".to_owned(), restore_size.clone());
    }
}

/// A snapshot as `GET /api/v1/storage` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Snapshot))]
pub struct SnapshotView {
    /// The VolumeSnapshot's name: what a launch or start names to restore from.
    pub name: String,
    /// The claim (home) it was taken of.
    pub home: Option<String>,
    /// The cluster it is on.
    pub cluster: String,
    /// When it was asked for (RFC 3339).
    pub created: Option<String>,
    /// Whether a home can be made from it.
    pub ready: bool,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The smallest home it restores to.
    pub size: Option<String>,
    /// `stop` or `removal`.
    pub reason: Option<String>,
    /// The workspace whose stop took it.
    pub workspace: Option<String>,
}

/// `snapshot` on `cluster` as a [`SnapshotView`].
pub fn view(snapshot: &VolumeSnapshot, cluster: &str) -> SnapshotView {
    let annotation = |key: &str| {
        snapshot
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    let state = snapshot.state();
    SnapshotView {
        name: snapshot.name().to_owned(),
        home: snapshot.claim().map(str::to_owned),
        cluster: cluster.to_owned(),
        created: snapshot
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        ready: state == State::Ready,
        error: match state {
            State::Failed(why) => Some(why),
            _ => None,
        },
        size: snapshot
            .status
            .as_ref()
            .and_then(|s| s.restore_size.as_ref())
            .map(|q| q.0.clone()),
        reason: annotation(keys::ANNOTATION_SNAPSHOT_REASON),
        workspace: annotation(keys::ANNOTATION_SNAPSHOT_WORKSPACE),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;

    pub(super) fn snapshot(
        name: &str,
        claim: &str,
        created: &str,
        status: serde_json::Value,
    ) -> VolumeSnapshot {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"volumeSnapshotClassName": "csi", "source": {"persistentVolumeClaimName": claim}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_snapshot_is_named_after_its_claim_time_and_salt_and_fits_a_name() {
        let at: Timestamp = "2026-11-29T12:00:05.042Z".parse().unwrap();
        assert_eq!(
            snapshot_name("web-ann-home", at, 0x0a1b_2c3d),
            "web-ann-home-20261129t120005042-0a1b2c3d"
        );
        // Issue 46: four removals within one millisecond made one name; the salt tells them apart.
        assert_ne!(snapshot_name("h", at, 1), snapshot_name("h", at, 2));
        let long = "c".repeat(250);
        let name = snapshot_name(&long, at, 7);
        assert_eq!(name.len(), MAX_SUBDOMAIN);
        assert!(name.ends_with("-20261129t120005042-00000007"));
        assert_ne!(
            name,
            snapshot_name(&"c".repeat(251), at, 7),
            "a hash tells long names apart"
        );
    }

    #[test]
    fn the_object_names_its_claim_class_and_owner() {
        let user = UserId::parse("ann@uni.dk").unwrap();
        let at: Timestamp = "2026-11-29T12:00:05Z".parse().unwrap();
        let object = volume_snapshot(
            snapshot_name("user-storage-ann", at, 1),
            ("user-storage-ann", &user),
            "csi-snaps",
            (Occasion::Stop, Some("web-ann")),
            Some("00ff"),
        );
        let wire = serde_json::to_value(&object).unwrap();
        assert_eq!(wire["apiVersion"], "snapshot.storage.k8s.io/v1");
        assert_eq!(wire["kind"], "VolumeSnapshot");
        assert_eq!(wire["spec"]["volumeSnapshotClassName"], "csi-snaps");
        assert_eq!(
            wire["spec"]["source"]["persistentVolumeClaimName"],
            "user-storage-ann"
        );
        assert_eq!(
            wire["metadata"]["annotations"]["outfit.dev/user-id"],
            "ann@uni.dk"
        );
        assert_eq!(
            wire["metadata"]["annotations"]["outfit.dev/snapshot-reason"],
            "stop"
        );
        assert_eq!(wire["metadata"]["annotations"]["outfit.dev/workspace"], "web-ann");
        assert_eq!(wire["metadata"]["annotations"]["outfit.dev/home-use"], "00ff");
        assert_eq!(object.home_use(), Some("00ff"));
        assert!(wire.get("status").is_none());
        assert_eq!(
            user_selector(&user),
            "app.kubernetes.io/managed-by=outfit-workspaces,domain=uni.dk,user=ann"
        );
    }

    #[test]
    fn a_restored_claim_names_its_snapshot_and_is_at_least_its_size() {
        let source = snapshot(
            "h-1",
            "h",
            "2026-11-29T10:00:00Z",
            json!({"readyToUse": true, "restoreSize": "20Gi"}),
        );
        let mut claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "h"},
            "spec": {"resources": {"requests": {"storage": "10Gi"}}}
        }))
        .unwrap();
        restore_into(&mut claim, &source);
        let wire = serde_json::to_value(&claim).unwrap();
        assert_eq!(
            wire["spec"]["dataSource"],
            json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "h-1"})
        );
        assert_eq!(wire["spec"]["resources"]["requests"]["storage"], "20Gi");
        assert_eq!(wire["metadata"]["annotations"]["outfit.dev/restored-from"], "h-1");
        // A larger claim keeps its size.
        let mut large: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "h"},
            "spec": {"resources": {"requests": {"storage": "50Gi"}}}
        }))
        .unwrap();
        restore_into(&mut large, &source);
        assert_eq!(
            serde_json::to_value(&large).unwrap()["spec"]["resources"]["requests"]["storage"],
            "50Gi"
        );
    }

    #[test]
    fn ready_failed_and_pending_are_told_apart() {
        let ready = snapshot("a", "h", "2026-11-29T10:00:00Z", json!({"readyToUse": true}));
        let failed = snapshot(
            "b",
            "h",
            "2026-11-29T10:00:00Z",
            json!({"readyToUse": false, "error": {"message": "driver refused"}}),
        );
        let pending = snapshot("c", "h", "2026-11-29T10:00:00Z", json!(null));
        assert_eq!(ready.state(), State::Ready);
        assert_eq!(failed.state(), State::Failed("driver refused".into()));
        assert_eq!(pending.state(), State::Pending);
    }

    #[test]
    fn the_newest_ready_ones_are_kept_and_restored_from() {
        let ready = json!({"readyToUse": true, "restoreSize": "10Gi"});
        let snapshots = vec![
            snapshot("h-1", "h", "2026-11-29T10:00:01Z", ready.clone()),
            snapshot(
                "h-2",
                "h",
                "2026-11-29T10:00:02Z",
                json!({"error": {"message": "x"}}),
            ),
            snapshot("h-3", "h", "2026-11-29T10:00:03Z", ready.clone()),
            snapshot("h-4", "h", "2026-11-29T10:00:04Z", ready.clone()),
            snapshot("h-5", "h", "2026-11-29T10:00:05Z", ready.clone()),
            snapshot("h-6", "h", "2026-11-29T10:00:06Z", json!(null)),
            snapshot("other-9", "other", "2026-11-29T10:00:09Z", ready.clone()),
        ];
        assert_eq!(
            newest_ready(&snapshots, "h").map(VolumeSnapshot::name),
            Some("h-5"),
            "the pending h-6 restores nothing yet"
        );
        assert_eq!(to_prune(&snapshots, "h", 3), ["h-2", "h-1"]);
        assert_eq!(to_prune(&snapshots, "h", 1), ["h-4", "h-3", "h-2", "h-1"]);
        assert!(to_prune(&snapshots, "other", 3).is_empty());
        assert_eq!(newest_ready(&snapshots, "gone"), None);
        let view = view(&snapshots[4], "default");
        assert_eq!(
            (view.ready, view.size.as_deref(), view.home.as_deref()),
            (true, Some("10Gi"), Some("h"))
        );
    }
}
