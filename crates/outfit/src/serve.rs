//! `outfit serve`: the admission webhook. Flags map onto [`outfit_server::Config`]; every flag can
//! also come from an `OUTFIT_*` environment variable (flag > environment > default).
//!
//! Signals: SIGTERM or SIGINT start a graceful shutdown (a second one exits at once); SIGHUP
//! re-reads the policies and the certificate now.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::Args;
use outfit_http::shell;
use outfit_k8s::{
    lease::Timing,
    manifests::{self, InstallOptions},
};
use outfit_server::{
    CompileOptions, Config, Election, Limits, Registration, SecretSettings, Server, Timeouts, TlsSource,
    authority::Lifetimes,
};
use tokio_util::sync::CancellationToken;

use crate::{
    daemon::{self, LogFormat},
    failure::{Failure, FlagError},
};

/// Arguments of `outfit serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Policy file, or directory searched recursively for *.yaml, *.yml and *.json; watched for
    /// changes. Repeatable. `Namespace` objects found there supply namespace labels for matching.
    #[arg(
        long = "policies",
        value_name = "PATH",
        required_unless_present = "from_cluster",
        env = "OUTFIT_POLICIES",
        value_delimiter = ','
    )]
    policies: Vec<PathBuf>,

    /// Also read PodDefaults, Gatekeeper mutators, Namespace labels and the filer injector's
    /// ConfigMaps and Secrets from the API server
    /// (in-cluster config, or KUBECONFIG), watched: changes apply without a restart, the last
    /// policies keep serving while the API server is away, and /readyz waits for the first read.
    #[arg(long, env = "OUTFIT_FROM_CLUSTER")]
    from_cluster: bool,

    /// Namespace of namespaced policies whose metadata names none.
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value_t = config_defaults().compile.default_namespace,
        env = "OUTFIT_DEFAULT_NAMESPACE"
    )]
    default_namespace: String,

    /// Namespace of the filer injector's ConfigMaps `filers-list` and
    /// `filer-sidecar-injector-json` (StatCan deploys it in `das`).
    #[arg(long, value_name = "NAMESPACE", default_value_t = config_defaults().compile.filer_namespace, env = "OUTFIT_FILER_NAMESPACE")]
    filer_namespace: String,

    /// Give filer sidecars the S3 keys as plain env values, as StatCan's injector does, instead of
    /// `secretKeyRef`s (with --from-cluster, the SVMs' Secrets' values are then kept, not only
    /// whether each key is set).
    #[arg(long, env = "OUTFIT_FILER_PLAIN_SECRETS")]
    filer_plain_secrets: bool,

    /// Leave out the `outfit.dev/mutated-by` annotation that lists the policies (other than
    /// PodDefaults, which Kubeflow's own annotations record) that changed an object.
    #[arg(long, env = "OUTFIT_NO_ANNOTATION")]
    no_annotation: bool,

    /// Send no AdmissionResponse warnings (a mutator that matched and changed nothing, say).
    #[arg(long, env = "OUTFIT_NO_WARNINGS")]
    no_warnings: bool,

    /// HTTPS address of the webhook (`POST /mutate`).
    #[arg(
        long,
        value_name = "ADDR",
        default_value_t = config_defaults().listen,
        env = "OUTFIT_LISTEN"
    )]
    listen: SocketAddr,

    /// Plain-HTTP address of /livez, /readyz and /metrics.
    #[arg(
        long,
        value_name = "ADDR",
        default_value_t = config_defaults().admin_listen.expect("Config::new sets an admin port"),
        env = "OUTFIT_ADMIN_LISTEN"
    )]
    admin_listen: SocketAddr,

    /// Serving certificate chain (PEM), reloaded when the file changes.
    #[arg(
        long,
        value_name = "FILE",
        env = "OUTFIT_TLS_CERT",
        requires = "tls_key",
        conflicts_with = "self_signed"
    )]
    tls_cert: Option<PathBuf>,

    /// Serving private key (PEM), reloaded when the file changes.
    #[arg(long, value_name = "FILE", env = "OUTFIT_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Generate a CA and a serving certificate into DIR when absent (reuse them when present);
    /// clients trust DIR/ca.crt. With --from-cluster, outfit writes DIR/ca.crt into the webhook
    /// configuration's caBundle.
    #[arg(
        long,
        value_name = "DIR",
        env = "OUTFIT_SELF_SIGNED",
        required_unless_present_any = ["tls_cert", "tls_secret"]
    )]
    self_signed: Option<PathBuf>,

    /// Keep the CA and serving certificate in this Secret of --namespace: created on first start
    /// (every replica serves the same one), renewed well before expiry, and rotated without a
    /// failed admission (the new CA joins caBundle before a certificate it signed is served).
    #[arg(
        long,
        value_name = "NAME",
        env = "OUTFIT_TLS_SECRET",
        requires = "from_cluster",
        conflicts_with_all = ["tls_cert", "self_signed", "no_manage_webhook"]
    )]
    tls_secret: Option<String>,

    /// Lifetime of the serving certificate outfit mints into --tls-secret, in seconds (its CAs
    /// live four times as long); each is renewed with a third of its life left. For tests.
    #[arg(long, value_name = "SECONDS", default_value_t = Lifetimes::default().leaf.as_secs_f64(), env = "OUTFIT_CERT_LIFETIME", hide = true)]
    cert_lifetime: f64,

    /// With --from-cluster: the MutatingWebhookConfiguration whose `rules` (pods plus every kind the
    /// policies apply to) and `caBundle` (the served certificate's CA) outfit keeps in step,
    /// undoing hand edits; one replica writes, elected by the Lease of the same name in
    /// --namespace.
    #[arg(long, value_name = "NAME", default_value = manifests::NAME, env = "OUTFIT_WEBHOOK_CONFIGURATION")]
    webhook_configuration: String,

    /// Leave the webhook configuration as it is (a team that manages it itself).
    #[arg(long, env = "OUTFIT_NO_MANAGE_WEBHOOK")]
    no_manage_webhook: bool,

    /// outfit's own namespace: where its Lease and --tls-secret live (`outfit manifests` sets it
    /// from the pod's).
    #[arg(long, value_name = "NAMESPACE", default_value_t = InstallOptions::default().namespace, env = "OUTFIT_NAMESPACE")]
    namespace: String,

    /// Extra DNS name for the self-signed certificate (besides localhost, 127.0.0.1, ::1). Repeatable.
    #[arg(
        long = "dns-name",
        value_name = "NAME",
        env = "OUTFIT_DNS_NAMES",
        value_delimiter = ','
    )]
    dns_names: Vec<String>,

    /// How often policy and certificate files are checked for changes, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = config_defaults().poll_interval.as_secs_f64(),
        env = "OUTFIT_POLL_INTERVAL"
    )]
    poll_interval: f64,

    /// Largest request body accepted, in bytes (the API server sends up to 3 MiB objects; an
    /// UPDATE review carries two).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_body_bytes, env = "OUTFIT_MAX_BODY_BYTES")]
    max_body_bytes: usize,

    /// The most bytes of large bodies (256 KiB and up) read and decided at once; a large body
    /// waits for room up to --body-timeout, then gets 503 (a review takes some twelve times its
    /// body at its peak: this bounds what many at once can take).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().large_bodies_bytes, env = "OUTFIT_MAX_LARGE_BODIES_BYTES")]
    max_large_bodies_bytes: usize,

    /// Largest patch sent, in bytes of JSON. A review whose patch would be larger (a pod of
    /// 100,000 containers, each given the PodDefaults' env and mounts) is refused with 413, as the
    /// API server would refuse the patched object (it takes no request above 3 MiB); the patch is
    /// never built whole.
    #[arg(long, value_name = "BYTES", default_value_t = config_defaults().compile.max_patch_bytes, env = "OUTFIT_MAX_PATCH_BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_patch_bytes: usize,

    /// Most connections open at once on the webhook port. At the cap a new connection closes the
    /// oldest idle one (no request in flight), so a flood of idle connections can neither hold
    /// memory without bound nor crowd out the API server; with every one busy it is refused.
    #[arg(
        long,
        value_name = "COUNT",
        default_value_t = 1024,
        env = "OUTFIT_MAX_CONNECTIONS",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    max_connections: u32,

    /// Seconds allowed for a TLS handshake.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = Timeouts::default().handshake.as_secs_f64(),
        env = "OUTFIT_HANDSHAKE_TIMEOUT"
    )]
    handshake_timeout: f64,

    /// Seconds allowed for request headers, and for an idle keep-alive connection.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = Timeouts::default().header_read.as_secs_f64(),
        env = "OUTFIT_HEADER_TIMEOUT"
    )]
    header_timeout: f64,

    /// Seconds allowed for a request body once its headers arrived.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = Limits::default().body_timeout.as_secs_f64(),
        env = "OUTFIT_BODY_TIMEOUT"
    )]
    body_timeout: f64,

    /// Seconds in-flight requests get to finish after SIGTERM.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = config_defaults().shutdown_grace.as_secs_f64(),
        env = "OUTFIT_SHUTDOWN_GRACE"
    )]
    shutdown_grace: f64,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "OUTFIT_LOG_FORMAT")]
    log_format: LogFormat,

    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `outfit_server=debug`.
    #[arg(long, value_name = "FILTER", default_value = "info", env = "OUTFIT_LOG")]
    log: String,
}

/// [`Config::new`]'s defaults, which the flags' defaults show (the policies and the certificate
/// given here are placeholders, unused).
fn config_defaults() -> Config {
    Config::new(
        Vec::new(),
        TlsSource::SelfSigned {
            dir: PathBuf::new(),
            dns_names: Vec::new(),
        },
    )
}

impl ServeArgs {
    fn config(&self) -> Result<Config, FlagError> {
        let seconds = |name: &'static str, value: f64| {
            Duration::try_from_secs_f64(value)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or(FlagError::NotSeconds { flag: name })
        };
        let tls = match (&self.tls_cert, &self.tls_key, &self.self_signed, &self.tls_secret) {
            (Some(cert), Some(key), _, _) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            (_, _, Some(dir), _) => TlsSource::SelfSigned {
                dir: dir.clone(),
                dns_names: self.dns_names.clone(),
            },
            (_, _, _, Some(name)) => TlsSource::Secret(SecretSettings {
                namespace: self.namespace.clone(),
                name: name.clone(),
                dns_names: self.dns_names.clone(),
                lifetimes: Lifetimes::from_leaf(seconds("cert-lifetime", self.cert_lifetime)?),
            }),
            _ => return Err(FlagError::NoCertificate),
        };
        let mut config = Config::new(self.policies.clone(), tls);
        config.compile = CompileOptions {
            default_namespace: self.default_namespace.clone(),
            annotate: !self.no_annotation,
            warnings: !self.no_warnings,
            filer_namespace: self.filer_namespace.clone(),
            filer_plain_secrets: self.filer_plain_secrets,
            max_patch_bytes: self.max_patch_bytes,
            ..config.compile
        };
        config.listen = self.listen;
        config.admin_listen = Some(self.admin_listen);
        config.poll_interval = seconds("poll-interval", self.poll_interval)?;
        config.limits = Limits {
            max_body_bytes: self.max_body_bytes,
            large_bodies_bytes: self.max_large_bodies_bytes,
            body_timeout: seconds("body-timeout", self.body_timeout)?,
        };
        config.timeouts = Timeouts {
            handshake: seconds("handshake-timeout", self.handshake_timeout)?,
            header_read: seconds("header-timeout", self.header_timeout)?,
        };
        config.shutdown_grace = seconds("shutdown-grace", self.shutdown_grace)?;
        config.max_connections = self.max_connections as usize;
        if self.from_cluster && !self.no_manage_webhook {
            config.registration = Some(Registration {
                configuration: self.webhook_configuration.clone(),
                election: Election {
                    namespace: self.namespace.clone(),
                    name: self.webhook_configuration.clone(),
                    identity: outfit_k8s::election::identity(),
                    timing: Timing::default(),
                    duty: "writes the webhook configuration and rotates the certificate",
                    granted_by: "outfit manifests",
                    alone_when_forbidden: false,
                },
            });
        }
        Ok(config)
    }
}

/// Runs `outfit serve` until SIGTERM/SIGINT.
pub(crate) fn run(args: &ServeArgs) -> ExitCode {
    daemon::run(&args.log, args.log_format, || Ok(serve(args)))
}

async fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let mut config = args.config()?;
    if args.from_cluster {
        let client = kube::Client::try_default().await.map_err(|e| {
            Failure::bad_input(format!(
                "--from-cluster: no usable kubeconfig or in-cluster config: {e}"
            ))
        })?;
        config.cluster = Some(outfit_server::ClusterClient(client));
    }
    let server = Server::bind(config)
        .await
        .map_err(|e| Failure::bad_input(e.to_string()))?;
    let admin = server.admin_addr().map(|a| a.to_string()).unwrap_or_default();
    tracing::info!(webhook = %server.local_addr(), admin, "outfit serve started");
    let shutdown = CancellationToken::new();
    let handle = server.handle();
    shell::shutdown_on_signals(shutdown.clone(), move || {
        tracing::info!("SIGHUP: reloading policies and certificate");
        handle.reload_now();
    })
    .map_err(|e| Failure::bad_input(format!("installing signal handlers: {e}")))?;
    server.run(shutdown).await;
    Ok(())
}
