//! PodPolicy and Audience on plain data: who matches, what is added, conflicts, and load errors.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::identity::Glob;
use crate::{
    Outcome, PolicySet, Request, UserInfo, document::parse_stream, explain::Verdict, policy_set::LoadReport,
};

/// Seed 000's GPU policy: a GPU, a toleration and a node selector for the `gpu-users` group.
const GPU: &str = r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: gpu}
spec:
  match:
    namespaces: ["team-*"]
    requesters:
      groups: [gpu-users]
      exclude: {users: [mallory]}
  add:
    resources: {limits: {nvidia.com/gpu: 1}}
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    nodeSelector: {accelerator: nvidia}
"#;

fn load(yaml: &str) -> (PolicySet, LoadReport) {
    let documents = parse_stream(yaml, "test.yaml").expect("YAML");
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    builder.build()
}

fn set(yaml: &str) -> PolicySet {
    let (set, report) = load(yaml);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    set
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "ws", "namespace": "team-a", "labels": {"app": "ws"}},
           "spec": {"containers": [{"name": "main", "image": "i"}, {"name": "proxy", "image": "p"}]}})
}

fn user<'a>(name: &'a str, groups: &[&'a str]) -> UserInfo<'a> {
    UserInfo {
        username: Cow::Borrowed(name),
        groups: groups.iter().map(|g| Cow::Borrowed(*g)).collect(),
    }
}

fn request<'a>(object: &'a Value, user: Option<&'a UserInfo<'a>>) -> Request<'a> {
    Request {
        user,
        ..Request::create(object, "default")
    }
}

/// The admitted pod, or the denial's message.
fn admit(set: &PolicySet, object: &Value, user: Option<&UserInfo<'_>>) -> Result<Value, String> {
    match set.apply(&request(object, user)) {
        Outcome::Admitted(admission) => Ok(admission.object(object).expect("patch applies").into_owned()),
        Outcome::Denied(denial) => Err(denial.message),
    }
}

/// The clause (field) that kept the only policy of `set` from applying.
fn clause(set: &PolicySet, object: &Value, user: Option<&UserInfo<'_>>) -> (String, String) {
    let explanation = set.explain(&request(object, user));
    match &explanation.policies[0].verdict {
        Verdict::NotMatched { clause } => (clause.field.clone(), clause.detail.clone()),
        other => panic!("expected not matched, got {other:?}"),
    }
}

#[test]
fn gpu_users_get_a_gpu_others_are_refused_silently() {
    let set = set(GPU);
    let alice = user("alice", &["team-a", "gpu-users"]);
    let admitted = admit(&set, &pod(), Some(&alice)).expect("admitted");
    for container in admitted["spec"]["containers"].as_array().unwrap() {
        assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], "1");
    }
    assert_eq!(admitted["spec"]["nodeSelector"], json!({"accelerator": "nvidia"}));
    assert_eq!(admitted["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");

    // Explain names the requester clause that let alice in, and agrees with the engine.
    let explanation = set.explain(&request(&pod(), Some(&alice)));
    let Verdict::ChangedFor { requester, changes } = &explanation.policies[0].verdict else {
        panic!("{explanation}")
    };
    assert_eq!(requester.field, "spec.match.requesters.groups");
    assert_eq!(
        requester.detail,
        r#"user "alice" (groups team-a, gpu-users) matches "gpu-users""#
    );
    assert_eq!(
        changes.len(),
        4,
        "a limit per container, the node selector, the toleration"
    );

    let bob = user("bob", &["team-b"]);
    assert_eq!(
        admit(&set, &pod(), Some(&bob)),
        Ok(pod()),
        "bob's pod is untouched"
    );
    let (field, detail) = clause(&set, &pod(), Some(&bob));
    assert_eq!(field, "spec.match.requesters");
    assert!(
        detail.contains(r#"user "bob" (groups team-b) is not among groups ["gpu-users"]"#),
        "{detail}"
    );

    // No userInfo (outfit mutate without --user): nobody to authorise.
    assert_eq!(admit(&set, &pod(), None), Ok(pod()));
    assert!(clause(&set, &pod(), None).1.contains("names no user"));
}

#[test]
fn an_excluded_user_is_refused_even_in_the_group() {
    let set = set(GPU);
    let mallory = user("mallory", &["gpu-users"]);
    assert_eq!(admit(&set, &pod(), Some(&mallory)), Ok(pod()));
    let (field, detail) = clause(&set, &pod(), Some(&mallory));
    assert_eq!(field, "spec.match.requesters.exclude");
    assert!(detail.contains(r#"excluded by users "mallory""#), "{detail}");
}

#[test]
fn namespaces_and_selector_come_before_the_requester() {
    let set = set(GPU);
    let alice = user("alice", &["gpu-users"]);
    let mut elsewhere = pod();
    elsewhere["metadata"]["namespace"] = json!("prod");
    assert_eq!(admit(&set, &elsewhere, Some(&alice)), Ok(elsewhere.clone()));
    assert_eq!(clause(&set, &elsewhere, Some(&alice)).0, "spec.match.namespaces");
}

#[test]
fn admitting_the_admitted_pod_again_changes_nothing() {
    let set = set(GPU);
    let alice = user("alice", &["gpu-users"]);
    let admitted = admit(&set, &pod(), Some(&alice)).unwrap();
    let Outcome::Admitted(again) = set.apply(&request(&admitted, Some(&alice))) else {
        panic!("denied")
    };
    assert!(again.is_unchanged(), "{:?}", again.patch());
    // A request that sends the quantity as a number holds the same quantity.
    let mut numeric = admitted.clone();
    numeric["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!(1);
    assert!(admit(&set, &numeric, Some(&alice)).is_ok());
}

#[test]
fn globs_match_users_groups_and_service_accounts() {
    let glob = |p: &str| Glob::new(p).unwrap();
    assert!(glob("dev-*").matches("dev-ann"));
    assert!(glob("*@example.com").matches("ann@example.com"));
    assert!(glob("a*b*c").matches("aXXbYYc"));
    assert!(!glob("a*b*c").matches("aXXcYYb"));
    assert!(glob("*").matches(""));
    assert!(!glob("alice").matches("alice2"));
    assert!(!glob("ab*ba").matches("aba"), "the parts may not overlap");
    assert!(Glob::service_account("coder").is_err());
    assert!(Glob::new("a b").is_err());

    let set = set(r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: sa}
spec:
  match: {requesters: {serviceAccounts: ["coder/*"]}}
  add: {labels: {gpu: "yes"}}
"#);
    let coder = user(
        "system:serviceaccount:coder:provisioner",
        &["system:serviceaccounts"],
    );
    assert_eq!(
        admit(&set, &pod(), Some(&coder)).unwrap()["metadata"]["labels"]["gpu"],
        "yes"
    );
    let other = user("system:serviceaccount:kube-system:provisioner", &[]);
    assert_eq!(admit(&set, &pod(), Some(&other)), Ok(pod()));
}

/// Coder's provisioner creates the pod and records the owner in a label: the label is the
/// requester only when a provisioner sent the pod.
const OWNER: &str = r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: owner-gpu}
spec:
  match:
    requesters: {users: [alice]}
    owner:
      label: com.coder.user.username
      provisioners: {serviceAccounts: [coder/coder]}
  add: {resources: {limits: {nvidia.com/gpu: "2"}}, containers: [main]}
"#;

#[test]
fn an_owner_label_is_trusted_only_from_a_provisioner() {
    let set = set(OWNER);
    let mut owned = pod();
    owned["metadata"]["labels"]["com.coder.user.username"] = json!("alice");
    let coder = user("system:serviceaccount:coder:coder", &["system:serviceaccounts"]);
    let admitted = admit(&set, &owned, Some(&coder)).unwrap();
    assert_eq!(
        admitted["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "2"
    );
    assert!(
        admitted["spec"]["containers"][1].get("resources").is_none(),
        "only the main container"
    );

    // Bob labels his own pod as alice's: not trusted, and bob is not alice.
    let bob = user("bob", &["team-b"]);
    assert_eq!(admit(&set, &owned, Some(&bob)), Ok(owned.clone()));
    let (field, detail) = clause(&set, &owned, Some(&bob));
    assert_eq!(field, "spec.match.owner");
    assert!(detail.contains("is not trusted"), "{detail}");

    // The provisioner's pod for bob.
    let mut bobs = owned.clone();
    bobs["metadata"]["labels"]["com.coder.user.username"] = json!("bob");
    assert_eq!(admit(&set, &bobs, Some(&coder)), Ok(bobs.clone()));
    // Alice creating her pod herself still matches as alice.
    let alice = user("alice", &[]);
    assert!(admit(&set, &pod(), Some(&alice)).unwrap()["spec"]["containers"][0]["resources"].is_object());
}

#[test]
fn an_audience_retargets_every_policy_that_names_it() {
    let policy = r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: gpu}
spec:
  match: {requesters: {audiences: [gpu-team]}}
  add: {resources: {limits: {nvidia.com/gpu: 1}}}
"#;
    let audience = r#"
---
apiVersion: outfit.dev/v1alpha1
kind: Audience
metadata: {name: gpu-team}
spec: {users: [alice, "dev-*"], exclude: {users: [dev-intern]}}
"#;
    let with_audience = set(&format!("{policy}{audience}"));
    for (name, gets) in [
        ("alice", true),
        ("dev-ann", true),
        ("dev-intern", false),
        ("bob", false),
    ] {
        let who = user(name, &[]);
        let admitted = admit(&with_audience, &pod(), Some(&who)).unwrap();
        assert_eq!(admitted != pod(), gets, "{name}");
    }
    let (without, report) = load(policy);
    assert!(report.errors.is_empty());
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0]
            .message
            .contains("Audience gpu-team is not loaded"),
        "{}",
        report.warnings[0]
    );
    let alice = user("alice", &[]);
    assert_eq!(admit(&without, &pod(), Some(&alice)), Ok(pod()));
    assert!(
        clause(&without, &pod(), Some(&alice))
            .1
            .contains("gpu-team is not loaded")
    );
}

const TWO_GPUS: &str = r#"
---
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: gpu-large}
spec:
  match: {requesters: {groups: [gpu-users]}}
  add: {resources: {limits: {nvidia.com/gpu: 2}}}
"#;

#[test]
fn two_policies_setting_one_field_differently_refuse_the_pod_naming_both() {
    let set = set(&format!("{GPU}{TWO_GPUS}"));
    let alice = user("alice", &["gpu-users"]);
    let message = admit(&set, &pod(), Some(&alice)).unwrap_err();
    assert!(
        message.contains(
            r#"spec.containers[main].resources.limits[nvidia.com/gpu]: PodPolicy gpu-large sets "2", PodPolicy gpu sets "1""#
        ),
        "{message}"
    );
    let explanation = set.explain(&request(&pod(), Some(&alice)));
    assert!(
        explanation
            .policies
            .iter()
            .all(|d| matches!(d.verdict, Verdict::Denied { .. })),
        "{explanation}"
    );

    // The same value twice is no conflict.
    let same = set_of_two_same();
    assert!(admit(&same, &pod(), Some(&alice)).is_ok());
}

fn set_of_two_same() -> PolicySet {
    set(&format!(
        "{GPU}{}",
        TWO_GPUS.replace("gpu-large", "gpu-again").replace(": 2", ": 1")
    ))
}

#[test]
fn a_pod_that_already_has_another_value_is_refused_naming_the_pod() {
    let set = set(GPU);
    let alice = user("alice", &["gpu-users"]);
    let mut greedy = pod();
    greedy["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": "4"}});
    let message = admit(&set, &greedy, Some(&alice)).unwrap_err();
    assert!(
        message.contains(r#"PodPolicy gpu sets "1", the pod has "4""#),
        "{message}"
    );
    // Bob's pod is not the policy's business: admitted as it came.
    let bob = user("bob", &[]);
    assert_eq!(admit(&set, &greedy, Some(&bob)), Ok(greedy.clone()));
}

#[test]
fn invalid_policies_are_rejected_with_their_name_and_field() {
    let cases = [
        (
            "spec: {match: {namespace: [a]}, add: {}}",
            "spec.match.namespace",
            "unknown field",
        ),
        (
            "spec: {match: {requesters: {serviceAccounts: [coder]}}, add: {}}",
            "spec.match.requesters.serviceAccounts[0]",
            "namespace/name",
        ),
        (
            "spec: {match: {requesters: {users: [\"\"]}}, add: {}}",
            "spec.match.requesters.users[0]",
            "empty pattern",
        ),
        (
            "spec: {match: {selector: {matchLabels: {'a b': x}}}, add: {}}",
            "spec.match.selector",
            "invalid label selector",
        ),
        (
            "spec: {add: {resources: {limits: {nvidia.com/gpu: lots}}}}",
            "spec.add.resources.limits.nvidia.com/gpu",
            "not a quantity",
        ),
        (
            "spec: {add: {env: [{value: x}]}}",
            "spec.add.env[0].name",
            "missing",
        ),
        (
            "spec: {match: {owner: {label: owner}}, add: {}}",
            "spec.match.owner.provisioners",
            "missing",
        ),
        (
            "spec: {match: {namespaces: [Team]}, add: {}}",
            "spec.match.namespaces[0]",
            "invalid pattern",
        ),
        ("spec: {match: {}}", "spec.add", "missing"),
    ];
    for (spec, field, problem) in cases {
        let yaml =
            format!("apiVersion: outfit.dev/v1alpha1\nkind: PodPolicy\nmetadata: {{name: bad}}\n{spec}\n");
        let (set, report) = load(&yaml);
        assert!(set.is_empty(), "{spec}");
        let [error] = &report.errors[..] else {
            panic!("{spec}: {:?}", report.errors)
        };
        let message = error.to_string();
        assert!(message.contains("PodPolicy bad"), "{message}");
        assert_eq!(error.field.as_str(), field, "{message}");
        assert!(message.contains(problem), "{spec}: {message}");
    }
    let (_, report) =
        load("apiVersion: outfit.dev/v1alpha1\nkind: Audience\nmetadata: {name: a}\nspec: {user: [x]}\n");
    assert_eq!(report.errors[0].field.as_str(), "spec.user");
}

#[test]
fn quantities_follow_apimachinery_syntax() {
    use crate::quantity::is_quantity;
    for good in ["1", "500m", "2Gi", "1.5", ".5", "1e3", "+1", "10E-2"] {
        assert!(is_quantity(good), "{good}");
    }
    for bad in ["", "lots", "1GB", "1..2", "Gi", "1e"] {
        assert!(!is_quantity(bad), "{bad}");
    }
}

/// outfit's workspace backend records the exact user id in an annotation (its `user`/`domain`
/// labels split it); its service account is the provisioner.
const WORKSPACES: &str = r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: university-gpus}
spec:
  match:
    requesters:
      users: ["*@ku.dk"]
      exclude: {audiences: [suspended]}
    owner:
      annotation: outfit.dev/user-id
      provisioners: {serviceAccounts: [outfit-system/outfit-workspaces]}
  add: {runtimeClassName: nvidia, env: [{name: GPU, value: "yes"}]}
---
apiVersion: outfit.dev/v1alpha1
kind: Audience
metadata: {name: suspended}
spec: {users: [mallory@ku.dk]}
"#;

#[test]
fn the_workspace_backends_owner_annotation_and_excluded_audiences() {
    let set = set(WORKSPACES);
    let backend = user(
        "system:serviceaccount:outfit-system:outfit-workspaces",
        &["system:serviceaccounts"],
    );
    let owned_by = |owner: &str| {
        let mut pod = pod();
        pod["metadata"]["annotations"] = json!({"outfit.dev/user-id": owner});
        pod
    };
    let admitted = admit(&set, &owned_by("alice@ku.dk"), Some(&backend)).unwrap();
    assert_eq!(admitted["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(
        admitted["spec"]["containers"][1]["env"],
        json!([{"name": "GPU", "value": "yes"}])
    );

    let (field, detail) = clause(&set, &owned_by("mallory@ku.dk"), Some(&backend));
    assert_eq!(field, "spec.match.requesters.exclude.audiences");
    assert!(
        detail.contains(r#"owner "mallory@ku.dk" (annotation outfit.dev/user-id"#),
        "{detail}"
    );

    // A provisioner's pod that names no owner is the provisioner's own.
    let (field, detail) = clause(&set, &pod(), Some(&backend));
    assert_eq!(field, "spec.match.requesters");
    assert!(
        detail.starts_with(r#"user "system:serviceaccount:outfit-system:outfit-workspaces""#),
        "{detail}"
    );
}

/// The backend records its owner's groups (from the sign-in's groups claim) in a second
/// annotation; they count only when the owner does, from a provisioner.
const OWNER_GROUPS: &str = r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: gpus-for-gpu-users}
spec:
  match:
    requesters: {groups: [gpu-users]}
    owner:
      annotation: outfit.dev/user-id
      groupsAnnotation: outfit.dev/user-groups
      provisioners: {serviceAccounts: [outfit-system/outfit-workspaces]}
  add: {resources: {limits: {nvidia.com/gpu: 1}}}
"#;

#[test]
fn an_owners_groups_recorded_by_a_provisioner_decide_as_the_requests_would() {
    let set = set(OWNER_GROUPS);
    let backend = user(
        "system:serviceaccount:outfit-system:outfit-workspaces",
        &["system:serviceaccounts"],
    );
    let owned = |owner: &str, groups: Option<&str>| {
        let mut pod = pod();
        pod["metadata"]["annotations"] = json!({"outfit.dev/user-id": owner});
        if let Some(groups) = groups {
            pod["metadata"]["annotations"]["outfit.dev/user-groups"] = json!(groups);
        }
        pod
    };
    let gpus = |pod: &Value| pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].clone();

    let alices = owned("alice@dtu.dk", Some("staff\ngpu-users\n"));
    assert_eq!(gpus(&admit(&set, &alices, Some(&backend)).unwrap()), "1");
    let explanation = set.explain(&request(&alices, Some(&backend)));
    let Verdict::ChangedFor { requester, .. } = &explanation.policies[0].verdict else {
        panic!("{:?}", explanation.policies[0].verdict)
    };
    assert_eq!(requester.field, "spec.match.requesters.groups");
    let who = r#"owner "alice@dtu.dk" (groups staff, gpu-users; annotation outfit.dev/user-id"#;
    assert!(requester.detail.starts_with(who), "{}", requester.detail);

    // Bob's groups do not have it; the clause says whose groups were read.
    let (field, detail) = clause(&set, &owned("bob@dtu.dk", Some("staff")), Some(&backend));
    assert_eq!(field, "spec.match.requesters");
    assert!(
        detail.contains(r#"owner "bob@dtu.dk" (groups staff; "#),
        "{detail}"
    );

    // Recorded by someone else, neither the owner nor the groups count: mallory is who sent it.
    let mallory = user("mallory", &["students"]);
    let (field, detail) = clause(&set, &alices, Some(&mallory));
    assert_eq!(field, "spec.match.owner");
    assert!(detail.contains("is not trusted"), "{detail}");

    // No groups recorded: the clause says where they would be.
    let (_, detail) = clause(&set, &owned("alice@dtu.dk", None), Some(&backend));
    assert!(
        detail.contains("no groups recorded (spec.match.owner.groupsAnnotation"),
        "{detail}"
    );

    // Only an annotation key is taken, as for the owner's own field.
    let (_, report) = load(&OWNER_GROUPS.replace(
        "groupsAnnotation: outfit.dev/user-groups",
        "groupsAnnotation: 'not a key'",
    ));
    assert_eq!(
        report.errors[0].field.as_str(),
        "spec.match.owner.groupsAnnotation"
    );
}

#[test]
fn a_policy_without_requesters_applies_to_everyone_and_says_why_it_changed_nothing() {
    let set = set(r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: everyone}
spec: {add: {labels: {app: ws}}}
"#);
    assert_eq!(admit(&set, &pod(), None), Ok(pod()));
    let explanation = set.explain(&request(&pod(), None));
    let Verdict::Unchanged { reason } = &explanation.policies[0].verdict else {
        panic!("{explanation}")
    };
    assert!(
        reason.starts_with("matched (spec.match.requesters: every requester (none is named))"),
        "{reason}"
    );
}

/// The API server stores quantities in canonical form (`0.5` as `500m`): the pod it sends again,
/// or a pod asking for the same amount in another spelling, is no conflict.
#[test]
fn a_quantity_in_another_spelling_is_the_same_amount() {
    let set = set(r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: half-a-cpu}
spec:
  add:
    resources: {limits: {cpu: "0.5", memory: 1024Mi}}
"#);
    let admitted = admit(&set, &pod(), None).expect("admitted");
    assert_eq!(
        admitted["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "0.5"
    );
    let mut stored = admitted.clone();
    for container in stored["spec"]["containers"].as_array_mut().unwrap() {
        container["resources"]["limits"] = json!({"cpu": "500m", "memory": "1Gi"});
    }
    assert_eq!(
        admit(&set, &stored, None),
        Ok(stored.clone()),
        "canonical spellings, same amounts"
    );
    let mut more = stored.clone();
    more["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("600m");
    let refused = admit(&set, &more, None).expect_err("a different amount conflicts");
    assert!(refused.contains("limits[cpu]"), "{refused}");
}

/// A Gatekeeper mutator runs after the PodPolicies and adds a sidecar; the PodPolicy gives every
/// container a GPU, the sidecar too. One admission settles it (the engine runs the families again
/// on their result), so that the API server's reinvocation changes nothing (found by the admission
/// fuzz target with every kind loaded).
#[test]
fn a_container_a_later_family_adds_gets_what_the_policy_gives_in_the_same_admission() {
    let set = set(r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: gpu-everywhere}
spec:
  add:
    resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: log-sidecar}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.containers[name: logger]"
  parameters:
    pathTests: [{subPath: "spec.containers[name: logger]", condition: MustNotExist}]
    assign: {value: {name: logger, image: fluent-bit}}
"#);
    let admitted = admit(&set, &pod(), None).expect("admitted");
    let containers = admitted["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 3, "{admitted}");
    for container in containers {
        assert_eq!(
            container["resources"]["limits"]["nvidia.com/gpu"], "1",
            "{container}"
        );
    }
    assert_eq!(
        admit(&set, &admitted, None),
        Ok(admitted.clone()),
        "a reinvocation changes nothing"
    );
}
