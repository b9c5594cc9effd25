//! The load: the baseline pass over the mix, the open-loop connections and the probes of the
//! changing policies.

use std::{
    sync::{Arc, PoisonError, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::{Result, ensure};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{
    review::{Sender, connect, next_body, patched, review},
    shared::{CLUSTER_NS, FILE_NS, Soak},
};

/// Sends every review of the mix once, before any fault, and keeps the patched objects: the mix's
/// policies never change, so every later answer must give the same. Checks that each pod CREATE
/// got the env variable of each PodDefault it opts in to.
pub(crate) async fn baseline(soak: &Soak) -> Result<()> {
    let (mut sender, _) = connect(soak.webhook, &soak.tls).await?;
    let mut baseline = Vec::new();
    let mut mutated = 0;
    for (i, object) in soak.objects.iter().enumerate() {
        let (body, uid) = next_body(soak, i);
        let response = review(&mut sender, body, &uid).await?;
        let after = patched(&response, object)?;
        let labels = object["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let is_create_pod = object["kind"] == "Pod" && soak.creates[i];
        for label in labels.keys().filter(|l| l.starts_with("pd-")) {
            if !is_create_pod {
                continue;
            }
            let want = format!("PD_{}_ENDPOINT", &label[3..]);
            let has = after.as_ref().is_some_and(|o| {
                o["spec"]["containers"][0]["env"]
                    .as_array()
                    .is_some_and(|env| env.iter().any(|e| e["name"] == want.as_str()))
            });
            ensure!(has, "review {i}: the pod opts in to {label} but got no {want}");
        }
        mutated += usize::from(after.is_some());
        baseline.push(after);
    }
    println!("baseline: {} reviews, {mutated} mutated", baseline.len());
    *soak.baseline.lock().unwrap_or_else(PoisonError::into_inner) = baseline;
    Ok(())
}

/// One connection of the mix: `rate / connections` requests per second, open loop.
pub(crate) async fn load(soak: Arc<Soak>, c: u32, stop: CancellationToken) -> Result<()> {
    let per_second = f64::from(soak.args.rate) / f64::from(soak.args.connections);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second));
    let mut sender: Option<Sender> = None;
    let mut on_connection = 0;
    let mut index = (c as usize * 37) % soak.templates.len();
    let mut latencies = Vec::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        if sender.is_none() || on_connection >= soak.args.requests_per_connection {
            match connect(soak.webhook, &soak.tls).await {
                Ok((s, _)) => {
                    sender = Some(s);
                    on_connection = 0;
                    soak.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    soak.stats.requests.fetch_add(1, Ordering::Relaxed);
                    soak.stats.fail(format!("connect: {error:#}"));
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        index = (index + 1) % soak.templates.len();
        let (body, uid) = next_body(&soak, index);
        let sent = Instant::now();
        let result = review(s, body, &uid).await;
        latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
        soak.stats.requests.fetch_add(1, Ordering::Relaxed);
        on_connection += 1;
        let checked = result.and_then(|response| {
            let after = patched(&response, &soak.objects[index])?;
            let baseline = soak.baseline.lock().unwrap_or_else(PoisonError::into_inner);
            ensure!(
                after == baseline[index],
                "review {index}: the patched object differs from the baseline"
            );
            Ok(())
        });
        if let Err(error) = checked {
            soak.stats.fail(format!("uid {uid}: {error:#}"));
            sender = None;
        }
    }
    soak.stats
        .latencies_us
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(latencies);
    Ok(())
}

fn probe_body(uid: &str, namespace: &str, label: &str) -> Bytes {
    let review = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "probe", "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "soak"},
            "object": probe_pod(namespace, label), "dryRun": false
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap_or_default())
}

fn probe_pod(namespace: &str, label: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace, "labels": {label: "true"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    })
}

/// The value of env variable `name` in the patched probe pod.
fn env_in(after: Option<&Value>, name: &str) -> Option<String> {
    after?["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
}

/// Sends a probe of each changing policy and returns the values seen.
pub(crate) async fn probe_once(soak: &Soak, sender: &mut Sender) -> Result<[(Option<String>, Instant); 2]> {
    let mut seen = Vec::new();
    for (namespace, env) in [(FILE_NS, "SOAK_FILE"), (CLUSTER_NS, "SOAK_CLUSTER")] {
        let uid = format!("probe-{}", soak.uid.fetch_add(1, Ordering::Relaxed));
        let response = review(sender, probe_body(&uid, namespace, namespace), &uid).await?;
        let after = patched(&response, &probe_pod(namespace, namespace))?;
        seen.push((env_in(after.as_ref(), env), Instant::now()));
    }
    let [file, cluster]: [(Option<String>, Instant); 2] =
        seen.try_into().map_err(|_| anyhow::anyhow!("two probes"))?;
    Ok([file, cluster])
}

pub(crate) async fn probe(soak: Arc<Soak>, stop: CancellationToken) -> Result<()> {
    let window = Duration::from_secs_f64(soak.args.window);
    let mut sender: Option<Sender> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    while !stop.is_cancelled() {
        tick.tick().await;
        if sender.is_none() {
            match connect(soak.webhook, &soak.tls).await {
                Ok((s, _)) => sender = Some(s),
                Err(error) => {
                    soak.stats.fail(format!("probe connect: {error:#}"));
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        soak.stats.probes.fetch_add(2, Ordering::Relaxed);
        soak.stats.requests.fetch_add(2, Ordering::Relaxed);
        match probe_once(&soak, s).await {
            Ok([(file, file_at), (cluster, cluster_at)]) => {
                for (name, expectation, seen, at) in [
                    ("file", &soak.file_policy, file, file_at),
                    ("cluster", &soak.cluster_policy, cluster, cluster_at),
                ] {
                    if !expectation.check(&seen, at, window) {
                        soak.stats.violations.fetch_add(1, Ordering::Relaxed);
                        let restarted = *soak
                            .stats
                            .last_restart
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        if restarted.is_some_and(|r| at.duration_since(r) < Duration::from_secs(60)) {
                            soak.stats.violations_after_outage.fetch_add(1, Ordering::Relaxed);
                        }
                        soak.stats.note(format!(
                            "{name} policy: probe saw {seen:?} at {:.1} s before the end, expected {:?} (or a value in force within {window:?})",
                            soak.deadline.saturating_duration_since(at).as_secs_f64(),
                            expectation.current()
                        ));
                    }
                }
            }
            Err(error) => {
                soak.stats.fail(format!("probe: {error:#}"));
                sender = None;
            }
        }
    }
    Ok(())
}
