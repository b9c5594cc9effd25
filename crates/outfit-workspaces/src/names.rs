//! Object names: deic-dk's where they fit Kubernetes' limits, shortened with a stable hash where
//! they would not (deic-dk lets the API server refuse them, or ignores the error).

use std::hash::Hasher;

use crate::user::UserId;

/// The longest DNS label: pod hostnames, Service names, Ingress host labels, label values.
pub const MAX_LABEL: usize = 63;
/// The longest DNS subdomain: the names of most objects, NetworkPolicies among them.
pub const MAX_SUBDOMAIN: usize = 253;
/// The longest suffix the backend adds to a pod's name for its objects (`-ingress`).
const LONGEST_OBJECT_SUFFIX: usize = "-ingress".len();
/// The longest suffix a numbered retry adds (`-9`).
const RETRY_SUFFIX: usize = 2;
/// How many names a create tries: the base, then `-1` … `-9`, as deic-dk does.
pub const NAME_ATTEMPTS: usize = 10;

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
    let base = fit(&base, MAX_LABEL - LONGEST_OBJECT_SUFFIX - RETRY_SUFFIX);
    std::iter::once(base.clone())
        .chain((1..NAME_ATTEMPTS).map(|i| format!("{base}-{i}")))
        .collect()
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

/// The storage name of `user` when deic-dk's name is taken by another user: the same name with a
/// hash of the exact id.
pub fn storage_name_for(user: &UserId) -> String {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(user.as_str().as_bytes());
    format!("{}-{:08x}", storage_name(user), hasher.finish() as u32)
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
    fn local_claims_are_named_as_deic_dk_names_them() {
        assert_eq!(local_claim("/data/x"), "local-claim--data-x");
    }
}
