//! Applying a [`PolicySet`] to one object: the admission decision shared by `outfit mutate` and
//! `outfit serve`. Each family of the kinds table that holds a policy takes its step in the
//! table's order, on the object as the earlier ones left it (see each family's module for its
//! step); the first denial ends the admission. Whatever no policy touched (unknown fields, nulls,
//! integer formatting, key order) is left exactly as it came.

use super::set::PolicySet;
use crate::{
    decision::{Admission, Denial, DenialReason, Object, Outcome, Request, internal_denial},
    patch::Changes,
    record,
};

/// Passes over the families after the first, at most: a later family may add what an earlier one
/// matches, and each pass settles one such step.
const MAX_PASSES: usize = 4;

impl PolicySet {
    /// Decides one object: applies every matching policy, or denies it when they conflict.
    pub fn apply(&self, request: &Request<'_>) -> Outcome<'_> {
        let decided = self
            .pass(request)
            .and_then(|admission| self.settle(request, admission));
        let mut admission = match decided {
            Ok(admission) => admission,
            Err(denial) => return Outcome::Denied(denial),
        };
        if self.annotate
            && let Err(denial) = record::annotate(&mut admission, request, &self.self_recorded)
        {
            return Outcome::Denied(denial);
        }
        if !self.warn {
            admission.warnings.clear();
        }
        Outcome::Admitted(admission)
    }

    /// One step of every family that holds a policy, in the table's order.
    fn pass(&self, request: &Request<'_>) -> Result<Admission<'_>, Denial> {
        let mut admission = Admission::unchanged();
        let context = self.context();
        for family in self.holding() {
            family.apply(request, &context, &mut admission)?;
        }
        Ok(admission)
    }

    /// With more than one family, runs them again on their result until nothing changes: a later
    /// family may add what an earlier one matches (a mutator's sidecar that a PodPolicy gives its
    /// GPU to), and the API server's reinvocation of the webhook would otherwise change the object
    /// again. The answer is then what any number of reinvocations leave, as Gatekeeper's loop
    /// makes it for its mutators alone.
    fn settle<'p>(
        &'p self,
        request: &Request<'_>,
        mut admission: Admission<'p>,
    ) -> Result<Admission<'p>, Denial> {
        if self.holding().nth(1).is_none() || admission.is_unchanged() {
            return Ok(admission);
        }
        let original = request.object_value()?;
        for _ in 0..MAX_PASSES {
            let current = admission
                .object(&original)
                .map_err(|error| internal_denial(&error))?
                .into_owned();
            let again = self.pass(&Request {
                object: Object::Value(&current),
                ..*request
            })?;
            if again.is_unchanged() {
                return Ok(admission);
            }
            let next = again
                .object(&current)
                .map_err(|error| internal_denial(&error))?
                .into_owned();
            for policy in again.applied {
                if !admission.applied.contains(&policy) {
                    admission.applied.push(policy);
                }
            }
            admission.changes = Changes::between(&original, next);
        }
        Err(Denial {
            message: format!(
                "outfit's policies do not settle: the object still changed after {} passes over them",
                MAX_PASSES + 1
            ),
            policies: admission.applied.iter().map(|p| (**p).clone()).collect(),
            reason: DenialReason::Policy,
        })
    }
}
