//! The control plane: outfit's CRDs installed, and the kube-apiserver outages.

use std::{
    path::Path,
    process::Command,
    sync::{Arc, PoisonError, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::{Result, ensure};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use outfit_test_support::control_plane::ControlPlane;
use tokio_util::sync::CancellationToken;

use crate::shared::Soak;

pub(crate) async fn install_crds(client: &Client, outfit: &Path) -> Result<()> {
    let output = Command::new(outfit)
        .args(["manifests", "--webhook-url", "https://127.0.0.1:1/unused"])
        .output()?;
    ensure!(output.status.success(), "outfit manifests failed");
    let documents = outfit_core::document::parse_stream(&String::from_utf8(output.stdout)?, "manifests")?;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let mut names = Vec::new();
    for document in documents
        .iter()
        .filter(|d| d.kind() == "CustomResourceDefinition")
    {
        let object: DynamicObject = serde_json::from_value(document.value.clone())?;
        names.push(
            document.value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        match crds.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    for name in names {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let crd = serde_json::to_value(crds.get(&name).await?)?;
            let established = crd["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established {
                break;
            }
            ensure!(Instant::now() < until, "CRD {name} never became Established");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Kills kube-apiserver as a crash would and starts it again with the same command line.
pub(crate) async fn outages(soak: Arc<Soak>, stop: CancellationToken) -> Result<()> {
    let every = Duration::from_secs_f64(soak.args.outage_every);
    let mut next = Instant::now() + every;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(next.into()) => {}
        }
        next += every;
        // An outage must end, and the cluster be checked, before the soak does.
        let needed = Duration::from_secs_f64(soak.args.outage_seconds + 30.0);
        if soak.deadline.saturating_duration_since(Instant::now()) < needed {
            continue;
        }
        let plane = ControlPlane::at(&soak.state_dir);
        soak.api_down.store(true, Ordering::Relaxed);
        let outage = tokio::task::block_in_place(|| plane.kill_apiserver())?;
        println!(
            "outage: kube-apiserver (pid {}) killed {:.0} s before the end",
            outage.pid,
            soak.deadline
                .saturating_duration_since(outage.killed)
                .as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs_f64(soak.args.outage_seconds)).await;
        let down = outage
            .restart(&plane, &soak.work.join("kube-apiserver-restarted.log"))
            .await?;
        soak.api_down.store(false, Ordering::Relaxed);
        *soak
            .stats
            .last_restart
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        soak.stats.outages.fetch_add(1, Ordering::Relaxed);
        soak.stats
            .outage_downtimes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(down);
        println!(
            "outage: kube-apiserver ready again after {:.1} s down",
            down.as_secs_f64()
        );
    }
    Ok(())
}
