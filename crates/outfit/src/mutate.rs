//! `outfit mutate`: the offline CLI. Its contract (flags, output formats, exit statuses) is
//! scripted against by other tools; see the README before changing it.
//!
//! Exit status: 0 when every object was admitted, 1 when any was denied (admitted objects are still
//! printed), 2 on bad input, with nothing printed on stdout.

use std::{
    io::{self, Read, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::{Args, ValueEnum};
use outfit_core::{
    Operation, Outcome, PolicySet, Request,
    document::{self, Document},
    policy_set::LoadReport,
    source,
};
use serde_json::Value;

use crate::failure::EXIT_BAD_INPUT;

/// Arguments of `outfit mutate`.
#[derive(Debug, Args)]
pub(crate) struct MutateArgs {
    /// Policy file, or directory searched recursively for *.yaml, *.yml and *.json. Repeatable.
    /// `Namespace` objects found there supply namespace labels for matching.
    #[arg(long = "policies", value_name = "PATH", required = true)]
    policies: Vec<PathBuf>,

    /// Manifest to mutate (YAML or JSON, multi-document, `kind: List` allowed); `-` or none reads
    /// stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    files: Vec<String>,

    /// Namespace of objects and namespaced policies whose metadata names none.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "NAMESPACE",
        default_value = "default"
    )]
    namespace: String,

    /// Output: the mutated objects as YAML, compact JSON one per line, or one RFC 6902 patch per line.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Yaml)]
    output: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    Yaml,
    Json,
    Patch,
}

/// Runs `outfit mutate`.
pub(crate) fn run(args: &MutateArgs) -> ExitCode {
    match mutate(args, &mut io::stdout().lock(), &mut io::stderr().lock()) {
        Ok(status) => status,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn mutate(args: &MutateArgs, stdout: &mut impl Write, stderr: &mut impl Write) -> Result<ExitCode, String> {
    let policies = load_policies(args, stderr)?;
    let objects = read_objects(&args.files)?;

    let mut out = String::new();
    let mut denied = false;
    for object in &objects {
        let request = Request {
            object: (&object.value).into(),
            namespace: &args.namespace,
            operation: Operation::Create,
            user: None,
        };
        match policies.apply(&request) {
            Outcome::Admitted(admission) => {
                for warning in &admission.warnings {
                    let _ = writeln!(
                        stderr,
                        "warning: {}: {warning}",
                        describe(object, &args.namespace)
                    );
                }
                render(args.output, &object.value, &admission, &mut out)?;
            }
            Outcome::Denied(denial) => {
                denied = true;
                let _ = writeln!(
                    stderr,
                    "denied: {}: {}",
                    describe(object, &args.namespace),
                    denial.message
                );
            }
        }
    }
    stdout
        .write_all(out.as_bytes())
        .map_err(|e| format!("writing output: {e}"))?;
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn load_policies(args: &MutateArgs, stderr: &mut impl Write) -> Result<PolicySet, String> {
    let documents = source::read_paths(&args.policies).map_err(|e| e.to_string())?;
    let mut builder = PolicySet::builder().default_namespace(&args.namespace);
    builder.add_all(&documents);
    let (set, report) = builder.build();
    let LoadReport {
        errors,
        warnings,
        skipped,
    } = report;
    for (origin, what) in &skipped {
        let _ = writeln!(
            stderr,
            "note: {origin}: skipping {what}: not a policy outfit reads"
        );
    }
    for warning in &warnings {
        let _ = writeln!(stderr, "warning: {warning}");
    }
    if !errors.is_empty() {
        let count = errors.len();
        for error in errors {
            let _ = writeln!(stderr, "error: invalid policy: {error}");
        }
        return Err(format!(
            "{count} invalid polic{}; nothing was mutated",
            if count == 1 { "y" } else { "ies" }
        ));
    }
    Ok(set)
}

fn read_objects(files: &[String]) -> Result<Vec<Document>, String> {
    let stdin_only = ["-".to_owned()];
    let files = if files.is_empty() { &stdin_only[..] } else { files };
    let mut objects = Vec::new();
    for file in files {
        let documents = if file == "-" {
            let mut text = String::new();
            io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("<stdin>: cannot read: {e}"))?;
            document::parse_stream(&text, "<stdin>")
        } else {
            source::read_file(file.as_ref())
        };
        objects.extend(documents.map_err(|e| e.to_string())?);
    }
    Ok(objects)
}

fn render(
    format: OutputFormat,
    original: &Value,
    admission: &outfit_core::Admission<'_>,
    out: &mut String,
) -> Result<(), String> {
    let object = admission.object(original).map_err(|e| {
        format!("internal error: outfit's own patch does not apply ({e}); please report this")
    })?;
    let object = object.as_ref();
    match format {
        OutputFormat::Yaml => {
            if !out.is_empty() {
                out.push_str("---\n");
            }
            let yaml = serde_saphyr::to_string(object).map_err(|e| format!("rendering YAML: {e}"))?;
            out.push_str(&yaml);
        }
        OutputFormat::Json => {
            out.push_str(&serde_json::to_string(object).map_err(|e| e.to_string())?);
            out.push('\n');
        }
        OutputFormat::Patch => {
            out.push_str(&serde_json::to_string(&admission.patch()).map_err(|e| e.to_string())?);
            out.push('\n');
        }
    }
    Ok(())
}

/// `<kind> <namespace>/<name>` for messages.
fn describe(object: &Document, default_namespace: &str) -> String {
    let field = |pointer: &str| {
        object
            .value
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let namespace = field("/metadata/namespace").unwrap_or(default_namespace);
    let name = field("/metadata/name")
        .or_else(|| field("/metadata/generateName"))
        .unwrap_or("<unnamed>");
    format!("{} {namespace}/{name}", object.kind())
}
