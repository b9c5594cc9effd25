//! Sign-outs every replica honours (issue 42): sessions and workspace passes live in browsers,
//! so a sign-out is recorded where every replica reads it, on one Lease of the workspace
//! namespace (`outfit-workspaces-sign-outs`), an annotation per user (keyed by a SHA-256 of the
//! name) holding when they signed out. A session or pass issued before that is refused: a
//! sign-out ends every session of the user and the passes of every workspace host at once.
//!
//! Each replica reads the Lease at most every [`REREAD_EVERY`] (one GET), so a sign-out holds
//! on every replica within that; entries older than the session lifetime are pruned at each
//! write, since no session they could end is left.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

/// The Lease that holds the sign-outs.
pub const SIGN_OUTS: &str = "outfit-workspaces-sign-outs";
/// Annotations of that Lease: `<prefix><hash of the user>` → Unix milliseconds.
const PREFIX: &str = "signed-out.outfit.dev/";
/// How often a replica reads the sign-outs again.
pub const REREAD_EVERY: Duration = Duration::from_secs(5);
/// Writes tried at most when other replicas write at the same time.
const WRITE_TRIES: usize = 5;

/// The key of `username` in the Lease's annotations.
fn key(username: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, username.as_bytes());
    let hex: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// `annotations` with `username`'s sign-out at `at` (Unix milliseconds), without the sign-outs
/// older than `kept` before it (no session they could end is left).
fn with_sign_out(annotations: &mut BTreeMap<String, String>, username: &str, at: u64, kept: Duration) {
    let oldest = at.saturating_sub(u64::try_from(kept.as_millis()).unwrap_or(u64::MAX));
    annotations.retain(|k, v| !k.starts_with(PREFIX) || v.parse::<u64>().is_ok_and(|t| t >= oldest));
    annotations.insert(key(username), at.to_string());
}

/// What a replica last read.
struct Read {
    at: Instant,
    annotations: BTreeMap<String, String>,
}

/// The sign-outs, read and written.
pub struct SignOuts {
    leases: Api<Lease>,
    /// The last reading: read by every authenticated request, written by one refresh at a time.
    read: std::sync::RwLock<Option<Read>>,
    /// Held by the one refresh under way; the others answer from the last reading meanwhile.
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SignOuts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignOuts").finish_non_exhaustive()
    }
}

impl SignOuts {
    /// The sign-outs of the workspace namespace `namespace`.
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self {
            leases: Api::namespaced(client, namespace),
            read: std::sync::RwLock::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    fn reading(&self) -> std::sync::RwLockReadGuard<'_, Option<Read>> {
        self.read
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self, read: Option<Read>) {
        *self
            .read
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = read;
    }

    /// When `username` last signed out (Unix milliseconds), as read within [`REREAD_EVERY`];
    /// `None` when they never did. The first reading is waited for; later ones are made by one
    /// request while the others answer from the last (and a failed one leaves it standing).
    pub async fn signed_out_at(&self, username: &str) -> Option<u64> {
        let stale = self
            .reading()
            .as_ref()
            .is_none_or(|r| r.at.elapsed() >= REREAD_EVERY);
        if stale {
            let first = self.reading().is_none();
            let refresh = match first {
                true => Some(self.refreshing.lock().await),
                false => self.refreshing.try_lock().ok(),
            };
            let still_stale = self
                .reading()
                .as_ref()
                .is_none_or(|r| r.at.elapsed() >= REREAD_EVERY);
            if refresh.is_some() && still_stale {
                self.refresh().await;
            }
        }
        self.reading()
            .as_ref()?
            .annotations
            .get(&key(username))?
            .parse()
            .ok()
    }

    async fn refresh(&self) {
        match self.leases.get_opt(SIGN_OUTS).await {
            Ok(lease) => {
                let annotations = lease.and_then(|l| l.metadata.annotations).unwrap_or_default();
                self.write(Some(Read {
                    at: Instant::now(),
                    annotations,
                }));
            }
            Err(error) => {
                tracing::warn!(%error, "could not read the sign-outs; the last reading stands");
                let last = self.reading().as_ref().map(|r| r.annotations.clone());
                self.write(Some(Read {
                    at: Instant::now(),
                    annotations: last.unwrap_or_default(),
                }));
            }
        }
    }

    /// Records that `username` signed out at `at` (Unix milliseconds), pruning what is older than
    /// `kept` before it; the error says why it could not be written.
    pub async fn record(&self, username: &str, at: u64, kept: Duration) -> Result<(), String> {
        for _ in 0..WRITE_TRIES {
            let found = self.leases.get_opt(SIGN_OUTS).await.map_err(|e| e.to_string())?;
            let mut lease = found.clone().unwrap_or_else(|| Lease {
                metadata: ObjectMeta {
                    name: Some(SIGN_OUTS.to_owned()),
                    ..ObjectMeta::default()
                },
                ..Lease::default()
            });
            let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
            with_sign_out(annotations, username, at, kept);
            let written = match found {
                Some(_) => {
                    self.leases
                        .replace(SIGN_OUTS, &PostParams::default(), &lease)
                        .await
                }
                None => self.leases.create(&PostParams::default(), &lease).await,
            };
            match written {
                Ok(written) => {
                    // This replica honours it at once.
                    let annotations = written.metadata.annotations.unwrap_or_default();
                    self.write(Some(Read {
                        at: Instant::now(),
                        annotations,
                    }));
                    return Ok(());
                }
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(error) => return Err(error.to_string()),
            }
        }
        Err(format!(
            "the sign-outs Lease changed {WRITE_TRIES} times while being written"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_key_is_a_valid_annotation_and_names_no_one() {
        let alice = key("alice@example.org");
        assert!(alice.starts_with(PREFIX));
        let name = alice.trim_start_matches(PREFIX);
        assert_eq!(name.len(), 32);
        assert!(name.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!alice.contains("alice"));
        assert_ne!(key("bob"), alice);
    }

    #[test]
    fn a_sign_out_is_kept_for_a_session_lifetime_and_older_ones_go() {
        let hour = Duration::from_secs(3600);
        let mut annotations = BTreeMap::from([("other.example/kept".to_owned(), "x".to_owned())]);
        with_sign_out(&mut annotations, "alice", 1_000_000_000, hour);
        // 59 minutes later alice's stays; two hours later it goes, with carol's (61 minutes
        // before that), and dave's (30 minutes before) and bob's are there.
        with_sign_out(&mut annotations, "carol", 1_000_000_000 + 59 * 60_000, hour);
        assert_eq!(
            annotations.get(&key("alice")).map(String::as_str),
            Some("1000000000")
        );
        with_sign_out(&mut annotations, "dave", 1_000_000_000 + 90 * 60_000, hour);
        with_sign_out(&mut annotations, "bob", 1_000_000_000 + 120 * 60_000, hour);
        assert!(!annotations.contains_key(&key("alice")) && !annotations.contains_key(&key("carol")));
        assert!(annotations.contains_key(&key("bob")) && annotations.contains_key(&key("dave")));
        assert!(
            annotations.contains_key("other.example/kept"),
            "others' annotations stay"
        );
    }
}
