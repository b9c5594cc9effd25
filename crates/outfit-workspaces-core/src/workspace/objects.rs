//! The objects a workspace pod comes with: the user's NFS storage (PV and PVC), the ssh NodePort
//! Service, the http Service and its Ingress. Per-pod objects are deleted with their pod and owned
//! by it, so the cluster's garbage collector removes them too, outfit running or not.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        core::v1::{
            NFSVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
            PersistentVolumeClaimSpec, PersistentVolumeSpec, Pod, Service, ServicePort, ServiceSpec,
            VolumeResourceRequirements,
        },
        networking::v1::{
            HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
            IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, OwnerReference},
        util::intstr::IntOrString,
    },
};

use crate::model::{
    config::{Config, StorageStrategy},
    keys, names,
    user::UserId,
};

/// The reference that makes `pod` own an object. `None` for a pod the API server has not
/// returned yet (no uid).
pub fn owned_by(pod: &Pod) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// The metadata of an object made for `pod`: `name`, the pod's namespace, deic-dk's
/// `createdForPod` label with outfit's marker, and `owner` as its only owner.
pub fn per_pod_meta(name: String, pod: &Pod, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(BTreeMap::from([
            (keys::LABEL_CREATED_FOR_POD.to_owned(), owner.name.clone()),
            (keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned()),
        ])),
        owner_references: Some(vec![owner.clone()]),
        namespace: pod.metadata.namespace.clone(),
        ..ObjectMeta::default()
    }
}

/// `<pod>-ssh`: NodePort 22 → 22, selecting the pod by its labels.
pub fn ssh_service(pod: &Pod, owner: &OwnerReference) -> Service {
    service(pod, owner, names::ssh_service(&owner.name), "NodePort", "ssh", 22)
}

/// `<pod>-http`: ClusterIP on the ingress port.
pub fn http_service(pod: &Pod, owner: &OwnerReference, port: i32) -> Service {
    service(
        pod,
        owner,
        names::http_service(&owner.name),
        "ClusterIP",
        "http",
        port,
    )
}

fn service(
    pod: &Pod,
    owner: &OwnerReference,
    name: String,
    kind: &str,
    port_name: &str,
    port: i32,
) -> Service {
    Service {
        metadata: per_pod_meta(name, pod, owner),
        spec: Some(ServiceSpec {
            type_: Some(kind.to_owned()),
            selector: pod.metadata.labels.clone(),
            ports: Some(vec![ServicePort {
                name: Some(port_name.to_owned()),
                port,
                target_port: Some(IntOrString::Int(port)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The NFS path of `user`'s storage: `<nfsStorageRoot>/<user id>`, as deic-dk names it.
fn user_path(user: &UserId, config: &Config) -> String {
    format!(
        "{}/{}",
        config.nfs_storage_root.trim_end_matches('/'),
        user.as_str()
    )
}

/// Whether the backend's workspace proxy serves `pod` (issue 42): a Workspace's pod (the native
/// API's), with `proxyDomain` set. Such a pod gets no HTTP Service nor Ingress of its own: only
/// the proxy, which signs its users in, reaches it. deic-dk's pods keep theirs.
pub fn proxied(pod: &Pod, config: &Config) -> bool {
    config.proxy_domain.is_some()
        && pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.kind == "Workspace" && owner.api_version == "outfit.dev/v1alpha1")
}

/// Where a pod's app is opened: its host under `proxyDomain` when [`proxied`], else its
/// Ingress's.
pub fn app_url(pod: &Pod, config: &Config) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    match &config.proxy_domain {
        Some(domain) if proxied(pod, config) => {
            let oidc = config.oidc.as_ref();
            let scheme = if oidc.is_none_or(|oidc| oidc.secure()) {
                "https"
            } else {
                "http"
            };
            let port = oidc
                .and_then(|oidc| oidc.port())
                .map(|port| format!(":{port}"))
                .unwrap_or_default();
            format!("{scheme}://{name}.{domain}{port}")
        }
        _ => format!("https://{}", ingress_host(name, config)),
    }
}

/// The host of a pod's Ingress: `<pod>.<ingressDomain>`.
pub fn ingress_host(pod_name: &str, config: &Config) -> String {
    format!("{pod_name}.{}", config.ingress_domain)
}

/// `<pod>-ingress`: `https://<pod>.<ingressDomain>/` → `<pod>-http`, with the wildcard secret.
pub fn ingress(pod: &Pod, owner: &OwnerReference, port: i32, config: &Config) -> Ingress {
    let host = ingress_host(&owner.name, config);
    Ingress {
        metadata: per_pod_meta(names::ingress(&owner.name), pod, owner),
        spec: Some(IngressSpec {
            ingress_class_name: config.ingress_class_name.clone(),
            tls: Some(vec![IngressTLS {
                hosts: Some(vec![host.clone()]),
                secret_name: Some(config.ingress_wildcard_secret.clone()),
            }]),
            rules: Some(vec![IngressRule {
                host: Some(host),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".to_owned()),
                        path_type: "Prefix".to_owned(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: names::http_service(&owner.name),
                                port: Some(ServiceBackendPort {
                                    number: Some(port),
                                    name: None,
                                }),
                            }),
                            resource: None,
                        },
                    }],
                }),
            }]),
            default_backend: None,
        }),
        status: None,
    }
}

/// A claim the class's provisioner fills (`per-user` and `per-workspace` homes), marked with its
/// strategy: `storageSize`, `storageAccessModes`, `storageClassName` (the cluster's default class
/// when empty).
fn provisioned(
    mut metadata: ObjectMeta,
    strategy: StorageStrategy,
    config: &Config,
    size: &str,
) -> PersistentVolumeClaim {
    metadata.annotations.get_or_insert_with(BTreeMap::new).insert(
        keys::ANNOTATION_STORAGE_STRATEGY.to_owned(),
        strategy.name().to_owned(),
    );
    PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(config.storage_access_modes.clone()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                limits: None,
            }),
            storage_class_name: (!config.storage_class_name.is_empty())
                .then(|| config.storage_class_name.clone()),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// The home of workspace `name` under `storageStrategy: per-workspace`: a provisioned claim
/// owned by `owner` (its Workspace, or for deic-dk's API its pod), which takes it with it. Not
/// the owner's controller: the Workspace controls its pod alone.
pub fn workspace_home(
    name: &str,
    user: &UserId,
    owner: &OwnerReference,
    config: &Config,
    size: &str,
) -> PersistentVolumeClaim {
    let metadata = ObjectMeta {
        name: Some(names::home_claim(name)),
        labels: Some(BTreeMap::from([
            (keys::LABEL_USER.to_owned(), names::label_value(user.name())),
            (keys::LABEL_DOMAIN.to_owned(), names::label_value(user.domain())),
            (keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned()),
        ])),
        annotations: Some(BTreeMap::from([(
            keys::ANNOTATION_USER_ID.to_owned(),
            user.as_str().to_owned(),
        )])),
        owner_references: Some(vec![OwnerReference {
            controller: None,
            ..owner.clone()
        }]),
        ..ObjectMeta::default()
    };
    provisioned(metadata, StorageStrategy::PerWorkspace, config, size)
}

/// The size `pod`'s home is asked to have: its manifest's `outfit.dev/storage-size` when larger
/// than `storageSize`, else `storageSize`; an annotation that is not a size is refused, naming it.
pub fn home_size(pod: &Pod, config: &Config) -> Result<String, String> {
    let Some(asked) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ANNOTATION_STORAGE_SIZE))
    else {
        return Ok(config.storage_size.clone());
    };
    let asked_bytes = outfit_core::quantity::bytes(asked)
        .map_err(|e| format!("{}: {asked:?} is not a size ({e})", keys::ANNOTATION_STORAGE_SIZE))?;
    let default_bytes = outfit_core::quantity::bytes(&config.storage_size).unwrap_or(0);
    Ok(if asked_bytes > default_bytes {
        asked.clone()
    } else {
        config.storage_size.clone()
    })
}

/// Whether `claim` asks for less than `size` (both read as bytes; a claim without a size does).
pub fn smaller_than(claim: &PersistentVolumeClaim, size: &str) -> bool {
    let has = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| outfit_core::quantity::bytes(&q.0).ok())
        .unwrap_or(0);
    outfit_core::quantity::bytes(size).is_ok_and(|wanted| wanted > has)
}

/// Where a user's storage lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// The PV's and the PVC's name.
    pub name: String,
    /// The NFS server: the silo the create came from.
    pub server: String,
    /// `<nfsStorageRoot>/<user id>`.
    pub path: String,
}

impl Storage {
    /// The storage of `user` on the silo `silo_ip`, under deic-dk's name or `name`.
    pub fn new(user: &UserId, silo_ip: &str, name: String, config: &Config) -> Self {
        Self {
            name,
            server: silo_ip.to_owned(),
            path: user_path(user, config),
        }
    }

    /// The name, labels and owner annotation the PV and the PVC both carry.
    fn metadata(&self, user: &UserId) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            labels: Some(self.labels(user)),
            annotations: Some(BTreeMap::from([(
                keys::ANNOTATION_USER_ID.to_owned(),
                user.as_str().to_owned(),
            )])),
            ..ObjectMeta::default()
        }
    }

    fn labels(&self, user: &UserId) -> BTreeMap<String, String> {
        BTreeMap::from([
            (keys::LABEL_NAME.to_owned(), names::label_value(&self.name)),
            (keys::LABEL_USER.to_owned(), names::label_value(user.name())),
            (keys::LABEL_DOMAIN.to_owned(), names::label_value(user.domain())),
            (keys::LABEL_SERVER.to_owned(), names::label_value(&self.server)),
            (keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned()),
        ])
    }

    /// The PV, as deic-dk makes it: NFS, ReadWriteMany, Retain (the data outlives the objects),
    /// `hard,nfsvers=4.1`, bound ahead to the PVC.
    pub fn volume(&self, user: &UserId, config: &Config) -> PersistentVolume {
        PersistentVolume {
            metadata: self.metadata(user),
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(vec!["ReadWriteMany".to_owned()]),
                capacity: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(config.storage_size.clone()),
                )])),
                persistent_volume_reclaim_policy: Some("Retain".to_owned()),
                storage_class_name: Some(config.storage_class_name.clone()),
                mount_options: Some(vec!["hard".to_owned(), "nfsvers=4.1".to_owned()]),
                nfs: Some(NFSVolumeSource {
                    server: self.server.clone(),
                    path: self.path.clone(),
                    read_only: None,
                }),
                claim_ref: Some(ObjectReference {
                    namespace: Some(config.namespace.clone()),
                    name: Some(self.name.clone()),
                    ..ObjectReference::default()
                }),
                ..PersistentVolumeSpec::default()
            }),
            status: None,
        }
    }

    /// The PVC, pinned to the PV and naming its storage class (deic-dk leaves the class out, so
    /// its claims bind only in clusters without a default class).
    pub fn claim(&self, user: &UserId, config: &Config) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: self.metadata(user),
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteMany".to_owned()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_owned(),
                        Quantity(config.storage_size.clone()),
                    )])),
                    limits: None,
                }),
                storage_class_name: Some(config.storage_class_name.clone()),
                volume_name: Some(self.name.clone()),
                ..PersistentVolumeClaimSpec::default()
            }),
            status: None,
        }
    }

    /// The claim of a `per-user` home: provisioned by `storageClassName`'s provisioner (the
    /// cluster's default class when empty), `storageSize`, `storageAccessModes`; outfit writes no
    /// volume. Marked with its strategy, so that the sweep keeps it after the user's last
    /// workspace.
    pub fn provisioned_claim(&self, user: &UserId, config: &Config, size: &str) -> PersistentVolumeClaim {
        provisioned(self.metadata(user), StorageStrategy::PerUser, config, size)
    }

    /// Whether an existing PV is this user's: made for the same id (by outfit) or, for a PV
    /// deic-dk made, exporting this user's path.
    pub fn belongs_to(volume: &PersistentVolume, user: &UserId, config: &Config) -> bool {
        if let Some(owner) = crate::model::user::owner_of(volume) {
            return owner == user.as_str();
        }
        let want = user_path(user, config);
        volume
            .spec
            .as_ref()
            .and_then(|s| s.nfs.as_ref())
            .is_some_and(|nfs| nfs.path == want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::Oidc;

    fn config() -> Config {
        let env = |var: &str| (var == "BACKEND_INGRESSDOMAIN").then(|| "pods.example".to_owned());
        Config::load(None, env).unwrap().0
    }

    #[test]
    fn a_workspace_behind_the_proxy_opens_at_its_host_and_a_deic_dk_pod_at_its_ingress() {
        let mut config = config();
        let deic_dk = pod();
        let mut native = pod();
        native.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "outfit.dev/v1alpha1".to_owned(),
            kind: "Workspace".to_owned(),
            name: "jupyter-alice-dtu-dk".to_owned(),
            uid: "w-1".to_owned(),
            ..OwnerReference::default()
        }]);
        assert!(!proxied(&native, &config), "no proxyDomain");
        assert_eq!(
            app_url(&native, &config),
            "https://jupyter-alice-dtu-dk.pods.example"
        );
        config.proxy_domain = Some("ws.example".to_owned());
        assert!(proxied(&native, &config) && !proxied(&deic_dk, &config));
        assert_eq!(
            app_url(&native, &config),
            "https://jupyter-alice-dtu-dk.ws.example"
        );
        assert_eq!(
            app_url(&deic_dk, &config),
            "https://jupyter-alice-dtu-dk.pods.example"
        );
        // The backend's own port and scheme, as its sign-in's redirect names them: the proxy
        // serves the workspaces' hosts on the same listener.
        for (redirect, url) in [
            (
                "http://127.0.0.1:8080/auth/callback",
                "http://jupyter-alice-dtu-dk.ws.example:8080",
            ),
            (
                "https://[::1]/auth/callback",
                "https://jupyter-alice-dtu-dk.ws.example",
            ),
            (
                "https://w.example.org:8443/auth/callback",
                "https://jupyter-alice-dtu-dk.ws.example:8443",
            ),
        ] {
            config.oidc = Some(Oidc::example(redirect));
            assert_eq!(app_url(&native, &config), url, "{redirect}");
        }
    }

    fn pod() -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("jupyter-alice-dtu-dk".to_owned());
        pod.metadata.namespace = Some("ws".to_owned());
        pod.metadata.uid = Some("uid-1".to_owned());
        pod.metadata.labels = Some(BTreeMap::from([("user".to_owned(), "alice".to_owned())]));
        pod
    }

    #[test]
    fn per_pod_objects_are_owned_by_the_pod_and_labelled_as_deic_dk_labels_them() {
        let (pod, config) = (pod(), config());
        let owner = owned_by(&pod).unwrap();
        let ssh = ssh_service(&pod, &owner);
        let http = http_service(&pod, &owner, 8888);
        let ingress = ingress(&pod, &owner, 8888, &config);
        for meta in [&ssh.metadata, &http.metadata, &ingress.metadata] {
            assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "uid-1");
            assert_eq!(
                meta.labels.as_ref().unwrap()["createdForPod"],
                "jupyter-alice-dtu-dk"
            );
        }
        assert_eq!(ssh.metadata.name.as_deref(), Some("jupyter-alice-dtu-dk-ssh"));
        assert_eq!(ssh.spec.as_ref().unwrap().type_.as_deref(), Some("NodePort"));
        assert_eq!(ssh.spec.as_ref().unwrap().selector, pod.metadata.labels);
        assert_eq!(http.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port, 8888);
        let spec = ingress.spec.unwrap();
        assert_eq!(
            spec.rules.unwrap()[0].host.as_deref(),
            Some("jupyter-alice-dtu-dk.pods.example")
        );
        assert_eq!(
            spec.tls.unwrap()[0].secret_name.as_deref(),
            Some("user-pods-wildcard")
        );
        assert!(owned_by(&Pod::default()).is_none());
    }

    #[test]
    fn a_per_user_home_is_a_claim_the_class_provisions() {
        let user = UserId::parse("alice@dtu.dk").unwrap();
        let mut config = config();
        config.storage_class_name = String::new();
        config.storage_access_modes = vec!["ReadWriteOnce".to_owned()];
        let storage = Storage::new(&user, "10.0.0.11", names::storage_name(&user), &config);
        let claim = storage.provisioned_claim(&user, &config, "10Gi");
        let spec = claim.spec.as_ref().unwrap();
        // No class: the cluster's default; no volume named: the provisioner makes one.
        assert_eq!(spec.storage_class_name, None);
        assert_eq!(spec.volume_name, None);
        assert_eq!(
            spec.access_modes.as_deref(),
            Some(&["ReadWriteOnce".to_owned()][..])
        );
        let annotations = claim.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[keys::ANNOTATION_STORAGE_STRATEGY], "per-user");
        assert_eq!(crate::model::user::owner_of(&claim), Some("alice@dtu.dk"));
        config.storage_class_name = "fast-ssd".to_owned();
        let claim = storage.provisioned_claim(&user, &config, "10Gi");
        assert!(smaller_than(&claim, "50Gi") && !smaller_than(&claim, "10240Mi"));
        assert_eq!(
            claim.spec.unwrap().storage_class_name.as_deref(),
            Some("fast-ssd")
        );
    }

    #[test]
    fn a_manifest_asks_for_a_larger_home_never_a_smaller_one() {
        let config = config();
        let mut pod = pod();
        assert_eq!(home_size(&pod, &config), Ok(config.storage_size.clone()));
        let mut ask = |size: &str| {
            pod.metadata.annotations = Some(BTreeMap::from([(
                keys::ANNOTATION_STORAGE_SIZE.to_owned(),
                size.to_owned(),
            )]));
            home_size(&pod, &config)
        };
        assert_eq!(ask("50Gi"), Ok("50Gi".to_owned()));
        assert_eq!(ask("1Gi"), Ok(config.storage_size.clone()));
        let refused = ask("lots").unwrap_err();
        assert!(
            refused.contains("outfit.dev/storage-size") && refused.contains("lots"),
            "{refused}"
        );
    }

    #[test]
    fn storage_is_deic_dks_nfs_with_a_storage_class() {
        let config = config();
        let user = UserId::parse("alice@dtu.dk").unwrap();
        let storage = Storage::new(&user, "10.0.0.11", names::storage_name(&user), &config);
        let volume = storage.volume(&user, &config);
        let spec = volume.spec.as_ref().unwrap();
        assert_eq!(spec.nfs.as_ref().unwrap().path, "/tank/storage/alice@dtu.dk");
        assert_eq!(spec.nfs.as_ref().unwrap().server, "10.0.0.11");
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        let claim = storage.claim(&user, &config);
        assert_eq!(
            claim.spec.as_ref().unwrap().storage_class_name.as_deref(),
            Some("nfs")
        );
        assert_eq!(
            claim.spec.as_ref().unwrap().volume_name.as_deref(),
            Some("user-storage-alice-dtu-dk")
        );
        assert!(Storage::belongs_to(&volume, &user, &config));
        let other = UserId::parse("alice-dtu@dk").unwrap();
        assert!(!Storage::belongs_to(&volume, &other, &config));
        // A PV deic-dk made (no annotation) is recognised by its path.
        let mut legacy = volume.clone();
        legacy.metadata.annotations = None;
        assert!(Storage::belongs_to(&legacy, &user, &config));
        assert!(!Storage::belongs_to(&legacy, &other, &config));
    }
}
