//! Signals of the long-running commands: SIGTERM or SIGINT start a graceful shutdown (a second
//! one exits at once); SIGHUP runs the command's own action (`outfit serve` reloads).

use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` on SIGTERM/SIGINT and calls `on_hangup` on SIGHUP.
#[cfg(unix)]
pub(crate) fn spawn_handlers(
    shutdown: CancellationToken,
    on_hangup: impl Fn() + Send + 'static,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
                _ = hangup.recv() => {
                    on_hangup();
                    continue;
                }
            }
            if shutdown.is_cancelled() {
                // Straight to stderr: the background log writer would not get to write it
                // before the process exits.
                eprintln!("second signal: exiting without waiting for the drain");
                std::process::exit(1);
            }
            tracing::info!("shutdown signal: draining");
            shutdown.cancel();
        }
    });
    Ok(())
}

/// Cancels `shutdown` on Ctrl-C.
#[cfg(not(unix))]
pub(crate) fn spawn_handlers(
    shutdown: CancellationToken,
    _on_hangup: impl Fn() + Send + 'static,
) -> std::io::Result<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            shutdown.cancel();
        }
    });
    Ok(())
}
