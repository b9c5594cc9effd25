//! `outfit explain`: for one object, every policy's verdict, with the clause that decided it and
//! what it changed. A slow path beside the engine, never on the admission path: it re-runs each
//! policy alone to say what that policy did, and takes the outcome from [`PolicySet::apply`]
//! itself, so the explanation cannot disagree with the webhook's answer.
//!
//! [`PolicySet::apply`]: crate::PolicySet::apply

pub(crate) mod changes;
pub mod report;
mod run;

pub use report::{Change, Clause, Decision, Explanation, Outcome, Verdict};
