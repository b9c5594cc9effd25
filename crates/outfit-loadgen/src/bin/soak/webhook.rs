//! The `outfit serve` process: its start on two free ports, readiness, admin port and stop.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use outfit_test_support::{free_port, http::Call};

/// Starts `outfit serve --from-cluster` on two free loopback ports, registered nowhere (the soak
/// sends the reviews itself), logging to `<work>/outfit.log`: the child, the webhook's address
/// and the admin port's.
pub(crate) fn start(
    outfit: &Path,
    work: &Path,
    policy_dir: &Path,
    tls_dir: &Path,
    kubeconfig: &Path,
    poll_interval: u64,
) -> Result<(Child, SocketAddr, SocketAddr)> {
    let webhook = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let admin = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let log = std::fs::File::create(work.join("outfit.log"))?;
    let child = Command::new(outfit)
        .arg("serve")
        .arg("--from-cluster")
        // Registered nowhere: the soak sends the reviews itself.
        .arg("--no-manage-webhook")
        .arg("--policies")
        .arg(policy_dir)
        .arg("--tls-cert")
        .arg(tls_dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(tls_dir.join("tls.key"))
        .arg("--listen")
        .arg(webhook.to_string())
        .arg("--admin-listen")
        .arg(admin.to_string())
        .arg("--poll-interval")
        .arg(poll_interval.to_string())
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting outfit serve")?;
    Ok((child, webhook, admin))
}

/// SIGTERM, then a clean exit awaited for 20 s (`None`: it did not exit and was killed).
pub(crate) async fn stop(mut child: Child) -> Result<Option<ExitStatus>> {
    let pid = child.id();
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let exit = tokio::task::spawn_blocking(move || {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > until {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await?;
    println!("outfit serve exit after SIGTERM: {exit:?}");
    Ok(exit)
}

/// A GET on the admin port: (status, body).
pub(crate) async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let answer = Call::new("GET", path).send(addr, Duration::from_secs(5)).await?;
    Ok((answer.status, answer.text()))
}

pub(crate) async fn wait_ready(admin: SocketAddr, child: &mut Child) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("outfit serve exited during start-up: {status}");
        }
        if matches!(http_get(admin, "/readyz").await, Ok((200, _))) {
            return Ok(());
        }
        ensure!(Instant::now() < until, "outfit serve not ready after 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
