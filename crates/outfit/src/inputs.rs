//! What `outfit mutate` and `outfit explain` both read: the policies and the manifests, with the
//! errors that stop either command before it prints anything.

use std::{
    borrow::Cow,
    io::{self, Read, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::Args;
use outfit_core::{
    DocumentError, PolicyError, PolicySet, UserInfo,
    document::{self, Document},
    policy_set::{LoadReport, LoadSettings},
    source,
};

use crate::failure::{EXIT_BAD_INPUT, EXIT_CLOSED_PIPE, closed_pipe};

/// The policies and manifests of an offline command.
#[derive(Debug, Args)]
pub(crate) struct Inputs {
    /// Policy file, or directory searched recursively for *.yaml, *.yml and *.json. Repeatable.
    /// `Namespace` objects found there supply namespace labels for matching.
    #[arg(long = "policies", value_name = "PATH", required = true)]
    pub(crate) policies: Vec<PathBuf>,

    /// Manifest to read (YAML or JSON, multi-document, `kind: List` allowed); `-` or none reads
    /// stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub(crate) files: Vec<String>,

    /// Namespace of objects and namespaced policies whose metadata names none.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "NAMESPACE",
        default_value = "default"
    )]
    pub(crate) namespace: String,

    /// Namespace of the filer injector's ConfigMaps `filers-list` and
    /// `filer-sidecar-injector-json` (StatCan deploys it in `das`).
    #[arg(long, value_name = "NAMESPACE", default_value = "das")]
    pub(crate) filer_namespace: String,

    /// Give filer sidecars the S3 keys as plain env values, as StatCan's injector does, instead of
    /// `secretKeyRef`s to the SVM's Secret (the keys are then readable in the pod spec).
    #[arg(long)]
    pub(crate) filer_plain_secrets: bool,

    /// Leave out the `outfit.dev/mutated-by` annotation that lists the policies (other than
    /// PodDefaults, which Kubeflow's own annotations record) that changed an object, as
    /// `outfit serve --no-annotation` does.
    #[arg(long)]
    pub(crate) no_annotation: bool,

    /// The requesting user to simulate (`request.userInfo.username`; a service account is
    /// `system:serviceaccount:NAMESPACE:NAME`): PodPolicies match on who the pod is for. Without
    /// it the request names no user, and policies limited to some requesters do not apply.
    #[arg(long = "user", value_name = "NAME")]
    pub(crate) user: Option<String>,

    /// A group of the simulated user (`request.userInfo.groups`). Repeatable.
    #[arg(long = "group", value_name = "NAME", requires = "user")]
    pub(crate) groups: Vec<String>,
}

/// Why an offline command stopped before printing anything (exit status 2), or could not finish
/// printing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// A policy or manifest file could not be read or parsed.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// Policies failed validation; each was reported on stderr.
    #[error("{count} invalid polic{}; nothing was mutated", if *count == 1 { "y" } else { "ies" })]
    InvalidPolicies {
        /// How many.
        count: usize,
    },
    /// Standard input could not be read.
    #[error("<stdin>: cannot read: {0}")]
    Stdin(#[source] io::Error),
    /// Standard output could not be written.
    #[error("writing output: {0}")]
    Output(#[source] io::Error),
    /// An object could not be rendered.
    #[error("rendering {format}: {message}")]
    Render {
        /// `YAML` or `JSON`.
        format: &'static str,
        /// The serializer's message.
        message: String,
    },
    /// outfit's own patch did not apply to the object it was made for: a bug.
    #[error("internal error: outfit's own patch does not apply ({0}); please report this")]
    OwnPatch(#[source] json_patch::PatchError),
}

/// The exit status of an offline command that ended with `result`: its own, or
/// [`EXIT_CLOSED_PIPE`] quietly when the reader of standard output went away, or
/// [`EXIT_BAD_INPUT`] with the error printed on stderr.
pub(crate) fn exit_status(result: Result<ExitCode, InputError>) -> ExitCode {
    match result {
        Ok(status) => status,
        Err(InputError::Output(error)) if closed_pipe(&error) => ExitCode::from(EXIT_CLOSED_PIPE),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

impl Inputs {
    /// Loads the policies, writing skipped documents, warnings and rejected policies to `stderr`;
    /// fails if any policy is rejected.
    pub(crate) fn load_policies(&self, stderr: &mut impl Write) -> Result<PolicySet, InputError> {
        let (set, rejected) = self.load_policies_reporting(stderr)?;
        if rejected.is_empty() {
            Ok(set)
        } else {
            Err(InputError::InvalidPolicies {
                count: rejected.len(),
            })
        }
    }

    /// As [`Inputs::load_policies`], but a rejected policy is left out and returned with the set
    /// rather than failing the load (`outfit explain` explains it).
    pub(crate) fn load_policies_reporting(
        &self,
        stderr: &mut impl Write,
    ) -> Result<(PolicySet, Vec<PolicyError>), InputError> {
        let documents = source::read_paths(&self.policies)?;
        let mut builder = PolicySet::builder()
            .settings(LoadSettings {
                default_namespace: self.namespace.clone(),
                filer_namespace: self.filer_namespace.clone(),
                filer_plain_secrets: self.filer_plain_secrets,
                // Files: a Secret not among them is missing.
                unreadable: Vec::new(),
            })
            .annotate(!self.no_annotation);
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
        for error in &errors {
            let _ = writeln!(stderr, "error: invalid policy: {error}");
        }
        Ok((set, errors))
    }

    /// The simulated `request.userInfo`, if `--user` is given.
    pub(crate) fn user_info(&self) -> Option<UserInfo<'_>> {
        self.user.as_deref().map(|name| UserInfo {
            username: Cow::Borrowed(name),
            groups: self.groups.iter().map(|g| Cow::Borrowed(g.as_str())).collect(),
        })
    }

    /// Reads every manifest (stdin when none is named).
    pub(crate) fn read_objects(&self) -> Result<Vec<Document>, InputError> {
        let stdin_only = ["-".to_owned()];
        let files = if self.files.is_empty() {
            &stdin_only[..]
        } else {
            &self.files
        };
        let mut objects = Vec::new();
        for file in files {
            let documents = if file == "-" {
                let mut text = String::new();
                io::stdin().read_to_string(&mut text).map_err(InputError::Stdin)?;
                document::parse_stream(&text, "<stdin>")
            } else {
                source::read_file(file.as_ref())
            };
            objects.extend(documents?);
        }
        Ok(objects)
    }
}

/// `<kind> <namespace>/<name>` for messages.
pub(crate) fn describe(object: &Document, default_namespace: &str) -> String {
    outfit_core::decision::describe(&object.value, default_namespace)
}
