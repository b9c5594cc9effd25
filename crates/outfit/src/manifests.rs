//! `outfit manifests`: prints the objects a cluster needs, as a YAML stream.

use std::{fmt::Write as _, path::PathBuf, process::ExitCode};

use clap::{Args, ValueEnum};
use outfit_k8s::{
    manifests::{self, Certificates, FailurePolicy, InstallOptions},
    risks::{self, Risk},
    rules::{self, Rules},
};

use outfit_workspaces::install::{
    access::{Access, ApiToken},
    guard::{self, PodSecurity},
};
use outfit_workspaces_core::{cidr::Cidr, model::config::StorageStrategy};

use crate::{
    failure::{EXIT_BAD_INPUT, FlagError, print_stdout},
    sign_in_args::SignInArgs,
};

/// Arguments of `outfit manifests`.
#[derive(Debug, Args)]
pub(crate) struct ManifestsArgs {
    /// Namespace outfit runs in (never sent to the webhook, as kube-system, kube-node-lease and
    /// kube-public are not).
    #[arg(long, default_value_t = InstallOptions::default().namespace)]
    namespace: String,

    /// A namespace whose requests are never sent to the webhook, besides the system ones and
    /// outfit's own (labelling a namespace `outfit.dev/ignore=true` does the same). Repeatable,
    /// or comma-separated.
    #[arg(
        long = "exclude-namespace",
        value_name = "NAMESPACE",
        value_delimiter = ',',
        value_parser = namespace_name,
        conflicts_with = "workspaces"
    )]
    exclude_namespaces: Vec<String>,

    /// A namespace whose pods may reach the admin port (`/metrics`), e.g. Prometheus', of the
    /// webhook or, with --workspaces, the backend. Repeatable, or comma-separated. Without it the
    /// NetworkPolicy admits no pod there (the kubelet's probes, from the node, always pass); the
    /// webhook port is open to any address, as the API server must reach it.
    #[arg(
        long = "monitoring-namespace",
        value_name = "NAMESPACE",
        value_delimiter = ',',
        value_parser = namespace_name,
        conflicts_with = "webhook_url"
    )]
    monitoring_namespaces: Vec<String>,

    /// outfit's container image.
    #[arg(long, default_value_t = InstallOptions::default().image)]
    image: String,

    /// Webhook replicas.
    #[arg(long, default_value_t = InstallOptions::default().replicas)]
    replicas: u32,

    /// What the API server does with a pod when outfit does not answer: `fail` rejects it (no pod
    /// ever misses its policies, but an outage blocks pod creation), `ignore` admits it unmutated.
    #[arg(long, value_enum, default_value_t = Failure::Fail)]
    failure_policy: Failure,

    /// Seconds the API server waits for outfit (1 to 30).
    #[arg(long, default_value_t = InstallOptions::default().timeout_seconds, value_parser = clap::value_parser!(u32).range(1..=30))]
    timeout_seconds: u32,

    /// PEM file of the CA that signed outfit's serving certificate; fills `caBundle`, and the
    /// Deployment mounts the certificate from the Secret `outfit-tls` you create. Without it (and
    /// without --cert-manager), outfit creates its CA and certificate in that Secret on first start,
    /// rotates them, and fills `caBundle` itself.
    #[arg(long, value_name = "PATH", conflicts_with = "cert_manager")]
    ca_file: Option<PathBuf>,

    /// Let cert-manager issue the serving certificate (a self-signed root, a CA Issuer, the
    /// Certificate `outfit-tls`) and inject its CA (`cert-manager.io/inject-ca-from`); outfit
    /// reloads the mounted files.
    #[arg(long, conflicts_with = "workspaces")]
    cert_manager: bool,

    /// Leave the webhook configuration as installed: outfit neither rewrites its `rules` when the
    /// policies' kinds change nor its `caBundle`, and gets no right to. Needs --ca-file or
    /// --cert-manager (outfit's own certificate rotates its CA into `caBundle`).
    #[arg(long, conflicts_with = "workspaces")]
    no_manage_webhook: bool,

    /// Leave out the PodDefault CRD (Kubeflow already installed it): `--without-crds kubeflow.org`.
    #[arg(long)]
    without_poddefault_crd: bool,

    /// Leave out the Gatekeeper mutator CRDs (Gatekeeper already installed them):
    /// `--without-crds mutations.gatekeeper.sh`.
    #[arg(long)]
    without_gatekeeper_crds: bool,

    /// Let outfit read the `<svm>-conn-secret` Secrets of the SVMs the filer injector's
    /// `filers-list` ConfigMap lists in this file (or directory), e.g. from `kubectl get
    /// configmap -n das filers-list -o yaml`: get, list and watch on those names alone, in every
    /// namespace, so that an SVM whose Secret is missing or lacks its S3 keys is skipped, as StatCan
    /// does. Re-run `outfit manifests` when SVMs are added (outfit mounts a new SVM unchecked until
    /// then, with a warning).
    #[arg(long, value_name = "PATH", conflicts_with = "workspaces")]
    filers_list: Option<PathBuf>,

    /// Let outfit read the `<svm>-conn-secret` Secret of this SVM (a vserver of `filers-list`),
    /// as --filers-list does. Repeatable, or comma-separated.
    #[arg(
        long = "filer-svm",
        value_name = "SVM",
        value_delimiter = ',',
        conflicts_with = "workspaces"
    )]
    filer_svms: Vec<String>,

    /// Accepted for scripts written before outfit read the Secrets by name: the grant above is
    /// the same for `outfit serve --filer-plain-secrets`.
    #[arg(long, hide = true)]
    filer_plain_secrets: bool,

    /// Leave out the CRDs of this API group (another project installs them). Repeatable.
    #[arg(long = "without-crds", value_name = "GROUP")]
    without_crds: Vec<String>,

    /// Local mode: print only the CRDs and a webhook configuration that calls outfit at this URL
    /// (for outfit running outside the cluster, e.g. `https://127.0.0.1:8443/mutate`).
    #[arg(long, value_name = "URL", conflicts_with = "workspaces")]
    webhook_url: Option<String>,

    /// Policies (files or directories, as `outfit mutate` reads them) whose kinds the webhook is
    /// called for: pods, plus every kind a Gatekeeper mutator applies to. Without it, pods only.
    #[arg(long, value_name = "PATH", conflicts_with = "workspaces")]
    policies: Vec<PathBuf>,

    /// A resource to call the webhook for besides the policies' (GROUP/VERSION/RESOURCE, or
    /// VERSION/RESOURCE for the core group), e.g. for a CRD's kind: `example.com/v1/widgets`.
    #[arg(long, value_name = "GROUP/VERSION/RESOURCE", conflicts_with = "workspaces")]
    webhook_resource: Vec<outfit_k8s::rules::ResourceRule>,

    /// Call the webhook for every CREATE and UPDATE of every kind (Gatekeeper's rule). Costs: every
    /// write in the selected namespaces waits on outfit, and with --failure-policy fail an outfit
    /// outage blocks them all.
    #[arg(long, conflicts_with_all = ["workspaces", "policies", "webhook_resource"])]
    all_resources: bool,

    /// Print the workspace backend's objects instead of the webhook's: its ServiceAccount,
    /// least-privilege Role and ClusterRole, config, Deployment and Service.
    #[arg(long)]
    workspaces: bool,

    /// With --workspaces: the namespace of the workspace pods (the config's `namespace`).
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "sciencedata-dev",
        requires = "workspaces"
    )]
    workspaces_namespace: String,

    /// With --workspaces: leave out the backend's FlowSchema and priority level
    /// (`flowcontrol.apiserver.k8s.io/v1`), for clusters before Kubernetes 1.29.
    #[arg(long, requires = "workspaces")]
    without_flow_schema: bool,

    /// With --workspaces: the PriorityClass of the backend's pods.
    #[arg(long, value_name = "NAME", requires = "workspaces")]
    priority_class: Option<String>,

    /// With --workspaces: a host path the backend's pods may mount (itself or below it), e.g. a
    /// GPU's `/dev/dri`; by default none. Repeatable, or comma-separated.
    #[arg(long = "allowed-host-path", value_name = "PATH", value_delimiter = ',', value_parser = guard::check_host_path, requires = "workspaces")]
    allowed_host_paths: Vec<String>,

    /// With --workspaces: a capability the backend's pods may add, e.g. `SYS_ADMIN`; by default
    /// none. Repeatable, or comma-separated.
    #[arg(long = "allowed-capability", value_name = "CAPABILITY", value_delimiter = ',', value_parser = guard::check_capability, requires = "workspaces")]
    allowed_capabilities: Vec<String>,

    /// With --workspaces: the config's `nfsStorageRoot`, under which alone the backend may create
    /// NFS PersistentVolumes.
    #[arg(long, value_name = "PATH", default_value = "/tank/storage", value_parser = guard::check_host_path, requires = "workspaces")]
    nfs_storage_root: String,

    /// With --workspaces: where homes live (the config's `storageStrategy`): `nfs` (a volume on
    /// the silo under --nfs-storage-root, deic-dk's), `per-user` (a claim per user from
    /// --storage-class, provisioned by the cluster: the backend gets no rights on
    /// PersistentVolumes), `per-workspace` (a claim per workspace, going with it), `ephemeral`
    /// (an emptyDir).
    #[arg(long, value_name = "STRATEGY", default_value = "nfs", value_parser = StorageStrategy::parse, requires = "workspaces")]
    storage_strategy: StorageStrategy,

    /// With --workspaces: the StorageClass of the homes (`storageClassName`); by default `nfs`
    /// for --storage-strategy nfs, the cluster's default class for `per-user`.
    #[arg(long, value_name = "CLASS", value_parser = storage_class_name, requires = "workspaces")]
    storage_class: Option<String>,

    /// With --workspaces: the VolumeSnapshotClass homes are snapshotted with
    /// (`snapshotClassName`): on every stop of a workspace and before a home is removed, which
    /// waits for it; the backend gets rights on VolumeSnapshots. Homes of the `per-user` and
    /// `per-workspace` strategies only.
    #[arg(long, value_name = "CLASS", value_parser = storage_class_name, requires = "workspaces")]
    snapshot_class: Option<String>,

    /// With --snapshot-class: the ready snapshots kept per home (`snapshotsKept`).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..), requires = "snapshot_class")]
    snapshots_kept: u16,

    /// With --workspaces: pull the catalogue's images ahead onto the nodes (`prePull: {enabled:
    /// true}`; docs/workspaces/internals.md, "Start time").
    #[arg(long, requires = "workspaces")]
    pre_pull: bool,

    /// With --workspaces: keep this many placeholder pods holding room for launches
    /// (`placeholders: {count: N}`).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "workspaces")]
    placeholders: u16,

    /// With --workspaces: the Pod Security level the workspace namespace enforces: `baseline` by
    /// default (no privileged container, host namespace, port or path), `privileged` when an
    /// allowed host path or capability needs it (the guard still holds pods to the list).
    #[arg(long, value_name = "LEVEL", value_parser = PodSecurity::parse, requires = "workspaces")]
    workspaces_pod_security: Option<PodSecurity>,

    /// With --workspaces: deic-dk's API token is key `token` of this existing Secret in
    /// --namespace (kept when the install is applied again). By default the install prints a
    /// Secret with a new random token; the frontend reads it with
    /// `kubectl -n NAMESPACE get secret outfit-workspaces-api-token -o jsonpath='{.data.token}' | base64 -d`.
    #[arg(long, value_name = "SECRET", value_parser = secret_name, requires = "workspaces")]
    api_token_secret: Option<String>,

    /// With --workspaces: a namespace of the frontend that calls deic-dk's API; the backend's
    /// NetworkPolicy admits the API port from it. Repeatable, or comma-separated.
    #[arg(long = "frontend-namespace", value_name = "NAMESPACE", value_delimiter = ',', value_parser = namespace_name, requires = "workspaces")]
    frontend_namespaces: Vec<String>,

    /// With --workspaces: a network deic-dk's API answers (`allowedSourceCidrs`), e.g. the
    /// frontend's pods' or silos' `10.0.0.0/24`; none by default (loopback only: deic-dk's API
    /// answers no one until its frontend is named). Repeatable, or comma-separated.
    #[arg(long = "frontend-cidr", value_name = "CIDR", value_delimiter = ',', value_parser = cidr_text, requires = "workspaces")]
    frontend_cidrs: Vec<String>,

    /// With --workspaces: the Ingress controller's namespace, from which users reach the page and
    /// the native API (the NetworkPolicy admits the API port from it). Repeatable.
    #[arg(long = "ingress-namespace", value_name = "NAMESPACE", value_delimiter = ',', value_parser = namespace_name, default_value = "ingress-nginx", requires = "workspaces")]
    ingress_namespaces: Vec<String>,

    /// Print an install that puts the cluster at risk anyway, naming the risk: `single-replica`
    /// (fewer than 2 webhook replicas with --failure-policy fail: while it is down every pod
    /// create is refused), `workspaces-in-system-namespace` (the workspace pods in outfit's own
    /// or a system namespace), `compat-api-without-token` (with --workspaces: deic-dk's API
    /// answers any caller in its networks for any user, as deic-dk does). Repeatable, or
    /// comma-separated.
    #[arg(long = "accept-risk", value_name = "RISK", value_delimiter = ',', value_parser = Risk::parse)]
    accept_risks: Vec<Risk>,

    #[command(flatten)]
    sign_in: SignInArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Failure {
    Fail,
    Ignore,
}

/// Runs `outfit manifests`.
pub(crate) fn run(args: &ManifestsArgs) -> ExitCode {
    let ca_bundle_pem = match &args.ca_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(pem) if pem.contains("-----BEGIN CERTIFICATE-----") => Some(pem),
            Ok(_) => {
                eprintln!("error: {}: no PEM certificate in the file", path.display());
                return ExitCode::from(EXIT_BAD_INPUT);
            }
            Err(e) => {
                eprintln!("error: {}: cannot read: {e}", path.display());
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        },
        None => None,
    };
    if args.no_manage_webhook && args.ca_file.is_none() && !args.cert_manager && args.webhook_url.is_none() {
        eprintln!(
            "error: --no-manage-webhook needs --ca-file or --cert-manager: outfit's own certificate rotates its CA into caBundle"
        );
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    if let Err(refused) = refuse_risks(args) {
        eprintln!("error: {refused}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let (rules, listed_names, without_crds) =
        match (webhook_rules(args), filer_secret_names(args), without_crds(args)) {
            (Ok(rules), Ok(names), Ok(groups)) => (rules, names, groups),
            (Err(error), ..) | (_, Err(error), _) | (.., Err(error)) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        };
    let options = InstallOptions {
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        replicas: args.replicas,
        failure_policy: match args.failure_policy {
            Failure::Fail => FailurePolicy::Fail,
            Failure::Ignore => FailurePolicy::Ignore,
        },
        excluded_namespaces: args.exclude_namespaces.clone(),
        timeout_seconds: args.timeout_seconds,
        monitoring_namespaces: args.monitoring_namespaces.clone(),
        ca_bundle_pem,
        families: outfit_core::kinds::FAMILIES,
        without_crds,
        listed_names,
        rules,
        certificates: if args.cert_manager {
            Certificates::CertManager
        } else if args.ca_file.is_some() {
            Certificates::Provided
        } else {
            Certificates::Managed
        },
        manage_webhook: !args.no_manage_webhook,
    };
    let objects = if args.workspaces {
        let allowed = guard::Allowed {
            host_paths: args.allowed_host_paths.clone(),
            capabilities: args.allowed_capabilities.clone(),
            nfs_storage_root: args.nfs_storage_root.clone(),
        };
        let pod_security = match guard::pod_security(args.workspaces_pod_security, &allowed) {
            Ok(level) => level,
            Err(error) => {
                eprintln!("error: --workspaces-pod-security: {error}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        };
        outfit_workspaces::install::objects(&outfit_workspaces::install::InstallOptions {
            namespace: args.namespace.clone(),
            workspace_namespace: args.workspaces_namespace.clone(),
            image: args.image.clone(),
            replicas: args.replicas,
            flow_schema: !args.without_flow_schema,
            priority_class: args.priority_class.clone(),
            allowed,
            pod_security,
            access: access(args),
            storage_strategy: args.storage_strategy,
            storage_class: args
                .storage_class
                .clone()
                .unwrap_or_else(|| match args.storage_strategy {
                    StorageStrategy::Nfs => "nfs".to_owned(),
                    StorageStrategy::PerUser | StorageStrategy::PerWorkspace | StorageStrategy::Ephemeral => {
                        String::new()
                    }
                }),
            snapshots: args
                .snapshot_class
                .clone()
                .map(|class| (class, usize::from(args.snapshots_kept))),
            pre_pull: args.pre_pull,
            placeholders: usize::from(args.placeholders),
            sign_in: args.sign_in.sign_in(random_token),
        })
    } else {
        match &args.webhook_url {
            Some(url) => manifests::local_webhook(&options, url),
            None => manifests::install(&options),
        }
    };
    match serde_saphyr::to_string_multiple(&objects) {
        Ok(yaml) => print_stdout(&yaml),
        Err(e) => {
            eprintln!("error: rendering YAML: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Who may reach the backend: deic-dk's API token (a new one, an existing Secret's, or none as an
/// accepted risk), its callers' networks and namespaces, and monitoring's.
fn access(args: &ManifestsArgs) -> Access {
    let token = if args.accept_risks.contains(&Risk::CompatApiWithoutToken) {
        ApiToken::Open
    } else if let Some(secret) = &args.api_token_secret {
        ApiToken::Existing(secret.clone())
    } else {
        ApiToken::Generated(random_token())
    };
    Access {
        token,
        frontend_namespaces: args.frontend_namespaces.clone(),
        frontend_cidrs: args.frontend_cidrs.clone(),
        ingress_namespaces: args.ingress_namespaces.clone(),
        monitoring_namespaces: args.monitoring_namespaces.clone(),
    }
}

/// 32 random bytes from the TLS stack's generator (the operating system's), in hex.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .expect("the operating system's random number generator");
    bytes.iter().fold(String::with_capacity(64), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}

/// A network as `allowedSourceCidrs` takes it.
fn cidr_text(text: &str) -> Result<String, String> {
    text.parse::<Cidr>()
        .map(|_| text.to_owned())
        .map_err(|error| error.to_string())
}

/// Refuses an install that puts the cluster at risk, unless `--accept-risk` names the risk. Local
/// mode (`--webhook-url`) prints no Deployment, so its replicas risk nothing.
fn refuse_risks(args: &ManifestsArgs) -> Result<(), risks::Refused> {
    if args.workspaces {
        return risks::check_workspace_namespace(
            &args.workspaces_namespace,
            &args.namespace,
            &args.accept_risks,
        );
    }
    if args.webhook_url.is_none() {
        risks::check_webhook(
            args.replicas,
            args.failure_policy == Failure::Fail,
            &args.accept_risks,
        )?;
    }
    Ok(())
}

/// A namespace's name as the API server takes it (a DNS label), so that a typo is refused here
/// rather than by the API server when the configuration is applied.
fn namespace_name(name: &str) -> Result<String, String> {
    // A namespace's name is a DNS label, as a pod's is.
    outfit_workspaces_core::model::names::check_pod_name(name)
        .map(|()| name.to_owned())
        .map_err(|_| {
            "a namespace's name is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
                .to_owned()
        })
}

/// A Secret's name, held to a DNS label as a namespace's is (a subset of what the API server
/// takes, and what the install's own Secrets use).
fn secret_name(name: &str) -> Result<String, String> {
    namespace_name(name).map_err(|_| {
        "a Secret's name here is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
            .to_owned()
    })
}

/// A StorageClass's name: a DNS subdomain (lower-case letters, digits, '-' and '.').
fn storage_class_name(name: &str) -> Result<String, String> {
    let plain =
        !name.is_empty() && name.len() <= 253 && name.split('.').all(|label| namespace_name(label).is_ok());
    if plain {
        Ok(name.to_owned())
    } else {
        Err("a StorageClass's name is lower-case letters, digits, '-' and '.' (a DNS subdomain)".to_owned())
    }
}

/// The webhook's rules: from the policies given, or Gatekeeper's everything.
fn webhook_rules(args: &ManifestsArgs) -> Result<Rules, FlagError> {
    if args.all_resources {
        return Ok(Rules::AllResources);
    }
    if args.policies.is_empty() {
        return Ok(if args.webhook_resource.is_empty() {
            Rules::Pods
        } else {
            Rules::Resources(args.webhook_resource.clone())
        });
    }
    let documents = outfit_core::source::read_paths(&args.policies)?;
    let mut builder = outfit_core::PolicySet::builder();
    builder.add_all(documents.iter());
    let (set, mut report) = builder.build();
    if !report.errors.is_empty() {
        let count = report.errors.len();
        let first = Box::new(report.errors.swap_remove(0));
        return Err(FlagError::InvalidPolicies { first, count });
    }
    Ok(rules::from_policies(&set, &args.webhook_resource)?)
}

/// The API groups whose CRDs are left out, the two older flags included; each must be a group
/// outfit installs CRDs of.
fn without_crds(args: &ManifestsArgs) -> Result<Vec<String>, FlagError> {
    let mut groups = args.without_crds.clone();
    if args.without_poddefault_crd {
        groups.push(outfit_core::poddefault::POLICY_KIND.info().group.to_owned());
    }
    if args.without_gatekeeper_crds {
        groups.push(outfit_core::gatekeeper::GROUP.to_owned());
    }
    outfit_k8s::crds::check_groups(outfit_core::kinds::FAMILIES, &groups)?;
    Ok(groups)
}

/// The filer injector's Secrets outfit may read: those of the SVMs `--filer-svm` names and
/// `--filers-list` lists.
fn filer_secret_names(args: &ManifestsArgs) -> Result<Vec<String>, FlagError> {
    use outfit_core::filer;
    let mut svms = Vec::new();
    for svm in &args.filer_svms {
        if filer::secret_names([svm.as_str()]).is_empty() {
            return Err(FlagError::FilerSvm(svm.clone()));
        }
        svms.push(svm.clone());
    }
    if let Some(path) = &args.filers_list {
        let error = |reason: String| FlagError::FilersList {
            path: path.display().to_string(),
            reason,
        };
        let documents =
            outfit_core::source::read_paths(std::slice::from_ref(path)).map_err(|e| error(e.to_string()))?;
        let lists: Vec<_> = documents
            .iter()
            .filter(|d| d.kind() == "ConfigMap" && d.name() == filer::FILERS_LIST)
            .collect();
        if lists.is_empty() {
            return Err(error(format!("no ConfigMap named {}", filer::FILERS_LIST)));
        }
        for list in lists {
            let vservers = filer::listed_vservers(&list.value)
                .map_err(|reason| error(format!("{}: {reason}", list.origin)))?;
            svms.extend(vservers);
        }
    }
    Ok(filer::secret_names(svms.iter().map(String::as_str)))
}
