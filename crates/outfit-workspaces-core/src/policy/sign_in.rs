//! Who may sign in, from the claims of a verified ID token (issue 42): the user named by the
//! configured claim, in the groups of the configured claim, admitted when in one of
//! `allowedGroups` and with a verified email in one of `allowedEmailDomains` (each when set).

use serde_json::{Map, Value};

use crate::model::config::Oidc;

/// The most groups a sign-in carries: they travel in the session cookie, which browsers cap at
/// 4 KiB.
pub const MAX_GROUPS: usize = 100;

/// A user the provider vouched for and outfit admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The user name (the configured claim's value).
    pub username: String,
    /// The groups (the configured claim's strings).
    pub groups: Vec<String>,
}

/// Why a verified ID token does not sign anyone in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInRefused {
    /// The user-name claim is missing or not a non-empty string.
    #[error("the ID token has no {claim:?} claim with a user name (usernameClaim)")]
    NoUsername {
        /// The configured claim.
        claim: String,
    },
    /// The groups claim is not a list of strings.
    #[error("the ID token's {claim:?} claim is not a list of group names (groupsClaim)")]
    BadGroups {
        /// The configured claim.
        claim: String,
    },
    /// More groups than a session carries.
    #[error("the ID token names {count} groups; a sign-in carries at most {MAX_GROUPS}")]
    TooManyGroups {
        /// How many.
        count: usize,
    },
    /// In none of the allowed groups.
    #[error("{username} is in none of the groups allowed to sign in (allowedGroups)")]
    NotInAllowedGroup {
        /// Who.
        username: String,
    },
    /// No verified email in an allowed domain.
    #[error("{username} has no verified email address in a domain allowed to sign in (allowedEmailDomains)")]
    EmailDomain {
        /// Who.
        username: String,
    },
}

/// The user `claims` (a verified ID token's, as JSON) sign in, or why not.
pub fn signed_in(claims: &Map<String, Value>, oidc: &Oidc) -> Result<SignedIn, SignInRefused> {
    let username = claims
        .get(&oidc.username_claim)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| SignInRefused::NoUsername {
            claim: oidc.username_claim.clone(),
        })?
        .to_owned();
    let groups = groups(claims.get(&oidc.groups_claim), &oidc.groups_claim)?;
    if !oidc.allowed_groups.is_empty() && !groups.iter().any(|g| oidc.allowed_groups.contains(g)) {
        return Err(SignInRefused::NotInAllowedGroup { username });
    }
    if !oidc.allowed_email_domains.is_empty() {
        let verified = claims.get("email_verified").and_then(Value::as_bool) == Some(true);
        let domain = claims
            .get("email")
            .and_then(Value::as_str)
            .and_then(|email| email.rsplit_once('@'))
            .map(|(_, domain)| domain.to_ascii_lowercase());
        if !verified || !domain.is_some_and(|d| oidc.allowed_email_domains.contains(&d)) {
            return Err(SignInRefused::EmailDomain { username });
        }
    }
    Ok(SignedIn { username, groups })
}

/// The groups of the claim's value: a list of strings, or one string (as some providers send a
/// single group); none when the claim is missing.
fn groups(value: Option<&Value>, claim: &str) -> Result<Vec<String>, SignInRefused> {
    let bad = || SignInRefused::BadGroups {
        claim: claim.to_owned(),
    };
    let groups: Vec<String> = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(group)) => vec![group.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad()),
    };
    if groups.len() > MAX_GROUPS {
        return Err(SignInRefused::TooManyGroups { count: groups.len() });
    }
    Ok(groups.into_iter().filter(|g| !g.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn oidc() -> Oidc {
        Oidc::example("https://w.example.org/auth/callback")
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_configured_claims_name_the_user_and_groups() {
        let given = claims(json!({"sub": "1", "preferred_username": "alice", "groups": ["gpu", "staff"]}));
        assert_eq!(
            signed_in(&given, &oidc()),
            Ok(SignedIn {
                username: "alice".to_owned(),
                groups: vec!["gpu".to_owned(), "staff".to_owned()],
            })
        );
        let by_email = Oidc {
            username_claim: "email".to_owned(),
            groups_claim: "roles".to_owned(),
            ..oidc()
        };
        let given = claims(json!({"email": "a@x.org", "roles": "admins"}));
        let user = signed_in(&given, &by_email).unwrap();
        assert_eq!(
            (user.username.as_str(), user.groups),
            ("a@x.org", vec!["admins".to_owned()])
        );
    }

    #[test]
    fn a_missing_name_or_malformed_groups_are_refused_by_claim() {
        let no_name = claims(json!({"sub": "1", "preferred_username": ""}));
        assert!(matches!(
            signed_in(&no_name, &oidc()),
            Err(SignInRefused::NoUsername { .. })
        ));
        let bad_groups = claims(json!({"preferred_username": "a", "groups": [1, 2]}));
        let error = signed_in(&bad_groups, &oidc()).unwrap_err();
        assert!(error.to_string().contains("groupsClaim"), "{error}");
        let many: Vec<String> = (0..=MAX_GROUPS).map(|i| format!("g{i}")).collect();
        let too_many = claims(json!({"preferred_username": "a", "groups": many}));
        assert!(matches!(
            signed_in(&too_many, &oidc()),
            Err(SignInRefused::TooManyGroups { .. })
        ));
    }

    #[test]
    fn allowed_groups_and_domains_admit_only_their_members() {
        let only_staff = Oidc {
            allowed_groups: vec!["staff".to_owned()],
            ..oidc()
        };
        let staff = claims(json!({"preferred_username": "a", "groups": ["staff"]}));
        let guest = claims(json!({"preferred_username": "b", "groups": ["guests"]}));
        assert!(signed_in(&staff, &only_staff).is_ok());
        assert!(matches!(
            signed_in(&guest, &only_staff),
            Err(SignInRefused::NotInAllowedGroup { .. })
        ));

        let only_dtu = Oidc {
            allowed_email_domains: vec!["dtu.dk".to_owned()],
            ..oidc()
        };
        let verified =
            claims(json!({"preferred_username": "a", "email": "a@DTU.dk", "email_verified": true}));
        let unverified =
            claims(json!({"preferred_username": "a", "email": "a@dtu.dk", "email_verified": false}));
        let elsewhere =
            claims(json!({"preferred_username": "a", "email": "a@dtu.dk.evil.org", "email_verified": true}));
        assert!(signed_in(&verified, &only_dtu).is_ok());
        for refused in [unverified, elsewhere] {
            assert!(matches!(
                signed_in(&refused, &only_dtu),
                Err(SignInRefused::EmailDomain { .. })
            ));
        }
    }
}
