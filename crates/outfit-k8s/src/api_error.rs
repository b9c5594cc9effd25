//! API errors as a line for a person: kube's own rendering repeats the whole `Status` object.

/// `403 Forbidden: secrets "outfit-tls" is forbidden: ...` for an error the API server answered,
/// kube's message for the others (connection refused, a timeout).
pub fn brief(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} {}: {}", status.code, status.reason, status.message),
        other => other.to_string(),
    }
}

/// As [`brief`], for a failed list or watch.
pub fn brief_watch(error: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error;
    match error {
        Error::InitialListFailed(error) => format!("listing: {}", brief(error)),
        Error::WatchStartFailed(error) | Error::WatchFailed(error) => format!("watching: {}", brief(error)),
        Error::WatchError(status) => {
            format!("watching: {} {}: {}", status.code, status.reason, status.message)
        }
        Error::NoResourceVersion => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_refusal_is_one_line_without_the_status_object() {
        let status =
            kube::core::Status::failure("secrets \"outfit-tls\" is forbidden", "Forbidden").with_code(403);
        let line = brief(&kube::Error::Api(Box::new(status)));
        assert_eq!(line, "403 Forbidden: secrets \"outfit-tls\" is forbidden");
    }
}
