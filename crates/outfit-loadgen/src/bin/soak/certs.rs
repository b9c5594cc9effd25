//! Certificate rotation: a new leaf swapped in as Kubernetes updates a Secret volume, and the
//! handshakes that must present it.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, PoisonError, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::Result;
use rustls_pki_types::{CertificateDer, pem::PemObject};
use tokio_util::sync::CancellationToken;

use crate::{review::connect, shared::Soak};

/// A Secret-volume-like directory: `..<n>/tls.{crt,key}`, `..data -> ..<n>`, `tls.crt ->
/// ..data/tls.crt`. Returns the new leaf's DER.
pub(crate) fn install_leaf(
    tls_dir: &Path,
    ca_key_pem: &str,
    generation: u64,
) -> Result<CertificateDer<'static>> {
    let (cert, key) = outfit_server::tls::issue_leaf_with_ca_pem(ca_key_pem, &[])?;
    let gen_dir = format!("..{generation}");
    std::fs::create_dir_all(tls_dir.join(&gen_dir))?;
    std::fs::write(tls_dir.join(&gen_dir).join("tls.crt"), &cert)?;
    std::fs::write(tls_dir.join(&gen_dir).join("tls.key"), &key)?;
    let tmp = tls_dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&gen_dir, &tmp)?;
    std::fs::rename(&tmp, tls_dir.join("..data"))?;
    for name in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(tls_dir.join(name)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), tls_dir.join(name))?;
        }
    }
    if generation > 1 {
        let _ = std::fs::remove_dir_all(tls_dir.join(format!("..{}", generation - 1)));
    }
    Ok(CertificateDer::from_pem_slice(cert.as_bytes())?)
}

pub(crate) async fn rotate(
    soak: Arc<Soak>,
    tls_dir: PathBuf,
    ca_key_pem: String,
    stop: CancellationToken,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(soak.args.rotate_every));
    tick.tick().await;
    let mut generation = 1;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        generation += 1;
        let leaf = install_leaf(&tls_dir, &ca_key_pem, generation)?;
        let rotated = Instant::now();
        let until = rotated + Duration::from_secs_f64(soak.args.window);
        loop {
            match connect(soak.webhook, &soak.tls).await {
                Ok((_, served)) if served == leaf => {
                    soak.stats.rotations.fetch_add(1, Ordering::Relaxed);
                    soak.stats
                        .rotation_lags
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(rotated.elapsed());
                    break;
                }
                Ok(_) => {}
                Err(error) => soak
                    .stats
                    .fail(format!("handshake after rotation {generation}: {error:#}")),
            }
            if Instant::now() > until {
                soak.stats.rotation_failures.fetch_add(1, Ordering::Relaxed);
                soak.stats.note(format!(
                    "rotation {generation}: new handshakes still get the old certificate after {:?}",
                    rotated.elapsed()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}
