//! User ids: deic-dk's validation rule and the names derived from an id.

use std::fmt;

use kube_core::Resource;

use crate::model::keys;

/// Why a user id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid user_id {id:?}: {reason}")]
pub struct InvalidUserId {
    /// The id as given.
    pub id: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The longest user id: the longest name made from one, its storage's when another id has taken
/// the plain name (`user-storage-<user string>-<8-digit hash>`), must stay within Kubernetes' 253.
pub const MAX_USER_ID: usize = 253 - "user-storage-".len() - "-01234567".len();

/// A validated user id such as `alice@dtu.dk`: lower-case letters and digits plus `-`, `.` and
/// `_`, at most one `@`, starting and ending with a letter or digit, at least two characters
/// (deic-dk's rule, §1.1 of the reference).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(String);

impl UserId {
    /// Validates `id`.
    pub fn parse(id: &str) -> Result<Self, InvalidUserId> {
        let fail = |reason| InvalidUserId {
            id: id.to_owned(),
            reason,
        };
        if id.len() < 2 {
            return Err(fail("shorter than 2 characters"));
        }
        // Longer ids would make names the API server refuses, after the create has begun.
        if id.len() > MAX_USER_ID {
            return Err(fail(
                "longer than 231 characters (its storage's name, user-storage-<id>-<hash>, must fit in 253)",
            ));
        }
        let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        let bytes = id.as_bytes();
        if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
            return Err(fail("must start and end with a lower-case letter or a digit"));
        }
        if bytes.iter().filter(|&&b| b == b'@').count() > 1 {
            return Err(fail("has more than one '@'"));
        }
        if !bytes
            .iter()
            .all(|&b| alnum(b) || matches!(b, b'-' | b'.' | b'_' | b'@'))
        {
            return Err(fail(
                "may hold only lower-case letters, digits, '-', '.', '_' and one '@'",
            ));
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before the `@` (deic-dk's `user` label).
    pub fn name(&self) -> &str {
        self.0.split_once('@').map_or(&self.0, |(name, _)| name)
    }

    /// The part after the `@`, empty when there is none (deic-dk's `domain` label).
    pub fn domain(&self) -> &str {
        self.0.split_once('@').map_or("", |(_, domain)| domain)
    }

    /// deic-dk's user string: every `@` and `.` replaced by `-` (`alice@dtu.dk` →
    /// `alice-dtu-dk`). Not unique: `a.b@x` and `a-b@x` give the same string.
    pub fn user_string(&self) -> String {
        self.0.replace(['@', '.'], "-")
    }
}

/// The most groups [`recorded_groups`] keeps (as many as a sign-in may carry).
pub const MAX_RECORDED_GROUPS: usize = 100;

/// `groups` as the [`keys::ANNOTATION_USER_GROUPS`] annotation holds them: one per line, the
/// first [`MAX_RECORDED_GROUPS`] only (an annotation is bounded). A group with a line break
/// could be read as two, so it is left out.
pub fn recorded_groups(groups: &[String]) -> String {
    let usable = groups
        .iter()
        .filter(|g| !g.is_empty() && !g.contains(['\n', '\r']))
        .take(MAX_RECORDED_GROUPS);
    usable.map(String::as_str).collect::<Vec<_>>().join("\n")
}

/// The exact user id an object the backend made belongs to (its `outfit.dev/user-id`
/// annotation; labels can't hold it, see [`keys::ANNOTATION_USER_ID`]).
pub fn owner_of<K: Resource>(object: &K) -> Option<&str> {
    object
        .meta()
        .annotations
        .as_ref()?
        .get(keys::ANNOTATION_USER_ID)
        .map(String::as_str)
}

/// Whether an object the backend made belongs to `user`.
pub fn belongs_to<K: Resource>(object: &K, user: &UserId) -> bool {
    owner_of(object) == Some(user.as_str())
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The owner id of the user `username`: service account `system:serviceaccount:<ns>:<name>`
/// owns as `<name>@<ns>.serviceaccount`; any other name owns as itself. Owner ids are lower-case,
/// and Kubernetes user names are case-sensitive: `Alice@x` and `ALICE@x` are two users, who would
/// share the owner id `alice@x` and each other's workspaces. So a name with an upper-case letter
/// is refused, unless `fold_case` (the config's `foldUserCase`, for a site whose identity
/// provider gives one user one name whatever its case) lower-cases it. A non-service-account name
/// in `.serviceaccount` is refused, so no one can take a service account's workspaces.
pub fn owner_id(username: &str, fold_case: bool) -> Result<UserId, String> {
    let mapped = match username.strip_prefix("system:serviceaccount:") {
        Some(rest) => {
            let (namespace, name) = rest.split_once(':').ok_or_else(|| {
                "a service account name is system:serviceaccount:<namespace>:<name>".to_owned()
            })?;
            format!("{name}@{namespace}.serviceaccount")
        }
        None if username.to_ascii_lowercase().ends_with(".serviceaccount") => {
            return Err("names ending in .serviceaccount stand for service accounts".to_owned());
        }
        None if fold_case => username.to_ascii_lowercase(),
        None if username.bytes().any(|b| b.is_ascii_uppercase()) => {
            return Err(
                "it has upper-case letters: owner ids are lower-case and user names are case-sensitive, so another user who differs only in case would share its workspaces (foldUserCase: true treats them as one, for an identity provider that does)"
                    .to_owned(),
            );
        }
        None => username.to_owned(),
    };
    UserId::parse(&mapped).map_err(|e| e.reason.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_groups_are_one_per_line_bounded_and_unambiguous() {
        let groups = |names: &[&str]| names.iter().map(|g| (*g).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            recorded_groups(&groups(&["gpu-users", "staff"])),
            "gpu-users\nstaff"
        );
        // A group that would read as two, or as none, is left out.
        assert_eq!(
            recorded_groups(&groups(&["a\ngpu-users", "", "b\r", "staff"])),
            "staff"
        );
        let many: Vec<String> = (0..=MAX_RECORDED_GROUPS).map(|i| format!("g{i}")).collect();
        assert_eq!(recorded_groups(&many).lines().count(), MAX_RECORDED_GROUPS);
        assert_eq!(recorded_groups(&[]), "");
    }

    /// deic-dk's own test vectors (util_test.go, §1.1 of the reference).
    #[test]
    fn accepts_and_refuses_as_deic_dk_does() {
        for good in ["foo", "foo@bar.baz", "foo-bar.baz@foo.bar-baz", "a1", "x_y@z"] {
            assert!(UserId::parse(good).is_ok(), "{good} should be valid");
        }
        for bad in [
            "foO@bar",
            "foo@bar@baz",
            "foo@",
            ".foo",
            "-foo",
            "foo.",
            "f",
            "",
            "a b",
        ] {
            assert!(UserId::parse(bad).is_err(), "{bad} should be invalid");
        }
    }

    #[test]
    fn splits_into_name_and_domain() {
        let id = UserId::parse("alice@dtu.dk").unwrap();
        assert_eq!((id.name(), id.domain()), ("alice", "dtu.dk"));
        assert_eq!(id.user_string(), "alice-dtu-dk");
        let bare = UserId::parse("bob").unwrap();
        assert_eq!((bare.name(), bare.domain()), ("bob", ""));
    }

    #[test]
    fn user_strings_collide_where_ids_differ() {
        let a = UserId::parse("a.b@x").unwrap();
        let b = UserId::parse("a-b@x").unwrap();
        assert_eq!(a.user_string(), b.user_string());
        assert_ne!(a, b);
    }

    #[test]
    fn ids_whose_storage_names_cannot_fit_are_refused() {
        assert_eq!(MAX_USER_ID, 231);
        assert!(UserId::parse(&"a".repeat(MAX_USER_ID)).is_ok());
        for length in [MAX_USER_ID + 1, 241, 253] {
            let error = UserId::parse(&"a".repeat(length)).unwrap_err();
            assert!(error.to_string().contains("longer than 231"), "{error}");
        }
    }

    #[test]
    fn error_names_the_id_and_the_rule() {
        let err = UserId::parse("Alice").unwrap_err().to_string();
        assert!(err.contains("\"Alice\"") && err.contains("lower-case"), "{err}");
    }

    #[test]
    fn service_accounts_own_as_name_at_namespace() {
        assert_eq!(
            owner_id("system:serviceaccount:team-a:alice", false)
                .unwrap()
                .as_str(),
            "alice@team-a.serviceaccount"
        );
        assert!(owner_id("system:serviceaccount:team-a", false).is_err());
    }

    #[test]
    fn other_names_own_as_themselves_and_upper_case_only_when_folded() {
        assert_eq!(owner_id("bob", false).unwrap().as_str(), "bob");
        assert_eq!(
            owner_id("alice@example.com", false).unwrap().as_str(),
            "alice@example.com"
        );
        // Two Kubernetes users who differ in case never share an owner id, unless the site says
        // its names are one user whatever their case.
        for name in ["Alice@Example.com", "ALICE@example.com"] {
            let refused = owner_id(name, false).unwrap_err();
            assert!(refused.starts_with("it has upper-case letters"), "{refused}");
            assert_eq!(owner_id(name, true).unwrap().as_str(), "alice@example.com");
        }
        // No one may pass as a service account.
        assert!(owner_id("alice@team-a.serviceaccount", true).is_err());
        assert!(owner_id("Alice@team-a.ServiceAccount", true).is_err());
        // Names no owner id can hold are refused, not bent into one.
        assert!(owner_id("oidc:alice", false).is_err());
        assert!(owner_id("a b", true).is_err());
    }
}
