//! What the workspace proxy (`proxy.rs`) changes in the headers it passes on (issue 42): the
//! hop-by-hop headers and the client's claims of identity dropped, outfit's own cookies kept from
//! the app both ways, the user and the forwarding headers set by outfit alone.

use std::net::IpAddr;

use hyper::{
    HeaderMap,
    header::{self, HeaderName, HeaderValue},
};

use super::source::Source;
use crate::io::session::Sessions;

/// Hop-by-hop headers: a proxy never passes them on (RFC 9110, 7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
];
/// What the client may not say itself: who it is, and what came before.
const NOT_FROM_CLIENTS: [&str; 7] = [
    "x-forwarded-user",
    "x-forwarded-groups",
    "x-forwarded-email",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "forwarded",
];

/// Where a request goes, for whom.
pub(super) struct Forwarded {
    pub(super) host: String,
    pub(super) ip: IpAddr,
    pub(super) port: u16,
    pub(super) secure: bool,
    /// The signed-in user's name and groups; `None` for a visitor of a public workspace.
    pub(super) user: Option<(String, Vec<String>)>,
    /// Whose stream slots its tunnels take: the signed-in user's owner id, or the visitor's
    /// source.
    pub(super) slot_holder: String,
    /// The client's source, whose share of the streams its tunnels take too.
    pub(super) source: Source,
    /// The host with the port the client named, if any: what `Host` says to the app.
    pub(super) authority: String,
}

/// The protocol an upgrade asks for (`websocket`), when the request asks for one.
pub(super) fn upgrade_asked(headers: &HeaderMap) -> Option<HeaderValue> {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade
        .then(|| headers.get(header::UPGRADE).cloned())
        .flatten()
}

/// The request's headers as the pod gets them: no hop-by-hop header (but an upgrade's), no
/// identity or forwarding header of the client's, none of outfit's cookies; the user and the
/// forwarding headers set here.
pub(super) fn prepare_headers(
    headers: &mut HeaderMap,
    sessions: &Sessions,
    to: &Forwarded,
    peer: IpAddr,
    upgrade: Option<HeaderValue>,
) {
    let named_in_connection: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .collect();
    for name in named_in_connection {
        headers.remove(name);
    }
    for name in HOP_BY_HOP.iter().chain(&NOT_FROM_CLIENTS) {
        headers.remove(*name);
    }
    headers.remove(header::UPGRADE);
    let cookies: Vec<String> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|pair| {
            let name = pair.split('=').next().unwrap_or_default();
            !pair.is_empty() && !sessions.is_own_cookie(name)
        })
        .map(str::to_owned)
        .collect();
    headers.remove(header::COOKIE);
    if !cookies.is_empty()
        && let Ok(value) = HeaderValue::try_from(cookies.join("; "))
    {
        headers.insert(header::COOKIE, value);
    }
    if let Some(protocol) = upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
    // HTTP/2 names the host in the request's authority, not a header; the app reads `Host`.
    let host_missing = !headers.contains_key(header::HOST);
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(name, value);
        }
    };
    if host_missing {
        set("host", &to.authority);
    }
    set("x-forwarded-for", &peer.to_string());
    set("x-forwarded-host", &to.host);
    set("x-forwarded-proto", if to.secure { "https" } else { "http" });
    if let Some((user, groups)) = &to.user {
        set("x-forwarded-user", user);
        set("x-forwarded-groups", &groups.join(","));
    }
}

/// The pod's answer's headers as the client gets them: no hop-by-hop header (but a switch's
/// `Connection` and `Upgrade`), and no cookie of outfit's name set by the app.
pub(super) fn strip_answer_headers(headers: &mut HeaderMap, sessions: &Sessions, switching: bool) {
    for name in HOP_BY_HOP {
        if !(switching && name == "connection") {
            headers.remove(name);
        }
    }
    let kept: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter(|v| {
            let name = v
                .to_str()
                .unwrap_or_default()
                .split('=')
                .next()
                .unwrap_or_default();
            !sessions.is_own_cookie(name.trim())
        })
        .cloned()
        .collect();
    headers.remove(header::SET_COOKIE);
    for value in kept {
        headers.append(header::SET_COOKIE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions() -> Sessions {
        Sessions::new(&crate::io::session::tests::oidc(
            "https://workspaces.example.org/auth/callback",
            None,
        ))
    }

    fn to() -> Forwarded {
        Forwarded {
            host: "web-alice.ws.example.org".to_owned(),
            ip: "10.244.0.7".parse().unwrap(),
            port: 80,
            secure: true,
            user: Some(("alice".to_owned(), vec!["staff".to_owned(), "gpu".to_owned()])),
            slot_holder: "alice".to_owned(),
            source: Source::of("203.0.113.7".parse().unwrap()),
            authority: "web-alice.ws.example.org".to_owned(),
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_app_gets_the_user_from_outfit_only_and_none_of_its_cookies() {
        let mut request = headers(&[
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "hop"),
            ("te", "trailers"),
            ("x-forwarded-user", "mallory"),
            ("x-forwarded-groups", "admins"),
            ("forwarded", "for=1.2.3.4"),
            ("cookie", "__Host-outfit-session=s; app=1"),
            ("cookie", "__Host-outfit-pass=p"),
            ("authorization", "token abc"),
        ]);
        prepare_headers(
            &mut request,
            &sessions(),
            &to(),
            "192.0.2.9".parse().unwrap(),
            None,
        );
        for gone in ["connection", "x-secret", "te", "forwarded", "upgrade"] {
            assert!(!request.contains_key(gone), "{gone}: {request:?}");
        }
        assert_eq!(request["x-forwarded-user"], "alice");
        assert_eq!(request.get_all("x-forwarded-user").iter().count(), 1);
        assert_eq!(request["x-forwarded-groups"], "staff,gpu");
        assert_eq!(request["x-forwarded-for"], "192.0.2.9");
        assert_eq!(request["x-forwarded-proto"], "https");
        assert_eq!(request["host"], "web-alice.ws.example.org");
        assert_eq!(request["cookie"], "app=1");
        assert_eq!(
            request["authorization"], "token abc",
            "the app's own credentials pass"
        );
    }

    #[test]
    fn an_upgrade_keeps_its_protocol_and_the_app_sets_none_of_outfits_cookies() {
        let mut request = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("host", "h:8443"),
        ]);
        let asked = upgrade_asked(&request);
        assert_eq!(asked, Some(HeaderValue::from_static("websocket")));
        prepare_headers(
            &mut request,
            &sessions(),
            &to(),
            "192.0.2.9".parse().unwrap(),
            asked,
        );
        assert_eq!(
            (&request["connection"], &request["upgrade"]),
            (
                &HeaderValue::from_static("upgrade"),
                &HeaderValue::from_static("websocket")
            )
        );
        assert_eq!(request["host"], "h:8443");
        assert_eq!(
            upgrade_asked(&headers(&[("upgrade", "websocket")])),
            None,
            "no Connection: upgrade"
        );

        let mut answer = headers(&[
            ("set-cookie", "__Host-outfit-pass=x; Path=/"),
            ("set-cookie", "app=2; Path=/"),
            ("transfer-encoding", "chunked"),
            ("connection", "close"),
        ]);
        strip_answer_headers(&mut answer, &sessions(), false);
        assert_eq!(
            answer.get_all("set-cookie").iter().collect::<Vec<_>>(),
            ["app=2; Path=/"]
        );
        assert!(!answer.contains_key("connection") && !answer.contains_key("transfer-encoding"));
    }
}
