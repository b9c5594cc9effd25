//! Each case names the deic-dk behaviour it pins (podcreator.go, §1.3–1.4 of the reference) or
//! the flaw it fixes.

use super::*;

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
    - {name: software, mountPath: /opt/software}
  - name: helper
    image: busybox
  volumes:
  - name: software
    persistentVolumeClaim: {claimName: jupyter-sciencedata-v1.0.0}
"#;

fn config() -> Config {
    let env = |var: &str| match var {
        "BACKEND_LOCALREGISTRYURL" => Some("registry.example:5000".to_owned()),
        "BACKEND_HOSTNAMELIST" => Some(r#"[{"hostname": "silo1", "address": "10.0.0.11"}]"#.to_owned()),
        _ => None,
    };
    Config::load(None, env).unwrap().0
}

fn alice() -> UserId {
    UserId::parse("alice@dtu.dk").unwrap()
}

/// `user` asking from `silo_ip`, with no groups and no snapshot to restore.
fn requester<'a>(user: &'a UserId, silo_ip: &'a str) -> Requester<'a> {
    Requester {
        user,
        groups: None,
        silo_ip,
        restore: None,
    }
}

/// Where alice's jupyter pod goes, with its home in `storage_claim`.
fn placement(storage_claim: Option<&str>) -> Placement<'_> {
    Placement {
        name: "jupyter-alice-dtu-dk",
        storage_claim,
        deadline: "2026-01-01T00:00:00Z",
        manifest_url: "https://example/jupyter.yaml",
    }
}

fn prepare_jupyter(settings: &Settings) -> Result<Prepared, ManifestError> {
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    prepare(JUPYTER, requester, settings, &config())
}

fn env_of(pod: &Pod, container: usize) -> BTreeMap<&str, &str> {
    pod.spec.as_ref().unwrap().containers[container]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect()
}

#[test]
fn settings_overwrite_declared_env_and_report_the_rest() {
    let settings: Settings = BTreeMap::from([
        (
            "jupyter".to_owned(),
            BTreeMap::from([
                ("FILE".to_owned(), "notebook.ipynb".to_owned()),
                ("NOT_DECLARED".to_owned(), "x".to_owned()),
            ]),
        ),
        (
            "nosuch".to_owned(),
            BTreeMap::from([("A".to_owned(), "b".to_owned())]),
        ),
    ]);
    let prepared = prepare_jupyter(&settings).unwrap();
    let env = env_of(&prepared.pod, 0);
    // deic-dk: applyCreatePodSettings overwrites declared vars only.
    assert_eq!(env["FILE"], "notebook.ipynb");
    assert_eq!(env["WORKING_DIRECTORY"], "jupyter");
    assert!(!env.contains_key("NOT_DECLARED"));
    // outfit: what deic-dk drops silently is said.
    assert_eq!(prepared.warnings.len(), 2, "{:?}", prepared.warnings);
    assert!(prepared.warnings.iter().any(|w| w.contains("NOT_DECLARED")));
    assert!(prepared.warnings.iter().any(|w| w.contains("nosuch")));
}

#[test]
fn mandatory_env_in_every_container() {
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    for container in 0..2 {
        let env = env_of(&prepared.pod, container);
        // deic-dk: HOME_SERVER_IP is the silo's data-network address (10.0. → 10.2.).
        assert_eq!(env["HOME_SERVER_IP"], "10.2.0.11");
        assert_eq!(env["SD_UID"], "alice@dtu.dk");
        assert_eq!(env["HOME_SERVER_HOSTNAME"], "silo1");
    }
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
}

#[test]
fn unknown_silo_leaves_the_hostname_out_with_a_warning() {
    let user = alice();
    let requester = requester(&user, "10.0.0.99");
    let prepared = prepare(JUPYTER, requester, &Settings::new(), &config()).unwrap();
    assert!(!env_of(&prepared.pod, 0).contains_key("HOME_SERVER_HOSTNAME"));
    assert!(prepared.warnings[0].contains("10.0.0.99"));
}

#[test]
fn local_registry_is_rewritten_with_its_pull_secret() {
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    let spec = prepared.pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("registry.example:5000/jupyter:1.0")
    );
    assert_eq!(spec.containers[1].image.as_deref(), Some("busybox"));
    let secrets = spec.image_pull_secrets.as_ref().unwrap();
    assert_eq!(secrets[0].name, "docker-registry-auth");
}

#[test]
fn restart_policy_defaults_only_when_unset() {
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    assert_eq!(
        prepared.pod.spec.as_ref().unwrap().restart_policy.as_deref(),
        Some("Never")
    );
    let always = JUPYTER.replace("spec:\n", "spec:\n  restartPolicy: Always\n");
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    let prepared = prepare(&always, requester, &Settings::new(), &config()).unwrap();
    assert_eq!(
        prepared.pod.spec.as_ref().unwrap().restart_policy.as_deref(),
        Some("Always")
    );
}

/// Fixes deic-dk's pods getting every Service's env and an API token: off unless the manifest
/// asks for them.
#[test]
fn service_links_and_the_account_token_are_off_unless_the_manifest_sets_them() {
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    let spec = prepared.pod.spec.as_ref().unwrap();
    assert_eq!(spec.enable_service_links, Some(false));
    assert_eq!(spec.automount_service_account_token, Some(false));
    let explicit = JUPYTER.replace(
        "spec:\n",
        "spec:\n  automountServiceAccountToken: true\n  enableServiceLinks: true\n",
    );
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    let prepared = prepare(&explicit, requester, &Settings::new(), &config()).unwrap();
    let spec = prepared.pod.spec.as_ref().unwrap();
    assert_eq!(spec.automount_service_account_token, Some(true));
    assert_eq!(spec.enable_service_links, Some(true));
}

#[test]
fn assembled_pod_has_deic_dk_labels_owner_and_provided_volumes() {
    let user = alice();
    let requester = Requester {
        user: &user,
        groups: Some("gpu-users\nstaff"),
        silo_ip: "10.0.0.11",
        restore: None,
    };
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    assert!(prepared.needs_user_storage);
    let placement = placement(Some("user-storage-alice-dtu-dk"));
    let pod = assemble(prepared, requester, &placement);
    let labels = pod.metadata.labels.as_ref().unwrap();
    // deic-dk replaces the manifest's labels (app: jupyter is gone).
    assert_eq!(labels.get("user").map(String::as_str), Some("alice"));
    assert_eq!(labels.get("domain").map(String::as_str), Some("dtu.dk"));
    assert_eq!(
        labels.get("podName").map(String::as_str),
        Some("jupyter-alice-dtu-dk")
    );
    assert!(!labels.contains_key("app"));
    let annotations = pod.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations[keys::ANNOTATION_USER_ID], "alice@dtu.dk");
    assert_eq!(annotations[keys::ANNOTATION_USER_GROUPS], "gpu-users\nstaff");
    assert_eq!(annotations[keys::ANNOTATION_COPY_TOKEN], "appendURL");
    let volumes = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    let claim = |name: &str| {
        volumes
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.as_str())
    };
    assert_eq!(claim("software"), Some("jupyter-sciencedata-v1.0.0"));
    assert_eq!(claim("sciencedata"), Some("user-storage-alice-dtu-dk"));
    assert_eq!(claim("local"), Some("local-claim--data-x"));
    assert_eq!(volumes.len(), 3);
}

/// Issue 32: under `storageStrategy: ephemeral` the home is an emptyDir that goes with the pod;
/// the manifest's own volumes and `local` claims are unchanged.
#[test]
fn an_ephemeral_home_is_an_empty_dir() {
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    let placement = placement(None);
    let pod = assemble(prepared, requester, &placement);
    let volumes = pod.spec.unwrap().volumes.unwrap();
    let home = volumes.iter().find(|v| v.name == "sciencedata").unwrap();
    assert!(
        home.empty_dir.is_some() && home.persistent_volume_claim.is_none(),
        "{home:?}"
    );
    let local = volumes.iter().find(|v| v.name == "local").unwrap();
    assert!(local.persistent_volume_claim.is_some());
}

#[test]
fn refusals_say_what_is_wrong() {
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    let cases: &[(&str, &str)] = &[
        (
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: x}\n",
            "only kind Pod",
        ),
        ("{", "not valid YAML"),
        (
            "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: []}\n---\nkind: Pod\napiVersion: v1\n",
            "2 documents",
        ),
        (
            "kind: Pod\napiVersion: v1\nspec: {containers: [{name: a}]}\n",
            "no metadata.name",
        ),
        (
            "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: []}\n",
            "no containers",
        ),
        (
            "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: [{name: c, volumeMounts: [{name: data, mountPath: /d}]}]}\n",
            "container \"c\" mounts volume \"data\"",
        ),
        (
            "kind: Pod\napiVersion: v1\nmetadata: {name: a, annotations: {sciencedata.dk/ingress-port: http}}\nspec: {containers: [{name: c}]}\n",
            "not a port number",
        ),
        (
            "kind: Pod\napiVersion: v1\nmetadata: {name: a, annotations: {sciencedata.dk/copy-token: ../etc/shadow}}\nspec: {containers: [{name: c}]}\n",
            "not a plain file name",
        ),
        (
            "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: [{name: 3}]}\n",
            "not a valid Pod",
        ),
    ];
    for (manifest, want) in cases {
        let err = prepare(manifest, requester, &Settings::new(), &config())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{manifest}: {err}");
    }
}

#[test]
fn ssh_and_tokens_are_read_from_the_manifest() {
    let prepared = prepare_jupyter(&Settings::new()).unwrap();
    let needs = PodNeeds::read(&prepared.pod).unwrap();
    assert!(!needs.ssh);
    assert_eq!(needs.token_keys, vec!["appendURL".to_owned()]);
    assert_eq!(needs.ingress_port, Some(8888));
    let ssh = "kind: Pod\napiVersion: v1\nmetadata: {name: u, annotations: {sciencedata.dk/copy-token: 'a, b'}}\nspec: {containers: [{name: c, ports: [{containerPort: 22}]}]}\n";
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    let prepared = prepare(ssh, requester, &Settings::new(), &config()).unwrap();
    let needs = PodNeeds::read(&prepared.pod).unwrap();
    assert!(needs.ssh);
    assert_eq!(needs.token_keys, vec!["a".to_owned(), "b".to_owned()]);
}

#[test]
fn a_manifest_cannot_name_the_owners_groups() {
    let user = alice();
    let requester = requester(&user, "10.0.0.11");
    let claiming = JUPYTER.replacen(
        "annotations:\n",
        "annotations:\n    outfit.dev/user-groups: gpu-users\n",
        1,
    );
    assert_ne!(claiming, JUPYTER, "the manifest has annotations to add to");
    let prepared = prepare(&claiming, requester, &Settings::new(), &config()).unwrap();
    let placement = placement(None);
    let pod = assemble(prepared, requester, &placement);
    let annotations = pod.metadata.annotations.unwrap();
    assert!(
        !annotations.contains_key(keys::ANNOTATION_USER_GROUPS),
        "{annotations:?}"
    );
}
