//! Who a pod is for, and whether a PodPolicy's `requesters` include them: identity globs, the
//! requester (the request's user, or the owner a trusted provisioner names), Audiences.

use std::{borrow::Cow, fmt};

use serde_json::Value;

use crate::decision::UserInfo;

/// The prefix of a service account's username (`system:serviceaccount:<namespace>:<name>`).
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// A name pattern: `*` stands for any run of characters (none included), anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob(String);

impl Glob {
    /// Checks the pattern: not empty, no whitespace or control characters.
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Err("empty pattern".to_owned());
        }
        if let Some(c) = pattern.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("invalid pattern {pattern:?}: {c:?} is not allowed"));
        }
        Ok(Self(pattern.to_owned()))
    }

    /// A `namespace/name` pattern of a service account.
    pub(crate) fn service_account(pattern: &str) -> Result<Self, String> {
        let glob = Self::new(pattern)?;
        match pattern.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(glob)
            }
            _ => Err(format!(
                "invalid service account {pattern:?}: expected namespace/name (globs with `*` allowed)"
            )),
        }
    }

    /// Whether `candidate` matches.
    pub(crate) fn matches(&self, candidate: &str) -> bool {
        let mut parts = self.0.split('*');
        let first = parts.next().unwrap_or_default();
        let Some(mut rest) = candidate.strip_prefix(first) else {
            return false;
        };
        let parts: Vec<&str> = parts.collect();
        let Some((last, middle)) = parts.split_last() else {
            // No `*`: the whole candidate must be the pattern.
            return rest.is_empty();
        };
        for part in middle {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Users, groups and service accounts, by glob.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Identities {
    pub(crate) users: Vec<Glob>,
    pub(crate) groups: Vec<Glob>,
    pub(crate) service_accounts: Vec<Glob>,
}

impl Identities {
    pub(crate) fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty() && self.service_accounts.is_empty()
    }

    /// The entry `who` matches, in words (`group "gpu-users"`), if any.
    pub(crate) fn find(&self, who: &Who<'_>) -> Option<String> {
        if let Some(account) = who.service_account()
            && let Some(glob) = self.service_accounts.iter().find(|g| g.matches(&account))
        {
            return Some(format!("serviceAccounts {glob}"));
        }
        if let Some(glob) = self.users.iter().find(|g| g.matches(who.name)) {
            return Some(format!("users {glob}"));
        }
        who.groups.iter().find_map(|group| {
            self.groups
                .iter()
                .find(|g| g.matches(group))
                .map(|glob| format!("groups {glob} (group {group:?})"))
        })
    }
}

impl fmt::Display for Identities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lists = [
            ("users", &self.users),
            ("groups", &self.groups),
            ("serviceAccounts", &self.service_accounts),
        ];
        let mut first = true;
        for (name, globs) in lists.into_iter().filter(|(_, g)| !g.is_empty()) {
            let globs: Vec<String> = globs.iter().map(ToString::to_string).collect();
            write!(
                f,
                "{}{name} [{}]",
                if first { "" } else { ", " },
                globs.join(", ")
            )?;
            first = false;
        }
        Ok(())
    }
}

/// A PodPolicy's `spec.match.requesters`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Requesters {
    pub(crate) include: Identities,
    pub(crate) audiences: Vec<String>,
    pub(crate) exclude: Identities,
    pub(crate) excluded_audiences: Vec<String>,
}

/// Why `requesters` leave a requester out: the field and the detail.
pub(crate) type Refusal = (&'static str, String);

impl Requesters {
    /// Whether `who` is among the requesters: `Ok` with the entry that includes them, or `Err`
    /// with the field that leaves them out.
    pub(crate) fn decide<'m>(
        &self,
        who: Option<&Who<'_>>,
        audiences: impl Fn(&str) -> Option<&'m Members>,
    ) -> Result<String, Refusal> {
        if let Some(who) = who {
            if let Some(entry) = self.exclude.find(who) {
                return Err((
                    "spec.match.requesters.exclude",
                    format!("{who} is excluded by {entry}"),
                ));
            }
            for name in &self.excluded_audiences {
                if let Some(entry) = audiences(name).and_then(|a| a.admits(who)) {
                    return Err((
                        "spec.match.requesters.exclude.audiences",
                        format!("{who} is excluded as a member of Audience {name} ({entry})"),
                    ));
                }
            }
        }
        if self.include.is_empty() && self.audiences.is_empty() {
            return Ok("every requester".to_owned());
        }
        let Some(who) = who else {
            return Err((
                "spec.match.requesters",
                "the request names no user (with `outfit mutate` and `outfit explain`: --user, --group)"
                    .to_owned(),
            ));
        };
        if let Some(entry) = self.include.find(who) {
            return Ok(format!("{who} matches {entry}"));
        }
        let mut missing = Vec::new();
        for name in &self.audiences {
            match audiences(name) {
                Some(audience) => {
                    if let Some(entry) = audience.admits(who) {
                        return Ok(format!("{who} is a member of Audience {name} ({entry})"));
                    }
                }
                None => missing.push(name.as_str()),
            }
        }
        let mut detail = format!("{who} is not among {}", self.describe_included());
        if !missing.is_empty() {
            detail.push_str(&format!(
                "; Audience {} is not loaded (matches nobody)",
                missing.join(", ")
            ));
        }
        if who.owner.is_some() && self.include.users.is_empty() && self.audiences.is_empty() {
            detail.push_str(
                "; an owner named by a provisioner has no groups: list owners in users or an Audience",
            );
        }
        Err(("spec.match.requesters", detail))
    }

    fn describe_included(&self) -> String {
        let mut parts = Vec::new();
        if !self.include.is_empty() {
            parts.push(self.include.to_string());
        }
        if !self.audiences.is_empty() {
            parts.push(format!("audiences [{}]", self.audiences.join(", ")));
        }
        parts.join(", ")
    }
}

/// An Audience's requesters: who is in it, and who is left out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Members {
    pub(crate) include: Identities,
    pub(crate) exclude: Identities,
}

impl Members {
    /// The entry that makes `who` a member, if they are one (and not excluded).
    pub(crate) fn admits(&self, who: &Who<'_>) -> Option<String> {
        if self.exclude.find(who).is_some() {
            return None;
        }
        self.include.find(who)
    }
}

/// Where a pod records the user it is for, and who is trusted to say so.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Owner {
    pub(crate) field: OwnerField,
    /// The identities whose requests may name an owner (a provisioner's service account).
    pub(crate) provisioners: Identities,
}

/// The label or annotation holding the owner's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnerField {
    Label(String),
    Annotation(String),
}

impl OwnerField {
    /// The owner's name on a pod's metadata, if set and not empty.
    pub(crate) fn read<'a>(&self, metadata: Option<&'a Value>) -> Option<&'a str> {
        let (map, key) = match self {
            OwnerField::Label(key) => ("labels", key),
            OwnerField::Annotation(key) => ("annotations", key),
        };
        metadata?
            .get(map)?
            .get(key)?
            .as_str()
            .filter(|name| !name.is_empty())
    }
}

impl fmt::Display for OwnerField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OwnerField::Label(key) => write!(f, "label {key}"),
            OwnerField::Annotation(key) => write!(f, "annotation {key}"),
        }
    }
}

/// The requester a PodPolicy matches: the request's user, or the owner a provisioner names.
#[derive(Debug, Clone)]
pub(crate) struct Who<'a> {
    pub(crate) name: &'a str,
    pub(crate) groups: &'a [Cow<'a, str>],
    /// Set when `name` is the owner recorded on the pod: the field, and the provisioner.
    pub(crate) owner: Option<(String, &'a str)>,
}

impl<'a> Who<'a> {
    /// The request's user.
    pub(crate) fn user(user: &'a UserInfo<'a>) -> Self {
        Self {
            name: &user.username,
            groups: &user.groups,
            owner: None,
        }
    }

    /// `namespace/name` when the requester is a service account.
    fn service_account(&self) -> Option<String> {
        if self.owner.is_some() {
            return None;
        }
        let (namespace, name) = self.name.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')?;
        Some(format!("{namespace}/{name}"))
    }
}

impl fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.owner {
            Some((field, provisioner)) => write!(
                f,
                "owner {:?} ({field}, trusted from provisioner {provisioner:?})",
                self.name
            ),
            None if self.groups.is_empty() => write!(f, "user {:?}", self.name),
            None => {
                let groups: Vec<&str> = self.groups.iter().map(|g| &**g).collect();
                write!(f, "user {:?} (groups {})", self.name, groups.join(", "))
            }
        }
    }
}

/// Who the pod is for under `owner`: the owner the pod names when a provisioner sent it, else the
/// request's user. The second value says why an owner the pod names was not trusted.
pub(crate) fn requester<'a>(
    owner: Option<&Owner>,
    user: Option<&'a UserInfo<'a>>,
    metadata: Option<&'a Value>,
) -> (Option<Who<'a>>, Option<String>) {
    let real = user.map(Who::user);
    let Some(owner) = owner else {
        return (real, None);
    };
    let named = owner.field.read(metadata);
    match (real, named) {
        (Some(real), Some(name)) => match owner.provisioners.find(&real) {
            Some(_) => {
                let who = Who {
                    name,
                    groups: &[],
                    owner: Some((owner.field.to_string(), real.name)),
                };
                (Some(who), None)
            }
            None => {
                let why = format!(
                    "the pod's owner {} = {name:?} is not trusted: {real} is not among the provisioners ({})",
                    owner.field, owner.provisioners
                );
                (Some(real), Some(why))
            }
        },
        (None, Some(name)) => (
            None,
            Some(format!(
                "the pod's owner {} = {name:?} is not trusted: the request names no user",
                owner.field
            )),
        ),
        (real, None) => (real, None),
    }
}
