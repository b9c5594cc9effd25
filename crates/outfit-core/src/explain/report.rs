//! What `outfit explain` reports: for one object, each policy's verdict (matched or not and the
//! clause that decided it, what it changed, why it changed nothing) and the outcome. Plain data the
//! families fill in, serialized as is for `-o json` and rendered as text by
//! [`Display`](fmt::Display).

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::vocab::PolicyRef;

/// The decisions for one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `<kind> <namespace>/<name>`.
    pub object: String,
    /// What the webhook answers for it.
    pub outcome: Outcome,
    /// The admission's message when denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every policy of the set, in the order the engine considers them.
    pub policies: Vec<Decision>,
    /// The warnings the webhook sends the requesting user with its answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The webhook's answer for the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Admitted as it came.
    Unchanged,
    /// Admitted with a patch.
    Mutated,
    /// Refused.
    Denied,
}

/// One policy's verdict on the object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The policy.
    pub policy: PolicyRef,
    /// What it did.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// What one policy did to the object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Verdict {
    /// It does not apply to the object: `clause` is the first part of the policy that rules it out.
    NotMatched {
        /// The deciding clause.
        clause: Clause,
    },
    /// It applied and changed these fields.
    Changed {
        /// Each field it set, added or removed.
        changes: Vec<Change>,
    },
    /// It applied to the pod because of who the pod is for, and changed these fields: outfit's
    /// PodPolicy, whose match depends on the requester. Serialized as `changed`, with the
    /// requester clause beside the changes.
    #[serde(rename = "changed")]
    ChangedFor {
        /// The requester clause that included the pod's requester.
        requester: Clause,
        /// Each field it set, added or removed.
        changes: Vec<Change>,
    },
    /// It applied and changed nothing; `reason` says why.
    Unchanged {
        /// Why, in words.
        reason: String,
    },
    /// It matched, but the object was refused because of it (a conflict, a failed mutation).
    Denied {
        /// The reason, naming the other policies and fields involved.
        reason: String,
    },
    /// It is loaded but not in force (a Gatekeeper schema conflict disables both mutators).
    Disabled {
        /// Why.
        reason: String,
    },
}

/// The part of a policy that decided it does not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Clause {
    /// The policy's field, or the request's (`operation`), e.g. `spec.match.namespaces`.
    pub field: String,
    /// What it requires and what the object has.
    pub detail: String,
}

impl Clause {
    /// A clause for `field`.
    pub fn new(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            detail: detail.into(),
        }
    }
}

/// One field a policy changed: a JSON pointer and the values before and after (absent: `None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// RFC 6901 pointer into the object.
    pub path: String,
    /// The value before, if there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The value after, if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Unchanged => "admitted unchanged",
            Outcome::Mutated => "mutated",
            Outcome::Denied => "denied",
        };
        writeln!(f, "{}: {outcome}", self.object)?;
        if let Some(message) = &self.message {
            writeln!(f, "  {message}")?;
        }
        for warning in &self.warnings {
            writeln!(f, "  warning: {warning}")?;
        }
        if self.policies.is_empty() {
            writeln!(f, "  (no policies loaded)")?;
        }
        for decision in &self.policies {
            write!(f, "  {}: ", decision.policy)?;
            match &decision.verdict {
                Verdict::NotMatched { clause } => {
                    writeln!(f, "not matched: {}: {}", clause.field, clause.detail)?
                }
                Verdict::Changed { changes } | Verdict::ChangedFor { changes, .. } => {
                    match &decision.verdict {
                        Verdict::ChangedFor { requester, .. } => {
                            writeln!(f, "changed ({}: {})", requester.field, requester.detail)?
                        }
                        _ => writeln!(f, "changed")?,
                    }
                    for change in changes {
                        writeln!(
                            f,
                            "      {}: {} -> {}",
                            change.path,
                            shown(change.before.as_ref()),
                            shown(change.after.as_ref())
                        )?;
                    }
                }
                Verdict::Unchanged { reason } => writeln!(f, "matched, changed nothing: {reason}")?,
                Verdict::Denied { reason } => writeln!(f, "matched, denied: {reason}")?,
                Verdict::Disabled { reason } => writeln!(f, "disabled: {reason}")?,
            }
        }
        Ok(())
    }
}

/// A value for the text form: compact JSON, cut to one line's worth.
fn shown(value: Option<&Value>) -> String {
    const MAX: usize = 100;
    let Some(value) = value else {
        return "(absent)".to_owned();
    };
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let mut short: String = text.chars().take(MAX - 3).collect();
    short.push_str("...");
    short
}
