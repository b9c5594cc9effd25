//! PodPolicy and Audience as a family of the kinds table: compiling them (Audiences resolved by
//! name when the set is built, in any order), the engine's step (on pod CREATE: every matching
//! PodPolicy, in name order, on the pod as the PodDefaults left it), and its explanation.

use std::{any::Any, borrow::Cow};

use serde_json::Value;

use super::{
    matching::{Asked, Matched, check, namespace_miss},
    merge::{Conflict, Merger},
    parse::{parse_audience, parse_pod_policy},
    policy::{AUDIENCE_KIND, Audience, POD_POLICY_KIND, PodPolicy},
    requesters::Members,
};
use crate::{
    decision::{Admission, Denial, DenialReason, Named, Object, Request, internal_denial, object_namespace},
    document::Document,
    error::{LoadWarning, PolicyError},
    explain::{
        changes::changes_between,
        report::{Decision, Verdict},
    },
    family::{Context, ExplainState, Family, FamilyBuilder, FamilySet, LoadOptions, Targets},
    vocab::{FastMap, Operation, Origin, PolicyKind, PolicyRef},
};

/// The PodPolicy family (PodPolicy and Audience).
#[derive(Debug)]
pub struct PodPolicies;

/// Its entry in the kinds table.
pub static FAMILY: PodPolicies = PodPolicies;

impl Family for PodPolicies {
    fn crds(&self) -> &'static str {
        include_str!("crds.yaml")
    }

    fn kinds(&self) -> &'static [PolicyKind] {
        &[POD_POLICY_KIND, AUDIENCE_KIND]
    }

    fn builder(&self, _options: &LoadOptions<'_>) -> Box<dyn FamilyBuilder> {
        Box::new(Builder::default())
    }
}

#[derive(Default)]
struct Builder {
    policies: Vec<(PodPolicy, Origin)>,
    audiences: Vec<Audience>,
}

impl FamilyBuilder for Builder {
    fn add(
        &mut self,
        document: &Document,
        _warnings: &mut Vec<LoadWarning>,
        admit: &mut dyn FnMut(&PolicyRef) -> Result<(), PolicyError>,
    ) -> Result<PolicyRef, PolicyError> {
        if document.kind() == AUDIENCE_KIND.as_str() {
            let audience = parse_audience(document)?;
            admit(&audience.reference)?;
            let reference = audience.reference.clone();
            self.audiences.push(audience);
            return Ok(reference);
        }
        let policy = parse_pod_policy(document)?;
        admit(&policy.reference)?;
        let reference = policy.reference.clone();
        self.policies.push((policy, document.origin.clone()));
        Ok(reference)
    }

    fn finish(&mut self, warnings: &mut Vec<LoadWarning>) {
        // The cluster loads objects in any order: a policy naming an Audience that is not (yet)
        // there matches nobody through it, and says so.
        for (policy, origin) in &self.policies {
            for name in policy.audiences() {
                if !self.audiences.iter().any(|a| a.reference.name == name) {
                    warnings.push(LoadWarning {
                        origin: origin.clone(),
                        message: format!(
                            "{}: spec.match.requesters: Audience {name} is not loaded; it matches nobody until it is",
                            policy.reference
                        ),
                    });
                }
            }
        }
    }

    fn build(self: Box<Self>, _errors: &mut Vec<PolicyError>) -> Box<dyn FamilySet> {
        let mut policies: Vec<PodPolicy> = self.policies.into_iter().map(|(p, _)| p).collect();
        policies.sort_by(|a, b| a.reference.name.cmp(&b.reference.name));
        let audience_count = self.audiences.len();
        let audiences = self
            .audiences
            .into_iter()
            .map(|a| (a.reference.name, a.members))
            .collect();
        Box::new(PodPolicySet {
            policies,
            audiences,
            audience_count,
        })
    }
}

/// The compiled PodPolicies, in application order (by name), and the Audiences by name.
#[derive(Debug, Default)]
pub struct PodPolicySet {
    policies: Vec<PodPolicy>,
    /// The Audiences' members, by name.
    audiences: FastMap<String, Members>,
    audience_count: usize,
}

impl PodPolicySet {
    /// Every PodPolicy, in application order.
    pub fn policies(&self) -> &[PodPolicy] {
        &self.policies
    }

    fn matching<'s>(&'s self, pod: &Value, asked: Asked<'_>) -> Vec<&'s PodPolicy> {
        self.policies
            .iter()
            .filter(|p| check(p, pod, asked, &self.audiences).is_ok())
            .collect()
    }
}

impl FamilySet for PodPolicySet {
    fn count(&self, kind: PolicyKind) -> usize {
        if kind == POD_POLICY_KIND {
            self.policies.len()
        } else if kind == AUDIENCE_KIND {
            self.audience_count
        } else {
            0
        }
    }

    fn apply<'p>(
        &'p self,
        request: &Request<'_>,
        _context: &Context<'p>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        if request.operation != Operation::Create || self.policies.is_empty() {
            return Ok(());
        }
        // Where the pod is created rules most policies out before the pod is read whole (as
        // `check` reads it: the pod's own namespace, else the request's).
        let namespace = match request.object {
            Object::Value(value) => Some(object_namespace(value).unwrap_or(request.namespace)),
            Object::Read { view, .. } => Some(view.namespace().unwrap_or(request.namespace)),
            Object::Json(_) => None,
        };
        if namespace.is_some_and(|ns| self.policies.iter().all(|p| namespace_miss(p, ns).is_some())) {
            return Ok(());
        }
        let original = request.object_value()?;
        let current = admission
            .object(&original)
            .map_err(|error| internal_denial(&error))?;
        let asked = Asked {
            operation: request.operation,
            namespace: request.namespace,
            user: request.user,
        };
        let matching = self.matching(&current, asked);
        if matching.is_empty() {
            return Ok(());
        }
        let mut object = current.into_owned();
        let mut merger = Merger::default();
        let mut applied = Vec::new();
        for policy in &matching {
            if merger.add(&mut object, policy) {
                applied.push(Cow::Borrowed(&policy.reference));
            }
        }
        if !merger.conflicts.is_empty() {
            return Err(denial(&original, request.namespace, &merger.conflicts));
        }
        admission.record(&original, object, applied);
        Ok(())
    }

    fn explain(&self, request: &Request<'_>, _context: &Context<'_>, state: &mut ExplainState<'_>) {
        let mut object = state.current.clone();
        let mut merger = Merger::default();
        let mut decisions = Vec::with_capacity(self.policies.len());
        let asked = Asked {
            operation: request.operation,
            namespace: request.namespace,
            user: request.user,
        };
        for policy in &self.policies {
            let verdict = match check(policy, &state.current, asked, &self.audiences) {
                Err(miss) => Verdict::NotMatched {
                    clause: miss.clause(policy, &self.audiences),
                },
                Ok(_) if state.denied_before => Verdict::Unchanged {
                    reason: "not run: an earlier denial ends the admission first".to_owned(),
                },
                Ok(matched) => explain_applied(policy, matched, &mut merger, &mut object),
            };
            decisions.push(Decision {
                policy: policy.reference.clone(),
                verdict,
            });
        }
        deny_earlier_sides(&merger.conflicts, &mut decisions);
        if !merger.conflicts.is_empty() {
            state.denied_before = true;
        } else if !state.denied_before {
            state.current = object;
        }
        state.decisions.extend(decisions);
    }

    fn targets(&self) -> Targets {
        Targets::pods_if(!self.policies.is_empty())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What a matching policy does to `object` after the earlier ones (`merger` knows what they set).
fn explain_applied<'p>(
    policy: &'p PodPolicy,
    matched: Matched<'_>,
    merger: &mut Merger<'p>,
    object: &mut Value,
) -> Verdict {
    let before = object.clone();
    let conflicts = merger.conflicts.len();
    merger.add(object, policy);
    if merger.conflicts.len() > conflicts {
        let mine: Vec<String> = merger.conflicts[conflicts..]
            .iter()
            .map(ToString::to_string)
            .collect();
        return Verdict::Denied {
            reason: mine.join("; "),
        };
    }
    let changes = changes_between(&before, object);
    if changes.is_empty() {
        Verdict::Unchanged {
            reason: format!("matched ({matched}); the pod already has everything it adds"),
        }
    } else {
        Verdict::ChangedFor {
            requester: matched.clause(),
            changes,
        }
    }
}

/// A policy in conflict with a later one is refused with it.
fn deny_earlier_sides(conflicts: &[Conflict<'_>], decisions: &mut [Decision]) {
    for conflict in conflicts {
        if let Some(other) = conflict.other
            && let Some(decision) = decisions.iter_mut().find(|d| d.policy == *other)
            && !matches!(decision.verdict, Verdict::Denied { .. })
        {
            decision.verdict = Verdict::Denied {
                reason: conflict.to_string(),
            };
        }
    }
}

/// The pod is refused: every conflict, each naming its place and both sides.
fn denial(pod: &Value, namespace: &str, conflicts: &[Conflict<'_>]) -> Denial {
    let mut policies: Vec<PolicyRef> = Vec::new();
    for conflict in conflicts {
        for policy in std::iter::once(conflict.policy).chain(conflict.other) {
            if !policies.contains(policy) {
                policies.push(policy.clone());
            }
        }
    }
    let named = Named::of(pod);
    let conflicts: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
    Denial {
        message: format!(
            "conflict applying PodPolicies to pod {}/{}: {}",
            named.namespace.unwrap_or(namespace),
            named.name,
            conflicts.join("; ")
        ),
        policies,
        reason: DenialReason::Policy,
    }
}
