//! How a command fails: the exit statuses every command shares, at the bottom of the binary's
//! modules so that each command and the daemon helpers can use them.

/// Exit status for bad input: unreadable files, invalid YAML or JSON, invalid policies.
pub(crate) const EXIT_BAD_INPUT: u8 = 2;

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
