//! Leader election on a `coordination.k8s.io/v1` Lease, as Kubernetes' own controllers elect one
//! (client-go's `leaderelection`): the holder renews `renewTime` every few seconds; a candidate
//! takes the Lease over once its record has not changed for `leaseDurationSeconds` by the
//! candidate's own clock (so clocks that disagree do not matter); every write carries the
//! `resourceVersion` read, so of two candidates at most one wins. This module decides; the I/O is
//! the caller's.

use std::time::Duration;

/// How long a Lease holds, and how often it is renewed and retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `leaseDurationSeconds`: how long a record that stopped changing holds off other candidates.
    pub lease_duration: Duration,
    /// A holder that could not renew for this long stops acting as the leader (shorter than
    /// `lease_duration`, so it has stopped before anyone else can take over).
    pub renew_deadline: Duration,
    /// How often the holder renews and a candidate looks again.
    pub retry_period: Duration,
}

impl Default for Timing {
    /// 10 s, 7 s, 2 s: a leader that dies is replaced within 12 s.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(7),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What the Lease says, as far as the election goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// `holderIdentity`; empty or absent when released.
    pub holder: Option<String>,
    /// `renewTime`, as the API server returned it (compared, never read as a clock).
    pub renew_time: Option<String>,
    /// `leaseDurationSeconds`.
    pub lease_duration_seconds: Option<i32>,
}

/// What to do with the Lease now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// There is none: create it, held by us.
    Create,
    /// Write ourselves in as holder (it was released, expired, or is ours already: a renewal).
    Take {
        /// Whether the holder changes (a transition, counted in `leaseTransitions`).
        transition: bool,
    },
    /// Someone else holds it: wait.
    Follow {
        /// The holder.
        holder: String,
    },
}

/// The step for `me`, given the Lease (`None`: there is none) and how long its record has been
/// unchanged by our clock.
pub fn decide(lease: Option<&Record>, me: &str, unchanged_for: Duration) -> Step {
    let Some(lease) = lease else {
        return Step::Create;
    };
    match lease.holder.as_deref().filter(|h| !h.is_empty()) {
        None => Step::Take { transition: true },
        Some(holder) if holder == me => Step::Take { transition: false },
        Some(holder) => {
            let duration = lease
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(Timing::default().lease_duration, Duration::from_secs);
            if unchanged_for >= duration {
                Step::Take { transition: true }
            } else {
                Step::Follow {
                    holder: holder.to_owned(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> Record {
        Record {
            holder: Some(holder.to_owned()),
            renew_time: Some("2026-11-26T20:00:00.000000Z".to_owned()),
            lease_duration_seconds: Some(10),
        }
    }

    #[test]
    fn a_missing_lease_is_created_and_a_released_one_taken() {
        assert_eq!(decide(None, "a", Duration::ZERO), Step::Create);
        let released = Record {
            holder: Some(String::new()),
            ..held_by("b")
        };
        assert_eq!(
            decide(Some(&released), "a", Duration::ZERO),
            Step::Take { transition: true }
        );
    }

    #[test]
    fn the_holder_renews_and_the_others_wait_until_its_record_goes_stale() {
        let lease = held_by("a");
        assert_eq!(
            decide(Some(&lease), "a", Duration::from_secs(60)),
            Step::Take { transition: false }
        );
        assert_eq!(
            decide(Some(&lease), "b", Duration::from_secs(9)),
            Step::Follow { holder: "a".into() }
        );
        assert_eq!(
            decide(Some(&lease), "b", Duration::from_secs(10)),
            Step::Take { transition: true }
        );
    }

    #[test]
    fn the_renew_deadline_ends_leadership_before_anyone_can_take_over() {
        let timing = Timing::default();
        assert!(timing.renew_deadline < timing.lease_duration);
        assert!(timing.lease_duration + timing.retry_period < Duration::from_secs(15));
    }
}
