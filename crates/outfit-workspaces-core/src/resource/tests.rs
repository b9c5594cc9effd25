//! The CRD and the types agree: the names, the fields each side knows, the enums, and the rules
//! the CRD's schema checks beside the ones the backend checks in Rust.

use serde_json::{Value, json};

use super::*;
use crate::model::user::UserId;

fn version_schema() -> Value {
    let crd = crd();
    let versions = crd["spec"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "one version");
    assert_eq!(versions[0]["name"], VERSION);
    versions[0].clone()
}

fn keys(object: &Value) -> Vec<String> {
    let mut keys: Vec<String> = object.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

fn full() -> Workspace {
    let mut workspace = Workspace::new(
        "jupyter-alice",
        "sciencedata",
        WorkspaceSpec {
            owner: "alice@dtu.dk".to_owned(),
            entry: "jupyter".to_owned(),
            values: [(
                "jupyter".to_owned(),
                [("GREETING".to_owned(), "hi".to_owned())].into(),
            )]
            .into(),
            cluster: Some("east".to_owned()),
            started: false,
            // Every field, for the schema's sake (the CEL rules allow an entry or a URL).
            manifest_url: Some("http://manifests.test/jupyter.yaml".to_owned()),
            silo_ip: Some("10.0.0.11".to_owned()),
        },
    );
    let at = Time(jiff::Timestamp::from_second(1_800_000_000).unwrap());
    workspace.status = Some(WorkspaceStatus {
        phase: Some(Phase::Stopped),
        observed_generation: Some(2),
        conditions: vec![Condition {
            type_: "Ready".to_owned(),
            status: "False".to_owned(),
            reason: "Stopped".to_owned(),
            message: "stopped by its owner".to_owned(),
            last_transition_time: at.clone(),
            observed_generation: Some(2),
        }],
        pod: Some("jupyter-alice".to_owned()),
        url: Some("https://jupyter-alice.example.org/".to_owned()),
        last_activity: Some(at.clone()),
        stopped: Some(Stopped {
            at,
            reason: StopReason::User,
        }),
    });
    workspace
}

#[test]
fn the_crd_names_what_the_type_says() {
    let crd = crd();
    assert_eq!(crd["metadata"]["name"], CRD_NAME);
    assert_eq!(crd["spec"]["group"], GROUP);
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["kind"], KIND);
    assert_eq!(crd["spec"]["names"]["plural"], PLURAL);
    assert_eq!(CRD_NAME, format!("{PLURAL}.{GROUP}"));
    assert_eq!(API_VERSION, format!("{GROUP}/{VERSION}"));
    assert_eq!(Workspace::api_version(&()), API_VERSION);
    assert_eq!(version_schema()["subresources"], json!({"status": {}}));
}

#[test]
fn the_schema_knows_every_field_the_type_writes_and_no_other() {
    let schema = &version_schema()["schema"]["openAPIV3Schema"]["properties"];
    let written = serde_json::to_value(full()).unwrap();
    assert_eq!(written["apiVersion"], API_VERSION);
    assert_eq!(written["kind"], KIND);
    for part in ["spec", "status"] {
        assert_eq!(keys(&written[part]), keys(&schema[part]["properties"]), "{part}");
    }
    assert_eq!(
        keys(&written["status"]["stopped"]),
        keys(&schema["status"]["properties"]["stopped"]["properties"])
    );
    let condition = &schema["status"]["properties"]["conditions"]["items"]["properties"];
    assert_eq!(keys(&written["status"]["conditions"][0]), keys(condition));
    assert_eq!(serde_json::from_value::<Workspace>(written).unwrap(), full());
}

#[test]
fn the_schema_s_enums_are_the_type_s() {
    let status = &version_schema()["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
    let phases = [
        Phase::Pending,
        Phase::Starting,
        Phase::Running,
        Phase::Stopping,
        Phase::Stopped,
        Phase::Failed,
    ];
    assert_eq!(status["phase"]["enum"], serde_json::to_value(phases).unwrap());
    let reasons = [
        StopReason::User,
        StopReason::Idle,
        StopReason::Lifetime,
        StopReason::Failed,
    ];
    assert_eq!(
        status["stopped"]["properties"]["reason"]["enum"],
        serde_json::to_value(reasons).unwrap()
    );
    for reason in reasons {
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
}

#[test]
fn a_spec_without_started_is_started_as_the_crd_defaults_it() {
    let spec = &version_schema()["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["started"]["default"], true);
    let read: WorkspaceSpec = serde_json::from_value(json!({"owner": "alice", "entry": "jupyter"})).unwrap();
    assert!(read.started);
    assert_eq!(
        read,
        WorkspaceSpec {
            owner: "alice".to_owned(),
            entry: "jupyter".to_owned(),
            ..WorkspaceSpec::default()
        }
    );
}

#[test]
fn the_name_rule_is_the_pod_name_bound() {
    let rules = &version_schema()["schema"]["openAPIV3Schema"]["x-kubernetes-validations"];
    assert_eq!(
        rules[0]["rule"],
        format!("size(self.metadata.name) <= {MAX_NAME}")
    );
    assert_eq!(MAX_NAME, 55);
}

/// The CRD's owner pattern lets in exactly the ids the backend's `UserId` does (deic-dk's rule),
/// so an admin's Workspace is refused by the API server where a launch would be.
#[test]
fn the_owner_pattern_is_the_user_id_rule() {
    let owner = &version_schema()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["owner"];
    let pattern = regex::Regex::new(owner["pattern"].as_str().unwrap()).unwrap();
    let (min, max) = (
        owner["minLength"].as_u64().unwrap(),
        owner["maxLength"].as_u64().unwrap(),
    );
    let long = "a".repeat(231);
    let too_long = "a".repeat(232);
    for id in [
        "ab",
        "a@b",
        "alice@dtu.dk",
        "a_b.c-d@x.y",
        "a",
        "-a",
        "a-",
        "a@",
        "@a",
        "a@@b",
        "a@b@c",
        "Alice",
        "a b",
        "aé",
        "a/b",
        "",
        &long,
        &too_long,
    ] {
        let length = id.len() as u64;
        let schema_accepts = pattern.is_match(id) && (min..=max).contains(&length);
        assert_eq!(schema_accepts, UserId::parse(id).is_ok(), "{id:?}");
    }
}
