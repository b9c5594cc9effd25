//! Container image references as AssignImage splits and rebuilds them (Gatekeeper's
//! `assignimage/imageparser.go`): no normalisation, so `nginx` stays `nginx`, not
//! `docker.io/library/nginx`.

/// An image split into domain, path and tag (the tag keeps its `:` or `@`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image<'a> {
    /// `myreg.io:5000`, or empty.
    pub domain: &'a str,
    /// `library/busybox`.
    pub path: &'a str,
    /// `:v1`, `@sha256:...`, or empty.
    pub tag: &'a str,
}

/// The first segment is a domain when it contains `.` or `:`, or is `localhost`, and a `/` follows.
fn split_domain(image: &str) -> (&str, &str) {
    match image.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => ("", image),
    }
}

impl<'a> Image<'a> {
    /// Splits an image the way Gatekeeper does; any string splits.
    pub fn parse(image: &'a str) -> Self {
        let (domain, rest) = split_domain(image);
        let (path, tag) = match rest.find([':', '@']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        Self { domain, path, tag }
    }

    /// `domain/path tag`, without the `/` when there is no domain.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.domain.len() + self.path.len() + self.tag.len() + 1);
        if !self.domain.is_empty() {
            out.push_str(self.domain);
            out.push('/');
        }
        out.push_str(self.path);
        out.push_str(self.tag);
        out
    }
}

/// AssignImage's parameters, validated so that every result converges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageParams {
    /// `assignDomain`.
    pub domain: Option<String>,
    /// `assignPath`.
    pub path: Option<String>,
    /// `assignTag`.
    pub tag: Option<String>,
}

impl ImageParams {
    /// Checks the components as Gatekeeper's `validateImageParts`; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let (domain, path, tag) = (
            self.domain.as_deref().unwrap_or(""),
            self.path.as_deref().unwrap_or(""),
            self.tag.as_deref().unwrap_or(""),
        );
        if domain.is_empty() && path.is_empty() && tag.is_empty() {
            return Err((
                "parameters",
                "at least one of assignDomain, assignPath or assignTag must be set".into(),
            ));
        }
        if !domain.is_empty() && !valid_domain(domain) {
            return Err((
                "parameters.assignDomain",
                format!(
                    "invalid domain {domain:?}: expected a host with a `.` (or localhost) and an optional :port"
                ),
            ));
        }
        if !path.is_empty() && !valid_path(path) {
            return Err((
                "parameters.assignPath",
                format!(
                    "invalid path {path:?}: expected lowercase components separated by `/`, `.`, `_`, `__` or `-`"
                ),
            ));
        }
        if domain.is_empty() && !split_domain(path).0.is_empty() {
            return Err((
                "parameters.assignPath",
                format!("path {path:?} starts with a domain-like segment; set assignDomain instead"),
            ));
        }
        if !tag.is_empty() && !valid_tag(tag) {
            return Err((
                "parameters.assignTag",
                format!("invalid tag {tag:?}: expected `:tag` or `@algorithm:digest`"),
            ));
        }
        Ok(())
    }

    /// The image after assigning the set components to `current`.
    pub fn mutate(&self, current: &str) -> String {
        let mut image = Image::parse(current);
        if let Some(domain) = self.domain.as_deref().filter(|d| !d.is_empty()) {
            image.domain = domain;
        }
        if let Some(path) = self.path.as_deref().filter(|p| !p.is_empty()) {
            image.path = path;
        }
        if let Some(tag) = self.tag.as_deref().filter(|t| !t.is_empty()) {
            image.tag = tag;
        }
        image.render()
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `(^\w[\w\-_]*\.[\w\-_\.]*[\w](:\d+)?$)|(^localhost(:\d+)?$)`
fn valid_domain(domain: &str) -> bool {
    let host = match domain.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => domain,
    };
    if host == "localhost" {
        return true;
    }
    let (Some(first), Some(last)) = (host.chars().next(), host.chars().last()) else {
        return false;
    };
    is_word(first)
        && is_word(last)
        && host.contains('.')
        && host.chars().all(|c| is_word(c) || c == '-' || c == '.')
}

/// `^[a-z0-9]+(?:(?:(?:[._/]|__|[-]*)[a-z0-9]+)+)?`, matching the whole string.
fn valid_path(path: &str) -> bool {
    let is_component = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut rest = path;
    loop {
        let end = rest.find(|c: char| !is_component(c)).unwrap_or(rest.len());
        if end == 0 {
            return false;
        }
        rest = &rest[end..];
        if rest.is_empty() {
            return true;
        }
        let separator = rest.find(is_component).unwrap_or(rest.len());
        let valid = match &rest[..separator] {
            "." | "_" | "/" | "__" => true,
            dashes => dashes.bytes().all(|b| b == b'-'),
        };
        if !valid {
            return false;
        }
        rest = &rest[separator..];
    }
}

/// `^:[\w][\w.-]{0,127}$` or `^@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}$`
fn valid_tag(tag: &str) -> bool {
    if let Some(name) = tag.strip_prefix(':') {
        return name.chars().next().is_some_and(is_word)
            && name.len() <= 128
            && name.chars().all(|c| is_word(c) || c == '.' || c == '-');
    }
    let Some(digest) = tag.strip_prefix('@') else {
        return false;
    };
    let Some((algorithm, hex)) = digest.rsplit_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|part| {
        part.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && part.chars().all(|c| c.is_ascii_alphanumeric())
    });
    algorithm_ok && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(domain: &str, path: &str, tag: &str) -> ImageParams {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        ImageParams {
            domain: some(domain),
            path: some(path),
            tag: some(tag),
        }
    }

    const DIGEST: &str = "@sha256:abcde67890123456789abc345678901a";

    #[test]
    fn mutations_match_gatekeeper_vectors() {
        // (row of reference §4.5 / §4.7, image before, domain, path, tag, image after)
        let cases = [
            (
                "I1 tag only",
                "library/busybox:v1",
                "",
                "",
                ":new",
                "library/busybox:new",
            ),
            (
                "I2 empty image",
                "",
                "",
                "library/busybox",
                ":new",
                "library/busybox:new",
            ),
            (
                "I3 path only keeps the tag",
                "library/busybox:v1",
                "",
                "new/repo",
                "",
                "new/repo:v1",
            ),
            (
                "I4 domain replaced",
                "docker.io/library/busybox:v1",
                "myreg.io",
                "",
                "",
                "myreg.io/library/busybox:v1",
            ),
            (
                "I5 library is not a domain",
                "library/busybox:v1",
                "myreg.io",
                "",
                "",
                "myreg.io/library/busybox:v1",
            ),
            (
                "I6 digest added",
                "myreg.io/library/busybox",
                "",
                "",
                DIGEST,
                "myreg.io/library/busybox@sha256:abcde67890123456789abc345678901a",
            ),
            (
                "I7 digest replaces tag",
                "library/busybox:v1",
                "",
                "",
                DIGEST,
                "library/busybox@sha256:abcde67890123456789abc345678901a",
            ),
            (
                "I8 all three",
                "docker.io/library/busybox:v1",
                "myreg.io",
                "newlib/newbox",
                ":v2",
                "myreg.io/newlib/newbox:v2",
            ),
            (
                "I9 odd references still converge",
                "a.b.c:5000//not.good:ABC123_//lib.com.repo//localhost@blah101",
                "myreg.io",
                "",
                "",
                "myreg.io//not.good:ABC123_//lib.com.repo//localhost@blah101",
            ),
            (
                "I10 dotted path without slash is not a domain",
                "a.b:latest",
                "myreg.io",
                "my.special.repo/a.b/c",
                "",
                "myreg.io/my.special.repo/a.b/c:latest",
            ),
            (
                "Y8 bats: no normalisation of nginx",
                "nginx:latest",
                "foocorp.org",
                "",
                DIGEST,
                "foocorp.org/nginx@sha256:abcde67890123456789abc345678901a",
            ),
            (
                "localhost is a domain",
                "localhost/app:1",
                "myreg.io:5000",
                "",
                "",
                "myreg.io:5000/app:1",
            ),
        ];
        for (case, before, domain, path, tag, after) in cases {
            let p = params(domain, path, tag);
            assert_eq!(p.validate(), Ok(()), "{case}");
            let once = p.mutate(before);
            assert_eq!(once, after, "{case}");
            assert_eq!(p.mutate(&once), once, "{case}: converges");
        }
    }

    #[test]
    fn split_matches_gatekeeper() {
        // I11
        let image = Image::parse("x.io/get/ready4.//this/not.good:404@yikes/bad/string");
        assert_eq!(
            (image.domain, image.path, image.tag),
            ("x.io", "get/ready4.//this/not.good", ":404@yikes/bad/string")
        );
        let image = Image::parse("localhost:5000/a@sha256:x");
        assert_eq!(
            (image.domain, image.path, image.tag),
            ("localhost:5000", "a", "@sha256:x")
        );
    }

    #[test]
    fn invalid_components_are_rejected() {
        // I12: (component, domain, path, tag, field named in the error)
        let cases = [
            ("domain without dot", "foobar", "", "", "assignDomain"),
            ("domain leading dot", ".foobar", "", "", "assignDomain"),
            ("domain trailing dot", "foobar.", "", "", "assignDomain"),
            (
                "domain port not numeric",
                "my.reg.io:abc2000",
                "",
                "",
                "assignDomain",
            ),
            ("domain with a tag", "my.reg.io:latest", "", "", "assignDomain"),
            ("path trailing slash", "", "lib/stuff/app/", "", "assignPath"),
            ("path leading slash", "", "/lib", "", "assignPath"),
            ("path with colon", "", "lib/stuff:things/app", "", "assignPath"),
            ("path uppercase", "", "Library/app", "", "assignPath"),
            ("tag without colon", "", "", "latest", "assignTag"),
            ("digest too short", "", "", "@sha256:123456", "assignTag"),
            ("tag with two colons", "", "", ":lat:est", "assignTag"),
            (
                "domain-like path with no domain",
                "",
                "a.b.c/stuff",
                "",
                "assignPath",
            ),
            ("nothing set", "", "", "", "parameters"),
        ];
        for (case, domain, path, tag, field) in cases {
            let (at, _) = params(domain, path, tag).validate().expect_err(case);
            assert!(at.ends_with(field), "{case}: {at}");
        }
        assert_eq!(params("", "a--b__c/d.e_f", ":v1.2-rc_3").validate(), Ok(()));
        assert_eq!(
            params("", "", &format!(":{}", "a".repeat(128))).validate(),
            Ok(())
        );
        assert!(
            params("", "", &format!(":{}", "a".repeat(129)))
                .validate()
                .is_err()
        );
    }
}
