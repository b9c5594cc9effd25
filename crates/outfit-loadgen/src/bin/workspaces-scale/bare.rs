//! Bare creates: the admin creates the manifest's pod at `--rate`, and one watch over the
//! namespace sees each turn Ready. What the cluster alone takes, for the backend's added time.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use outfit_loadgen::{
    harness::make_namespace,
    workspaces::{delete_namespace, manifest},
};
use serde_json::Value;
use tokio::time::MissedTickBehavior;

/// `count` bare creates at `rate` a second in a namespace of their own (deleted after); each
/// one's time from its create request to the watch showing it Ready.
pub(crate) async fn bare_creates(client: &Client, count: usize, rate: f64) -> Result<Vec<Duration>> {
    let ns = format!("scale-bare-{}", std::process::id());
    make_namespace(client, &ns).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let ready_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch = {
        let (pods, ready_at) = (pods.clone(), Arc::clone(&ready_at));
        tokio::spawn(async move {
            let mut stream = watcher(pods, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(pod)) = stream.next().await {
                let ready = pod
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if let (true, Some(name)) = (ready, pod.metadata.name) {
                    ready_at
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };
    // Let the watch make its first read before the first create.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let template: Pod = serde_json::from_value(serde_saphyr::from_str::<Value>(&manifest("web"))?)?;
    let mut sent: Vec<(String, Instant)> = Vec::with_capacity(count);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut creates = Vec::with_capacity(count);
    for i in 0..count {
        tick.tick().await;
        let mut pod = template.clone();
        let name = format!("bare-{i}");
        pod.metadata.name = Some(name.clone());
        sent.push((name, Instant::now()));
        let pods = pods.clone();
        creates.push(tokio::spawn(async move {
            pods.create(&PostParams::default(), &pod).await
        }));
    }
    for create in creates {
        create.await??;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let times = loop {
        let ready = ready_at.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if sent.iter().all(|(name, _)| ready.contains_key(name)) {
            break sent.iter().map(|(name, at)| ready[name] - *at).collect();
        }
        if Instant::now() > deadline {
            bail!("only {} of {count} bare pods Ready after 5 minutes", ready.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    watch.abort();
    delete_namespace(client, &ns).await?;
    Ok(times)
}
