//! Object names: deic-dk's where they fit Kubernetes' limits, shortened with a stable hash where
//! they would not (deic-dk lets the API server refuse them, or ignores the error).

use std::hash::Hasher;

#[cfg(test)]
use crate::model::user::MAX_USER_ID;
use crate::model::user::UserId;

/// The longest DNS label: pod hostnames, Service names, Ingress host labels, label values.
pub const MAX_LABEL: usize = 63;
/// The longest DNS subdomain: the names of most objects, NetworkPolicies among them.
pub const MAX_SUBDOMAIN: usize = 253;
/// The longest suffix the backend adds to a pod's name for its objects (`-ingress`).
const LONGEST_OBJECT_SUFFIX: usize = "-ingress".len();
/// The longest pod name: room is left for the longest suffix of the pod's objects (a Workspace's
/// name is its pod's, so the same bound holds there).
pub const MAX_POD_NAME: usize = MAX_LABEL - LONGEST_OBJECT_SUFFIX;
/// The longest suffix a numbered retry adds (`-9`).
const RETRY_SUFFIX: usize = 2;
/// The longest first name a create tries, leaving room for a retry's suffix.
const MAX_BASE: usize = MAX_POD_NAME - RETRY_SUFFIX;
/// How many names a create tries: the base, then `-1` … `-9`, as deic-dk does.
pub const NAME_ATTEMPTS: usize = 10;

/// Why a name from a request can't be a workspace's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a workspace name: {reason}")]
pub struct InvalidName {
    /// The name as given (its head, when long).
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Checks that `name`, from a request, is a DNS-1123 label (every pod name the backend gives is
/// one) before it goes into an API server URL, where `?`, `/` or `..` would change the request.
pub fn check_pod_name(name: &str) -> Result<(), InvalidName> {
    let fail = |reason| InvalidName {
        name: name.chars().take(MAX_LABEL + 1).collect(),
        reason,
    };
    if name.is_empty() || name.len() > MAX_LABEL {
        return Err(fail("a name has 1 to 63 characters"));
    }
    let bytes = name.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.iter().all(|&b| alnum(b) || b == b'-') {
        return Err(fail("a name holds only lower-case letters, digits and '-'"));
    }
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(fail("a name starts and ends with a lower-case letter or a digit"));
    }
    Ok(())
}

/// `name` itself when it has at most `max` bytes, else its head and an 8-digit hash of the whole,
/// so that two long names sharing a head stay apart and the same name always maps the same way.
pub fn fit(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(name.as_bytes());
    let hash = format!("{:08x}", hasher.finish() as u32);
    let mut head_len = max.saturating_sub(hash.len() + 1);
    while !name.is_char_boundary(head_len) {
        head_len -= 1;
    }
    let head = name[..head_len].trim_end_matches(['-', '.', '_']);
    format!("{head}-{hash}")
}

/// `text` made fit for a DNS name: lower-case letters, digits and `-` (deic-dk's user string may
/// hold `_`, which the API server refuses in names).
pub fn dns_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The names a create tries for a pod from manifest `manifest_name` for `user`, in order:
/// `<manifest name>-<user string>`, then with `-1` … `-9`. Each leaves room for the suffixes of
/// the pod's Services and Ingress within 63 characters.
pub fn pod_name_candidates(manifest_name: &str, user: &UserId) -> Vec<String> {
    let base = dns_safe(&format!("{manifest_name}-{}", user.user_string()));
    let base = fit(&base, MAX_BASE);
    std::iter::once(base.clone())
        .chain((1..NAME_ATTEMPTS).map(|i| format!("{base}-{i}")))
        .collect()
}

/// The names a create tries for `user` when deic-dk's ([`pod_name_candidates`]) are held by
/// other users whose ids give the same user string (`a.b@x`, `a-b@x`): the same base, shortened,
/// with a hash of the exact id, then with `-1` … `-9`. No other id gives these names, so no one can
/// take them all from the user.
pub fn own_pod_name_candidates(manifest_name: &str, user: &UserId) -> Vec<String> {
    let hash = id_hash(user);
    let base = dns_safe(&format!("{manifest_name}-{}", user.user_string()));
    let room = MAX_BASE - hash.len() - 1;
    let head = fit(&base, room);
    let base = format!("{}-{hash}", head.trim_end_matches('-'));
    std::iter::once(base.clone())
        .chain((1..NAME_ATTEMPTS).map(|i| format!("{base}-{i}")))
        .collect()
}

/// Whether a launch for `user` could have given a workspace the name `name`: one of
/// [`pod_name_candidates`] or [`own_pod_name_candidates`] of some manifest. `false` means no
/// workspace of that name is the user's, whatever an API server holds, so a request of theirs for
/// it is answered without asking one (issue 46). A shortened name (`<head>-<hash of the whole>`)
/// may be anyone's: a manifest name of 43 characters or more leaves nothing of the user in it.
pub fn may_be_named_for(name: &str, user: &UserId) -> bool {
    let retry = name
        .strip_suffix(|c: char| matches!(c, '1'..='9'))
        .and_then(|head| head.strip_suffix('-'));
    std::iter::once(name)
        .chain(retry)
        .any(|base| may_be_base_for(base, user))
}

/// Whether `base` is the first of a user's candidates ([`may_be_named_for`] without a retry's `-N`).
fn may_be_base_for(base: &str, user: &UserId) -> bool {
    if base.len() > MAX_BASE {
        return false;
    }
    // The user's own names end in the hash of their exact id; deic-dk's, whole, in their user
    // string; shortened, in a hash.
    let own = format!("-{}", id_hash(user));
    let user_part = format!("-{}", dns_safe(&user.user_string()));
    let ends_in = |suffix: &str| base.len() > suffix.len() && base.ends_with(suffix);
    ends_in(&own) || ends_in(&user_part) || is_shortened(base)
}

/// Whether `name` has the shape of one [`fit`] shortened: `<head>-<8 hex digits>`.
fn is_shortened(name: &str) -> bool {
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    name.rsplit_once('-')
        .is_some_and(|(head, hash)| !head.is_empty() && hash.len() == 8 && hash.chars().all(hex))
}

/// An 8-digit hash of the exact user id.
fn id_hash(user: &UserId) -> String {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(user.as_str().as_bytes());
    format!("{:08x}", hasher.finish() as u32)
}

/// The ssh NodePort Service of a pod.
pub fn ssh_service(pod: &str) -> String {
    format!("{pod}-ssh")
}

/// The http Service of a pod.
pub fn http_service(pod: &str) -> String {
    format!("{pod}-http")
}

/// The Ingress of a pod.
pub fn ingress(pod: &str) -> String {
    format!("{pod}-ingress")
}

/// The NetworkPolicy of a pod: `<pod>-isolation`. Its name is a DNS subdomain (up to 253
/// characters), not a label, so it needs none of the room the Service suffixes leave.
pub fn network_policy(pod: &str) -> String {
    fit(&format!("{pod}-isolation"), MAX_SUBDOMAIN)
}

/// deic-dk's name for a user's PV and PVC: `user-storage-<user string>`. Two users can share a
/// user string; [`storage_name_for`] gives the second one a name of its own.
pub fn storage_name(user: &UserId) -> String {
    dns_safe(&format!("user-storage-{}", user.user_string()))
}

/// The claim of workspace `name`'s home under `storageStrategy: per-workspace`.
pub fn home_claim(name: &str) -> String {
    format!("{name}-home")
}

/// The storage name of `user` when deic-dk's name is taken by another user: the same name with a
/// hash of the exact id.
pub fn storage_name_for(user: &UserId) -> String {
    format!("{}-{}", storage_name(user), id_hash(user))
}

/// The PVC deic-dk generates for a `local` volumeMount: `local-claim-<mountPath with / as ->`.
pub fn local_claim(mount_path: &str) -> String {
    format!("local-claim-{}", mount_path.replace('/', "-"))
}

/// A label value: at most 63 characters.
pub fn label_value(text: &str) -> String {
    fit(text, MAX_LABEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    #[test]
    fn short_names_are_deic_dks() {
        let names = pod_name_candidates("jupyter", &user("alice@dtu.dk"));
        assert_eq!(names.len(), 10);
        assert_eq!(names[0], "jupyter-alice-dtu-dk");
        assert_eq!(names[1], "jupyter-alice-dtu-dk-1");
        assert_eq!(names[9], "jupyter-alice-dtu-dk-9");
        assert_eq!(ssh_service(&names[0]), "jupyter-alice-dtu-dk-ssh");
        assert_eq!(storage_name(&user("alice@dtu.dk")), "user-storage-alice-dtu-dk");
    }

    #[test]
    fn long_names_fit_every_object_within_63() {
        let long = user(&format!("{}@{}.example.org", "a".repeat(40), "b".repeat(30)));
        for name in pod_name_candidates("jupyter-sciencedata", &long) {
            for object in [
                ingress(&name),
                http_service(&name),
                ssh_service(&name),
                name.clone(),
            ] {
                assert!(object.len() <= MAX_LABEL, "{object} has {} chars", object.len());
            }
        }
        let names = pod_name_candidates("jupyter-sciencedata", &long);
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
    }

    #[test]
    fn network_policies_are_named_after_their_pod_within_253() {
        assert_eq!(
            network_policy("jupyter-alice-dtu-dk"),
            "jupyter-alice-dtu-dk-isolation"
        );
        let long = user(&format!("{}@{}.example.org", "a".repeat(40), "b".repeat(30)));
        for name in pod_name_candidates("jupyter-sciencedata", &long) {
            assert_eq!(network_policy(&name), format!("{name}-isolation"));
        }
        let huge = "p".repeat(300);
        let fitted = network_policy(&huge);
        assert!(fitted.len() <= MAX_SUBDOMAIN, "{}", fitted.len());
        assert_ne!(fitted, network_policy(&"q".repeat(300)));
    }

    #[test]
    fn shortening_is_stable_and_keeps_long_names_apart() {
        let a = fit(&format!("{}-a", "x".repeat(80)), 20);
        let b = fit(&format!("{}-b", "x".repeat(80)), 20);
        assert_eq!(a, fit(&format!("{}-a", "x".repeat(80)), 20));
        assert_ne!(a, b);
        assert!(a.len() <= 20);
    }

    #[test]
    fn every_name_a_launch_gives_a_user_may_be_theirs_and_others_not() {
        let long = format!("{}@{}.example.org", "a".repeat(40), "b".repeat(30));
        let manifests = ["jupyter", "web", &"m".repeat(50), "rstudio-sciencedata-long-name"];
        for id in ["alice@dtu.dk", "a_b@x.y", "m.n@x", long.as_str()] {
            let user = user(id);
            for manifest in manifests {
                let names = pod_name_candidates(manifest, &user)
                    .into_iter()
                    .chain(own_pod_name_candidates(manifest, &user));
                for name in names {
                    assert!(may_be_named_for(&name, &user), "{name} for {id}");
                }
            }
        }
        let alice = user("alice@dtu.dk");
        for name in [
            "jupyter-bob-dtu-dk",
            "jupyter-bob-dtu-dk-3",
            "random-name",
            "x",
            "alice-dtu-dk",
            "jupyter-alice-dtu-dk-10",
            "jupyter-alice-dtu-dk-0",
            "web-12345678x",
            "web-1234567",
        ] {
            assert!(!may_be_named_for(name, &alice), "{name}");
        }
        // The other user of the same user string may have deic-dk's names; a name ending in a
        // hash may be a shortened one of anyone's.
        let (dot, dash) = (user("m.n@x"), user("m-n@x"));
        assert!(may_be_named_for(&pod_name_candidates("web", &dot)[0], &dash));
        assert!(may_be_named_for("anything-0123abcd", &alice));
    }

    #[test]
    fn underscores_become_dashes_in_names() {
        assert_eq!(
            pod_name_candidates("ubuntu", &user("a_b@x.y"))[0],
            "ubuntu-a-b-x-y"
        );
    }

    #[test]
    fn colliding_user_strings_get_distinct_storage_names() {
        let (a, b) = (user("a.b@x"), user("a-b@x"));
        assert_eq!(storage_name(&a), storage_name(&b));
        assert_ne!(storage_name_for(&a), storage_name_for(&b));
    }

    #[test]
    fn names_that_would_change_the_url_are_refused() {
        for bad in [
            "web-alice?dryRun=All",
            "web-alice/status",
            "..",
            "%2e%2e",
            "",
            "Web-Alice",
            "-web",
            "web-",
            "web.alice",
            &"a".repeat(64),
        ] {
            let error = check_pod_name(bad).unwrap_err();
            assert!(error.to_string().contains("not a workspace name"), "{error}");
        }
        for good in ["web-alice", "jupyter-alice-dtu-dk-9", "a", &"a".repeat(63)] {
            assert_eq!(check_pod_name(good), Ok(()), "{good}");
        }
        for name in pod_name_candidates("jupyter-sciencedata", &user(&"a".repeat(200))) {
            assert_eq!(check_pod_name(&name), Ok(()), "{name}");
        }
    }

    #[test]
    fn ids_sharing_a_user_string_get_names_of_their_own() {
        let (dot, dash) = (user("a.b"), user("a-b"));
        assert_eq!(
            pod_name_candidates("web", &dot),
            pod_name_candidates("web", &dash)
        );
        let (own_dot, own_dash) = (
            own_pod_name_candidates("web", &dot),
            own_pod_name_candidates("web", &dash),
        );
        assert!(own_dot.iter().all(|n| !own_dash.contains(n)));
        assert!(own_dot[0].starts_with("web-a-b-"), "{}", own_dot[0]);
        let long = user(&"x".repeat(MAX_USER_ID));
        for name in own_pod_name_candidates("jupyter-sciencedata", &long) {
            assert_eq!(check_pod_name(&ingress(&name)), Ok(()), "{name}");
        }
        assert_eq!(own_dot.len(), NAME_ATTEMPTS);
    }

    #[test]
    fn the_longest_id_still_names_its_storage_within_253() {
        let longest = user(&"x".repeat(MAX_USER_ID));
        assert!(storage_name_for(&longest).len() <= MAX_SUBDOMAIN);
        assert!(storage_name(&longest).len() <= MAX_SUBDOMAIN);
    }

    #[test]
    fn local_claims_are_named_as_deic_dk_names_them() {
        assert_eq!(local_claim("/data/x"), "local-claim--data-x");
    }
}
