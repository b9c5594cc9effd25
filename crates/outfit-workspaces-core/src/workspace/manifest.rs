//! A workspace pod from an operator's manifest, as deic-dk makes it (§1.3–1.4 of the reference):
//! the request's env settings, the mandatory env, the local-registry rewrite, the default restart
//! policy, isolation defaults, the pod's name and labels, and the volumes the backend provides.
//! Pure: no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, LocalObjectReference, PersistentVolumeClaimVolumeSource, Pod,
    Volume,
};
use serde_json::Value;

use crate::{
    model::{
        config::{Config, data_network_address},
        keys, names,
        user::UserId,
    },
    workspace::pod_needs::{NeedsError, PodNeeds},
};

/// Env settings of a create request: container name → env var → value.
pub type Settings = BTreeMap<String, BTreeMap<String, String>>;

/// Why a manifest can't become a workspace pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not YAML or JSON.
    #[error("the manifest is not valid YAML: {0}")]
    Syntax(String),
    /// Not exactly one object.
    #[error("the manifest holds {0} documents; one Pod is expected")]
    Documents(usize),
    /// Not a Pod.
    #[error("the manifest is a {kind:?} of {api_version:?}; only kind Pod of apiVersion v1 is launched")]
    NotAPod {
        /// Its kind.
        kind: String,
        /// Its apiVersion.
        api_version: String,
    },
    /// A field has the wrong shape.
    #[error("the manifest is not a valid Pod: {0}")]
    Invalid(String),
    /// `metadata.name` is missing.
    #[error("the manifest has no metadata.name")]
    NoName,
    /// No containers.
    #[error("the manifest has no containers")]
    NoContainers,
    /// A volumeMount with no volume that the backend does not know how to provide.
    #[error(
        "container {container:?} mounts volume {volume:?}, which the manifest does not declare and the backend can't provide (it provides \"sciencedata\" and \"local\")"
    )]
    UnknownVolume {
        /// The container.
        container: String,
        /// The volume's name.
        volume: String,
    },
    /// What the pod asks for (an ingress port, tokens) is malformed.
    #[error(transparent)]
    Needs(#[from] NeedsError),
}

/// A manifest with the request applied, waiting for its name and storage.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The pod so far.
    pub pod: Pod,
    /// The manifest's `metadata.name`, the stem of the pod's name.
    pub manifest_name: String,
    /// Whether the pod mounts the user's storage (a `sciencedata` volume).
    pub needs_user_storage: bool,
    /// Settings the manifest did not declare and the like: answered to the caller.
    pub warnings: Vec<String>,
}

/// Who asks, and from where.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// The user the workspace is for.
    pub user: &'a UserId,
    /// Their groups as recorded on the Workspace ([`crate::model::user::recorded_groups`]),
    /// given to the pod for PodPolicies; none for deic-dk's `create_pod`, which names no groups.
    pub groups: Option<&'a str>,
    /// The silo address the request came from (loopback mapped to `testingHost`).
    pub silo_ip: &'a str,
    /// The snapshot (a VolumeSnapshot of the user's) the request asks the home to be made from;
    /// the manifest does not read it, the storage step does.
    pub restore: Option<&'a str>,
}

/// Reads `manifest` and applies the request's `settings` and the mandatory values.
pub fn prepare(
    manifest: &str,
    requester: Requester<'_>,
    settings: &Settings,
    config: &Config,
) -> Result<Prepared, ManifestError> {
    let mut pod = read_pod(manifest)?;
    let manifest_name = pod
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(ManifestError::NoName)?;
    let spec = pod.spec.as_mut().ok_or(ManifestError::NoContainers)?;
    if spec.containers.is_empty() {
        return Err(ManifestError::NoContainers);
    }
    let mut warnings = Vec::new();
    apply_settings(&mut spec.containers, settings, &mut warnings);
    apply_mandatory_env(&mut spec.containers, requester, config, &mut warnings);
    if spec.restart_policy.as_deref().is_none_or(str::is_empty) {
        spec.restart_policy = Some(config.default_restart_policy.clone());
    }
    apply_local_registry(spec, config);
    crate::model::isolation::apply_pod_defaults(spec, config.host_users);
    let needs_user_storage = check_volumes(spec)?;
    PodNeeds::read(&pod)?;
    Ok(Prepared {
        pod,
        manifest_name,
        needs_user_storage,
        warnings,
    })
}

/// The one Pod of `manifest` (YAML or JSON), as written: the catalogue reads its fields from it,
/// [`prepare`] builds on it.
pub fn read_pod(manifest: &str) -> Result<Pod, ManifestError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(manifest).map_err(|e| ManifestError::Syntax(e.to_string()))?;
    let documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    let [document] = <[Value; 1]>::try_from(documents).map_err(|d| ManifestError::Documents(d.len()))?;
    let field = |name| {
        document
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (kind, api_version) = (field("kind"), field("apiVersion"));
    if kind != "Pod" || api_version != "v1" {
        return Err(ManifestError::NotAPod { kind, api_version });
    }
    serde_json::from_value(document).map_err(|e| ManifestError::Invalid(e.to_string()))
}

/// deic-dk overwrites the values of env vars the manifest declares; it drops the rest without a
/// word. outfit does the same and says what it dropped.
fn apply_settings(containers: &mut [Container], settings: &Settings, warnings: &mut Vec<String>) {
    for (container_name, vars) in settings {
        let Some(container) = containers.iter_mut().find(|c| &c.name == container_name) else {
            warnings.push(format!(
                "settings for container {container_name:?} ignored: the manifest has no such container"
            ));
            continue;
        };
        for (name, value) in vars {
            let declared = container.env.iter_mut().flatten().filter(|e| &e.name == name);
            let mut found = false;
            for env in declared {
                env.value = Some(value.clone());
                env.value_from = None;
                found = true;
            }
            if !found {
                warnings.push(format!(
                    "setting {name:?} of container {container_name:?} ignored: the manifest does not declare it"
                ));
            }
        }
    }
}

/// The env the backend sets in every container, whatever the request says.
pub const MANDATORY_ENV: [&str; 3] = ["HOME_SERVER_IP", "SD_UID", "HOME_SERVER_HOSTNAME"];

/// `HOME_SERVER_IP`, `SD_UID` and `HOME_SERVER_HOSTNAME`, set in every container.
fn apply_mandatory_env(
    containers: &mut [Container],
    requester: Requester<'_>,
    config: &Config,
    warnings: &mut Vec<String>,
) {
    let mut mandatory = vec![
        ("HOME_SERVER_IP", data_network_address(requester.silo_ip)),
        ("SD_UID", requester.user.as_str().to_owned()),
    ];
    match config.hostname_of(requester.silo_ip) {
        Some(hostname) => mandatory.push(("HOME_SERVER_HOSTNAME", hostname.to_owned())),
        None => warnings.push(format!(
            "HOME_SERVER_HOSTNAME not set: no hostnameList entry for {}",
            requester.silo_ip
        )),
    }
    for container in containers {
        let env = container.env.get_or_insert_with(Vec::new);
        for (name, value) in &mandatory {
            match env.iter_mut().find(|e| e.name == *name) {
                Some(existing) => {
                    existing.value = Some(value.clone());
                    existing.value_from = None;
                }
                None => env.push(EnvVar {
                    name: (*name).to_owned(),
                    value: Some(value.clone()),
                    value_from: None,
                }),
            }
        }
    }
}

/// The images a launch of the manifest `pod` pulls (as its containers name them, `LOCALREGISTRY`
/// rewritten), with the pull secrets it pulls them with: what pulling it ahead needs.
pub fn pulls_of(mut pod: Pod, config: &Config) -> (Vec<String>, Vec<LocalObjectReference>) {
    let Some(spec) = pod.spec.as_mut() else {
        return (Vec::new(), Vec::new());
    };
    apply_local_registry(spec, config);
    let mut images: Vec<String> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .filter_map(|c| c.image.clone())
        .collect();
    images.sort();
    images.dedup();
    (images, spec.image_pull_secrets.clone().unwrap_or_default())
}

/// `LOCALREGISTRY` in an image becomes `localRegistryURL`; the pull secret then replaces the
/// manifest's.
fn apply_local_registry(spec: &mut k8s_openapi::api::core::v1::PodSpec, config: &Config) {
    let mut rewritten = false;
    let init = spec.init_containers.iter_mut().flatten();
    for container in spec.containers.iter_mut().chain(init) {
        if let Some(image) = container.image.as_mut().filter(|i| i.contains("LOCALREGISTRY")) {
            *image = image.replacen("LOCALREGISTRY", &config.local_registry_url, 1);
            rewritten = true;
        }
    }
    if rewritten && !config.local_registry_secret.is_empty() {
        spec.image_pull_secrets = Some(vec![LocalObjectReference {
            name: config.local_registry_secret.clone(),
        }]);
    }
}

/// Checks that every volumeMount without a volume is one the backend provides; says whether the
/// user's storage is mounted.
fn check_volumes(spec: &k8s_openapi::api::core::v1::PodSpec) -> Result<bool, ManifestError> {
    let declared = |name: &str| spec.volumes.iter().flatten().any(|v| v.name == name);
    // Only a volume the backend generates is the user's storage; a manifest that declares its own
    // `sciencedata` volume keeps it, and no PV or PVC is made for nothing (deic-dk makes them).
    let mut needs_storage = false;
    for container in &spec.containers {
        for mount in container.volume_mounts.iter().flatten() {
            match mount.name.as_str() {
                _ if declared(&mount.name) => {}
                "sciencedata" => needs_storage = true,
                "local" => {}
                other => {
                    return Err(ManifestError::UnknownVolume {
                        container: container.name.clone(),
                        volume: other.to_owned(),
                    });
                }
            }
        }
    }
    Ok(needs_storage)
}

/// What the pod needs besides its manifest to be created.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    /// The pod's name.
    pub name: &'a str,
    /// The PVC of the user's storage; none under `storageStrategy: ephemeral`, where the
    /// `sciencedata` volume is an `emptyDir` that goes with the pod.
    pub storage_claim: Option<&'a str>,
    /// When the create is given up (RFC 3339).
    pub deadline: &'a str,
    /// The manifest's URL.
    pub manifest_url: &'a str,
}

/// The pod as it is created: named, labelled `{user, domain, podName}` (deic-dk replaces the
/// manifest's labels with these) plus outfit's marker, annotated with the owner and deadline,
/// and with the volumes the backend provides.
pub fn assemble(prepared: Prepared, requester: Requester<'_>, placement: &Placement<'_>) -> Pod {
    let mut pod = prepared.pod;
    let user = requester.user;
    pod.metadata.name = Some(placement.name.to_owned());
    pod.metadata.namespace = None;
    pod.metadata.generate_name = None;
    pod.metadata.labels = Some(owner_labels(user, placement.name));
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in [
        (keys::ANNOTATION_USER_ID, user.as_str()),
        (keys::ANNOTATION_CREATE_DEADLINE, placement.deadline),
        (keys::ANNOTATION_MANIFEST, placement.manifest_url),
        (keys::ANNOTATION_SILO_IP, requester.silo_ip),
    ] {
        annotations.insert(key.to_owned(), value.to_owned());
    }
    // Set by the backend, never by the manifest: a PodPolicy trusts it from the backend.
    match requester.groups.filter(|groups| !groups.is_empty()) {
        Some(groups) => annotations.insert(keys::ANNOTATION_USER_GROUPS.to_owned(), groups.to_owned()),
        None => annotations.remove(keys::ANNOTATION_USER_GROUPS),
    };
    if let Some(spec) = pod.spec.as_mut() {
        let mut added: Vec<Volume> = Vec::new();
        for mount in spec
            .containers
            .iter()
            .flat_map(|c| c.volume_mounts.iter().flatten())
        {
            let declared = spec
                .volumes
                .iter()
                .flatten()
                .chain(&added)
                .any(|v| v.name == mount.name);
            let claim = match mount.name.as_str() {
                _ if declared => continue,
                "sciencedata" => placement.storage_claim.map(str::to_owned),
                "local" => Some(names::local_claim(&mount.mount_path)),
                // prepare() refused every other name.
                _ => continue,
            };
            added.push(match claim {
                Some(claim_name) => Volume {
                    name: mount.name.clone(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name,
                        read_only: None,
                    }),
                    ..Volume::default()
                },
                None => Volume {
                    name: mount.name.clone(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                },
            });
        }
        if !added.is_empty() {
            spec.volumes.get_or_insert_with(Vec::new).extend(added);
        }
    }
    pod
}

/// The labels of every object made for `user`'s pod `pod_name`: deic-dk's three and outfit's
/// marker.
pub fn owner_labels(user: &UserId, pod_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::LABEL_USER.to_owned(), names::label_value(user.name())),
        (keys::LABEL_DOMAIN.to_owned(), names::label_value(user.domain())),
        (keys::LABEL_POD_NAME.to_owned(), pod_name.to_owned()),
        (keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned()),
    ])
}

#[cfg(test)]
mod tests;
