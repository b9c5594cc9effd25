//! `outfit workspaces`: the workspace backend, deic-dk's user-pods API on the cluster that
//! KUBECONFIG (else the in-cluster configuration) names. Configuration comes from a deic-dk style
//! `config.yaml` and `BACKEND_*` variables; the flags here only override where it listens.
//!
//! Signals: SIGTERM or SIGINT start a graceful shutdown (a second one exits at once); SIGHUP
//! reloads the serving certificate now (it is also reloaded when its files change). The
//! configuration is read once, at start.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Args;
use outfit_http::shell;
use outfit_workspaces::{Config, Server};
use tokio_util::sync::CancellationToken;

use crate::{
    daemon::{self, LogFormat},
    failure::Failure,
};

/// Arguments of `outfit workspaces`.
#[derive(Debug, Args)]
pub(crate) struct WorkspacesArgs {
    /// deic-dk's config.yaml (keys in docs/workspaces/configuration.md); without it, the defaults and the
    /// BACKEND_* environment variables.
    #[arg(long, value_name = "FILE", env = "OUTFIT_WORKSPACES_CONFIG")]
    config: Option<PathBuf>,

    /// Address of the API (overrides the config's `listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Address of /livez, /readyz and /metrics (overrides the config's `adminListen`).
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "OUTFIT_LOG_FORMAT")]
    log_format: LogFormat,

    /// Log filter (tracing-subscriber EnvFilter syntax).
    #[arg(long, default_value = "info", env = "OUTFIT_LOG")]
    log: String,
}

/// Runs `outfit workspaces` until SIGTERM/SIGINT.
pub(crate) fn run(args: &WorkspacesArgs) -> ExitCode {
    daemon::run(&args.log, args.log_format, || load_config(args).map(serve))
}

fn load_config(args: &WorkspacesArgs) -> Result<Config, Failure> {
    let (mut config, warnings) = Config::load(args.config.as_deref(), |var| std::env::var(var).ok())
        .map_err(|e| Failure::bad_input(e.to_string()))?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(admin) = args.admin_listen {
        config.admin_listen = Some(admin);
    }
    Ok(config)
}

async fn serve(config: Config) -> Result<(), Failure> {
    let client = kube::Client::try_default().await.map_err(|e| {
        Failure::other(format!(
            "no usable kubeconfig (KUBECONFIG, ~/.kube/config) or in-cluster config: {e}"
        ))
    })?;
    let server = Server::bind(config, client)
        .await
        .map_err(|e| Failure::other(e.to_string()))?;
    let shutdown = CancellationToken::new();
    let certificate = server.certificate();
    shell::shutdown_on_signals(shutdown.clone(), move || match &certificate {
        Some(store) => {
            tracing::info!("SIGHUP: reloading the serving certificate");
            store.reload_now();
        }
        None => tracing::info!("SIGHUP: nothing to reload (the configuration is read at start)"),
    })
    .map_err(|e| Failure::other(format!("installing signal handlers: {e}")))?;
    server.run(shutdown).await;
    Ok(())
}
