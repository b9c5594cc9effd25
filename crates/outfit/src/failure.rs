//! How a command fails: the exit statuses every command shares, and why flags are refused, at the
//! bottom of the binary's modules so that each command and the daemon helpers can use them.

use std::{io::Write, process::ExitCode};

use outfit_core::{DocumentError, PolicyError};

/// Exit status for bad input: unreadable files, invalid YAML or JSON, invalid policies.
pub(crate) const EXIT_BAD_INPUT: u8 = 2;

/// Exit status when the reader of standard output went away early (`outfit manifests | head`, a
/// pager quit, a failing `kubectl apply -f -`): 128 + SIGPIPE, what a shell shows for `cat` or
/// `kubectl` ended by that signal. Nothing more is printed; a closed pipe is not an error of
/// outfit's.
pub(crate) const EXIT_CLOSED_PIPE: u8 = 141;

/// Whether a write failed because the reader of standard output went away ([`EXIT_CLOSED_PIPE`]).
pub(crate) fn closed_pipe(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::BrokenPipe
}

/// Writes `text` on standard output and ends as a Unix tool does: [`ExitCode::SUCCESS`], quietly
/// [`EXIT_CLOSED_PIPE`] when the reader went away, or status 1 with the error on stderr (a full
/// disk, say). `print!` would panic instead.
pub(crate) fn print_stdout(text: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if closed_pipe(&error) => ExitCode::from(EXIT_CLOSED_PIPE),
        Err(error) => {
            eprintln!("error: writing output: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Why a command stopped: its message and exit status.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    /// Bad input: flags, configuration, files (exit status 2).
    pub(crate) fn bad_input(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_BAD_INPUT,
            message: message.into(),
        }
    }

    /// Anything else (exit status 1).
    pub(crate) fn other(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }
}

/// Flags, or what they name, that a command cannot run with (exit status 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FlagError {
    /// `--log` is not a tracing filter.
    #[error("--log {filter:?}: {source}")]
    LogFilter {
        /// The flag's value.
        filter: String,
        /// The parser's complaint.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// No certificate to serve with.
    #[error("give --tls-cert and --tls-key, --self-signed DIR, or --tls-secret NAME (with --from-cluster)")]
    NoCertificate,
    /// A duration flag that is not a positive number of seconds.
    #[error("--{flag} must be a positive number of seconds")]
    NotSeconds {
        /// The flag, without its dashes.
        flag: &'static str,
    },
    /// A policy file named by `--policies` cannot be read or parsed.
    #[error(transparent)]
    Policies(#[from] DocumentError),
    /// A policy named by `--policies` is invalid.
    #[error("{first} ({count} policies rejected)")]
    InvalidPolicies {
        /// The first rejected.
        first: Box<PolicyError>,
        /// How many were.
        count: usize,
    },
    /// `--filers-list` names no readable `filers-list` ConfigMap.
    #[error("--filers-list {path}: {reason}")]
    FilersList {
        /// The file or directory given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--filer-svm` names an SVM whose Secret name would not be a valid object name.
    #[error(
        "--filer-svm {0:?}: its Secret's name would not be a valid object name (lowercase letters, digits, '-', '_' and '.')"
    )]
    FilerSvm(String),
    /// `--without-crds` names a group outfit installs no CRD of.
    #[error(transparent)]
    UnknownCrdGroup(#[from] outfit_k8s::crds::UnknownGroup),
    /// The policies apply to kinds whose resource names outfit cannot tell.
    #[error(transparent)]
    UnknownKinds(#[from] outfit_k8s::rules::UnknownKinds),
}

impl From<FlagError> for Failure {
    fn from(error: FlagError) -> Self {
        Failure::bad_input(error.to_string())
    }
}
