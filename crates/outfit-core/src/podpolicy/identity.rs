//! Who a pod is for: identity globs, the requester (the request's user, or the owner a trusted
//! provisioner names on the pod), and which entry of a list of identities matches them. Matching
//! allocates nothing: what matched is returned as references, put into words only by explain.

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

    /// A `namespace/name` pattern of a service account (globs on either side).
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
        glob_matches(&self.0, candidate)
    }

    /// Whether a service account matches a `namespace/name` pattern.
    fn matches_account(&self, namespace: &str, name: &str) -> bool {
        self.0
            .split_once('/')
            .is_some_and(|(ns, n)| glob_matches(ns, namespace) && glob_matches(n, name))
    }
}

fn glob_matches(pattern: &str, candidate: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = candidate.strip_prefix(first) else {
        return false;
    };
    let Some(mut last) = parts.next() else {
        // No `*`: the whole candidate must be the pattern.
        return rest.is_empty();
    };
    for part in parts {
        // `last` is a middle part: find it, leftmost, and go on after it.
        match rest.find(last) {
            Some(at) => rest = &rest[at + last.len()..],
            None => return false,
        }
        last = part;
    }
    rest.ends_with(last)
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

/// The entry of an [`Identities`] a requester matched.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'a> {
    User(&'a Glob),
    /// The glob, and the requester's group it matched.
    Group(&'a Glob, &'a str),
    ServiceAccount(&'a Glob),
}

impl fmt::Display for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::User(glob) => write!(f, "users {glob}"),
            Entry::Group(glob, group) if glob.0 == *group => write!(f, "groups {glob}"),
            Entry::Group(glob, group) => write!(f, "groups {glob} (group {group:?})"),
            Entry::ServiceAccount(glob) => write!(f, "serviceAccounts {glob}"),
        }
    }
}

impl Identities {
    pub(crate) fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty() && self.service_accounts.is_empty()
    }

    /// The entry `who` matches, if any.
    pub(crate) fn find<'a>(&'a self, who: &Who<'a>) -> Option<Entry<'a>> {
        if let Some((namespace, name)) = who.service_account()
            && let Some(glob) = self
                .service_accounts
                .iter()
                .find(|g| g.matches_account(namespace, name))
        {
            return Some(Entry::ServiceAccount(glob));
        }
        if let Some(glob) = self.users.iter().find(|g| g.matches(who.name)) {
            return Some(Entry::User(glob));
        }
        who.groups.iter().find_map(|group| {
            self.groups
                .iter()
                .find(|g| g.matches(group))
                .map(|glob| Entry::Group(glob, group))
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

/// Where a pod records the user it is for, and who is trusted to say so.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Owner {
    pub(crate) field: OwnerField,
    /// The annotation holding the owner's groups, one per line (`groupsAnnotation`).
    pub(crate) groups: Option<String>,
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

/// A requester's groups: the request's (`userInfo.groups`), or those a trusted provisioner
/// recorded on the pod for its owner, one per line (read where they are, not copied).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Groups<'a> {
    Request(&'a [Cow<'a, str>]),
    Recorded(&'a str),
}

impl<'a> Groups<'a> {
    pub(crate) fn iter(self) -> impl Iterator<Item = &'a str> {
        let (request, recorded) = match self {
            Groups::Request(groups) => (groups, ""),
            Groups::Recorded(lines) => (&[][..], lines),
        };
        // Exact, as the request's groups are: only empty lines are skipped.
        let recorded = recorded.lines().filter(|g| !g.is_empty());
        request.iter().map(|g| &**g).chain(recorded)
    }

    pub(crate) fn is_empty(self) -> bool {
        self.iter().next().is_none()
    }
}

/// The requester a PodPolicy matches: the request's user, or the owner a provisioner names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Who<'a> {
    pub(crate) name: &'a str,
    pub(crate) groups: Groups<'a>,
    /// Set when `name` is the owner recorded on the pod: the field, and the provisioner.
    pub(crate) owner: Option<(&'a OwnerField, &'a str)>,
}

impl<'a> Who<'a> {
    /// The request's user.
    pub(crate) fn user(user: &'a UserInfo<'a>) -> Self {
        Self {
            name: &user.username,
            groups: Groups::Request(&user.groups),
            owner: None,
        }
    }

    /// Namespace and name when the requester is a service account (an owner never is).
    fn service_account(&self) -> Option<(&'a str, &'a str)> {
        if self.owner.is_some() {
            return None;
        }
        self.name.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')
    }
}

impl fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let groups: Vec<&str> = self.groups.iter().collect();
        let groups = match groups.is_empty() {
            true => String::new(),
            false => format!("groups {}", groups.join(", ")),
        };
        match self.owner {
            Some((field, provisioner)) => {
                let groups = if groups.is_empty() {
                    groups
                } else {
                    format!("{groups}; ")
                };
                write!(
                    f,
                    "owner {:?} ({groups}{field}, trusted from provisioner {provisioner:?})",
                    self.name
                )
            }
            None if groups.is_empty() => write!(f, "user {:?}", self.name),
            None => write!(f, "user {:?} ({groups})", self.name),
        }
    }
}

/// An owner the pod names, not taken: who sent the pod (`None`: nobody known) is no provisioner.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Untrusted<'a> {
    owner: &'a Owner,
    named: &'a str,
    sender: Option<Who<'a>>,
}

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Untrusted { owner, named, sender } = self;
        write!(f, "the pod's owner {} = {named:?} is not trusted: ", owner.field)?;
        match sender {
            Some(sender) => write!(
                f,
                "{sender} is not among the provisioners ({})",
                owner.provisioners
            ),
            None => f.write_str("the request names no user"),
        }
    }
}

/// Who the pod is for under `owner`: the owner the pod names when a provisioner sent it, else the
/// request's user; and the owner the pod names that was not trusted, if any.
pub(crate) fn requester<'a>(
    owner: Option<&'a Owner>,
    user: Option<&'a UserInfo<'a>>,
    metadata: Option<&'a Value>,
) -> (Option<Who<'a>>, Option<Untrusted<'a>>) {
    let real = user.map(Who::user);
    let Some(owner) = owner else {
        return (real, None);
    };
    let Some(named) = owner.field.read(metadata) else {
        return (real, None);
    };
    match real {
        Some(sender) if owner.provisioners.find(&sender).is_some() => {
            let recorded = owner.groups.as_ref().and_then(|key| {
                let annotations = metadata?.get("annotations")?;
                annotations.get(key)?.as_str()
            });
            let who = Who {
                name: named,
                groups: Groups::Recorded(recorded.unwrap_or_default()),
                owner: Some((&owner.field, sender.name)),
            };
            (Some(who), None)
        }
        sender => (sender, Some(Untrusted { owner, named, sender })),
    }
}
