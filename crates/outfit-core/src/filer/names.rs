//! The names StatCan's injector derives from an SVM, a share and a namespace, computed the same
//! way so that both mount the same buckets, and the checks StatCan lacks.

/// The bucket of a share: FNV-1a 64-bit of its path, in decimal, as the buckets were created.
pub(super) fn bucket(share: &str) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = share
        .bytes()
        .fold(OFFSET, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME));
    hash.to_string()
}

/// The first `bytes` bytes of `text`, as Go's `s[:n]` (on a character boundary at or below it:
/// Go would cut a character in two; namespace and SVM names are ASCII).
pub(super) fn prefix(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `filerBucket`: the SVM's first 5 bytes, `-`, the bucket. Also the sidecar's name.
pub(super) fn filer_bucket(svm: &str, bucket: &str) -> String {
    format!("{}-{bucket}", prefix(svm, 5))
}

/// `shortNs`: the first 5 bytes of the namespace's last `-` segment, then the first 2 of its first.
pub(super) fn short_namespace(namespace: &str) -> String {
    let first = namespace.split('-').next().unwrap_or_default();
    let last = namespace.rsplit('-').next().unwrap_or_default();
    format!("{}{}", prefix(last, 5), prefix(first, 2))
}

/// The env var suffix of a share: `/` to `-`, anything but `[A-Za-z0-9-]` dropped, dashes trimmed
/// and collapsed, then `-` to `_`.
pub(super) fn sanitize(share: &str) -> String {
    let kept: String = share
        .chars()
        .map(|c| if c == '/' { '-' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let mut out = String::with_capacity(kept.len());
    for c in kept.trim_matches('-').chars() {
        if c == '-' && out.ends_with('_') {
            continue;
        }
        out.push(if c == '-' { '_' } else { c });
    }
    out
}

/// The Secret of an SVM: `_` becomes `-` (Secret names cannot hold `_`), then `-conn-secret`.
pub(super) fn secret_name(svm: &str) -> String {
    format!("{}{}", svm.replace('_', "-"), super::upstream::SECRET_SUFFIX)
}

/// `BUCKET_HOST`: the URL without its scheme. StatCan cuts 8 bytes (`https://`), which loses a
/// character of an `http://` URL and panics on a shorter one; here the scheme is required and
/// stripped, and the URL (which ends up in the sidecar's shell command) may hold no character a
/// shell would read.
pub(super) fn bucket_host(url: &str) -> Result<&str, String> {
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("URL {url:?} does not start with https:// or http://"))?;
    if host.is_empty() {
        return Err(format!("URL {url:?} has no host"));
    }
    if let Some(bad) = url
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || ".-_~:/%".contains(*c)))
    {
        return Err(format!("URL {url:?} holds {bad:?}"));
    }
    Ok(host)
}

/// Whether `name` can name a Secret: a DNS-1123 subdomain (at most 253 lowercase letters, digits,
/// `-` and `.`, starting and ending with a letter or digit). A name that cannot is never watched:
/// it goes into a field selector, and no such Secret can exist.
pub(super) fn is_object_name(name: &str) -> bool {
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.chars().next().is_some_and(valid)
        && name.chars().last().is_some_and(valid)
        && name.chars().all(|c| valid(c) || c == '-' || c == '.')
}

/// Checks a generated object name: a DNS-1123 label (at most 63 lowercase letters, digits and
/// `-`, starting and ending with a letter or digit), as the API server requires of container and
/// volume names.
pub(super) fn check_name(name: &str) -> Result<(), String> {
    const MAX: usize = 63;
    if name.len() > MAX {
        return Err(format!(
            "{name:?} is {} characters, over the limit of {MAX}",
            name.len()
        ));
    }
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ends = name.chars().next().is_some_and(valid) && name.chars().last().is_some_and(valid);
    if !ends || !name.chars().all(|c| valid(c) || c == '-') {
        return Err(format!(
            "{name:?} is not a valid name (lowercase letters, digits and '-', starting and ending with a letter or digit)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// StatCan webhook.go `hashBucketName`: `fnv.New64a` of the share, `strconv.FormatUint(_, 10)`.
    /// The values are FNV-1a's published test vectors.
    #[test]
    fn buckets_are_fnv1a_64_in_decimal() {
        assert_eq!(bucket(""), "14695981039346656037");
        assert_eq!(bucket("a"), 0xaf63_dc4c_8601_ec8c_u64.to_string());
        assert_eq!(bucket("foobar"), 0x8594_4171_f739_67e8_u64.to_string());
    }

    /// StatCan webhook.go: `limitString(svmName, 5) + "-" + hashedBucketName` and `limitNs`.
    #[test]
    fn filer_bucket_and_short_namespace_cut_as_statcan_does() {
        assert_eq!(filer_bucket("fld5filersvm", "42"), "fld5f-42");
        assert_eq!(filer_bucket("svm", "42"), "svm-42");
        assert_eq!(short_namespace("jose-matsuda"), "matsujo");
        assert_eq!(short_namespace("team"), "teamte");
        assert_eq!(short_namespace("a-b-research"), "reseaa");
        assert_eq!(prefix("é", 1), "", "never a panic inside a character");
    }

    /// StatCan webhook.go `cleanAndSanitizeName`.
    #[test]
    fn share_env_names_are_sanitised_as_statcan_does() {
        assert_eq!(sanitize("dir/share2"), "dir_share2");
        assert_eq!(sanitize("/a//b c.d/"), "a_bcd");
        assert_eq!(sanitize("--x--y--"), "x_y");
        assert_eq!(sanitize("Ünï/ok"), "n_ok");
    }

    /// StatCan webhook.go: `strings.ReplaceAll(svmName, "_", "-") + "-conn-secret"`.
    #[test]
    fn secret_names_replace_underscores() {
        assert_eq!(secret_name("fld5_svm_x"), "fld5-svm-x-conn-secret");
    }

    /// Fixed: StatCan's `s3Url[8:]` loses a character of `http://` URLs and panics below 8 bytes.
    #[test]
    fn bucket_host_strips_the_scheme() {
        assert_eq!(bucket_host("https://s3.example.ca"), Ok("s3.example.ca"));
        assert_eq!(bucket_host("http://s3.example.ca:9000"), Ok("s3.example.ca:9000"));
        assert!(bucket_host("https:/").is_err());
        assert!(bucket_host("https://").is_err());
        assert!(bucket_host("s3.example.ca").is_err());
        assert!(bucket_host("https://x;rm -rf /").is_err(), "no shell characters");
    }

    /// Fixed: StatCan builds names without checking them.
    #[test]
    fn names_are_checked_against_the_63_character_limit() {
        assert!(check_name(&"a".repeat(63)).is_ok());
        let long = check_name(&"a".repeat(64)).unwrap_err();
        assert!(long.contains("64 characters, over the limit of 63"), "{long}");
        assert!(
            check_name("my_sv-1").is_err(),
            "an SVM with '_' in its first 5 bytes"
        );
        assert!(check_name("Fld5-1").is_err());
    }
}
