//! Waiting on the controllers' inputs.

use tokio::sync::watch;

/// Waits for the next change of `receiver`; never returns once its sender is gone (so a `select!`
/// arm on it does not spin).
pub(crate) async fn changed<T>(receiver: &mut watch::Receiver<T>) {
    if receiver.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
