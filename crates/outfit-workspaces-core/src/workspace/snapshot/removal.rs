//! What a removal of a home does about its snapshots (issue 46): the claim's use mark, which
//! says whether a pod has used the home since a snapshot was taken; and the plan of a removal
//! ([`for_removal`]): keep a ready snapshot taken since the home's last use, wait for a pending
//! one, take none past [`PENDING_CAP`] pending, prune ones never ready. Pure, as its parent.

use std::hash::Hasher;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::{State, VolumeSnapshot, named_after, of_claim};
use crate::model::keys;

/// The most snapshots of one claim a removal leaves pending: with as many not ready, a removal
/// takes no other (issue 46: 30 removals of a home whose snapshots were slow took 30).
pub const PENDING_CAP: usize = 2;

/// A claim's use mark (its [`keys::ANNOTATION_HOME_USE`]), as a snapshot of it reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeUse<'a> {
    /// Settled: written while no pod used the claim, and no pod made since.
    Settled(&'a str),
    /// A create wrote it (at that time) just before it makes a pod that mounts the claim, and has
    /// not said since that it made it: a pod may be about to use the claim.
    Making(Option<Timestamp>),
    /// A create made a pod that mounts the claim (and wrote it then): the claim is in use, or was.
    Used(Option<Timestamp>),
    /// None yet: no pod was made since marks are written (or the claim is older).
    Unmarked,
}

/// `claim`'s use mark.
pub fn home_use(claim: &PersistentVolumeClaim) -> HomeUse<'_> {
    let mark = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ANNOTATION_HOME_USE));
    let at = |rest: &str| {
        rest.split('-')
            .next()
            .and_then(|secs| secs.parse().ok())
            .and_then(|secs| Timestamp::from_second(secs).ok())
    };
    match mark {
        None => HomeUse::Unmarked,
        Some(mark) => match (mark.strip_prefix("making-"), mark.strip_prefix("used-")) {
            (Some(rest), _) => HomeUse::Making(at(rest)),
            (_, Some(rest)) => HomeUse::Used(at(rest)),
            _ => HomeUse::Settled(mark),
        },
    }
}

/// The mark a create writes on a claim, at `at`, before it makes a pod that mounts it.
pub fn making_mark(at: Timestamp, salt: u64) -> String {
    format!("making-{}-{salt:016x}", at.as_second())
}

/// The mark a create writes on a claim, at `at`, once it made a pod that mounts it.
pub fn used_mark(at: Timestamp, salt: u64) -> String {
    format!("used-{}-{salt:016x}", at.as_second())
}

/// A settled mark: written on a claim no pod uses, before a snapshot of it is taken.
pub fn settled_mark(salt: u64) -> String {
    format!("{salt:016x}")
}

/// What a removal's snapshot of `claim` is called when it carries the settled use mark
/// `home_use`: the claim, a hash of the mark, and how many of `snapshots` of the claim carry it
/// already (`-removal-0a1b2c3d4e5f6a7b-0`). Every replica that plans a removal of the home from
/// the same snapshots names it alike, so removals at once on two replicas make one: the second
/// create is refused as taken and waits for the first's (sharing within one replica, as before).
pub fn removal_name(snapshots: &[VolumeSnapshot], claim: &str, home_use: &str) -> String {
    let carrying = snapshots
        .iter()
        .filter(|s| s.claim() == Some(claim) && s.home_use() == Some(home_use))
        .count();
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(home_use.as_bytes());
    named_after(claim, &format!("-removal-{:016x}-{carrying}", hasher.finish()))
}

/// How long a claim's use mark must be left before a snapshot may settle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleAfter {
    /// After a create's [`HomeUse::Making`]: longer than a create may take to make its pod.
    pub making: std::time::Duration,
    /// After a create's [`HomeUse::Used`]: longer than a cache takes to show the pod made.
    pub used: std::time::Duration,
}

/// Whether a claim whose mark is `mark` may be marked settled at `now`, no pod using it as the
/// cache sees it: unmarked, or marked by a create longer ago than [`SettleAfter`] says (so that
/// a pod about to be made, or made but not shown yet, is not taken for none). A settled one
/// stays as it is.
pub fn may_settle(mark: HomeUse<'_>, now: Timestamp, after: SettleAfter) -> bool {
    match mark {
        HomeUse::Settled(_) => false,
        HomeUse::Unmarked => true,
        HomeUse::Making(since) => since.is_some_and(|since| older_than(since, now, after.making)),
        HomeUse::Used(since) => since.is_some_and(|since| older_than(since, now, after.used)),
    }
}

/// Whether `then` is more than `bound` before `now`.
fn older_than(then: Timestamp, now: Timestamp, bound: std::time::Duration) -> bool {
    std::time::Duration::try_from(now.duration_since(then)).is_ok_and(|age| age > bound)
}

/// What a removal of a claim does about its snapshots ([`for_removal`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RemovalPlan<'a> {
    /// Snapshots of the claim that never turned ready, older than the bound: deleted.
    pub prune: Vec<String>,
    /// Then.
    pub next: Next<'a>,
}

/// A removal's snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next<'a> {
    /// This one is ready and was taken after the home's last use: the removal keeps it.
    Keep(&'a VolumeSnapshot),
    /// This one was taken after the home's last use and is pending: the removal waits for it.
    Await(&'a VolumeSnapshot),
    /// [`PENDING_CAP`] are pending, this the newest: the removal takes no other and is refused.
    Refuse(&'a VolumeSnapshot),
    /// None fits: the removal takes one.
    Take,
}

/// What a removal of `claim` does, among `snapshots` (its owner's), at `now`. `home_use` is the
/// claim's settled use mark when no pod uses it now, else `None`.
///
/// The rule that keeps a removal from losing data: a snapshot is kept or waited for only if it
/// carries `home_use`, the claim's settled mark now. A snapshot carries a settled mark only when
/// no pod used the claim as it was taken, and every create of a pod that mounts the claim first
/// overwrites the mark ([`making_mark`], then [`used_mark`]), never settled again while a pod
/// uses the claim: the claim still carrying that snapshot's mark means no pod has used it since,
/// so the snapshot holds the home as the removal would find it. No mark, or another, and a new
/// one is taken.
///
/// Snapshots not ready (pending or failed) older than `stale_after` are pruned: they will not
/// do, and they would count against [`PENDING_CAP`] forever.
pub fn for_removal<'a>(
    snapshots: &'a [VolumeSnapshot],
    claim: &str,
    home_use: Option<&str>,
    (now, stale_after): (Timestamp, std::time::Duration),
) -> RemovalPlan<'a> {
    let stale = |s: &VolumeSnapshot| {
        s.state() != State::Ready
            && s.created()
                .is_some_and(|created| older_than(created, now, stale_after))
    };
    let (prune, live): (Vec<&VolumeSnapshot>, Vec<&VolumeSnapshot>) =
        of_claim(snapshots, claim).into_iter().partition(|s| stale(s));
    let current = |s: &VolumeSnapshot| home_use.is_some() && s.home_use() == home_use;
    let pending: Vec<&VolumeSnapshot> = live
        .iter()
        .copied()
        .filter(|s| s.state() == State::Pending)
        .collect();
    let next = if let Some(ready) = live.iter().find(|s| current(s) && s.state() == State::Ready) {
        Next::Keep(ready)
    } else if let Some(waiting) = pending.iter().find(|s| current(s)) {
        Next::Await(waiting)
    } else if let (true, Some(newest)) = (pending.len() >= PENDING_CAP, pending.first()) {
        Next::Refuse(newest)
    } else {
        Next::Take
    };
    RemovalPlan {
        prune: prune.iter().map(|s| s.name().to_owned()).collect(),
        next,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::workspace::snapshot::tests::snapshot;

    /// A snapshot of `h` asked for at `created`, carrying the use mark `mark`.
    fn marked(name: &str, created: &str, mark: Option<&str>, status: serde_json::Value) -> VolumeSnapshot {
        let mut s = snapshot(name, "h", created, status);
        if let Some(mark) = mark {
            s.metadata.annotations = Some(BTreeMap::from([(
                keys::ANNOTATION_HOME_USE.to_owned(),
                mark.to_owned(),
            )]));
        }
        s
    }

    const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

    #[test]
    fn a_removals_name_is_the_same_from_the_same_snapshots_and_new_past_each_taken() {
        let ready = json!({"readyToUse": true});
        let failed = json!({"readyToUse": false, "error": {"message": "driver"}});
        let earlier = [marked("a", "2026-11-29T10:00:00Z", Some("m1"), ready.clone())];
        let first = removal_name(&earlier, "h", "m2");
        assert_eq!(first, removal_name(&earlier, "h", "m2"), "alike on every replica");
        assert!(
            first.starts_with("h-removal-") && first.ends_with("-0"),
            "{first}"
        );
        assert_ne!(
            first,
            removal_name(&earlier, "h", "m3"),
            "another use, another name"
        );
        // One carrying the mark failed: the next is named past it.
        let taken = marked(&first, "2026-11-29T11:00:00Z", Some("m2"), failed);
        let next = removal_name(&[earlier[0].clone(), taken], "h", "m2");
        assert!(next.ends_with("-1") && next != first, "{next}");
        let long = "c".repeat(300);
        assert!(removal_name(&[], &long, "m").len() <= crate::model::names::MAX_SUBDOMAIN);
    }

    fn next_of<'a>(plan: &RemovalPlan<'a>) -> (&'static str, &'a str) {
        match plan.next {
            Next::Keep(s) => ("keep", s.name()),
            Next::Await(s) => ("await", s.name()),
            Next::Refuse(s) => ("refuse", s.name()),
            Next::Take => ("take", ""),
        }
    }

    /// Issue 46: a removal keeps a ready snapshot, or waits for a pending one, only when it
    /// carries the claim's settled mark now (no pod used the home since it was taken).
    #[test]
    fn a_removal_keeps_only_a_snapshot_taken_since_the_homes_last_use() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let ready = json!({"readyToUse": true});
        let snapshots = vec![
            marked("h-old", "2026-11-29T10:00:00Z", Some("m1"), ready.clone()),
            marked("h-new", "2026-11-29T11:59:00Z", Some("m2"), json!(null)),
            marked("h-unmarked", "2026-11-29T11:58:00Z", None, ready.clone()),
        ];
        // m1 is the mark now: h-old, ready, is kept; no pod used the home since.
        let plan = for_removal(&snapshots, "h", Some("m1"), (now, HOUR));
        assert_eq!(next_of(&plan), ("keep", "h-old"));
        // m2 is: its snapshot is pending, waited for.
        let plan = for_removal(&snapshots, "h", Some("m2"), (now, HOUR));
        assert_eq!(next_of(&plan), ("await", "h-new"));
        // Used since (another mark), or in use (none): a ready snapshot from before is not kept.
        for mark in [Some("m3"), None] {
            let plan = for_removal(&snapshots, "h", mark, (now, HOUR));
            assert_eq!(next_of(&plan), ("take", ""), "{mark:?}");
        }
        assert!(plan_prunes_nothing(&snapshots, now));
    }

    fn plan_prunes_nothing(snapshots: &[VolumeSnapshot], now: Timestamp) -> bool {
        for_removal(snapshots, "h", None, (now, HOUR)).prune.is_empty()
    }

    /// Issue 46: 30 removals of a home with slow snapshots took 30; with PENDING_CAP pending a
    /// removal takes none and names the newest, and ones never ready are pruned when stale.
    #[test]
    fn pending_snapshots_are_capped_and_stale_ones_pruned() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let snapshots = vec![
            marked("h-1", "2026-11-29T11:59:00Z", None, json!(null)),
            marked("h-2", "2026-11-29T11:59:30Z", Some("old"), json!(null)),
            marked("h-stale", "2026-11-29T10:00:00Z", Some("m"), json!(null)),
            marked(
                "h-failed",
                "2026-11-29T09:00:00Z",
                None,
                json!({"error": {"message": "x"}}),
            ),
            marked(
                "h-ready",
                "2026-11-29T09:00:00Z",
                None,
                json!({"readyToUse": true}),
            ),
        ];
        let plan = for_removal(&snapshots, "h", Some("m"), (now, HOUR));
        assert_eq!(next_of(&plan), ("refuse", "h-2"), "the newest pending is named");
        assert_eq!(
            plan.prune,
            ["h-stale", "h-failed"],
            "never ready and stale; ready ones stay"
        );
        // One pending below the cap: a removal takes one.
        let plan = for_removal(&snapshots[1..], "h", Some("m"), (now, HOUR));
        assert_eq!(next_of(&plan), ("take", ""));
        // The stale one, though current, is not waited for: it is pruned.
        assert_eq!(plan.prune, ["h-stale", "h-failed"]);
    }

    #[test]
    fn a_claims_use_mark_is_read_and_settled_only_when_safe() {
        let at: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let claim = |mark: Option<String>| -> PersistentVolumeClaim {
            let mut c = PersistentVolumeClaim::default();
            if let Some(mark) = mark {
                c.metadata.annotations = Some(BTreeMap::from([(keys::ANNOTATION_HOME_USE.to_owned(), mark)]));
            }
            c
        };
        let making = claim(Some(making_mark(at, 5)));
        assert_eq!(home_use(&making), HomeUse::Making(Some(at)));
        let used = claim(Some(used_mark(at, 5)));
        assert_eq!(home_use(&used), HomeUse::Used(Some(at)));
        let settled = claim(Some(settled_mark(5)));
        assert_eq!(home_use(&settled), HomeUse::Settled("0000000000000005"));
        assert_eq!(home_use(&claim(None)), HomeUse::Unmarked);
        let after = SettleAfter {
            making: std::time::Duration::from_secs(600),
            used: std::time::Duration::from_secs(10),
        };
        let later = |secs| at + jiff::SignedDuration::from_secs(secs);
        assert!(
            !may_settle(home_use(&used), later(5), after),
            "a cache may not show the pod yet"
        );
        assert!(may_settle(home_use(&used), later(30), after));
        assert!(
            !may_settle(home_use(&making), later(30), after),
            "a pod may be about to be made"
        );
        assert!(may_settle(home_use(&making), later(700), after));
        assert!(may_settle(HomeUse::Unmarked, at, after));
        assert!(
            !may_settle(home_use(&settled), later(700), after),
            "settled stays as it is"
        );
        assert!(
            !may_settle(HomeUse::Used(None), later(700), after),
            "a mark without a time stays"
        );
    }
}
