//! What the long-running commands (`serve`, `workspaces`) share as processes, around the server:
//! logging, the async runtime, exit statuses. The server's own shell (ports, readiness, drain,
//! signals) is outfit-http's `shell`.

use std::{future::Future, io::IsTerminal as _, process::ExitCode};

use clap::ValueEnum;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

use crate::failure::{EXIT_BAD_INPUT, Failure, FlagError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Installs the logs, then runs what `start` returns on a multi-threaded runtime until it ends;
/// a failure is logged and becomes the exit status.
pub(crate) fn run<F>(log: &str, format: LogFormat, start: impl FnOnce() -> Result<F, Failure>) -> ExitCode
where
    F: Future<Output = Result<(), Failure>>,
{
    let _log_writer = match init_logs(log, format) {
        Ok(guard) => guard,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let outcome = start().and_then(|main| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::other(format!("cannot start the async runtime: {e}")))?;
        runtime.block_on(main)
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            tracing::error!("{}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Installs the log subscriber. Lines are written to stderr by a background thread: an admission
/// only formats its line and queues it, so a slow reader of stderr (a container runtime's pipe)
/// never holds up a request; when the queue is full, lines are dropped rather than waited for.
/// The guard flushes what is queued when dropped, at exit.
fn init_logs(log: &str, format: LogFormat) -> Result<WorkerGuard, FlagError> {
    let filter = EnvFilter::try_new(log).map_err(|source| FlagError::LogFilter {
        filter: log.to_owned(),
        source,
    })?;
    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
    Ok(guard)
}
