//! The labels and annotations the backend reads and writes: deic-dk's, kept for compatibility,
//! and outfit's own, which hold the state deic-dk kept in memory.

/// The backend's own name: its objects' name and its pods' `app.kubernetes.io/name` label (the
/// NetworkPolicy lets its pods in).
pub const APP_NAME: &str = "outfit-workspaces";

/// deic-dk's owner labels: the user id split at its `@`.
pub const LABEL_USER: &str = "user";
/// See [`LABEL_USER`].
pub const LABEL_DOMAIN: &str = "domain";
/// deic-dk's label holding the pod's own name (Services select on it).
pub const LABEL_POD_NAME: &str = "podName";
/// deic-dk's label on every per-pod Service and Ingress.
pub const LABEL_CREATED_FOR_POD: &str = "createdForPod";
/// deic-dk's labels on user storage.
pub const LABEL_NAME: &str = "name";
/// See [`LABEL_NAME`].
pub const LABEL_SERVER: &str = "server";

/// Marks everything the backend made; the pod watch selects on it.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "outfit-workspaces";

/// Manifest annotation: comma-separated token keys read from `/tmp/<key>` in the first container.
pub const ANNOTATION_COPY_TOKEN: &str = "sciencedata.dk/copy-token";
/// Manifest annotation: the container port an http Service and an Ingress expose.
pub const ANNOTATION_INGRESS_PORT: &str = "sciencedata.dk/ingress-port";

/// The exact user id. Labels can't hold it (`a.b@x` and `a-b@x` share a user string, and label
/// values are capped at 63 characters), so ownership is checked on this annotation.
pub const ANNOTATION_USER_ID: &str = "outfit.dev/user-id";
/// The owner's groups as they launched or last started it, one per line: on the Workspace, and
/// on its pod for PodPolicies (`spec.match.owner.groupsAnnotation`) to match them.
pub const ANNOTATION_USER_GROUPS: &str = "outfit.dev/user-groups";
/// When an unfinished create is given up and its pod removed (RFC 3339). Stored on the pod so a
/// restarted backend, or another replica, enforces the same deadline.
pub const ANNOTATION_CREATE_DEADLINE: &str = "outfit.dev/create-deadline";
/// Set once the start jobs (Services, Ingress, tokens) are done: the create is complete.
pub const ANNOTATION_STARTED: &str = "outfit.dev/started";
/// The copied tokens, a JSON object of key to value.
pub const ANNOTATION_TOKENS: &str = "outfit.dev/tokens";
/// The ssh Service's node port, as deic-dk's `k8s_pod_info.sshPort`.
pub const ANNOTATION_SSH_PORT: &str = "outfit.dev/ssh-port";
/// The manifest URL the pod was made from.
pub const ANNOTATION_MANIFEST: &str = "outfit.dev/manifest-url";
/// The address the create request came from (decides the NFS server of the user's storage).
pub const ANNOTATION_SILO_IP: &str = "outfit.dev/silo-ip";
/// Why a create failed, with the phase it was stuck in; set on the pod just before it is removed,
/// so every watcher (in any replica) answers with the same reason.
pub const ANNOTATION_FAILED: &str = "outfit.dev/failed";
/// On user storage: a create wants it until this time (RFC 3339), so the storage sweep leaves it
/// alone while the create's pod does not exist yet.
pub const ANNOTATION_STORAGE_WANTED_UNTIL: &str = "outfit.dev/wanted-until";
/// On user storage: the `storageStrategy` it was made under (`per-user` claims are kept when
/// their user has no workspace; a change of strategy leaves them so).
pub const ANNOTATION_STORAGE_STRATEGY: &str = "outfit.dev/storage-strategy";
/// Manifest annotation: the home this workspace needs at least (`50Gi`), beyond `storageSize`;
/// an existing `per-user` or `per-workspace` home smaller than that is grown where its class
/// allows.
pub const ANNOTATION_STORAGE_SIZE: &str = "outfit.dev/storage-size";
/// Annotation of the manifest's `metadata.name` (the label of the spawn metrics).
pub const ANNOTATION_MANIFEST_NAME: &str = "outfit.dev/manifest";
/// Manifest annotation: cull the workspace this long after it started (`never` or `0`: never).
pub const ANNOTATION_MAX_LIFETIME: &str = "outfit.dev/max-lifetime";
/// Manifest annotation: cull the workspace after this long without activity.
pub const ANNOTATION_IDLE_TIMEOUT: &str = "outfit.dev/idle-timeout";
/// Manifest annotation: a Jupyter-style status URL (`last_activity`) of the workspace; `{ip}` is
/// the pod's address.
pub const ANNOTATION_ACTIVITY_URL: &str = "outfit.dev/activity-url";
/// Annotation of the workspace's last activity (RFC 3339).
pub const ANNOTATION_LAST_ACTIVITY: &str = "outfit.dev/last-activity";
/// Manifest annotation: what culling does to this workspace (`stop` or `delete`), over the
/// configuration's `cullAction`.
pub const ANNOTATION_CULL_ACTION: &str = "outfit.dev/cull-action";
/// Annotation of why the workspace was culled.
pub const ANNOTATION_CULLED: &str = "outfit.dev/culled";
/// On a Workspace: the snapshot its home is made from at its start (a start's `?snapshot=`),
/// set with `spec.started: true` and cleared by the next start; the controller reads it.
pub const ANNOTATION_RESTORE_FROM: &str = "outfit.dev/restore-from";
/// On a Workspace: why its last stop was asked for (`user`, `idle`, `lifetime`, `failed`), set
/// with `spec.started: false` by whoever stops it; unset (kubectl) reads as `user`.
pub const ANNOTATION_STOP_REASON: &str = "outfit.dev/stop-reason";
/// On a Workspace: when its last stop was asked for (RFC 3339), beside [`ANNOTATION_STOP_REASON`].
pub const ANNOTATION_STOP_AT: &str = "outfit.dev/stop-at";
/// On a started Workspace: a user's stop asked for through the API (RFC 3339, when), which the
/// leader's controller decides on: it stops the Workspace, or, past
/// `maxStoppedWorkspacesPerUser`, refuses ([`ANNOTATION_STOP_REFUSED`]); either removes this.
pub const ANNOTATION_STOP_REQUESTED: &str = "outfit.dev/stop-requested";
/// On a Workspace: who besides its owner and the admins may open it through the workspace proxy
/// (JSON of `workspace::sharing::Sharing`); only its owner when absent.
pub const ANNOTATION_SHARING: &str = "outfit.dev/sharing";
/// On a Workspace: the controller's refusal of the stop requested at a time, as `<time> <why>`.
pub const ANNOTATION_STOP_REFUSED: &str = "outfit.dev/stop-refused";
/// On a VolumeSnapshot: why it was taken (`stop`, `removal`).
pub const ANNOTATION_SNAPSHOT_REASON: &str = "outfit.dev/snapshot-reason";
/// On a VolumeSnapshot: the workspace whose stop took it.
pub const ANNOTATION_SNAPSHOT_WORKSPACE: &str = "outfit.dev/workspace";
/// On a claim, and on a VolumeSnapshot of it: the claim's use mark (issue 46). A pod that mounts
/// the claim is created only after a new mark is written on it (`starting-<unix seconds>-<hex>`),
/// and the mark is written again once the pod exists (`<hex>`); a snapshot taken while no pod used
/// the claim carries the settled mark it had. A snapshot whose mark is still the claim's was taken
/// after the home's last use, so a removal may keep it instead of taking another.
pub const ANNOTATION_HOME_USE: &str = "outfit.dev/home-use";
/// On a claim: the VolumeSnapshot it was made from.
pub const ANNOTATION_RESTORED_FROM: &str = "outfit.dev/restored-from";
/// On a Workspace: the VolumeSnapshot of its home taken at its last stop.
pub const ANNOTATION_SNAPSHOT: &str = "outfit.dev/snapshot";
/// On a Workspace: the stop (its `stopped.at`, RFC 3339) [`ANNOTATION_SNAPSHOT`] was taken for.
pub const ANNOTATION_SNAPSHOT_FOR: &str = "outfit.dev/snapshot-for";
/// On a Workspace: where that snapshot stands: `Pending`, `Ready`, `Failed: <why>`,
/// `TimedOut: <why>`, or `NoHome` (nothing to take: an `nfs` or `ephemeral` home).
pub const ANNOTATION_SNAPSHOT_STATE: &str = "outfit.dev/snapshot-state";
/// The name the backend's Events are reported under.
pub const REPORTER: &str = "outfit-workspaces";

/// The Lease in the workspace namespace whose holder runs the lifecycle (one replica of several).
pub const LEASE: &str = "outfit-workspaces";
