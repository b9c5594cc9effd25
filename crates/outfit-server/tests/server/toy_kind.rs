//! A kind added through the kinds table alone (issue 12): the `Toy` family below is one module's
//! worth of code, and `TABLE` is the built-in table plus one line. With nothing else told about
//! it, the policy set loads its documents, counts them, applies them after the built-in families
//! and explains them (what `outfit mutate` and `outfit explain` do); the webhook serves them
//! (`outfit serve`); and `outfit manifests` installs its CRD, lets the ClusterRole read it, and
//! the cluster source watches it.

use std::{any::Any, borrow::Cow};

use base64::Engine as _;
use hyper::StatusCode;
use outfit_core::{
    Admission, Denial, Document, LoadWarning, Object, Outcome, PolicyError, PolicyKind, PolicyRef,
    PolicySetBuilder, Request, document,
    explain::{Clause, Decision, Verdict},
    family::{Context, ExplainState, Family, FamilyBuilder, FamilySet, LoadOptions, Table, Targets},
    filer, gatekeeper, poddefault, podpolicy,
    vocab::{KindInfo, Served},
};
use outfit_k8s::{
    cluster::{WatchOptions, watched_resources},
    manifests::{self, InstallOptions},
};
use outfit_server::{CompileOptions, Limits};
use serde_json::{Value, json};

use crate::support::{TempDir, post, webhook_with};
use outfit_test_support::apply_patches_independently;

/// `LabelAll`: sets one label on every pod of its namespace.
const LABEL_ALL: PolicyKind = PolicyKind::new(&KindInfo {
    name: "LabelAll",
    group: "toy.outfit.dev",
    versions: &["v1"],
    plural: "labelalls",
    namespaced: true,
    served: Served::Crd,
});

#[derive(Debug)]
struct Toy;

#[derive(Debug)]
struct Policy {
    reference: PolicyRef,
    key: String,
    value: String,
}

impl Family for Toy {
    fn kinds(&self) -> &'static [PolicyKind] {
        &[LABEL_ALL]
    }

    fn crds(&self) -> &'static str {
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: labelalls.toy.outfit.dev}
spec:
  group: toy.outfit.dev
  names: {kind: LabelAll, plural: labelalls, singular: labelall}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {key: {type: string}, value: {type: string}}
"
    }

    fn builder(&self, options: &LoadOptions<'_>) -> Box<dyn FamilyBuilder> {
        Box::new(ToyBuilder {
            default_namespace: options.default_namespace.to_owned(),
            policies: Vec::new(),
        })
    }
}

struct ToyBuilder {
    default_namespace: String,
    policies: Vec<Policy>,
}

impl FamilyBuilder for ToyBuilder {
    fn add(
        &mut self,
        document: &Document,
        _warnings: &mut Vec<LoadWarning>,
        admit: &mut dyn FnMut(&PolicyRef) -> Result<(), PolicyError>,
    ) -> Result<PolicyRef, PolicyError> {
        let namespace = document
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(&self.default_namespace);
        let reference = PolicyRef::new(LABEL_ALL, Some(namespace), document.name());
        admit(&reference)?;
        let field = |name: &str| {
            document.value["spec"][name]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        self.policies.push(Policy {
            reference: reference.clone(),
            key: field("key"),
            value: field("value"),
        });
        Ok(reference)
    }

    fn build(self: Box<Self>, _errors: &mut Vec<PolicyError>) -> Box<dyn FamilySet> {
        Box::new(ToySet(self.policies))
    }
}

#[derive(Debug)]
struct ToySet(Vec<Policy>);

impl ToySet {
    fn in_namespace<'s>(&'s self, object: &Value, request: &Request<'_>) -> impl Iterator<Item = &'s Policy> {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(request.namespace)
            .to_owned();
        self.0
            .iter()
            .filter(move |p| p.reference.namespace.as_deref() == Some(namespace.as_str()))
    }
}

impl FamilySet for ToySet {
    fn count(&self, kind: PolicyKind) -> usize {
        if kind == LABEL_ALL { self.0.len() } else { 0 }
    }

    fn apply<'p>(
        &'p self,
        request: &Request<'_>,
        _context: &Context<'p>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        let original = request.object_value()?;
        let mut object = admission
            .object(&original)
            .map(Cow::into_owned)
            .unwrap_or_else(|_| original.as_ref().clone());
        let mut applied = Vec::new();
        for policy in self.in_namespace(&original, request) {
            let labels = &mut object["metadata"]["labels"];
            if labels[&policy.key] != json!(policy.value) {
                labels[&policy.key] = json!(policy.value);
                applied.push(Cow::Borrowed(&policy.reference));
            }
        }
        admission.record(&original, object, applied);
        Ok(())
    }

    fn explain(&self, request: &Request<'_>, _context: &Context<'_>, state: &mut ExplainState<'_>) {
        for policy in &self.0 {
            let in_namespace = self
                .in_namespace(&state.current, request)
                .any(|p| p.reference == policy.reference);
            let verdict = if in_namespace {
                Verdict::Changed { changes: Vec::new() }
            } else {
                Verdict::NotMatched {
                    clause: Clause::new("metadata.namespace", "another namespace"),
                }
            };
            state.decisions.push(Decision {
                policy: policy.reference.clone(),
                verdict,
            });
        }
    }

    fn targets(&self) -> Targets {
        Targets::pods_if(true)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

static TOY: Toy = Toy;

/// The built-in table and one line.
static TABLE: Table = &[
    &poddefault::FAMILY,
    &podpolicy::FAMILY,
    &filer::FAMILY,
    &gatekeeper::FAMILY,
    &TOY,
];

const POLICIES: &str = r#"
apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata: {name: proxy, namespace: team-a}
spec:
  selector: {}
  env: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
---
apiVersion: toy.outfit.dev/v1
kind: LabelAll
metadata: {name: owner, namespace: team-a}
spec: {key: owner, value: platform}
---
apiVersion: toy.outfit.dev/v1
kind: LabelAll
metadata: {name: elsewhere, namespace: team-b}
spec: {key: team, value: b}
"#;

#[test]
fn a_kind_added_through_the_table_loads_applies_and_explains() {
    let documents = document::parse_stream(POLICIES, "toy.yaml").expect("YAML");
    let mut builder = PolicySetBuilder::with_families(TABLE);
    builder.add_all(&documents);
    let (set, report) = builder.build();
    assert!(
        report.errors.is_empty() && report.skipped.is_empty(),
        "{report:?}"
    );
    assert_eq!(set.count(LABEL_ALL), 2);
    assert_eq!(set.count(poddefault::POLICY_KIND), 1);
    assert!(set.kinds().contains(&LABEL_ALL));
    assert!(set.family::<ToySet>().is_some());

    // The built-in table does not know the kind: its documents are skipped there.
    let mut builtin = PolicySetBuilder::default();
    builtin.add_all(&documents);
    assert_eq!(builtin.report().skipped.len(), 2);

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
                     "spec": {"containers": [{"name": "main", "image": "i"}]}});
    let request = Request::create(&pod, "team-a");
    let Outcome::Admitted(admission) = set.apply(&request) else {
        panic!("denied")
    };
    let admitted = admission.object(&pod).expect("the patch applies");
    // The PodDefault's step and the toy's, in the table's order, in one patch.
    assert_eq!(admitted["metadata"]["labels"]["owner"], "platform");
    assert_eq!(admitted["spec"]["containers"][0]["env"][0]["name"], "HTTPS_PROXY");
    let applied: Vec<String> = admission.applied.iter().map(ToString::to_string).collect();
    assert_eq!(applied, ["PodDefault team-a/proxy", "LabelAll team-a/owner"]);

    let explanation = set.explain(&request);
    let verdicts: Vec<(String, &str)> = explanation
        .policies
        .iter()
        .map(|d| {
            let result = match d.verdict {
                Verdict::Changed { .. } => "changed",
                Verdict::NotMatched { .. } => "not matched",
                _ => "other",
            };
            (d.policy.to_string(), result)
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("PodDefault team-a/proxy".to_owned(), "changed"),
            ("LabelAll team-a/owner".to_owned(), "changed"),
            ("LabelAll team-b/elsewhere".to_owned(), "not matched"),
        ]
    );

    // Admitting the admitted pod again changes nothing.
    let again = Request {
        object: Object::Value(&admitted),
        ..request
    };
    let Outcome::Admitted(second) = set.apply(&again) else {
        panic!("denied")
    };
    assert!(second.is_unchanged(), "{:?}", second.patch());
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
           "spec": {"containers": [{"name": "main", "image": "i"}]}})
}

#[tokio::test]
async fn the_webhook_serves_a_kind_added_through_the_table() {
    let dir = TempDir::new("toy-kind");
    std::fs::write(dir.path().join("policies.yaml"), POLICIES).unwrap();
    let options = CompileOptions {
        families: TABLE,
        annotate: true,
        ..CompileOptions::from("default")
    };
    let (webhook, _) = webhook_with(dir.path(), Limits::default(), options);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-toy", "operation": "CREATE", "namespace": "team-a",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "object": pod()}
    });
    let (status, answer) = post(&webhook, "/mutate", serde_json::to_vec(&review).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{response}");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("a patch"))
        .unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    let admitted = apply_patches_independently(env!("CARGO_TARGET_TMPDIR"), &[(pod(), patch)]).remove(0);
    assert_eq!(admitted["metadata"]["labels"]["owner"], "platform");
    assert_eq!(admitted["spec"]["containers"][0]["env"][0]["name"], "HTTPS_PROXY");
    // outfit's record lists the toy (the PodDefault records itself, as Kubeflow does).
    assert_eq!(
        admitted["metadata"]["annotations"]["outfit.dev/mutated-by"],
        "LabelAll/team-a/owner"
    );
}

#[test]
fn the_install_manifests_and_the_watches_follow_a_kind_added_through_the_table() {
    let objects = manifests::install(&InstallOptions {
        families: TABLE,
        ..InstallOptions::default()
    });
    let crd = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "labelalls.toy.outfit.dev")
        .expect("the toy's CRD is installed");
    assert_eq!(crd["kind"], "CustomResourceDefinition");
    let role = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    assert!(
        role["rules"].as_array().unwrap().contains(&json!({
            "apiGroups": ["toy.outfit.dev"], "resources": ["labelalls"], "verbs": ["get", "list", "watch"]
        })),
        "{role}"
    );
    let watched = watched_resources(&WatchOptions {
        families: TABLE,
        ..WatchOptions::default()
    });
    assert!(
        watched
            .iter()
            .any(|w| w.resource.plural == "labelalls" && w.resource.api_version == "toy.outfit.dev/v1")
    );
    // The built-in table knows nothing of it.
    let builtin = manifests::install(&InstallOptions::default());
    assert!(
        builtin
            .iter()
            .all(|o| o["metadata"]["name"] != "labelalls.toy.outfit.dev")
    );
}
