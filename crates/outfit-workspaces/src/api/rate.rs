//! Each user's pace on the native API (issue 46, point 4): a token bucket per user, refilled at
//! `requestsPerUserPerSecond` up to `requestBurstPerUser`. A user past it is answered 429 with
//! how long to wait, before the request reaches the backend or the API server, so that a few
//! callers can't take the backend's share of the API server (its one priority-and-fairness flow)
//! from the others. A bucket that has filled up again says nothing a new one wouldn't, so it is
//! let go: memory follows the users who called within the last few seconds.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Users tracked at once before the full buckets are let go; past it even after that (as many
/// users calling within a burst's refill), a request is let through untracked rather than refused.
const MAX_TRACKED: usize = 100_000;

/// Every user's bucket, shared by every connection.
#[derive(Debug)]
pub struct UserRates {
    buckets: Mutex<HashMap<String, Bucket>>,
    per_second: f64,
    burst: f64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// The tokens at `now`, refilled since `at`.
    fn tokens_at(self, now: Instant, per_second: f64, burst: f64) -> f64 {
        let refilled = now.saturating_duration_since(self.at).as_secs_f64() * per_second;
        (self.tokens + refilled).min(burst)
    }
}

impl UserRates {
    /// `per_second` requests a second for each user, `burst` at once after a quiet spell.
    pub fn new(per_second: usize, burst: usize) -> Self {
        Self {
            buckets: Mutex::default(),
            per_second: per_second as f64,
            burst: burst as f64,
        }
    }

    /// One request of `user` at `now`, or how long until the user may make one.
    pub(super) fn take(&self, user: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(user) {
            let (per_second, burst) = (self.per_second, self.burst);
            buckets.retain(|_, bucket| bucket.tokens_at(now, per_second, burst) < burst);
            if buckets.len() >= MAX_TRACKED {
                return Ok(());
            }
        }
        // Looked up by `&str` first: the user's name is copied only for their first bucket.
        if !buckets.contains_key(user) {
            let full = Bucket {
                tokens: self.burst,
                at: now,
            };
            buckets.insert(user.to_owned(), full);
        }
        let bucket = buckets.get_mut(user).expect("inserted above");
        let tokens = bucket.tokens_at(now, self.per_second, self.burst);
        if tokens < 1.0 {
            let wait = (1.0 - tokens) / self.per_second;
            return Err(Duration::from_secs_f64(wait));
        }
        *bucket = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        Ok(())
    }

    /// Users tracked (tests).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.buckets.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_gets_the_burst_then_the_rate_and_others_are_not_held() {
        let rates = UserRates::new(10, 20);
        let start = Instant::now();
        for i in 0..20 {
            assert_eq!(rates.take("mallory", start), Ok(()), "request {i} of the burst");
        }
        let wait = rates.take("mallory", start).unwrap_err();
        assert!(
            wait > Duration::from_millis(90) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        // Another user is not held by mallory's pace.
        assert_eq!(rates.take("alice", start), Ok(()));
        // A tenth of a second later, one more; not two.
        let later = start + Duration::from_millis(100);
        assert_eq!(rates.take("mallory", later), Ok(()));
        assert!(rates.take("mallory", later).is_err());
        // A quiet spell gives the burst back, never more.
        let quiet = start + Duration::from_secs(60);
        let taken = (0..30).filter(|_| rates.take("mallory", quiet).is_ok()).count();
        assert_eq!(taken, 20);
    }

    #[test]
    fn full_buckets_are_let_go_at_the_cap() {
        let rates = UserRates::new(1000, 1);
        let start = Instant::now();
        for user in 0..MAX_TRACKED {
            rates.take(&format!("u{user}"), start).unwrap();
        }
        assert_eq!(rates.tracked(), MAX_TRACKED);
        // A millisecond later every bucket is full again: the next new user lets them go.
        let later = start + Duration::from_millis(1);
        rates.take("newcomer", later).unwrap();
        assert_eq!(rates.tracked(), 1);
    }
}
