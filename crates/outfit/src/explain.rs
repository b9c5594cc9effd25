//! `outfit explain`, and `outfit mutate --explain`: per object and per policy, whether it matched
//! and the clause that decided it, what it changed, or why it changed nothing.
//!
//! Exit status: 0 when every object was admitted, 1 when any was denied, 2 when a file cannot be
//! read. Unlike `outfit mutate`, an invalid policy does not stop it: the policy is reported on
//! stderr and explained as disabled, since "why did my policy not apply" is often that.

use std::{
    io::{self, Write},
    process::ExitCode,
};

use clap::{Args, ValueEnum};
use outfit_core::{
    Operation, PolicyError, PolicySet, Problem, Request, UserInfo,
    explain::{Decision, Explanation, Verdict},
};

use crate::inputs::{InputError, Inputs, exit_status};

/// Arguments of `outfit explain`.
#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    #[command(flatten)]
    inputs: Inputs,

    /// Output: text for people, or one JSON array of explanations (one per object).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ExplainFormat::Text)]
    output: ExplainFormat,

    /// The operation to explain the admission of.
    #[arg(long, value_enum, default_value_t = OperationArg::Create)]
    operation: OperationArg,
}

/// How explanations are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExplainFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OperationArg {
    Create,
    Update,
}

/// Runs `outfit explain`.
pub(crate) fn run(args: &ExplainArgs) -> ExitCode {
    exit_status(explain(args, &mut io::stdout().lock(), &mut io::stderr().lock()))
}

fn explain(
    args: &ExplainArgs,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> Result<ExitCode, InputError> {
    let (policies, rejected) = args.inputs.load_policies_reporting(stderr)?;
    let objects = args.inputs.read_objects()?;
    let operation = match args.operation {
        OperationArg::Create => Operation::Create,
        OperationArg::Update => Operation::Update,
    };
    let rejected = rejected_decisions(rejected);
    let user = args.inputs.user_info();
    let explanations: Vec<Explanation> = objects
        .iter()
        .map(|object| {
            let mut explanation = explain_one(
                &policies,
                &object.value,
                &args.inputs.namespace,
                operation,
                user.as_ref(),
            );
            explanation.policies.extend(rejected.iter().cloned());
            explanation
        })
        .collect();
    write(args.output, &explanations, stdout)?;
    let denied = explanations
        .iter()
        .any(|e| e.outcome == outfit_core::explain::Outcome::Denied);
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Policies rejected when loaded, as verdicts. Those a schema conflict disabled are left to the
/// set, which explains them already.
fn rejected_decisions(rejected: Vec<PolicyError>) -> Vec<Decision> {
    rejected
        .into_iter()
        .filter(|error| !matches!(error.problem, Problem::SchemaConflict { .. }))
        .map(|error| Decision {
            verdict: Verdict::Disabled {
                reason: format!("rejected when loaded: {}: {}", error.field, error.problem),
            },
            policy: error.policy,
        })
        .collect()
}

/// The explanation of one object's admission.
pub(crate) fn explain_one(
    policies: &PolicySet,
    object: &serde_json::Value,
    namespace: &str,
    operation: Operation,
    user: Option<&UserInfo<'_>>,
) -> Explanation {
    policies.explain(&Request {
        object: object.into(),
        namespace,
        operation,
        user,
    })
}

/// Writes explanations as text (one block per object) or as one JSON array.
pub(crate) fn write(
    format: ExplainFormat,
    explanations: &[Explanation],
    out: &mut impl Write,
) -> Result<(), InputError> {
    let text = match format {
        ExplainFormat::Text => explanations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        ExplainFormat::Json => {
            let mut json = serde_json::to_string_pretty(explanations).map_err(|e| InputError::Render {
                format: "JSON",
                message: e.to_string(),
            })?;
            json.push('\n');
            json
        }
    };
    out.write_all(text.as_bytes()).map_err(InputError::Output)
}
