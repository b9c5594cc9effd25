//! The document's tests: it is OpenAPI, it lists every route and reason, and every answer's
//! schema says what the answer holds.

use jiff::Timestamp;
use outfit_test_support::openapi::{conforms as check, object_of, resolve};
use outfit_workspaces_core::workspace::{
    home::Home,
    info::{ClusterState, Stop, WorkspaceInfo, stopped_workspace},
    progress::{Status, Step, StepState},
    sharing::Level,
    snapshot::SnapshotView,
};
use serde::Serialize;
use serde_json::Value;

use super::*;
use crate::io::{
    auth::Via,
    catalogue::{Field, Item},
};

fn served() -> Value {
    serde_json::from_str(&DOCUMENT).expect("the document is JSON")
}

/// The schema of the JSON answer `status` of `method` on `path`.
fn answer_schema<'a>(doc: &'a Value, method: &str, path: &str, status: &str) -> &'a Value {
    let schema = &doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "{method} {path} answers no JSON {status}");
    schema
}

fn sample<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

fn workspace() -> WorkspaceInfo {
    let at = Timestamp::from_second(1_700_000_000).unwrap();
    let stop = Stop { at, reason: "idle" };
    let cluster = ClusterState::new("east", Some("timed out".into()));
    let mut workspace = stopped_workspace("ws-1", "alice", "jupyter", Some(at), cluster, stop, at);
    workspace.phase = Some("scheduling");
    workspace.url = "https://ws-1.example.org".into();
    workspace.tokens.insert("token".into(), "t".into());
    workspace.expires = Some(at);
    workspace.idle_timeout = Some("30m".into());
    workspace.last_activity = Some(at);
    workspace
}

#[test]
fn the_document_is_openapi_3_json_and_every_reference_resolves() {
    let doc = served();
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..2]), Some("3."));
    assert_eq!(doc["info"]["title"], "outfit workspaces");
    let text = DOCUMENT.as_str();
    for (at, _) in text.match_indices("\"$ref\":\"") {
        let rest = &text[at + 8..];
        let target = &rest[..rest.find('"').unwrap()];
        resolve(&doc, &serde_json::json!({"$ref": target}));
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let answers = operation["responses"].as_object().unwrap();
            assert!(
                answers.keys().any(|s| s.starts_with('2')),
                "{method} {path}: no success"
            );
            assert!(operation["operationId"].is_string(), "{method} {path}");
        }
    }
}

/// Every `(StatusCode::X, "Reason")` the native API's refusals are made of, read from the
/// sources that make them (the error table and the extractors), is documented: the reason in
/// the Error schema, and under that status in some operation (a 405 answers a method no
/// operation has: the description says it).
#[test]
fn every_reason_of_the_error_table_is_documented_with_its_status() {
    let doc = served();
    let all: Vec<&str> = doc["components"]["schemas"]["Error"]["properties"]["reason"]["enum"]
        .as_array()
        .expect("Error's reason is an enum")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let sources = [include_str!("../error.rs"), include_str!("../native.rs")];
    let mut pairs = vec![];
    for source in sources {
        let source = &source[..source.find("#[cfg(test)]").unwrap_or(source.len())];
        for (at, _) in source.match_indices("StatusCode::") {
            let rest = &source[at + 12..];
            let name_end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                .unwrap();
            let after = rest[name_end..].trim_start();
            let Some(after) = after.strip_prefix(',') else {
                continue;
            };
            let Some(after) = after.trim_start().strip_prefix('"') else {
                continue;
            };
            let reason = &after[..after.find('"').unwrap()];
            pairs.push((&rest[..name_end], reason));
        }
    }
    assert!(pairs.len() > 25, "the sources' pairs were not found: {pairs:?}");
    for (name, reason) in pairs {
        let status = match name {
            "BAD_REQUEST" => "400",
            "UNAUTHORIZED" => "401",
            "FORBIDDEN" => "403",
            "NOT_FOUND" => "404",
            "METHOD_NOT_ALLOWED" => "405",
            "CONFLICT" => "409",
            "UNSUPPORTED_MEDIA_TYPE" => "415",
            "UNPROCESSABLE_ENTITY" => "422",
            "TOO_MANY_REQUESTS" => "429",
            "INTERNAL_SERVER_ERROR" => "500",
            "BAD_GATEWAY" => "502",
            "SERVICE_UNAVAILABLE" => "503",
            other => panic!("StatusCode::{other}: add its number here"),
        };
        assert!(all.contains(&reason), "{reason} is not in Error's reasons");
        if reason == "MethodNotAllowed" {
            assert!(DESCRIPTION.contains("405 MethodNotAllowed"));
            continue;
        }
        let documented = doc["paths"].as_object().unwrap().values().any(|item| {
            item.as_object().unwrap().values().any(|operation| {
                let answer = &operation["responses"][status];
                let schema = &answer["content"]["application/json"]["schema"]["allOf"][1];
                schema["properties"]["reason"]["enum"]
                    .as_array()
                    .is_some_and(|reasons| reasons.iter().any(|r| r == reason))
            })
        });
        assert!(documented, "no operation documents {status} {reason}");
    }
}

/// Each answer's schema against a serialized example of its type, every optional field set:
/// a field renamed, added or made optional in code and not here fails.
#[test]
fn each_answer_s_schema_matches_its_serialized_example() {
    let doc = served();
    let at = Timestamp::from_second(1_700_000_000).unwrap();
    let me = Me {
        user: "alice".into(),
        username: "Alice".into(),
        groups: vec!["staff".into()],
        admin: false,
        via: Via::Session,
        proxy: true,
    };
    let item = Item {
        name: "jupyter".into(),
        title: "Jupyter".into(),
        description: "notebooks".into(),
        fields: vec![Field {
            container: "main".into(),
            name: "GREETING".into(),
            default: "hi".into(),
        }],
        error: Some("unreadable".into()),
        cluster: Some("east".into()),
    };
    // How the caller was known, in the words the page reads (`app.js`).
    assert_eq!(sample(&me)["via"], "session");
    let catalogue = Catalogue {
        items: vec![item],
        clusters: vec![ClusterState::new("east", Some("timed out".into()))],
    };
    let home = Home {
        name: "home-alice".into(),
        cluster: "east".into(),
        strategy: "per-user",
        storage_class: Some("fast".into()),
        requested: Some("1Gi".into()),
        capacity: Some("1Gi".into()),
        phase: Some("Bound".into()),
        workspace: Some("ws-1".into()),
        created: Some(at.to_string()),
        deleting: false,
    };
    let snapshot = SnapshotView {
        name: "s1".into(),
        home: Some("home-alice".into()),
        cluster: "east".into(),
        created: Some(at.to_string()),
        ready: true,
        error: Some("failed".into()),
        size: Some("1Gi".into()),
        reason: Some("stop".into()),
        workspace: Some("ws-1".into()),
    };
    let sharing = Sharing {
        level: Level::Public,
        users: vec!["bob".into()],
        groups: vec!["staff".into()],
    };
    let name = "/api/v1/workspaces/{name}";
    let answers = [
        ("get", "/api/v1/me", "200", sample(&me)),
        ("get", "/api/v1/catalogue", "200", sample(&catalogue)),
        (
            "get",
            "/api/v1/workspaces",
            "200",
            sample(&Workspaces {
                items: vec![workspace()],
            }),
        ),
        (
            "post",
            "/api/v1/workspaces",
            "201",
            sample(&Launched {
                workspace: workspace(),
                warnings: vec!["GREETING: no such field".into()],
            }),
        ),
        ("get", name, "200", sample(&workspace())),
        (
            "delete",
            name,
            "202",
            sample(&Deleting {
                name: "ws-1".into(),
                deleting: true,
            }),
        ),
        (
            "post",
            "/api/v1/workspaces/{name}/stop",
            "202",
            sample(&Stopping {
                name: "ws-1".into(),
                stopping: true,
            }),
        ),
        (
            "post",
            "/api/v1/workspaces/{name}/start",
            "202",
            sample(&Starting {
                name: "ws-1".into(),
                starting: true,
            }),
        ),
        (
            "get",
            "/api/v1/workspaces/{name}/sharing",
            "200",
            sample(&sharing),
        ),
        (
            "put",
            "/api/v1/workspaces/{name}/sharing",
            "200",
            sample(&sharing),
        ),
        (
            "get",
            "/api/v1/storage",
            "200",
            sample(&Storage {
                items: vec![home],
                snapshots: vec![snapshot],
            }),
        ),
        (
            "delete",
            "/api/v1/storage",
            "202",
            sample(&RemovingStorage {
                deleting: vec!["home-alice".into()],
            }),
        ),
        (
            "get",
            name,
            "401",
            sample(&Refusal {
                error: "no credentials",
                reason: "Unauthenticated",
                sign_in: Some("/auth/login"),
            }),
        ),
    ];
    let mut seen = vec![];
    for (method, path, status, value) in &answers {
        check(
            &doc,
            answer_schema(&doc, method, path, status),
            value,
            &format!("{method} {path} {status}"),
        );
        seen.push((*method, *path, *status));
    }
    // Every JSON success answer of the document has its example above.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (status, answer) in operation["responses"].as_object().unwrap() {
                let json = !answer["content"]["application/json"].is_null();
                if json && status.starts_with('2') && path != "/api/v1/openapi.json" {
                    let listed = seen.contains(&(method.as_str(), path.as_str(), status.as_str()));
                    assert!(listed, "{method} {path} {status} has no example here");
                }
            }
        }
    }
    // The progress stream's events, and every refusal of every operation.
    let report = Report {
        workspace: "ws-1".into(),
        status: Status::Creating,
        percent: 40,
        phase: Some("image pull"),
        message: "pulling".into(),
        steps: vec![Step {
            name: "storage",
            state: StepState::Done,
            message: String::new(),
            at: Some(at),
        }],
        warning: Some("Back-off pulling image".into()),
    };
    let progress = serde_json::json!({"$ref": "#/components/schemas/Progress"});
    check(&doc, &progress, &sample(&report), "Progress");
    let refusal = sample(&Refusal {
        error: "no",
        reason: "NotFound",
        sign_in: None,
    });
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (status, _) in operation["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = answer_schema(&doc, method, path, status);
                    check(&doc, schema, &refusal, &format!("{method} {path} {status}"));
                }
            }
        }
    }
}

/// A launch's request body with every property its schema lists is read by [`Launch`].
#[test]
fn the_launch_schema_lists_what_a_launch_reads() {
    let doc = served();
    let (properties, required) = object_of(&doc, &serde_json::json!({"$ref": "#/components/schemas/Launch"}));
    assert_eq!(required, ["manifest"]);
    let body = serde_json::json!({
        "manifest": "jupyter",
        "settings": {"main": {"GREETING": "hi"}},
        "cluster": "east",
        "snapshot": "s1",
    });
    let keys: Vec<&String> = properties.keys().collect();
    assert_eq!(keys, ["manifest", "settings", "cluster", "snapshot"]);
    let launch: Launch = serde_json::from_value(body).expect("every listed property is read");
    assert_eq!(launch.snapshot.as_deref(), Some("s1"));
}

/// The most users and groups a sharing names, as the document says it, is the core's.
#[test]
fn a_sharing_s_caps_are_the_core_s() {
    use outfit_workspaces_core::workspace::sharing::MAX_NAMED;
    let doc = served();
    for list in ["users", "groups"] {
        let cap = &doc["components"]["schemas"]["Sharing"]["properties"][list]["maxItems"];
        assert_eq!(cap.as_u64(), Some(MAX_NAMED as u64), "{list}");
    }
}
