//! The sweep of what the backend made for pods that are gone: Services, Ingresses and
//! NetworkPolicies whose owner pod is in neither the cache nor the API server. A delete removes
//! them right after the pod (`Cluster::delete_pod`), and the garbage collector would too, but a
//! replica killed between the two deletes leaves them to the collector alone, which stalls for
//! minutes after an API server restart (RELIABILITY.md); and a new leader sees no pod go, since
//! its first list never holds the pods already gone. So the leader sweeps on taking the lead and
//! every [`SWEEP_EVERY`]: three LISTs by label, and a GET per candidate.

use std::{collections::HashSet, time::Duration};

use kube::ResourceExt;

use crate::io::{cache::Cache, calls::ClusterCalls, cluster::made::MadeFor};

/// How often the leader sweeps (besides on taking the lead).
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The owners in `made` whose pod is not among `live` (the uids of the pods the cache holds).
pub(super) fn orphans<'a>(
    made: impl IntoIterator<Item = &'a MadeFor>,
    live: &HashSet<String>,
) -> Vec<&'a MadeFor> {
    made.into_iter()
        .filter(|made| !live.contains(&made.uid))
        .collect()
}

/// Deletes what was made for pods that are gone. The cache may be behind a pod a create has just
/// made (its NetworkPolicy follows the pod at once), so each candidate's pod is read from the API
/// server first and kept while it is there; the deletes are made only while each object is still
/// the one owned by that pod's uid.
pub(super) async fn sweep<C: ClusterCalls>(cluster: &C, cache: &Cache) {
    let made = match cluster.made_for().await {
        Ok(made) => made,
        Err(error) => {
            tracing::warn!(%error, "could not list what was made for pods; sweeping it later");
            return;
        }
    };
    let live: HashSet<String> = cache.pods().iter().filter_map(|pod| pod.uid()).collect();
    for orphan in orphans(&made, &live) {
        match cluster.get_pod(&orphan.pod).await {
            Ok(Some(pod)) if pod.uid().as_deref() == Some(orphan.uid.as_str()) => continue,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "could not check a pod before sweeping what was made for it");
                return;
            }
        }
        tracing::info!(
            pod = orphan.pod,
            uid = orphan.uid,
            "removing the Services, Ingress and NetworkPolicy a gone pod left"
        );
        cluster.delete_made_for(&orphan.pod, &orphan.uid).await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::io::fake::FakeCluster;

    fn made(pod: &str, uid: &str) -> MadeFor {
        MadeFor {
            pod: pod.to_owned(),
            uid: uid.to_owned(),
        }
    }

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "uid": uid}})).unwrap()
    }

    #[test]
    fn what_was_made_for_a_pod_not_in_the_cache_is_a_candidate() {
        let made = [made("a", "uid-a"), made("b", "uid-b"), made("b", "uid-b-old")];
        let live = HashSet::from(["uid-a".to_owned(), "uid-b".to_owned()]);
        // b's objects made for an earlier pod of the name are the earlier pod's: candidates.
        assert_eq!(orphans(&made, &live), [&made[2]]);
        assert_eq!(orphans(&made, &HashSet::new()).len(), 3);
    }

    #[tokio::test]
    async fn the_sweep_deletes_only_what_gone_pods_left() {
        let (fake, cache) = FakeCluster::new();
        fake.put_pod(pod("cached", "uid-cached"));
        // Made by a create a moment ago: on the API server, not yet in the cache.
        fake.with(|s| s.pods.insert("fresh".to_owned(), pod("fresh", "uid-fresh")));
        // A pod made anew under the name of a gone one: the gone one's objects go.
        fake.put_pod(pod("renewed", "uid-renewed-2"));
        fake.with(|s| {
            s.made.extend([
                made("cached", "uid-cached"),
                made("fresh", "uid-fresh"),
                made("gone", "uid-gone"),
                made("renewed", "uid-renewed-1"),
            ]);
        });
        sweep(&fake, &cache).await;
        let left = fake.with(|s| s.made.clone());
        assert_eq!(
            left.into_iter().collect::<Vec<_>>(),
            [made("cached", "uid-cached"), made("fresh", "uid-fresh")]
        );
        let deletes: Vec<String> = fake
            .calls()
            .into_iter()
            .filter(|c| c.starts_with("delete_made_for"))
            .collect();
        assert_eq!(deletes, ["delete_made_for gone", "delete_made_for renewed"]);
    }
}
