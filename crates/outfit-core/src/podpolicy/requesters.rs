//! A PodPolicy's `spec.match.requesters` and the Audiences it names: whether a requester is among
//! them. The verdict borrows what decided it (no allocation on the admission path); explain puts
//! it into words.

use std::fmt;

use super::identity::{Entry, Identities, Who};
use crate::vocab::FastMap;

/// An Audience's requesters: who is in it, and who is left out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Members {
    pub(crate) include: Identities,
    pub(crate) exclude: Identities,
}

impl Members {
    /// The entry that makes `who` a member, if they are one (and not excluded).
    pub(crate) fn admits<'a>(&'a self, who: &Who<'a>) -> Option<Entry<'a>> {
        if self.exclude.find(who).is_some() {
            return None;
        }
        self.include.find(who)
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

/// Why a requester is among the requesters.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Included<'a> {
    /// No requester is named: everyone is.
    Everyone,
    Entry(Entry<'a>),
    /// A member of the named Audience.
    Audience(&'a str, Entry<'a>),
}

/// Why a requester is not among the requesters.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Left<'a> {
    Excluded(Entry<'a>),
    /// A member of the named Audience, which `exclude.audiences` lists.
    ExcludedAudience(&'a str, Entry<'a>),
    /// The request names no user.
    Unknown,
    /// None of the included entries and Audiences.
    NotAmong,
}

/// The loaded Audiences' members, by name.
pub(crate) type AudienceLookup<'a> = &'a FastMap<String, Members>;

impl Requesters {
    /// Whether `who` is among the requesters.
    pub(crate) fn decide<'a>(
        &'a self,
        who: Option<&Who<'a>>,
        audiences: AudienceLookup<'a>,
    ) -> Result<Included<'a>, Left<'a>> {
        if let Some(who) = who {
            if let Some(entry) = self.exclude.find(who) {
                return Err(Left::Excluded(entry));
            }
            for name in &self.excluded_audiences {
                if let Some(entry) = audiences.get(name).and_then(|a| a.admits(who)) {
                    return Err(Left::ExcludedAudience(name, entry));
                }
            }
        }
        if self.include.is_empty() && self.audiences.is_empty() {
            return Ok(Included::Everyone);
        }
        let Some(who) = who else {
            return Err(Left::Unknown);
        };
        if let Some(entry) = self.include.find(who) {
            return Ok(Included::Entry(entry));
        }
        for name in &self.audiences {
            if let Some(entry) = audiences.get(name).and_then(|a| a.admits(who)) {
                return Ok(Included::Audience(name, entry));
            }
        }
        Err(Left::NotAmong)
    }

    /// The field and the words for `left`, as explain shows them.
    pub(crate) fn explain_left(
        &self,
        left: Left<'_>,
        who: Option<&Who<'_>>,
        audiences: AudienceLookup<'_>,
    ) -> (&'static str, String) {
        // An owner named by a provisioner comes with the groups the provisioner recorded, if any.
        let owner_without_groups =
            who.is_some_and(|w| w.owner.is_some() && w.groups.is_empty()) && !self.include.groups.is_empty();
        let who = who.map_or_else(|| "the requester".to_owned(), ToString::to_string);
        match left {
            Left::Excluded(entry) => (
                "spec.match.requesters.exclude",
                format!("{who} is excluded by {entry}"),
            ),
            Left::ExcludedAudience(name, entry) => (
                "spec.match.requesters.exclude.audiences",
                format!("{who} is excluded as a member of Audience {name} ({entry})"),
            ),
            Left::Unknown => (
                "spec.match.requesters",
                "the request names no user (with `outfit mutate` and `outfit explain`: --user, --group)"
                    .to_owned(),
            ),
            Left::NotAmong => {
                let mut detail = format!("{who} is not among {}", self.described());
                let missing: Vec<&str> = self
                    .audiences
                    .iter()
                    .map(String::as_str)
                    .filter(|name| !audiences.contains_key(*name))
                    .collect();
                if !missing.is_empty() {
                    detail.push_str(&format!(
                        "; Audience {} is not loaded (matches nobody)",
                        missing.join(", ")
                    ));
                }
                if owner_without_groups {
                    detail.push_str("; the owner named by a provisioner has no groups recorded (spec.match.owner.groupsAnnotation names where they are)");
                }
                ("spec.match.requesters", detail)
            }
        }
    }

    fn described(&self) -> String {
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

impl fmt::Display for Included<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Included::Everyone => f.write_str("every requester"),
            Included::Entry(entry) => write!(f, "{entry}"),
            Included::Audience(name, entry) => write!(f, "Audience {name} ({entry})"),
        }
    }
}
