//! What `outfit explain` reports, and the words the families explain their policies in: each
//! policy's verdict (`report`) and what it changed (`changes`). Plain data below the families,
//! which fill it in; the run that asks every family in turn is [`PolicySet::explain`], at the top
//! beside the engine.
//!
//! [`PolicySet::explain`]: crate::PolicySet::explain

pub(crate) mod changes;
pub mod report;

pub use report::{Change, Clause, Decision, Explanation, Outcome, Verdict};
