//! `match` semantics from Gatekeeper's `pkg/mutation/match/match.go` and `pkg/wildcard`.

use serde_json::{Map, Value, json};

use super::*;
use crate::gatekeeper::test_support::mutator;

fn compiled(block: Value) -> Match {
    mutator(
        "Assign",
        "m",
        json!({"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}], "match": block, "location": "spec.x", "parameters": {"assign": {"value": 1}}}),
    )
    .unwrap()
    .matcher
}

fn labels_of(team: &str) -> Map<String, Value> {
    json!({"team": team}).as_object().unwrap().clone()
}

#[test]
fn wildcards_are_prefix_suffix_or_contains() {
    let cases = [
        ("kube-*", "kube-system", true),
        ("kube-*", "my-kube-x", false),
        ("*-system", "kube-system", true),
        ("*-system", "system-x", false),
        ("*ube*", "kube-system", true),
        ("*", "anything", true),
        ("default", "default", true),
        ("default", "default2", false),
    ];
    for (pattern, candidate, expected) in cases {
        assert_eq!(
            Wildcard::new(pattern).unwrap().matches(candidate),
            expected,
            "{pattern} vs {candidate}"
        );
    }
    assert!(
        Wildcard::new("a*b").is_err(),
        "glob only at the ends (CRD pattern)"
    );
}

#[test]
fn match_rows() {
    let pod = |ns: &str, labels: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": ns, "labels": labels}});
    let namespace = |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": "x"}}});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let deployment =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "a"}});
    let generated =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-", "namespace": "a"}});
    let loaded = labels_of("blue");
    let lookup = |ns: &str| (ns == "blue-ns").then_some(&loaded);
    // (row, match block, object, expected)
    let cases = [
        ("empty match matches all", json!({}), pod("a", json!({})), true),
        (
            "kinds: group * and kind",
            json!({"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}]}),
            pod("a", json!({})),
            true,
        ),
        (
            "kinds: empty kinds any",
            json!({"kinds": [{"apiGroups": ["apps"]}]}),
            deployment.clone(),
            true,
        ),
        (
            "kinds: wrong group",
            json!({"kinds": [{"apiGroups": ["apps"], "kinds": ["Pod"]}]}),
            pod("a", json!({})),
            false,
        ),
        (
            "scope Namespaced: pod",
            json!({"scope": "Namespaced"}),
            pod("a", json!({})),
            true,
        ),
        (
            "scope Namespaced: Namespace object",
            json!({"scope": "Namespaced"}),
            namespace("a"),
            false,
        ),
        (
            "scope Cluster: Node",
            json!({"scope": "Cluster"}),
            node.clone(),
            true,
        ),
        (
            "scope Cluster: pod",
            json!({"scope": "Cluster"}),
            pod("a", json!({})),
            false,
        ),
        (
            "namespaces prefix glob",
            json!({"namespaces": ["team-*"]}),
            pod("team-a", json!({})),
            true,
        ),
        (
            "namespaces miss",
            json!({"namespaces": ["team-*"]}),
            pod("other", json!({})),
            false,
        ),
        (
            "namespaces: a Namespace compares its own name",
            json!({"namespaces": ["team-*"]}),
            namespace("team-b"),
            true,
        ),
        (
            "namespaces never filter cluster-scoped objects",
            json!({"namespaces": ["team-*"]}),
            node.clone(),
            true,
        ),
        (
            "excludedNamespaces suffix glob",
            json!({"excludedNamespaces": ["*-system"]}),
            pod("kube-system", json!({})),
            false,
        ),
        (
            "excludedNamespaces never exclude cluster-scoped objects",
            json!({"excludedNamespaces": ["*"]}),
            node.clone(),
            true,
        ),
        (
            "labelSelector",
            json!({"labelSelector": {"matchLabels": {"app": "web"}}}),
            pod("a", json!({"app": "web"})),
            true,
        ),
        (
            "labelSelector miss",
            json!({"labelSelector": {"matchLabels": {"app": "web"}}}),
            pod("a", json!({})),
            false,
        ),
        (
            "namespaceSelector with a loaded Namespace",
            json!({"namespaceSelector": {"matchLabels": {"team": "blue"}}}),
            pod("blue-ns", json!({})),
            true,
        ),
        (
            "namespaceSelector: unloaded Namespace has only its name label",
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "a"}}}),
            pod("a", json!({})),
            true,
        ),
        (
            "namespaceSelector: unloaded Namespace lacks other labels",
            json!({"namespaceSelector": {"matchLabels": {"team": "blue"}}}),
            pod("a", json!({})),
            false,
        ),
        (
            "namespaceSelector on a Namespace uses its own labels",
            json!({"namespaceSelector": {"matchLabels": {"team": "x"}}}),
            namespace("z"),
            true,
        ),
        (
            "namespaceSelector always matches cluster-scoped objects",
            json!({"namespaceSelector": {"matchLabels": {"team": "x"}}}),
            node,
            true,
        ),
        ("name glob", json!({"name": "web-*"}), pod("a", json!({})), true),
        (
            "name exact miss",
            json!({"name": "web"}),
            pod("a", json!({})),
            false,
        ),
        (
            "name prefix matches generateName",
            json!({"name": "web*"}),
            generated.clone(),
            true,
        ),
        (
            "name exact never matches generateName",
            json!({"name": "web-"}),
            generated,
            false,
        ),
        (
            "source Original",
            json!({"source": "Original"}),
            pod("a", json!({})),
            true,
        ),
        (
            "source Generated never at admission",
            json!({"source": "Generated"}),
            pod("a", json!({})),
            false,
        ),
    ];
    for (row, block, object, expected) in cases {
        let subject = Subject::new(&object, "", Operation::Create).unwrap();
        assert_eq!(compiled(block).matches(&subject, &lookup), expected, "{row}");
    }
}

#[test]
fn namespace_comes_from_metadata_then_request() {
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(
        Subject::new(&bare, "req", Operation::Create).unwrap().namespace,
        Some("req")
    );
    let named = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "own"}});
    assert_eq!(
        Subject::new(&named, "req", Operation::Create).unwrap().namespace,
        Some("own")
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
    assert_eq!(
        Subject::new(&role, "req", Operation::Create).unwrap().namespace,
        None
    );
    assert!(Subject::new(&json!({"kind": "Pod"}), "", Operation::Create).is_none());
}

#[test]
fn apply_to_is_exact_and_per_entry() {
    let entry = ApplyTo {
        groups: vec!["apps".into()],
        versions: vec!["v1".into()],
        kinds: vec!["Deployment".into()],
        operations: Operations {
            create: true,
            update: false,
        },
    };
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
    assert!(entry.applies(&Subject::new(&deployment, "a", Operation::Create).unwrap()));
    assert!(
        !entry.applies(&Subject::new(&deployment, "a", Operation::Update).unwrap()),
        "operations"
    );
    let beta = json!({"apiVersion": "apps/v1beta1", "kind": "Deployment"});
    assert!(
        !entry.applies(&Subject::new(&beta, "a", Operation::Create).unwrap()),
        "versions are exact"
    );
    let star = ApplyTo {
        groups: vec!["*".into()],
        ..entry.clone()
    };
    assert!(
        !star.applies(&Subject::new(&deployment, "a", Operation::Create).unwrap()),
        "`*` is literal"
    );
    assert!(!Operations::ALL.covers(Operation::Delete));
}
