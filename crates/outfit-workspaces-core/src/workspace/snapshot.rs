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
    let tail = format!("{stamp}-{salt:08x}");
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

/// The most snapshots of one claim a removal leaves pending: with as many not ready, a removal
/// takes no other (issue 46: 30 removals of a home whose snapshots were slow took 30).
pub const PENDING_CAP: usize = 2;

/// A claim's use mark (its [`keys::ANNOTATION_HOME_USE`]), as a snapshot of it reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeUse<'a> {
    /// Settled: written while no pod used the claim, and no pod made since.
    Settled(&'a str),
    /// A create wrote it (at that time) just before it makes a pod that mounts the claim, and has
    /// not said since that it made it: a pod may be about to use the claim.
    Making(Option<Timestamp>),
    /// A create made a pod that mounts the claim (and wrote it then): the claim is in use, or was.
    Used(Option<Timestamp>),
    /// None yet: no pod was made since marks are written (or the claim is older).
    Unmarked,
}

/// `claim`'s use mark.
pub fn home_use(claim: &PersistentVolumeClaim) -> HomeUse<'_> {
    let mark = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ANNOTATION_HOME_USE));
    let at = |rest: &str| {
        rest.split('-')
            .next()
            .and_then(|secs| secs.parse().ok())
            .and_then(|secs| Timestamp::from_second(secs).ok())
    };
    match mark {
        None => HomeUse::Unmarked,
        Some(mark) => match (mark.strip_prefix("making-"), mark.strip_prefix("used-")) {
            (Some(rest), _) => HomeUse::Making(at(rest)),
            (_, Some(rest)) => HomeUse::Used(at(rest)),
            _ => HomeUse::Settled(mark),
        },
    }
}

/// The mark a create writes on a claim, at `at`, before it makes a pod that mounts it.
pub fn making_mark(at: Timestamp, salt: u64) -> String {
    format!("making-{}-{salt:016x}", at.as_second())
}

/// The mark a create writes on a claim, at `at`, once it made a pod that mounts it.
pub fn used_mark(at: Timestamp, salt: u64) -> String {
    format!("used-{}-{salt:016x}", at.as_second())
}

/// A settled mark: written on a claim no pod uses, before a snapshot of it is taken.
pub fn settled_mark(salt: u64) -> String {
    format!("{salt:016x}")
}

/// How long a claim's use mark must be left before a snapshot may settle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleAfter {
    /// After a create's [`HomeUse::Making`]: longer than a create may take to make its pod.
    pub making: std::time::Duration,
    /// After a create's [`HomeUse::Used`]: longer than a cache takes to show the pod made.
    pub used: std::time::Duration,
}

/// Whether a claim whose mark is `mark` may be marked settled at `now`, no pod using it as the
/// cache sees it: unmarked, or marked by a create longer ago than [`SettleAfter`] says (so that
/// a pod about to be made, or made but not shown yet, is not taken for none). A settled one
/// stays as it is.
pub fn may_settle(mark: HomeUse<'_>, now: Timestamp, after: SettleAfter) -> bool {
    match mark {
        HomeUse::Settled(_) => false,
        HomeUse::Unmarked => true,
        HomeUse::Making(since) => since.is_some_and(|since| older_than(since, now, after.making)),
        HomeUse::Used(since) => since.is_some_and(|since| older_than(since, now, after.used)),
    }
}

/// Whether `then` is more than `bound` before `now`.
fn older_than(then: Timestamp, now: Timestamp, bound: std::time::Duration) -> bool {
    std::time::Duration::try_from(now.duration_since(then)).is_ok_and(|age| age > bound)
}

/// What a removal of a claim does about its snapshots ([`for_removal`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RemovalPlan<'a> {
    /// Snapshots of the claim that never turned ready, older than the bound: deleted.
    pub prune: Vec<String>,
    /// Then.
    pub next: Next<'a>,
}

/// A removal's snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next<'a> {
    /// This one is ready and was taken after the home's last use: the removal keeps it.
    Keep(&'a VolumeSnapshot),
    /// This one was taken after the home's last use and is pending: the removal waits for it.
    Await(&'a VolumeSnapshot),
    /// [`PENDING_CAP`] are pending, this the newest: the removal takes no other and is refused.
    Refuse(&'a VolumeSnapshot),
    /// None fits: the removal takes one.
    Take,
}

/// What a removal of `claim` does, among `snapshots` (its owner's), at `now`. `home_use` is the
/// claim's settled use mark when no pod uses it now, else `None`.
///
/// The rule that keeps a removal from losing data: a snapshot is kept or waited for only if it
/// carries `home_use`, the claim's settled mark now. A snapshot carries a settled mark only when
/// no pod used the claim as it was taken, and every create of a pod that mounts the claim first
/// overwrites the mark ([`making_mark`], then [`used_mark`]), never settled again while a pod
/// uses the claim: the claim still carrying that snapshot's mark means no pod has used it since,
/// so the snapshot holds the home as the removal would find it. No mark, or another, and a new
/// one is taken.
///
/// Snapshots not ready (pending or failed) older than `stale_after` are pruned: they will not
/// do, and they would count against [`PENDING_CAP`] forever.
pub fn for_removal<'a>(
    snapshots: &'a [VolumeSnapshot],
    claim: &str,
    home_use: Option<&str>,
    (now, stale_after): (Timestamp, std::time::Duration),
) -> RemovalPlan<'a> {
    let stale = |s: &VolumeSnapshot| {
        s.state() != State::Ready
            && s.created()
                .is_some_and(|created| older_than(created, now, stale_after))
    };
    let (prune, live): (Vec<&VolumeSnapshot>, Vec<&VolumeSnapshot>) =
        of_claim(snapshots, claim).into_iter().partition(|s| stale(s));
    let current = |s: &VolumeSnapshot| home_use.is_some() && s.home_use() == home_use;
    let pending: Vec<&VolumeSnapshot> = live
        .iter()
        .copied()
        .filter(|s| s.state() == State::Pending)
        .collect();
    let next = if let Some(ready) = live.iter().find(|s| current(s) && s.state() == State::Ready) {
        Next::Keep(ready)
    } else if let Some(waiting) = pending.iter().find(|s| current(s)) {
        Next::Await(waiting)
    } else if let (true, Some(newest)) = (pending.len() >= PENDING_CAP, pending.first()) {
        Next::Refuse(newest)
    } else {
        Next::Take
    };
    RemovalPlan {
        prune: prune.iter().map(|s| s.name().to_owned()).collect(),
        next,
    }
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
mod tests {
    use serde_json::json;

    use super::*;

    fn snapshot(name: &str, claim: &str, created: &str, status: serde_json::Value) -> VolumeSnapshot {
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

    /// A snapshot of `h` asked for at `created`, carrying the use mark `mark`.
    fn marked(name: &str, created: &str, mark: Option<&str>, status: serde_json::Value) -> VolumeSnapshot {
        let mut s = snapshot(name, "h", created, status);
        if let Some(mark) = mark {
            s.metadata.annotations = Some(BTreeMap::from([(
                keys::ANNOTATION_HOME_USE.to_owned(),
                mark.to_owned(),
            )]));
        }
        s
    }

    const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

    fn next_of<'a>(plan: &RemovalPlan<'a>) -> (&'static str, &'a str) {
        match plan.next {
            Next::Keep(s) => ("keep", s.name()),
            Next::Await(s) => ("await", s.name()),
            Next::Refuse(s) => ("refuse", s.name()),
            Next::Take => ("take", ""),
        }
    }

    /// Issue 46: a removal keeps a ready snapshot, or waits for a pending one, only when it
    /// carries the claim's settled mark now (no pod used the home since it was taken).
    #[test]
    fn a_removal_keeps_only_a_snapshot_taken_since_the_homes_last_use() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let ready = json!({"readyToUse": true});
        let snapshots = vec![
            marked("h-old", "2026-11-29T10:00:00Z", Some("m1"), ready.clone()),
            marked("h-new", "2026-11-29T11:59:00Z", Some("m2"), json!(null)),
            marked("h-unmarked", "2026-11-29T11:58:00Z", None, ready.clone()),
        ];
        // m1 is the mark now: h-old, ready, is kept; no pod used the home since.
        let plan = for_removal(&snapshots, "h", Some("m1"), (now, HOUR));
        assert_eq!(next_of(&plan), ("keep", "h-old"));
        // m2 is: its snapshot is pending, waited for.
        let plan = for_removal(&snapshots, "h", Some("m2"), (now, HOUR));
        assert_eq!(next_of(&plan), ("await", "h-new"));
        // Used since (another mark), or in use (none): a ready snapshot from before is not kept.
        for mark in [Some("m3"), None] {
            let plan = for_removal(&snapshots, "h", mark, (now, HOUR));
            assert_eq!(next_of(&plan), ("take", ""), "{mark:?}");
        }
        assert!(plan_prunes_nothing(&snapshots, now));
    }

    fn plan_prunes_nothing(snapshots: &[VolumeSnapshot], now: Timestamp) -> bool {
        for_removal(snapshots, "h", None, (now, HOUR)).prune.is_empty()
    }

    /// Issue 46: 30 removals of a home with slow snapshots took 30; with PENDING_CAP pending a
    /// removal takes none and names the newest, and ones never ready are pruned when stale.
    #[test]
    fn pending_snapshots_are_capped_and_stale_ones_pruned() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let snapshots = vec![
            marked("h-1", "2026-11-29T11:59:00Z", None, json!(null)),
            marked("h-2", "2026-11-29T11:59:30Z", Some("old"), json!(null)),
            marked("h-stale", "2026-11-29T10:00:00Z", Some("m"), json!(null)),
            marked(
                "h-failed",
                "2026-11-29T09:00:00Z",
                None,
                json!({"error": {"message": "x"}}),
            ),
            marked(
                "h-ready",
                "2026-11-29T09:00:00Z",
                None,
                json!({"readyToUse": true}),
            ),
        ];
        let plan = for_removal(&snapshots, "h", Some("m"), (now, HOUR));
        assert_eq!(next_of(&plan), ("refuse", "h-2"), "the newest pending is named");
        assert_eq!(
            plan.prune,
            ["h-stale", "h-failed"],
            "never ready and stale; ready ones stay"
        );
        // One pending below the cap: a removal takes one.
        let plan = for_removal(&snapshots[1..], "h", Some("m"), (now, HOUR));
        assert_eq!(next_of(&plan), ("take", ""));
        // The stale one, though current, is not waited for: it is pruned.
        assert_eq!(plan.prune, ["h-stale", "h-failed"]);
    }

    #[test]
    fn a_claims_use_mark_is_read_and_settled_only_when_safe() {
        let at: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let claim = |mark: Option<String>| -> PersistentVolumeClaim {
            let mut c = PersistentVolumeClaim::default();
            if let Some(mark) = mark {
                c.metadata.annotations = Some(BTreeMap::from([(keys::ANNOTATION_HOME_USE.to_owned(), mark)]));
            }
            c
        };
        let making = claim(Some(making_mark(at, 5)));
        assert_eq!(home_use(&making), HomeUse::Making(Some(at)));
        let used = claim(Some(used_mark(at, 5)));
        assert_eq!(home_use(&used), HomeUse::Used(Some(at)));
        let settled = claim(Some(settled_mark(5)));
        assert_eq!(home_use(&settled), HomeUse::Settled("0000000000000005"));
        assert_eq!(home_use(&claim(None)), HomeUse::Unmarked);
        let after = SettleAfter {
            making: std::time::Duration::from_secs(600),
            used: std::time::Duration::from_secs(10),
        };
        let later = |secs| at + jiff::SignedDuration::from_secs(secs);
        assert!(
            !may_settle(home_use(&used), later(5), after),
            "a cache may not show the pod yet"
        );
        assert!(may_settle(home_use(&used), later(30), after));
        assert!(
            !may_settle(home_use(&making), later(30), after),
            "a pod may be about to be made"
        );
        assert!(may_settle(home_use(&making), later(700), after));
        assert!(may_settle(HomeUse::Unmarked, at, after));
        assert!(
            !may_settle(home_use(&settled), later(700), after),
            "settled stays as it is"
        );
        assert!(
            !may_settle(HomeUse::Used(None), later(700), after),
            "a mark without a time stays"
        );
    }
}
