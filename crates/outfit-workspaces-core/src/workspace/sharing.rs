//! Who besides its owner and the admins may open a workspace through the workspace proxy
//! (issue 42), as Coder's sharing levels: `owner` (no one else, the default), named `users` and
//! `groups`, every signed-in user (`authenticated`), or anyone at all (`public`). Kept on the
//! Workspace as an annotation, set by its owner or an admin.

use serde::{Deserialize, Serialize};

use crate::model::user::UserId;

/// The most users, and the most groups, a workspace is shared with by name.
pub const MAX_NAMED: usize = 100;

/// How widely a workspace is shared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Level {
    /// Its owner, and those named.
    #[default]
    Owner,
    /// Every signed-in user.
    Authenticated,
    /// Anyone, signed in or not.
    Public,
}

/// A workspace's sharing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Sharing {
    /// How widely.
    #[serde(default)]
    pub level: Level,
    /// Users (owner ids) who may open it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub users: Vec<String>,
    /// Groups whose members may open it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub groups: Vec<String>,
}

impl Sharing {
    /// Why it can't be set, naming the field, if it can't.
    pub fn check(&self) -> Result<(), String> {
        for (field, names) in [("users", &self.users), ("groups", &self.groups)] {
            if names.len() > MAX_NAMED {
                return Err(format!("{field}: {} names; at most {MAX_NAMED}", names.len()));
            }
        }
        for user in &self.users {
            UserId::parse(user).map_err(|e| format!("users: {user:?}: {}", e.reason))?;
        }
        if let Some(group) = self.groups.iter().find(|g| g.is_empty() || g.len() > 256) {
            return Err(format!(
                "groups: {group:?} is not a group name (1 to 256 characters)"
            ));
        }
        Ok(())
    }

    /// Whether someone who is not the owner nor an admin may open the workspace: `caller` is
    /// the signed-in user's owner id and groups, `None` when nobody is signed in.
    pub fn lets_in(&self, caller: Option<(&str, &[String])>) -> bool {
        match (self.level, caller) {
            (Level::Public, _) | (Level::Authenticated, Some(_)) => true,
            (_, Some((user, groups))) => {
                self.users.iter().any(|u| u == user) || groups.iter().any(|g| self.groups.contains(g))
            }
            (_, None) => false,
        }
    }

    /// The sharing an annotation's text says; only the owner when there is none, or when it is
    /// not one (a hand-edited annotation shares nothing it does not clearly say).
    pub fn of_annotation(text: Option<&str>) -> Self {
        text.and_then(|t| serde_json::from_str::<Sharing>(t).ok())
            .filter(|s| s.check().is_ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_lets_in_whom_it_says() {
        let staff = ["staff".to_owned()];
        let named = Sharing {
            users: vec!["bob".to_owned()],
            groups: vec!["staff".to_owned()],
            ..Sharing::default()
        };
        assert!(named.lets_in(Some(("bob", &[]))));
        assert!(named.lets_in(Some(("carol", &staff))));
        assert!(!named.lets_in(Some(("carol", &[]))));
        assert!(!named.lets_in(None));
        let everyone = Sharing {
            level: Level::Authenticated,
            ..Sharing::default()
        };
        assert!(everyone.lets_in(Some(("carol", &[]))) && !everyone.lets_in(None));
        let public = Sharing {
            level: Level::Public,
            ..Sharing::default()
        };
        assert!(public.lets_in(None));
        assert!(!Sharing::default().lets_in(Some(("carol", &staff))));
    }

    #[test]
    fn bad_names_are_refused_and_a_bad_annotation_shares_nothing() {
        let bad_user = Sharing {
            users: vec!["Not Valid".to_owned()],
            ..Sharing::default()
        };
        assert!(bad_user.check().unwrap_err().starts_with("users"));
        let many = Sharing {
            groups: vec!["g".to_owned(); MAX_NAMED + 1],
            ..Sharing::default()
        };
        assert!(many.check().unwrap_err().starts_with("groups"));
        assert_eq!(
            Sharing::of_annotation(Some(r#"{"level":"public","extra":1}"#)),
            Sharing::default()
        );
        assert_eq!(Sharing::of_annotation(Some("not json")), Sharing::default());
        let public = Sharing::of_annotation(Some(r#"{"level":"public"}"#));
        assert_eq!(public.level, Level::Public);
    }
}
