//! How an admission request ended: the `outcome` label that [`Metrics`](super::Metrics) counts by
//! and the sharded admission cells index their counters with. It sits below both, so the metrics
//! module and its `admission` submodule each import it and not each other.

/// How an admission request ended, the `outcome` label of `outfit_admission_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Allowed without a patch.
    Allowed,
    /// Allowed with a patch.
    Mutated,
    /// Denied (`allowed: false`).
    Denied,
    /// HTTP 400: not JSON, or not an `admission.k8s.io/v1` AdmissionReview.
    BadRequest,
    /// HTTP 413: the body is over the limit.
    TooLarge,
    /// HTTP 408: the body did not arrive in time.
    Timeout,
    /// HTTP 404 or 405: another path or method.
    NotFound,
    /// HTTP 503: a large body found the memory for large reviews taken until its deadline.
    Busy,
}

impl RequestOutcome {
    pub(super) const ALL: [RequestOutcome; 8] = [
        Self::Allowed,
        Self::Mutated,
        Self::Denied,
        Self::BadRequest,
        Self::TooLarge,
        Self::Timeout,
        Self::NotFound,
        Self::Busy,
    ];

    /// Its position in [`RequestOutcome::ALL`].
    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Mutated => "mutated",
            Self::Denied => "denied",
            Self::BadRequest => "bad_request",
            Self::TooLarge => "too_large",
            Self::Timeout => "timeout",
            Self::NotFound => "not_found",
            Self::Busy => "busy",
        }
    }
}
