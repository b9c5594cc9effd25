//! The Gatekeeper mutators as a family of the kinds table: compiling Assign, AssignImage,
//! AssignMetadata and ModifySet documents (both sides of a schema conflict left out, as
//! Gatekeeper does), the engine's step (on CREATE and UPDATE, as Gatekeeper's webhook, in its own
//! order and convergence loop, on the object as the earlier families left it), and its
//! explanation.

use std::any::Any;

use serde_json::Value;

use super::{
    conflicts,
    matching::Subject,
    mutator::{ASSIGN, ASSIGN_IMAGE, ASSIGN_METADATA, GROUP, MODIFY_SET, Mutator},
    parse::parse,
    system::{MutationError, Mutators, RunInput},
};
use crate::{
    decision::{Admission, Denial, DenialReason, Named, Request, internal_denial},
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    explain::{
        changes::changes_between,
        report::{Change, Clause, Decision, Verdict},
    },
    family::{Context, ExplainState, Family, FamilyBuilder, FamilySet, LoadOptions, TargetKind, Targets},
    fieldpath::FieldPath,
    record,
    vocab::{Operation, PolicyKind, PolicyRef},
};

impl Mutators {
    /// Warns of each mutator at `unchanged` (they matched and changed nothing), unless the object
    /// lists it as having changed it before: then this is a reinvocation and all is as it should.
    fn warn_unchanged(
        &self,
        unchanged: &[u32],
        original: &Value,
        object: &Value,
        request: &Request<'_>,
        warnings: &mut Vec<String>,
    ) {
        let listed: Vec<&str> = record::entries(record::listed(original).unwrap_or("")).collect();
        for &position in unchanged {
            let mutator = &self.items()[position as usize];
            let reference = &mutator.reference;
            if !listed.is_empty() && listed.contains(&record::entry(reference).as_str()) {
                continue;
            }
            let why = unchanged_reason(mutator, object, request);
            warnings.push(format!("{reference} matched and changed nothing: {why}"));
        }
    }
}

/// The Gatekeeper family.
#[derive(Debug)]
pub struct Gatekeeper;

/// Its entry in the kinds table.
pub static FAMILY: Gatekeeper = Gatekeeper;

impl Family for Gatekeeper {
    fn crds(&self) -> &'static str {
        include_str!("crds.yaml")
    }

    fn kinds(&self) -> &'static [PolicyKind] {
        &[ASSIGN, ASSIGN_IMAGE, ASSIGN_METADATA, MODIFY_SET]
    }

    /// The whole group: a kind Gatekeeper does not have is refused, not skipped.
    fn claims(&self, group: &str, _kind: &str) -> bool {
        group == GROUP
    }

    fn builder(&self, _options: &LoadOptions<'_>) -> Box<dyn FamilyBuilder> {
        Box::new(Builder { items: Vec::new() })
    }
}

struct Builder {
    items: Vec<Mutator>,
}

impl FamilyBuilder for Builder {
    fn add(
        &mut self,
        document: &Document,
        warnings: &mut Vec<LoadWarning>,
        admit: &mut dyn FnMut(&PolicyRef) -> Result<(), PolicyError>,
    ) -> Result<PolicyRef, PolicyError> {
        let mutator = parse(document, warnings)?;
        let reference = mutator.reference().clone();
        admit(&reference)?;
        self.items.push(mutator);
        Ok(reference)
    }

    /// Sorts and indexes the mutators, leaving out both sides of every schema conflict, each
    /// reported as an error naming the other.
    fn build(self: Box<Self>, errors: &mut Vec<PolicyError>) -> Box<dyn FamilySet> {
        let mutators = self.items;
        let found = conflicts::find(&mutators);
        let mut left_out = vec![false; mutators.len()];
        let mut disabled = Vec::new();
        for conflict in &found {
            for (this, other) in [
                (conflict.first, conflict.second),
                (conflict.second, conflict.first),
            ] {
                left_out[this] = true;
                let (this, other) = (&mutators[this], &mutators[other]);
                disabled.push((
                    this.reference().clone(),
                    format!(
                        "schema conflict with {} at spec.location: {}",
                        other.reference(),
                        conflict.detail
                    ),
                ));
                errors.push(PolicyError {
                    origin: this.origin().clone(),
                    policy: this.reference().clone(),
                    field: FieldPath::new("spec.location"),
                    problem: Problem::SchemaConflict {
                        other: other.reference().clone(),
                        other_origin: other.origin().clone(),
                        detail: conflict.detail.clone(),
                    },
                });
            }
        }
        let loaded = mutators.len();
        let mut enabled: Vec<Mutator> = mutators
            .into_iter()
            .zip(left_out)
            .filter_map(|(mutator, left_out)| (!left_out).then_some(mutator))
            .collect();
        // Collected in place into the builder's list, which grew by doubling.
        enabled.shrink_to_fit();
        Box::new(GatekeeperSet {
            mutators: Mutators::new(enabled, loaded),
            disabled,
        })
    }
}

/// The enabled mutators, sorted and indexed, and those a schema conflict left out.
#[derive(Debug, Default)]
pub struct GatekeeperSet {
    mutators: Mutators,
    disabled: Vec<(PolicyRef, String)>,
}

impl GatekeeperSet {
    /// The enabled mutators, in application order.
    pub fn mutators(&self) -> &Mutators {
        &self.mutators
    }

    /// The mutators left out by a schema conflict, each with the reason.
    pub fn disabled(&self) -> &[(PolicyRef, String)] {
        &self.disabled
    }
}

impl FamilySet for GatekeeperSet {
    fn count(&self, kind: PolicyKind) -> usize {
        self.mutators
            .items()
            .iter()
            .filter(|m| m.reference().kind == kind)
            .count()
    }

    /// Its operations replace the earlier families' ones in `admission`: Gatekeeper mutates in
    /// place, so they are a diff of the request's object against the result.
    fn apply<'p>(
        &'p self,
        request: &Request<'_>,
        context: &Context<'p>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        let mutators = &self.mutators;
        // As Gatekeeper's webhook: CREATE and UPDATE only. Checked before the object is parsed.
        if mutators.is_empty() || !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(());
        }
        let original = request.object_value()?;
        let original = original.as_ref();
        // The earlier families' result, when they changed anything: built by applying their patch,
        // or a copy of the object a whole-object step (the filer sidecars) kept. Running on the
        // request's object instead would drop their changes from the diff `record` makes.
        let after_earlier = if admission.is_unchanged() {
            None
        } else {
            let object = admission.object(original).map_err(|e| internal_denial(&e))?;
            Some(object.into_owned())
        };
        let namespace_labels = |namespace: &str| context.namespace_labels(namespace);
        let input = RunInput {
            namespace: request.namespace,
            operation: request.operation,
            namespace_labels: &namespace_labels,
        };
        let mut mutated = after_earlier;
        let mut applied = Vec::new();
        let mut unchanged = Vec::new();
        mutators
            .run(original, &mut mutated, &input, &mut applied, &mut unchanged)
            .map_err(|error| gatekeeper_denial(original, error))?;
        if context.annotates() && context.warns() && !unchanged.is_empty() {
            let object = mutated.as_ref().unwrap_or(original);
            mutators.warn_unchanged(&unchanged, original, object, request, &mut admission.warnings);
        }
        if let Some(object) = mutated {
            admission.record(original, object, applied);
        }
        Ok(())
    }

    /// Runs the mutators one at a time on the object as the earlier families left it, as the loop
    /// does, recording what each changed.
    fn explain(&self, request: &Request<'_>, context: &Context<'_>, state: &mut ExplainState<'_>) {
        let mutators = self.mutators.items();
        let ruled_out = whole_run_clause(&state.current, request);
        let mut verdicts = self.verdicts_before_running(
            &state.current,
            request,
            context,
            ruled_out.as_ref(),
            state.denied_before,
        );
        let mut changes: Vec<Option<Vec<Change>>> = vec![None; mutators.len()];
        if ruled_out.is_none() && !state.denied_before {
            // Gatekeeper's loop: every matching mutator in order, until an iteration changes nothing.
            for _ in 0..=mutators.len() {
                let mut changed = false;
                for (position, mutator) in mutators.iter().enumerate() {
                    if matches!(verdicts[position], Some(Verdict::Denied { .. })) {
                        continue;
                    }
                    changed |= explain_step(
                        mutator,
                        &mut state.current,
                        request,
                        context,
                        &mut changes[position],
                        &mut verdicts[position],
                    );
                }
                if !changed {
                    break;
                }
            }
        }
        for (position, mutator) in mutators.iter().enumerate() {
            let verdict = final_verdict(
                mutator,
                verdicts[position].take(),
                changes[position].take(),
                state.denial,
                || unchanged_reason(mutator, &state.current, request),
            );
            state.decisions.push(Decision {
                policy: mutator.reference().clone(),
                verdict,
            });
        }
        for (policy, reason) in &self.disabled {
            state.decisions.push(Decision {
                policy: policy.clone(),
                verdict: Verdict::Disabled {
                    reason: reason.clone(),
                },
            });
        }
    }

    /// `applyTo` of Assign, ModifySet and AssignImage (exact group, version, kind);
    /// AssignMetadata's `match.kinds` (any version), or everything when it names none or a `*`.
    fn targets(&self) -> Targets {
        let mut kinds = Vec::new();
        let target = |group: &str, version: &str, kind: &str| TargetKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        };
        for mutator in self.mutators.items() {
            if mutator.reference().kind == ASSIGN_METADATA {
                let entries = mutator.match_kinds();
                let any = |list: &[String]| list.is_empty() || list.iter().any(|x| x == "*");
                if entries.is_empty() || entries.iter().any(|e| any(&e.groups) || any(&e.kinds)) {
                    return Targets::Everything;
                }
                for entry in entries {
                    for group in &entry.groups {
                        kinds.extend(entry.kinds.iter().map(|kind| target(group, "*", kind)));
                    }
                }
                continue;
            }
            for entry in mutator.apply_to() {
                for group in &entry.groups {
                    for version in &entry.versions {
                        kinds.extend(entry.kinds.iter().map(|kind| target(group, version, kind)));
                    }
                }
            }
        }
        Targets::Kinds(kinds)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl GatekeeperSet {
    /// What is known of each mutator before any runs: the clause that rules it out, or that it
    /// will not run because an earlier family denied the object.
    fn verdicts_before_running(
        &self,
        object: &Value,
        request: &Request<'_>,
        context: &Context<'_>,
        ruled_out: Option<&Clause>,
        denied_before: bool,
    ) -> Vec<Option<Verdict>> {
        let namespace_labels = |namespace: &str| context.namespace_labels(namespace);
        self.mutators
            .items()
            .iter()
            .map(|mutator| {
                let clause = ruled_out.cloned().or_else(|| {
                    let subject = Subject::new(object, request.namespace, request.operation)?;
                    mutator.mismatch(&subject, &namespace_labels)
                });
                match clause {
                    Some(clause) => Some(Verdict::NotMatched { clause }),
                    None if denied_before => Some(Verdict::Unchanged {
                        reason: "not run: an earlier denial ends the admission first".to_owned(),
                    }),
                    None => None,
                }
            })
            .collect()
    }
}

/// One mutator, once, on the object as it stands; returns whether it changed it.
fn explain_step(
    mutator: &Mutator,
    object: &mut Value,
    request: &Request<'_>,
    context: &Context<'_>,
    changes: &mut Option<Vec<Change>>,
    verdict: &mut Option<Verdict>,
) -> bool {
    let namespace_labels = |namespace: &str| context.namespace_labels(namespace);
    let matches = Subject::new(object, request.namespace, request.operation)
        .is_some_and(|subject| mutator.matches(&subject, &namespace_labels));
    if !matches {
        return false;
    }
    let before = object.clone();
    match mutator.mutate_once(object, request.namespace, request.operation) {
        Ok(true) => {
            changes
                .get_or_insert_with(Vec::new)
                .extend(changes_between(&before, object));
            // Matched after another mutator changed the object, though not at first.
            if matches!(verdict, Some(Verdict::NotMatched { .. })) {
                *verdict = None;
            }
            true
        }
        Ok(false) => false,
        Err(error) => {
            *object = before;
            *verdict = Some(Verdict::Denied {
                reason: format!("at {}: {}", mutator.location(), error.0),
            });
            false
        }
    }
}

/// A mutator's verdict once the loop has run: a failure stands; else what it changed (a denial if
/// the object was refused because of it); else why it matched and changed nothing.
fn final_verdict(
    mutator: &Mutator,
    verdict: Option<Verdict>,
    changes: Option<Vec<Change>>,
    denial: Option<&Denial>,
    unchanged: impl FnOnce() -> String,
) -> Verdict {
    match (verdict, changes) {
        (Some(failed @ Verdict::Denied { .. }), _) => failed,
        (_, Some(_)) if denial.is_some_and(|d| d.policies.contains(mutator.reference())) => Verdict::Denied {
            reason: denial.map(|d| d.message.clone()).unwrap_or_default(),
        },
        (_, Some(changes)) => Verdict::Changed { changes },
        (Some(verdict), None) => verdict,
        (None, None) => Verdict::Unchanged { reason: unchanged() },
    }
}

/// The clause that rules out every Gatekeeper mutator at once, if any.
fn whole_run_clause(object: &Value, request: &Request<'_>) -> Option<Clause> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Some(Clause::new(
            "operation",
            format!(
                "{}; Gatekeeper mutates on CREATE and UPDATE",
                request.operation.as_str()
            ),
        ));
    }
    let Some(subject) = Subject::new(object, request.namespace, request.operation) else {
        return Some(Clause::new("kind", "the object has no apiVersion or kind"));
    };
    subject.group.ends_with(".gatekeeper.sh").then(|| {
        Clause::new(
            "kind",
            format!("{}: Gatekeeper never mutates its own resources", subject.group),
        )
    })
}

fn unchanged_reason(mutator: &Mutator, object: &Value, request: &Request<'_>) -> String {
    if mutator.reference().kind == ASSIGN_METADATA {
        return "the label or annotation is already set (AssignMetadata never changes one)".to_owned();
    }
    let stopped = Subject::new(object, request.namespace, request.operation)
        .is_some_and(|subject| mutator.stopped_by_path_tests(&subject));
    if stopped {
        "its spec.parameters.pathTests stopped it".to_owned()
    } else {
        "the object already has what it sets, or its location names list entries the object does not have"
            .to_owned()
    }
}

fn gatekeeper_denial(object: &Value, error: MutationError) -> Denial {
    let Named { kind, name, .. } = Named::of(object);
    let policies = match &error {
        MutationError::Failed { mutator, .. } => vec![mutator.clone()],
        MutationError::NotConverging { mutators, .. } => mutators.clone(),
    };
    Denial {
        message: format!("gatekeeper mutation of {kind} {name}: {error}"),
        policies,
        reason: DenialReason::Policy,
    }
}
