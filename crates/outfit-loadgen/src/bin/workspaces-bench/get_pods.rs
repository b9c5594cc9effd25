//! `get_pods` over many users' pods, made straight in the API server as the backend makes them.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::{Value, json};

use outfit_loadgen::{harness::Backend, workspaces::KeepAlive};

/// Makes `users` × `per_user` pods as the backend makes them: its labels and annotations.
pub(crate) async fn make_pods(client: &Client, ns: &str, users: usize, per_user: usize) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let specs: Vec<(String, String)> = (0..users)
        .flat_map(|u| {
            (0..per_user).map(move |p| (format!("user{u}@bench.example"), format!("web-user{u}-{p}")))
        })
        .collect();
    let results: Vec<Result<()>> = futures::stream::iter(specs.into_iter().map(|(user, name)| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {
                    "name": name,
                    "labels": {"user": user.split('@').next().unwrap(), "domain": "bench.example",
                               "podName": name, "app.kubernetes.io/managed-by": "outfit-workspaces"},
                    "annotations": {"outfit.dev/user-id": user, "outfit.dev/started": "2026-01-01T00:00:00Z",
                                    "sciencedata.dk/ingress-port": "80"}
                },
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }))?;
            pods.create(&PostParams::default(), &pod).await?;
            Ok(())
        }
    }))
    .buffer_unordered(16)
    .collect()
    .await;
    results.into_iter().collect::<Result<()>>()?;
    // Wait until kwok has run them all, so get_pods answers about running pods.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let running = pods
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == users * per_user {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "only {running} of {} pods running after 5 minutes",
                users * per_user
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `requests` get_pods calls over one keep-alive connection, users in turn.
pub(crate) async fn get_pods(
    backend: &Backend,
    users: usize,
    per_user: usize,
    requests: usize,
) -> Result<Vec<Duration>> {
    let mut connection = KeepAlive::connect(backend.port).await?;
    let mut latencies = Vec::with_capacity(requests);
    let bodies: Vec<Bytes> = (0..users)
        .map(|u| Bytes::from(json!({"user_id": format!("user{u}@bench.example")}).to_string()))
        .collect();
    // Warm-up: the first answers also wait for the cache's first read.
    for i in 0..requests + 50 {
        let body = bodies[i % users].clone();
        let (status, body, took) = connection.send("POST", "/get_pods", &[], Some(body)).await?;
        let pods: Value = serde_json::from_slice(&body)?;
        if status != 200 || pods.as_array().map(Vec::len) != Some(per_user) {
            bail!(
                "get_pods answered {status} with {} pods",
                pods.as_array().map_or(0, Vec::len)
            );
        }
        if i >= 50 {
            latencies.push(took);
        }
    }
    Ok(latencies)
}
