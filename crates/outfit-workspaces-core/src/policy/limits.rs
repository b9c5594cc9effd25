//! Per-user limits: how many workspaces a user may have at once, and how much CPU, memory and any
//! other resource (GPUs, hugepages: `maxResourcesPerUser`) they may request together. Requests are counted as the scheduler counts them, so a limit
//! means what `kubectl describe node` would show the user's pods taking.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::{
    api::core::v1::{Container, Pod, ResourceRequirements},
    apimachinery::pkg::api::resource::Quantity,
};

use outfit_core::quantity::{self, Amount};

pub use crate::model::limits::Limits;

/// What a pod asks the scheduler for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    /// CPU, in millicores.
    pub cpu_millis: u64,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// Every other resource (extended resources such as `nvidia.com/gpu`, hugepages, ephemeral
    /// storage) by name, in whole units (bytes for sizes), as the scheduler counts them.
    pub other: BTreeMap<String, u64>,
}

impl Requests {
    fn add(mut self, other: &Self) -> Self {
        self.cpu_millis = self.cpu_millis.saturating_add(other.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_add(other.memory_bytes);
        for (name, amount) in &other.other {
            let sum = self.other.entry(name.clone()).or_default();
            *sum = sum.saturating_add(*amount);
        }
        self
    }

    fn max(mut self, other: &Self) -> Self {
        self.cpu_millis = self.cpu_millis.max(other.cpu_millis);
        self.memory_bytes = self.memory_bytes.max(other.memory_bytes);
        for (name, amount) in &other.other {
            let peak = self.other.entry(name.clone()).or_default();
            *peak = (*peak).max(*amount);
        }
        self
    }

    /// How much of the resource `name` (other than CPU and memory) it asks for.
    pub fn of(&self, name: &str) -> u64 {
        self.other.get(name).copied().unwrap_or(0)
    }
}

/// The pod's effective requests as the scheduler computes them (component-helpers'
/// `PodRequests`): the larger of what its containers ask together and what its init containers
/// ask one at a time, restartable (sidecar) init containers counting alongside both; pod-level
/// requests replace the containers' where set; the RuntimeClass overhead comes on top.
///
/// A resource with a limit and no request counts its limit, as the API server defaults the one to
/// the other. A quantity that can't be read counts as zero: the API server checked every quantity
/// of a pod it stored, and one it would refuse makes the create fail anyway, so an unreadable
/// one can only be a format newer than this code, and blocking every create for it helps nobody.
pub fn requests(pod: &Pod) -> Requests {
    let Some(spec) = &pod.spec else {
        return Requests::default();
    };
    let mut total = spec
        .containers
        .iter()
        .map(container_requests)
        .fold(Requests::default(), |sum, asks| sum.add(&asks));
    let mut sidecars = Requests::default();
    let mut init_peak = Requests::default();
    for init in spec.init_containers.iter().flatten() {
        let asks = container_requests(init);
        let while_running = if init.restart_policy.as_deref() == Some("Always") {
            // A sidecar keeps running beside the containers and every later init container.
            total = total.add(&asks);
            sidecars = sidecars.add(&asks);
            sidecars.clone()
        } else {
            asks.add(&sidecars)
        };
        init_peak = init_peak.max(&while_running);
    }
    total = total.max(&init_peak);
    if let Some(pod_level) = spec.resources.as_ref() {
        // Pod-level resources cover CPU and memory only (the API server refuses others there).
        let pod_level = effective(pod_level);
        if let Some(cpu) = pod_level.get("cpu") {
            total.cpu_millis = read(quantity::cpu_millis, cpu);
        }
        if let Some(memory) = pod_level.get("memory") {
            total.memory_bytes = read(quantity::bytes, memory);
        }
    }
    if let Some(overhead) = &spec.overhead {
        total = total.add(&from_list(overhead.iter().map(|(name, q)| (name.as_str(), q))));
    }
    total
}

fn container_requests(container: &Container) -> Requests {
    container
        .resources
        .as_ref()
        .map_or_else(Requests::default, |r| from_list(effective(r)))
}

/// The requests of `resources` after the API server's defaulting: each limit without a request
/// becomes the request.
fn effective(resources: &ResourceRequirements) -> BTreeMap<&str, &Quantity> {
    let mut list: BTreeMap<&str, &Quantity> = resources
        .limits
        .iter()
        .flatten()
        .map(|(name, q)| (name.as_str(), q))
        .collect();
    list.extend(
        resources
            .requests
            .iter()
            .flatten()
            .map(|(name, q)| (name.as_str(), q)),
    );
    list
}

fn from_list<'a>(list: impl IntoIterator<Item = (&'a str, &'a Quantity)>) -> Requests {
    let mut requests = Requests::default();
    for (name, value) in list {
        match name {
            "cpu" => requests.cpu_millis = read(quantity::cpu_millis, value),
            "memory" => requests.memory_bytes = read(quantity::bytes, value),
            other => {
                requests
                    .other
                    .insert(other.to_owned(), read(quantity::bytes, value));
            }
        }
    }
    requests
}

/// See [`requests`] for why an unreadable quantity is zero.
fn read(parse: fn(&str) -> Result<u64, quantity::QuantityError>, value: &Quantity) -> u64 {
    parse(&value.0).unwrap_or(0)
}

/// Which limit a create (or a stop) would pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// `maxWorkspacesPerUser`.
    Workspaces,
    /// `maxCpuPerUser`.
    Cpu,
    /// `maxMemoryPerUser`.
    Memory,
    /// The resource of this name in `maxResourcesPerUser`.
    Resource(String),
    /// `maxStoppedWorkspacesPerUser`.
    Stopped,
}

impl Limit {
    /// The configuration key that sets it.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Workspaces => "maxWorkspacesPerUser",
            Self::Cpu => "maxCpuPerUser",
            Self::Memory => "maxMemoryPerUser",
            Self::Resource(_) => "maxResourcesPerUser",
            Self::Stopped => "maxStoppedWorkspacesPerUser",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Resource(name) => write!(f, "{}[{name}]", self.key()),
            other => f.write_str(other.key()),
        }
    }
}

/// A create refused because the user would pass a limit; says which, and by how much.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LimitExceeded {
    /// The limit passed.
    pub limit: Limit,
    /// Its value, as the configuration would write it (`2`, `1500m`, `4Gi`).
    pub limit_value: String,
    /// What the user's workspaces use already: their count, CPU or memory.
    pub in_use: String,
    /// What the new workspace asks (`1` for a workspace count).
    pub requested: String,
    /// `in_use` and `requested` together.
    pub total: String,
    /// How many workspaces the user has that count.
    pub workspaces: usize,
}

impl LimitExceeded {
    /// The configuration key of the limit, for the API's answer.
    pub fn key(&self) -> &'static str {
        self.limit.key()
    }
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}: ", self.limit, self.limit_value)?;
        let plural = if self.workspaces == 1 { "" } else { "s" };
        match (&self.limit, self.workspaces) {
            (Limit::Workspaces, n) => write!(
                f,
                "you have {n} workspace{plural}, and this one would make {}",
                self.total
            ),
            (Limit::Stopped, n) => write!(
                f,
                "you have {n} stopped workspace{plural}, and this stop would make {}; delete one you no longer need",
                self.total
            ),
            (_, 0) => write!(f, "this workspace alone requests {}", self.requested),
            (_, n) => write!(
                f,
                "your {n} workspace{plural} request{} {} and this one {} ({} in all)",
                if n == 1 { "s" } else { "" },
                self.in_use,
                self.requested,
                self.total
            ),
        }
    }
}

/// Whether a pod still takes its share: not being deleted, and not finished. A finished pod's
/// containers have stopped, and the scheduler no longer counts its requests against its node.
pub fn counts(pod: &Pod) -> bool {
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| matches!(phase, "Succeeded" | "Failed"));
    pod.metadata.deletion_timestamp.is_none() && !finished
}

/// Whether `user`'s new pod `new` fits within `limits`, next to `existing`, the user's workspace
/// pods (those being deleted or finished don't count; see [`counts`]). Checks the workspace
/// count first, then CPU, then memory, and answers the first limit passed.
pub fn check(limits: &Limits, existing: &[&Pod], new: &Pod) -> Result<(), LimitExceeded> {
    let counted: Vec<&Pod> = existing.iter().copied().filter(|p| counts(p)).collect();
    let workspaces = counted.len();
    if let Some(max) = limits.max_workspaces
        && workspaces + 1 > max
    {
        return Err(LimitExceeded {
            limit: Limit::Workspaces,
            limit_value: max.to_string(),
            in_use: workspaces.to_string(),
            requested: "1".to_owned(),
            total: (workspaces + 1).to_string(),
            workspaces,
        });
    }
    let in_use = counted
        .iter()
        .map(|p| requests(p))
        .fold(Requests::default(), |sum, asks| sum.add(&asks));
    let asked = requests(new);
    let exceeded = |limit, max: Option<u64>, in_use: u64, asked: u64, amount: fn(u64) -> Amount| {
        let max = max?;
        let total = in_use.saturating_add(asked);
        (total > max).then(|| LimitExceeded {
            limit,
            limit_value: amount(max).to_string(),
            in_use: amount(in_use).to_string(),
            requested: amount(asked).to_string(),
            total: amount(total).to_string(),
            workspaces,
        })
    };
    let cpu = exceeded(
        Limit::Cpu,
        limits.max_cpu_millis,
        in_use.cpu_millis,
        asked.cpu_millis,
        Amount::Cpu,
    );
    let memory = exceeded(
        Limit::Memory,
        limits.max_memory_bytes,
        in_use.memory_bytes,
        asked.memory_bytes,
        Amount::Memory,
    );
    // Every other resource in whole units, as the configuration writes it (`2`, `1Gi`).
    let other = limits.max_resources.iter().find_map(|(name, max)| {
        exceeded(
            Limit::Resource(name.clone()),
            Some(*max),
            in_use.of(name),
            asked.of(name),
            Amount::Memory,
        )
    });
    match cpu.or(memory).or(other) {
        Some(exceeded) => Err(exceeded),
        None => Ok(()),
    }
}

/// Whether `user` may stop one more workspace, having `stopped` stopped already
/// (`maxStoppedWorkspacesPerUser`): each keeps its record and the user's storage.
pub fn check_stopped(limits: &Limits, stopped: usize) -> Result<(), LimitExceeded> {
    match limits.max_stopped {
        Some(max) if stopped + 1 > max => Err(LimitExceeded {
            limit: Limit::Stopped,
            limit_value: max.to_string(),
            in_use: stopped.to_string(),
            requested: "1".to_owned(),
            total: (stopped + 1).to_string(),
            workspaces: stopped,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::core::v1::{PodSpec, PodStatus},
        apimachinery::pkg::apis::meta::v1::Time,
    };

    use super::*;

    fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
        let list = |pairs: &[(&str, &str)]| {
            (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                    .collect()
            })
        };
        ResourceRequirements {
            requests: list(requests),
            limits: list(limits),
            ..ResourceRequirements::default()
        }
    }

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: "c".to_owned(),
            resources: Some(resources(requests, limits)),
            ..Container::default()
        }
    }

    fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: (!init.is_empty()).then_some(init),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    fn asking(cpu: &str, memory: &str) -> Pod {
        pod(vec![container(&[("cpu", cpu), ("memory", memory)], &[])], vec![])
    }

    fn req(cpu_millis: u64, memory_bytes: u64) -> Requests {
        Requests {
            cpu_millis,
            memory_bytes,
            ..Requests::default()
        }
    }

    const MI: u64 = 1 << 20;

    #[test]
    fn containers_add_up() {
        let pod = pod(
            vec![
                container(&[("cpu", "500m"), ("memory", "256Mi")], &[]),
                container(&[("cpu", "1")], &[("memory", "1Gi")]),
            ],
            vec![],
        );
        assert_eq!(requests(&pod), req(1_500, 256 * MI + 1024 * MI));
    }

    /// The API server's defaulting (SetDefaults_Pod): a limit without a request is the request.
    #[test]
    fn a_limit_without_a_request_counts_as_the_request() {
        let pod = pod(
            vec![container(
                &[("memory", "1Gi")],
                &[("cpu", "2"), ("memory", "4Gi")],
            )],
            vec![],
        );
        assert_eq!(requests(&pod), req(2_000, 1024 * MI));
    }

    /// component-helpers' PodRequests: init containers run one at a time before the rest, so
    /// the pod needs the larger of their peak and the containers' sum, per resource.
    #[test]
    fn init_containers_count_by_their_peak_per_resource() {
        let pod = pod(
            vec![
                container(&[("cpu", "500m"), ("memory", "100Mi")], &[]),
                container(&[("cpu", "500m"), ("memory", "100Mi")], &[]),
            ],
            vec![
                container(&[("cpu", "2"), ("memory", "50Mi")], &[]),
                container(&[("cpu", "100m"), ("memory", "150Mi")], &[]),
            ],
        );
        assert_eq!(requests(&pod), req(2_000, 200 * MI));
    }

    /// KEP-753 sidecars (init containers with restartPolicy Always) run beside everything after
    /// them, so they add to the containers' sum and to every later init container's peak.
    #[test]
    fn sidecars_add_to_the_containers_and_to_later_init_containers() {
        let mut sidecar = container(&[("cpu", "200m"), ("memory", "64Mi")], &[]);
        sidecar.restart_policy = Some("Always".to_owned());
        let pod = pod(
            vec![container(&[("cpu", "1"), ("memory", "64Mi")], &[])],
            vec![sidecar, container(&[("cpu", "100m"), ("memory", "512Mi")], &[])],
        );
        assert_eq!(requests(&pod), req(1_200, 576 * MI));
    }

    #[test]
    fn pod_level_requests_replace_the_containers_and_overhead_adds() {
        let mut pod = asking("1", "1Gi");
        let spec = pod.spec.as_mut().unwrap();
        spec.resources = Some(resources(&[("cpu", "3")], &[]));
        spec.overhead = Some(BTreeMap::from([("cpu".to_owned(), Quantity("250m".to_owned()))]));
        assert_eq!(requests(&pod), req(3_250, 1024 * MI));
    }

    #[test]
    fn unreadable_quantities_count_as_nothing() {
        assert_eq!(requests(&asking("lots", "1Gi")), req(0, 1024 * MI));
        assert_eq!(requests(&Pod::default()), req(0, 0));
    }

    #[test]
    fn no_limits_pass_everything() {
        let big = asking("64", "1Ti");
        assert_eq!(check(&Limits::default(), &[&big, &big], &big), Ok(()));
    }

    #[test]
    fn the_workspace_count_is_checked_first() {
        let limits = Limits {
            max_workspaces: Some(2),
            max_cpu_millis: Some(1),
            max_memory_bytes: None,
            ..Limits::default()
        };
        let (a, b) = (asking("1", "1Gi"), asking("1", "1Gi"));
        let err = check(&limits, &[&a, &b], &asking("1", "1Gi")).unwrap_err();
        assert_eq!(err.key(), "maxWorkspacesPerUser");
        assert_eq!(
            err.to_string(),
            "maxWorkspacesPerUser is 2: you have 2 workspaces, and this one would make 3"
        );
        let limits = Limits {
            max_cpu_millis: None,
            ..limits
        };
        assert_eq!(check(&limits, &[&a], &b), Ok(()));
    }

    #[test]
    fn cpu_over_the_limit_says_what_is_in_use_and_asked() {
        let limits = Limits {
            max_cpu_millis: Some(2_000),
            ..Limits::default()
        };
        let running = asking("1500m", "1Gi");
        let err = check(&limits, &[&running], &asking("1", "1Gi")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "maxCpuPerUser is 2: your 1 workspace requests 1500m and this one 1 (2500m in all)"
        );
        assert_eq!(
            (
                err.limit_value.as_str(),
                err.in_use.as_str(),
                err.requested.as_str()
            ),
            ("2", "1500m", "1")
        );
        assert_eq!(check(&limits, &[&running], &asking("500m", "1Gi")), Ok(()));
    }

    #[test]
    fn memory_over_the_limit_alone_or_with_others() {
        let limits = Limits {
            max_memory_bytes: Some(4 * 1024 * MI),
            ..Limits::default()
        };
        let err = check(&limits, &[], &asking("1", "5Gi")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "maxMemoryPerUser is 4Gi: this workspace alone requests 5Gi"
        );
        let (a, b) = (asking("1", "1Gi"), asking("1", "2Gi"));
        let err = check(&limits, &[&a, &b], &asking("1", "1536Mi")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "maxMemoryPerUser is 4Gi: your 2 workspaces request 3Gi and this one 1536Mi (4608Mi in all)"
        );
    }

    #[test]
    fn pods_being_deleted_or_finished_do_not_count() {
        let limits = Limits {
            max_workspaces: Some(1),
            max_cpu_millis: Some(1_000),
            max_memory_bytes: None,
            ..Limits::default()
        };
        let mut deleting = asking("1", "1Gi");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let finished = |phase: &str| {
            let mut pod = asking("1", "1Gi");
            pod.status = Some(PodStatus {
                phase: Some(phase.to_owned()),
                ..PodStatus::default()
            });
            pod
        };
        let (succeeded, failed, running) = (finished("Succeeded"), finished("Failed"), finished("Running"));
        let new = asking("1", "1Gi");
        assert_eq!(check(&limits, &[&deleting, &succeeded, &failed], &new), Ok(()));
        let err = check(&limits, &[&deleting, &running], &new).unwrap_err();
        assert_eq!(err.limit, Limit::Workspaces);
        assert_eq!(err.workspaces, 1);
    }

    /// Issue 31: seed 000's GPUs for authorised users, with a ceiling per user: extended resources
    /// count as the scheduler counts them (a limit alone counts as the request), per name.
    #[test]
    fn other_resources_are_limited_per_name_as_the_scheduler_counts_them() {
        let gpus = |n: &str| pod(vec![container(&[], &[("nvidia.com/gpu", n)])], vec![]);
        let limits = Limits {
            max_resources: [("nvidia.com/gpu".to_owned(), 2)].into(),
            ..Limits::default()
        };
        assert_eq!(requests(&gpus("1")).of("nvidia.com/gpu"), 1);
        assert_eq!(check(&limits, &[&gpus("1")], &gpus("1")), Ok(()));
        let err = check(&limits, &[&gpus("1")], &gpus("2")).unwrap_err();
        assert_eq!(err.limit, Limit::Resource("nvidia.com/gpu".to_owned()));
        assert_eq!(
            err.to_string(),
            "maxResourcesPerUser[nvidia.com/gpu] is 2: your 1 workspace requests 1 and this one 2 (3 in all)"
        );
        // An init container's peak counts, not its sum with the containers'.
        let init = pod(
            vec![container(&[], &[])],
            vec![container(&[], &[("nvidia.com/gpu", "2")])],
        );
        assert_eq!(requests(&init).of("nvidia.com/gpu"), 2);
        // Other resources are not limited by it.
        assert_eq!(check(&limits, &[], &asking("64", "1Ti")), Ok(()));
    }

    #[test]
    fn a_stop_past_the_stopped_limit_is_refused() {
        let limits = Limits {
            max_stopped: Some(2),
            ..Limits::default()
        };
        assert_eq!(check_stopped(&limits, 1), Ok(()));
        let err = check_stopped(&limits, 2).unwrap_err();
        assert_eq!(err.key(), "maxStoppedWorkspacesPerUser");
        assert!(err.to_string().contains("you have 2 stopped workspaces"), "{err}");
        assert_eq!(check_stopped(&Limits::default(), 1000), Ok(()));
    }
}
