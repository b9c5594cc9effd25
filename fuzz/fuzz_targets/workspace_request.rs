//! What `outfit workspaces` reads from outside, each from any bytes. The first byte picks the
//! reader (its value modulo the number of readers), the rest is its input:
//!
//! | byte | reader | invariants beyond "no panic" |
//! |---:|---|---|
//! | 0 | `Config::load` of a YAML file | an error names the file; the loaded config prepares a manifest |
//! | 1 | the native API's launch body (`workspace::requests::Launch`, JSON) | every setting is applied to the env it names or warned about; the mandatory env (`SD_UID`, ...) is the backend's, whatever the settings say |
//! | 2 | a manifest (`manifest::prepare`, then `assemble`) | the mandatory env is the backend's in every container, as the container will see it; pod names and their objects' names fit 63 characters |
//! | 3 | a Pod (JSON; `progress::report`, `culling`, `info`, `limits`, `progress`) | `percent` ≤ 100, and 100 exactly when ready or deleted |
//! | 4 | a Pod, its claim and Events (`{"pod":…, "claim":…, "events":[…]}`) | as 3 |
//! | 5 | a quantity (`quantity::cpu_millis`, `bytes`) | what `format_cpu` / `format_bytes` write reads back as the same amount |
//! | 6 | a user name (`user::owner_id`), folded and not | an owner id is a valid user id, maps to itself, ends in `.serviceaccount` only for a service account, and unfolded comes only from a name without upper-case letters |
//! | 7 | a Go duration (`duration::parse`, config values and culling annotations) | what `duration::format` writes parses back to the same duration |
//! | 8 | deic-dk's `create_pod` body (`workspace::requests::CreateRequest`, JSON) | pod names for its user, deic-dk's and its own, fit 63 characters; its storage names fit 253 |
//! | 9 | a pod name from a request (`names::check_pod_name`) | an accepted name is one URL path segment: no `/`, `?`, `#`, `%`, `.`, at most 63 characters |
//!
//! Run: `hack/fuzz.sh run workspace_request 60`

#![no_main]

use std::{collections::BTreeMap, sync::LazyLock};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use libfuzzer_sys::fuzz_target;
use outfit_core::quantity;
use outfit_workspaces_core::{model::{config::Config, duration, names, user::{self, UserId}}, policy::{culling, limits}, workspace::{ info::{self, ClusterState}, manifest::{self, MANDATORY_ENV, Placement, Prepared, Requester, Settings}, pod_needs::PodNeeds, progress::{self, Status}, requests::{CreateRequest, Launch}, }};

/// The manifest launches use: deic-dk's Jupyter manifest as the manifest tests have it.
const JUPYTER: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: jupyter
  labels: {app: jupyter}
  annotations:
    sciencedata.dk/copy-token: appendURL
    sciencedata.dk/ingress-port: "8888"
spec:
  containers:
  - name: jupyter
    image: LOCALREGISTRY/jupyter:1.0
    env:
    - {name: FILE, value: ""}
    - {name: WORKING_DIRECTORY, value: jupyter}
    volumeMounts:
    - {name: sciencedata, mountPath: /home/jovyan/work}
    - {name: local, mountPath: /data/x}
  - name: helper
    image: busybox
"#;

const SILO: &str = "10.0.0.11";

static CONFIG: LazyLock<Config> = LazyLock::new(|| {
    let env = |var: &str| match var {
        "BACKEND_HOSTNAMELIST" => Some(format!(r#"[{{"hostname": "silo1", "address": "{SILO}"}}]"#)),
        _ => None,
    };
    Config::load(None, env).expect("the defaults load").0
});

static USER: LazyLock<UserId> = LazyLock::new(|| UserId::parse("alice@dtu.dk").expect("valid"));

/// alice asking from the silo, with the groups a sign-in gave her (as the backend records them).
fn requester() -> Requester<'static> {
    Requester {
        user: &USER,
        groups: Some("staff\ngpu-users"),
        silo_ip: SILO,
        restore: None,
    }
}

/// A fixed "now", so that a reproducer behaves the same tomorrow.
fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("in range")
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    match mode % 10 {
        0 => config(input),
        1 => launch(input),
        2 => {
            if let Ok(text) = std::str::from_utf8(input) {
                manifest(text);
            }
        }
        3 => {
            if let Ok(pod) = serde_json::from_slice::<Pod>(input) {
                pod_views(&pod, None, &[]);
            }
        }
        4 => progress_bundle(input),
        5 => quantities(input),
        6 => {
            if let Ok(name) = std::str::from_utf8(input) {
                owner(name);
            }
        }
        7 => {
            if let Ok(text) = std::str::from_utf8(input) {
                durations(text);
            }
        }
        8 => create_request(input),
        _ => {
            if let Ok(name) = std::str::from_utf8(input) {
                pod_name(name);
            }
        }
    }
});

fn config(input: &[u8]) {
    // One file per process, rewritten each time: Config::load reads a path.
    static PATH: LazyLock<std::path::PathBuf> = LazyLock::new(|| {
        std::env::temp_dir().join(format!("outfit-fuzz-config-{}.yaml", std::process::id()))
    });
    std::fs::write(&*PATH, input).expect("temp file written");
    let path = PATH.display().to_string();
    match Config::load(Some(&PATH), |_| None) {
        Err(error) => {
            let message = error.to_string();
            assert!(message.contains(&path), "error without its file: {message}");
        }
        Ok((config, warnings)) => {
            for warning in warnings {
                assert!(warning.contains(&path), "warning without its file: {warning}");
            }
            let requester = requester();
            // Any configuration that loads can prepare a valid manifest.
            let prepared = manifest::prepare(JUPYTER, requester, &Settings::new(), &config)
                .unwrap_or_else(|e| panic!("a valid manifest refused under a loaded config: {e}"));
            assert_mandatory_env(&prepared, requester, &config);
        }
    }
}

fn launch(input: &[u8]) {
    let Ok(launch) = serde_json::from_slice::<Launch>(input) else {
        return;
    };
    let requester = requester();
    let prepared = manifest::prepare(JUPYTER, requester, &launch.settings, &CONFIG)
        .unwrap_or_else(|e| panic!("settings made a valid manifest fail: {e}"));
    let spec = prepared.pod.spec.as_ref().expect("a prepared pod has a spec");
    for (container_name, vars) in &launch.settings {
        let Some(container) = spec.containers.iter().find(|c| &c.name == container_name) else {
            assert!(
                prepared
                    .warnings
                    .iter()
                    .any(|w| w.contains(&format!("{container_name:?}"))),
                "settings for a missing container {container_name:?} dropped without a warning"
            );
            continue;
        };
        for (name, value) in vars {
            if MANDATORY_ENV.contains(&name.as_str()) {
                continue;
            }
            let env: Vec<_> = container
                .env
                .iter()
                .flatten()
                .filter(|e| &e.name == name)
                .collect();
            if env.is_empty() {
                assert!(
                    prepared.warnings.iter().any(|w| w.contains(&format!("{name:?}"))),
                    "setting {name:?} dropped without a warning"
                );
            } else {
                for e in env {
                    assert_eq!(
                        e.value.as_deref(),
                        Some(value.as_str()),
                        "setting {name:?} not applied"
                    );
                    assert!(e.value_from.is_none());
                }
            }
        }
    }
    assert_mandatory_env(&prepared, requester, &CONFIG);
}

fn manifest(text: &str) {
    let requester = requester();
    let settings: Settings = BTreeMap::from([(
        "jupyter".to_owned(),
        BTreeMap::from([("FILE".to_owned(), "notebook.ipynb".to_owned())]),
    )]);
    let Ok(prepared) = manifest::prepare(text, requester, &settings, &CONFIG) else {
        return;
    };
    assert_mandatory_env(&prepared, requester, &CONFIG);
    let spec = prepared.pod.spec.as_ref().expect("a prepared pod has a spec");
    assert!(!spec.containers.is_empty());
    assert!(spec.restart_policy.as_deref().is_some_and(|p| !p.is_empty()));
    // prepare checked the pod's asks: reading them again strictly succeeds, and as the start does
    // gives the same.
    let needs = PodNeeds::read(&prepared.pod).expect("prepare checked the pod's asks");
    assert_eq!(PodNeeds::of(&prepared.pod), needs);
    let candidates = names::pod_name_candidates(&prepared.manifest_name, &USER);
    assert_eq!(candidates.len(), names::NAME_ATTEMPTS);
    for name in &candidates {
        assert_names_fit(name);
    }
    let placement = Placement {
        name: &candidates[0],
        storage_claim: Some("user-storage-alice-dtu-dk"),
        deadline: "2027-01-15T08:00:00Z",
        manifest_url: "https://example.org/jupyter.yaml",
    };
    let pod = manifest::assemble(prepared, requester, &placement);
    assert_eq!(pod.metadata.name.as_deref(), Some(candidates[0].as_str()));
    for value in pod.metadata.labels.iter().flatten().map(|(_, v)| v) {
        assert!(value.len() <= names::MAX_LABEL, "label value {value:?} too long");
    }
    pod_views(&pod, None, &[]);
}

/// `HOME_SERVER_IP`, `SD_UID` and `HOME_SERVER_HOSTNAME` as every container will see them: the
/// last entry of a name wins in a container's environment.
fn assert_mandatory_env(prepared: &Prepared, requester: Requester<'_>, config: &Config) {
    let spec = prepared.pod.spec.as_ref().expect("a prepared pod has a spec");
    let expected = [
        (
            "HOME_SERVER_IP",
            Some(outfit_workspaces_core::model::config::data_network_address(requester.silo_ip)),
        ),
        ("SD_UID", Some(requester.user.as_str().to_owned())),
        (
            "HOME_SERVER_HOSTNAME",
            config.hostname_of(requester.silo_ip).map(str::to_owned),
        ),
    ];
    for container in &spec.containers {
        for (name, value) in &expected {
            let Some(value) = value else { continue };
            let seen = container.env.iter().flatten().rfind(|e| e.name == *name);
            let seen = seen.unwrap_or_else(|| panic!("container {:?} has no {name}", container.name));
            assert_eq!(
                (seen.value.as_deref(), seen.value_from.is_none()),
                (Some(value.as_str()), true),
                "container {:?}: {name} is not the backend's",
                container.name
            );
        }
    }
}

fn assert_names_fit(pod: &str) {
    for name in [
        names::ssh_service(pod),
        names::http_service(pod),
        names::ingress(pod),
    ] {
        assert!(name.len() <= names::MAX_LABEL, "{name:?} is longer than 63");
    }
    assert!(names::network_policy(pod).len() <= names::MAX_SUBDOMAIN);
}

fn pod_views(pod: &Pod, claim: Option<&PersistentVolumeClaim>, events: &[std::sync::Arc<Event>]) {
    let name = pod.metadata.name.as_deref().unwrap_or("workspace");
    let report = progress::report(name, Some(pod), claim, events);
    assert!(report.percent <= 100, "percent {}", report.percent);
    assert_eq!(
        report.percent == 100,
        matches!(report.status, Status::Ready | Status::Deleted),
        "{report:?}"
    );
    let _ = progress::report(name, None, claim, events);
    let _ = info::pod_info(pod, &CONFIG, now());
    for cluster in [
        ClusterState::new("default", None),
        ClusterState::new("east", Some("connection refused".to_owned())),
    ] {
        let _ = info::workspace(pod, &report, &CONFIG, cluster, now());
    }
    let _ = culling::lifetimes(pod, &CONFIG);
    let _ = culling::due(pod, &CONFIG, now());
    let _ = culling::expires(pod, &CONFIG);
    let _ = culling::last_activity(pod);
    let _ = limits::requests(pod);
    let _ = limits::counts(pod);
    let _ = limits::check(&CONFIG.limits, &[pod], pod);
    let _ = progress::stuck(pod, claim);
    let _ = progress::deadline(pod);
    let _ = progress::failure(pod);
    let _ = progress::storage_claim_of(pod);
}

#[derive(serde::Deserialize)]
struct Bundle {
    pod: Pod,
    claim: Option<PersistentVolumeClaim>,
    #[serde(default)]
    events: Vec<Event>,
}

fn progress_bundle(input: &[u8]) {
    let Ok(bundle) = serde_json::from_slice::<Bundle>(input) else {
        return;
    };
    let events: Vec<_> = bundle.events.into_iter().map(std::sync::Arc::new).collect();
    let _ = progress::last_warning(&events);
    pod_views(&bundle.pod, bundle.claim.as_ref(), &events);
}

fn quantities(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if let Ok(millis) = quantity::cpu_millis(text) {
        let written = quantity::format_cpu(millis);
        assert_eq!(
            quantity::cpu_millis(&written),
            Ok(millis),
            "{text:?} → {written:?}"
        );
    }
    if let Ok(bytes) = quantity::bytes(text) {
        let written = quantity::format_bytes(bytes);
        assert_eq!(quantity::bytes(&written), Ok(bytes), "{text:?} → {written:?}");
    }
}

fn owner(name: &str) {
    for fold_case in [false, true] {
        owner_as(name, fold_case);
    }
}

fn owner_as(name: &str, fold_case: bool) {
    let Ok(id) = user::owner_id(name, fold_case) else {
        return;
    };
    assert_eq!(UserId::parse(id.as_str()).as_ref(), Ok(&id));
    match name.strip_prefix("system:serviceaccount:") {
        Some(_) => assert!(id.as_str().ends_with(".serviceaccount"), "{name:?} → {id:?}"),
        None => {
            assert!(
                !id.as_str().ends_with(".serviceaccount"),
                "{name:?} takes a service account's id {id:?}"
            );
            // Unfolded, a name that differs from another only in case never gets an id.
            assert!(
                fold_case || !name.bytes().any(|b| b.is_ascii_uppercase()),
                "{name:?} → {id:?} without foldUserCase"
            );
            assert_eq!(user::owner_id(id.as_str(), false).as_ref(), Ok(&id), "{name:?}");
        }
    }
    for candidate in names::pod_name_candidates("jupyter", &id) {
        assert_names_fit(&candidate);
    }
}

fn durations(text: &str) {
    if let Ok(parsed) = duration::parse(text) {
        let written = duration::format(parsed);
        assert_eq!(duration::parse(&written), Ok(parsed), "{text:?} → {written:?}");
    }
}

fn create_request(input: &[u8]) {
    let Ok(request) = serde_json::from_slice::<CreateRequest>(input) else {
        return;
    };
    if let Ok(user) = UserId::parse(&request.user_id) {
        let own = names::own_pod_name_candidates("jupyter", &user);
        for candidate in names::pod_name_candidates("jupyter", &user).iter().chain(&own) {
            assert_names_fit(candidate);
            assert_eq!(names::check_pod_name(candidate), Ok(()), "{candidate:?}");
        }
        assert!(names::storage_name_for(&user).len() <= names::MAX_SUBDOMAIN);
    }
    let _ = CONFIG.whitelist_manifest_regex.is_match(&request.yaml_url);
    if let Some(settings) = request.settings {
        let requester = requester();
        let prepared = manifest::prepare(JUPYTER, requester, &settings, &CONFIG).expect("valid manifest");
        assert_mandatory_env(&prepared, requester, &CONFIG);
    }
}

/// A name from a request goes into an API server URL only if it is one path segment of a name.
fn pod_name(name: &str) {
    if names::check_pod_name(name).is_ok() {
        assert!(!name.is_empty() && name.len() <= names::MAX_LABEL, "{name:?}");
        assert!(!name.contains(['/', '?', '#', '%', '.', '\\']), "{name:?} passed");
        assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
    }
}
