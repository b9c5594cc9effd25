//! `outfit mutate`: the offline CLI. Its contract (flags, output formats, exit statuses) is
//! scripted against by other tools; see the README before changing it.
//!
//! Exit status: 0 when every object was admitted, 1 when any was denied (admitted objects are still
//! printed), 2 on bad input, with nothing printed on stdout.

use std::{
    io::{self, Write},
    process::ExitCode,
};

use clap::{Args, ValueEnum};
use outfit_core::{Admission, Operation, Outcome, Request};
use serde_json::Value;

use crate::{
    explain::{self, ExplainFormat},
    inputs::{InputError, Inputs, describe, exit_status},
};

/// Arguments of `outfit mutate`.
#[derive(Debug, Args)]
pub(crate) struct MutateArgs {
    #[command(flatten)]
    inputs: Inputs,

    /// Output: the mutated objects as YAML, compact JSON one per line, or one RFC 6902 patch per line.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Yaml)]
    output: OutputFormat,

    /// Also explain each decision on stderr (as `outfit explain`): text, or `--explain=json`.
    #[arg(long, value_enum, value_name = "FORMAT", num_args = 0..=1, require_equals = true, default_missing_value = "text")]
    explain: Option<ExplainFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    Yaml,
    Json,
    Patch,
}

/// Runs `outfit mutate`.
pub(crate) fn run(args: &MutateArgs) -> ExitCode {
    exit_status(mutate(args, &mut io::stdout().lock(), &mut io::stderr().lock()))
}

fn mutate(
    args: &MutateArgs,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> Result<ExitCode, InputError> {
    let inputs = &args.inputs;
    let policies = inputs.load_policies(stderr)?;
    let objects = inputs.read_objects()?;

    let mut out = String::new();
    let mut denied = false;
    let mut explanations = Vec::new();
    let user = inputs.user_info();
    for object in &objects {
        let request = Request {
            object: (&object.value).into(),
            namespace: &inputs.namespace,
            operation: Operation::Create,
            user: user.as_ref(),
        };
        match policies.apply(&request) {
            Outcome::Admitted(admission) => {
                // With --explain, the explanation carries them (and stays JSON with =json).
                let warnings = if args.explain.is_none() {
                    &admission.warnings[..]
                } else {
                    &[]
                };
                for warning in warnings {
                    let _ = writeln!(
                        stderr,
                        "warning: {}: {warning}",
                        describe(object, &inputs.namespace)
                    );
                }
                render(args.output, &object.value, &admission, &mut out)?;
            }
            Outcome::Denied(denial) => {
                denied = true;
                let _ = writeln!(
                    stderr,
                    "denied: {}: {}",
                    describe(object, &inputs.namespace),
                    denial.message
                );
            }
        }
        if args.explain.is_some() {
            explanations.push(explain::explain_one(
                &policies,
                &object.value,
                &inputs.namespace,
                Operation::Create,
                user.as_ref(),
            ));
        }
    }
    if let Some(format) = args.explain {
        explain::write(format, &explanations, stderr)?;
    }
    stdout.write_all(out.as_bytes()).map_err(InputError::Output)?;
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn render(
    format: OutputFormat,
    original: &Value,
    admission: &Admission<'_>,
    out: &mut String,
) -> Result<(), InputError> {
    let object = admission.object(original).map_err(InputError::OwnPatch)?;
    let object = object.as_ref();
    let json_error = |e: serde_json::Error| InputError::Render {
        format: "JSON",
        message: e.to_string(),
    };
    match format {
        OutputFormat::Yaml => {
            if !out.is_empty() {
                out.push_str("---\n");
            }
            let yaml = serde_saphyr::to_string(object).map_err(|e| InputError::Render {
                format: "YAML",
                message: e.to_string(),
            })?;
            out.push_str(&yaml);
        }
        OutputFormat::Json => {
            out.push_str(&serde_json::to_string(object).map_err(json_error)?);
            out.push('\n');
        }
        OutputFormat::Patch => {
            out.push_str(&serde_json::to_string(&admission.patch()).map_err(json_error)?);
            out.push('\n');
        }
    }
    Ok(())
}
