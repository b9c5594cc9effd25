//! Why a request of the native API is refused, as it answers it: a [`Failure`] is
//! `{"error": "...", "reason": "..."}` with a status that says what kind it is, and a
//! [`RequestError`] becomes one by the one table of reasons and statuses ([`Failure::of`]), its
//! `IntoResponse`. deic-dk's API answers its own way (`compat.rs`), in its compatible fields.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::answer::json;
use crate::backend::RequestError;

/// A refusal of the native API: its status, reason and what was wrong; a 401 may name where to
/// sign in.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) status: StatusCode,
    pub(super) reason: &'static str,
    pub(super) message: String,
    pub(super) sign_in: Option<&'static str>,
    /// When to try again, if the refusal says (a 429's).
    pub(super) retry_after: Option<std::time::Duration>,
}

impl Failure {
    pub(super) fn new(status: StatusCode, reason: &'static str, message: impl std::fmt::Display) -> Self {
        Self {
            status,
            reason,
            message: message.to_string(),
            sign_in: None,
            retry_after: None,
        }
    }

    /// The answer to a failed operation: the status and reason of `error`, and what the caller
    /// is told of it.
    pub(super) fn of(error: &RequestError) -> Self {
        let (status, reason) = match error {
            RequestError::Refused { reason, .. } => refusal_status(reason),
            other => status_of(other),
        };
        let message = match error {
            // The catalogue's manifest URL may be internal: the log names it, the caller is told why.
            RequestError::Fetch(fetch) => {
                tracing::warn!(error = %fetch, "catalogue manifest unavailable");
                format!(
                    "the catalogue's manifest could not be fetched: {}",
                    fetch.reason()
                )
            }
            other => other.public_message(),
        };
        Self::new(status, reason, message)
    }
}

/// A refusal's body, as every refusal of the native API answers it (and `/api/v1/openapi.json`
/// describes it: its `reason`s by status, in `openapi.rs`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub(super) struct Refusal<'a> {
    /// What is wrong, in a sentence.
    pub(super) error: &'a str,
    /// What kind of refusal it is: one word, the same for the same kind (see each answer's).
    pub(super) reason: &'static str,
    /// On a 401, when the backend has sign-in with the site's OpenID provider (`oidc`): the path
    /// that begins it (`/auth/login`).
    #[serde(rename = "signIn", skip_serializing_if = "Option::is_none")]
    pub(super) sign_in: Option<&'static str>,
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = Refusal {
            error: &self.message,
            reason: self.reason,
            sign_in: self.sign_in,
        };
        let mut response = json(self.status, &body);
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up: a client that waits as told is let in.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let value = axum::http::HeaderValue::from(seconds.max(1));
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, value);
        }
        response
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        Failure::of(&self).into_response()
    }
}

/// The status and reason of every error but a refusal read back.
fn status_of(error: &RequestError) -> (StatusCode, &'static str) {
    match error {
        RequestError::User(_)
        | RequestError::Name(_)
        | RequestError::BadAddress(_)
        | RequestError::BadSharing(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        RequestError::Fetch(_) => (StatusCode::BAD_GATEWAY, "ManifestUnavailable"),
        RequestError::Manifest(_) | RequestError::Annotation(_) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "BadManifest")
        }
        RequestError::NoSuchPod { .. } => (StatusCode::NOT_FOUND, "NotFound"),
        RequestError::UnknownManifest(_) => (StatusCode::NOT_FOUND, "UnknownManifest"),
        RequestError::NamesTaken { .. } | RequestError::AlreadyDeleting(_) | RequestError::Busy(_) => {
            (StatusCode::CONFLICT, "Conflict")
        }
        RequestError::NotStoppable(_) => (StatusCode::CONFLICT, "NotStoppable"),
        RequestError::InUse(_) => (StatusCode::CONFLICT, "InUse"),
        RequestError::UnknownSnapshot(_) => (StatusCode::NOT_FOUND, "UnknownSnapshot"),
        RequestError::SnapshotNotReady(_) => (StatusCode::CONFLICT, "SnapshotNotReady"),
        RequestError::TooManyCreates(_) => (StatusCode::TOO_MANY_REQUESTS, "TooManyCreates"),
        RequestError::Forbidden(_) => (StatusCode::FORBIDDEN, "Forbidden"),
        RequestError::Limit(_) => (StatusCode::FORBIDDEN, "LimitExceeded"),
        RequestError::WrongCluster(_) => (StatusCode::BAD_REQUEST, "UnknownCluster"),
        RequestError::Unreachable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "ClusterUnreachable"),
        // The API server's verdict on what the workspace asked for (a quota passed, a policy's
        // refusal, an invalid object): the caller's to act on, with the API server's status.
        RequestError::Cluster(refused) if refused.is_forbidden() => {
            (StatusCode::FORBIDDEN, "RefusedByCluster")
        }
        RequestError::Cluster(refused) if refused.is_invalid() => {
            (StatusCode::UNPROCESSABLE_ENTITY, "RefusedByCluster")
        }
        RequestError::Refused { .. }
        | RequestError::Storage(_)
        | RequestError::StorageRefused(_)
        | RequestError::Cluster(_) => (StatusCode::INTERNAL_SERVER_ERROR, "ClusterError"),
    }
}

/// The status and reason of the controller's refusal of a start, by the reason it wrote
/// (`RequestError::condition_reason`): what the error it met answers when a request meets it.
fn refusal_status(reason: &str) -> (StatusCode, &'static str) {
    match reason {
        "UnknownEntry" => (StatusCode::NOT_FOUND, "UnknownManifest"),
        "LimitExceeded" => (StatusCode::FORBIDDEN, "LimitExceeded"),
        "WrongCluster" => (StatusCode::BAD_REQUEST, "UnknownCluster"),
        "InvalidOwner" => (StatusCode::BAD_REQUEST, "BadRequest"),
        "BadManifest" => (StatusCode::UNPROCESSABLE_ENTITY, "BadManifest"),
        "UnknownSnapshot" => (StatusCode::NOT_FOUND, "UnknownSnapshot"),
        "SnapshotNotReady" => (StatusCode::CONFLICT, "SnapshotNotReady"),
        "RefusedByCluster" => (StatusCode::FORBIDDEN, "RefusedByCluster"),
        "InvalidForCluster" => (StatusCode::UNPROCESSABLE_ENTITY, "RefusedByCluster"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "ClusterError"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start's refusal, written by the controller to the status and read back by the request,
    /// answers what the error the controller met answers when a request meets it.
    #[test]
    fn a_refusal_read_back_answers_as_the_error_it_was() {
        let errors = [
            RequestError::UnknownManifest("web".into()),
            RequestError::WrongCluster("east".into()),
            RequestError::UnknownSnapshot("s".into()),
            RequestError::SnapshotNotReady("s".into()),
            RequestError::User(
                outfit_workspaces_core::model::user::UserId::parse("no spaces allowed").unwrap_err(),
            ),
            RequestError::StorageRefused("the home could not grow".into()),
        ];
        for error in errors {
            let message = error.public_message();
            let read_back = RequestError::refused(error.condition_reason(), &message);
            let (met, refused) = (Failure::of(&error), Failure::of(&read_back));
            assert_eq!(
                (met.status, met.reason, &met.message),
                (refused.status, refused.reason, &refused.message),
                "{error:?}"
            );
        }
    }

    #[test]
    fn the_api_server_s_refusals_keep_their_status_and_failures_are_500() {
        use crate::io::fake::api_error;
        let answer = |error| Failure::of(&RequestError::Cluster(error));
        let quota = answer(api_error(
            403,
            "Forbidden",
            "creating PersistentVolumeClaim ws/home-alice",
        ));
        assert_eq!(
            (quota.status, quota.reason),
            (StatusCode::FORBIDDEN, "RefusedByCluster")
        );
        let invalid = answer(api_error(422, "Invalid", "creating Pod ws/x"));
        assert_eq!(
            (invalid.status, invalid.reason),
            (StatusCode::UNPROCESSABLE_ENTITY, "RefusedByCluster")
        );
        let failed = answer(api_error(500, "InternalError", "creating Pod ws/x"));
        assert_eq!(
            (failed.status, failed.reason),
            (StatusCode::INTERNAL_SERVER_ERROR, "ClusterError")
        );
    }
}
