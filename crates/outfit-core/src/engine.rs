//! Applying a [`PolicySet`] to one object: the admission decision shared by `outfit mutate` and
//! `outfit serve`. Each family of the kinds table that holds a policy takes its step in the table's order, on the
//! object as the earlier ones left it (see each family's module for its step); the first denial
//! ends the admission. Whatever no policy touched (unknown fields, nulls, integer formatting, key
//! order) is left exactly as it came.

use crate::{
    decision::{Admission, Outcome, Request},
    policy_set::PolicySet,
    record,
};

impl PolicySet {
    /// Decides one object: applies every matching policy, or denies it when they conflict.
    pub fn apply(&self, request: &Request<'_>) -> Outcome<'_> {
        let mut admission = Admission::unchanged();
        let context = self.context();
        for family in self.holding() {
            if let Err(denial) = family.apply(request, &context, &mut admission) {
                return Outcome::Denied(denial);
            }
        }
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
}
