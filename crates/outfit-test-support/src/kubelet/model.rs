//! The image kubelet's model, on plain data: which images a node holds, the pulls running on it
//! sharing its bandwidth, and what a pod waits for next. No client, no clock: the caller says how
//! much time passed.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Container, Pod};
use outfit_workspaces_core::workspace::placement::normalize;

use super::config::PRE_PULL_LABEL;

/// A pull running on a node.
#[derive(Debug, Clone)]
pub(super) struct Pull {
    /// The image, normalized.
    pub(super) image: String,
    /// Its size, in bytes.
    pub(super) bytes: u64,
    /// What is left to download.
    pub(super) left: f64,
    /// What is left of the fixed latency (the registry's round trips) before the download starts.
    pub(super) latency: Duration,
    /// The index of its record.
    pub(super) record: usize,
    /// When it was last advanced (or started): each pull counts its own time, so that one
    /// started between two ticks gets no more than it ran.
    pub(super) advanced: Instant,
}

/// One node as the model sees it: what it holds and what it is pulling.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeModel {
    /// The images it holds (normalized) and their sizes.
    pub(super) images: BTreeMap<String, u64>,
    /// The pulls running, one per image.
    pub(super) pulls: Vec<Pull>,
}

impl NodeModel {
    /// Whether it holds `image` (normalized).
    pub(super) fn holds(&self, image: &str) -> bool {
        self.images.contains_key(image)
    }

    /// The pull of `image` running on it.
    pub(super) fn pull_of(&self, image: &str) -> Option<&Pull> {
        self.pulls.iter().find(|p| p.image == image)
    }

    /// Advances its pulls to `now` at `bandwidth` bytes/s, shared equally by the pulls past
    /// their latency; returns the pulls that finished (their images are then held).
    pub(super) fn advance(&mut self, now: Instant, bandwidth: u64) -> Vec<Pull> {
        let downloading = self.pulls.iter().filter(|p| p.latency.is_zero()).count().max(1);
        for pull in &mut self.pulls {
            let mut elapsed = now.saturating_duration_since(pull.advanced);
            pull.advanced = now;
            let waited = elapsed.min(pull.latency);
            pull.latency -= waited;
            elapsed -= waited;
            pull.left -= bandwidth as f64 / downloading as f64 * elapsed.as_secs_f64();
        }
        let (done, running) = std::mem::take(&mut self.pulls)
            .into_iter()
            .partition::<Vec<_>, _>(|p| p.latency.is_zero() && p.left <= 0.0);
        self.pulls = running;
        for pull in &done {
            self.images.insert(pull.image.clone(), pull.bytes);
        }
        done
    }
}

/// What a pod on a node waits for, as the kubelet goes: its init containers' images one after
/// the other, then its containers' all at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stage {
    /// Images to pull (normalized) before the next step; `init` while an init container waits.
    Pulling { images: Vec<String>, init: bool },
    /// A container's image cannot be pulled (the model's missing images): `container` waits
    /// forever.
    Unpullable {
        container: String,
        image: String,
        init: bool,
    },
    /// Every image is there: the pod runs (or, for a pull pod, has run).
    Started,
}

/// The containers of `pod`: init containers first.
fn containers(pod: &Pod) -> (&[Container], &[Container]) {
    let Some(spec) = pod.spec.as_ref() else {
        return (&[], &[]);
    };
    (
        spec.init_containers.as_deref().unwrap_or_default(),
        &spec.containers,
    )
}

/// The next stage of `pod` on `node`, with `missing` the images (normalized) no registry has.
pub(super) fn stage(pod: &Pod, node: &NodeModel, missing: &BTreeSet<String>) -> Stage {
    let (init, regular) = containers(pod);
    let image = |c: &Container| normalize(c.image.as_deref().unwrap_or_default());
    for container in init {
        let wanted = image(container);
        if missing.contains(&wanted) {
            return Stage::Unpullable {
                container: container.name.clone(),
                image: wanted,
                init: true,
            };
        }
        if !node.holds(&wanted) {
            return Stage::Pulling {
                images: vec![wanted],
                init: true,
            };
        }
    }
    if let Some(container) = regular.iter().find(|c| missing.contains(&image(c))) {
        return Stage::Unpullable {
            container: container.name.clone(),
            image: image(container),
            init: false,
        };
    }
    let absent: BTreeSet<String> = regular.iter().map(image).filter(|i| !node.holds(i)).collect();
    if absent.is_empty() {
        Stage::Started
    } else {
        Stage::Pulling {
            images: absent.into_iter().collect(),
            init: false,
        }
    }
}

/// Whether `pod` ends once started (phase `Succeeded`): a pull pod (labelled
/// `outfit.dev/pre-pull`), or one whose every container runs `true`.
pub(super) fn runs_to_completion(pod: &Pod) -> bool {
    let labelled = pod
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(PRE_PULL_LABEL));
    let (_, regular) = containers(pod);
    labelled
        || (!regular.is_empty()
            && regular
                .iter()
                .all(|c| c.command.as_deref() == Some(&["true".to_owned()][..])))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pull(image: &str, bytes: u64, latency_ms: u64, at: Instant) -> Pull {
        Pull {
            advanced: at,
            image: image.to_owned(),
            bytes,
            left: bytes as f64,
            latency: Duration::from_millis(latency_ms),
            record: 0,
        }
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn two_pulls_share_the_bandwidth_and_the_latency_comes_first() {
        let start = Instant::now();
        let mut node = NodeModel {
            pulls: vec![pull("a", 100, 100, start), pull("b", 100, 100, start)],
            ..NodeModel::default()
        };
        let at = |ms| start + Duration::from_millis(ms);
        // The latency passes with nothing downloaded.
        assert!(node.advance(at(100), 100).is_empty());
        assert_eq!(node.pulls[0].left, 100.0);
        // Then 50 bytes/s each: two seconds for 100 bytes, where one alone would take one.
        for tick in 2..=20 {
            assert!(node.advance(at(tick * 100), 100).is_empty());
        }
        let done = node.advance(at(2150), 100);
        assert_eq!(done.len(), 2);
        assert!(node.holds("a") && node.holds("b") && node.pulls.is_empty());
    }

    #[test]
    fn init_images_come_one_after_the_other_then_the_containers_all_at_once() {
        let pod = pod(json!({
            "initContainers": [{"name": "i1", "image": "one"}, {"name": "i2", "image": "two"}],
            "containers": [{"name": "c1", "image": "three:1"}, {"name": "c2", "image": "r.io/four:2"}]
        }));
        let mut node = NodeModel::default();
        let missing = BTreeSet::new();
        assert_eq!(
            stage(&pod, &node, &missing),
            Stage::Pulling {
                images: vec!["docker.io/library/one:latest".into()],
                init: true
            }
        );
        node.images.insert("docker.io/library/one:latest".into(), 1);
        node.images.insert("docker.io/library/two:latest".into(), 1);
        assert_eq!(
            stage(&pod, &node, &missing),
            Stage::Pulling {
                images: vec!["docker.io/library/three:1".into(), "r.io/four:2".into()],
                init: false
            }
        );
        node.images.insert("docker.io/library/three:1".into(), 1);
        node.images.insert("r.io/four:2".into(), 1);
        assert_eq!(stage(&pod, &node, &missing), Stage::Started);
    }

    #[test]
    fn a_missing_image_is_never_pulled() {
        let pod = pod(json!({"containers": [{"name": "c", "image": "gone:1"}]}));
        let missing = BTreeSet::from(["docker.io/library/gone:1".to_owned()]);
        assert!(matches!(
            stage(&pod, &NodeModel::default(), &missing),
            Stage::Unpullable { init: false, .. }
        ));
    }

    #[test]
    fn pull_pods_and_true_commands_run_to_completion() {
        let truthy = pod(json!({"containers": [{"name": "c", "image": "x", "command": ["true"]}]}));
        assert!(runs_to_completion(&truthy));
        let server = pod(json!({"containers": [{"name": "c", "image": "x"}]}));
        assert!(!runs_to_completion(&server));
        let mut labelled = server.clone();
        labelled.metadata.labels = Some([(PRE_PULL_LABEL.to_owned(), "true".to_owned())].into());
        assert!(runs_to_completion(&labelled));
    }
}
