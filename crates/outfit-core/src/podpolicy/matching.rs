//! Whether a PodPolicy applies to a pod, in the order the engine checks: the operation, the kind,
//! the namespace, the selector, the requester. The verdict borrows what decided it, so the
//! admission path allocates nothing here; explain turns a miss into a [`Clause`].

use std::fmt;

use serde_json::{Map, Value};

use super::{
    identity::{Entry, Untrusted, Who, requester},
    policy::PodPolicy,
    requesters::{AudienceLookup, Included, Left},
};
use crate::{
    decision::{UserInfo, object_namespace},
    explain::report::Clause,
    gatekeeper::matching::Wildcard,
    selector::Requirement,
    vocab::Operation,
};

/// What the checks read of the request besides the pod.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    pub(crate) operation: Operation,
    /// Where the pod is created when it names no namespace.
    pub(crate) namespace: &'a str,
    pub(crate) user: Option<&'a UserInfo<'a>>,
}

/// Why a PodPolicy does not apply to a pod.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Miss<'a> {
    Operation(Operation),
    Kind,
    Namespace(&'a str),
    ExcludedNamespace(&'a str, &'a Wildcard),
    Selector(&'a Requirement, Option<&'a Map<String, Value>>),
    Requester {
        left: Left<'a>,
        who: Option<Who<'a>>,
        untrusted: Option<Untrusted<'a>>,
    },
}

/// A PodPolicy applies: to whom, and why they are among its requesters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Matched<'a> {
    included: Included<'a>,
    who: Option<Who<'a>>,
}

/// Why `policy` does not apply to pods of `namespace` (`spec.match.namespaces`,
/// `excludedNamespaces`), if it does not: the check that needs no more of the pod than where it
/// is created, so the step can rule policies out before it reads the pod.
pub(crate) fn namespace_miss<'a>(policy: &'a PodPolicy, namespace: &'a str) -> Option<Miss<'a>> {
    if !policy.namespaces.is_empty() && !policy.namespaces.iter().any(|w| w.matches(namespace)) {
        return Some(Miss::Namespace(namespace));
    }
    policy
        .excluded_namespaces
        .iter()
        .find(|w| w.matches(namespace))
        .map(|w| Miss::ExcludedNamespace(namespace, w))
}

/// Whether `policy` applies to `pod` (as the earlier families left it): `Ok` with why the
/// requester is included, or the first check that rules it out.
pub(crate) fn check<'a>(
    policy: &'a PodPolicy,
    pod: &'a Value,
    asked: Asked<'a>,
    audiences: AudienceLookup<'a>,
) -> Result<Matched<'a>, Miss<'a>> {
    if asked.operation != Operation::Create {
        return Err(Miss::Operation(asked.operation));
    }
    if pod.get("apiVersion").and_then(Value::as_str) != Some("v1")
        || pod.get("kind").and_then(Value::as_str) != Some("Pod")
    {
        return Err(Miss::Kind);
    }
    let metadata = pod.get("metadata");
    let namespace = object_namespace(pod).unwrap_or(asked.namespace);
    if let Some(miss) = namespace_miss(policy, namespace) {
        return Err(miss);
    }
    let labels = metadata.and_then(|m| m.get("labels")).and_then(Value::as_object);
    if let Some(unmet) = policy.selector.unmet(labels) {
        return Err(Miss::Selector(unmet, labels));
    }
    let (who, untrusted) = requester(policy.owner.as_ref(), asked.user, metadata);
    policy
        .requesters
        .decide(who.as_ref(), audiences)
        .map(|included| Matched { included, who })
        .map_err(|left| Miss::Requester { left, who, untrusted })
}

impl Matched<'_> {
    /// The requester clause that included the pod's requester, as explain shows it.
    pub(crate) fn clause(&self) -> Clause {
        let who = self
            .who
            .map_or_else(|| "the requester".to_owned(), |who| who.to_string());
        let (field, glob) = match self.included {
            Included::Everyone => {
                return Clause::new("spec.match.requesters", "every requester (none is named)");
            }
            Included::Audience(name, entry) => {
                return Clause::new(
                    "spec.match.requesters.audiences",
                    format!("{who} is in Audience {name} ({entry})"),
                );
            }
            Included::Entry(Entry::User(glob)) => ("spec.match.requesters.users", glob),
            Included::Entry(Entry::Group(glob, _)) => ("spec.match.requesters.groups", glob),
            Included::Entry(Entry::ServiceAccount(glob)) => ("spec.match.requesters.serviceAccounts", glob),
        };
        Clause::new(field, format!("{who} matches {glob}"))
    }
}

impl fmt::Display for Matched<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Clause { field, detail } = self.clause();
        write!(f, "{field}: {detail}")
    }
}

impl Miss<'_> {
    /// The policy's field that rules the pod out, and why, as explain shows it.
    pub(crate) fn clause(&self, policy: &PodPolicy, audiences: AudienceLookup<'_>) -> Clause {
        match *self {
            Miss::Operation(operation) => Clause::new(
                "operation",
                format!("{}; PodPolicies apply when a pod is created", operation.as_str()),
            ),
            Miss::Kind => Clause::new("kind", "PodPolicies apply to v1 Pods only"),
            Miss::Namespace(namespace) => Clause::new(
                "spec.match.namespaces",
                format!("the pod's namespace {namespace:?} is not listed"),
            ),
            Miss::ExcludedNamespace(namespace, wildcard) => Clause::new(
                "spec.match.excludedNamespaces",
                format!("the pod's namespace {namespace:?} matches {:?}", wildcard.0),
            ),
            Miss::Selector(unmet, labels) => Clause::new(
                "spec.match.selector",
                format!("requires {unmet}; the pod has {}", unmet.found(labels)),
            ),
            Miss::Requester { left, who, untrusted } => {
                let (field, detail) = policy.requesters.explain_left(left, who.as_ref(), audiences);
                match untrusted {
                    // The owner the pod names would have been the requester: that is the news.
                    Some(untrusted) => Clause::new("spec.match.owner", format!("{untrusted}; {detail}")),
                    None => Clause::new(field, detail),
                }
            }
        }
    }
}
