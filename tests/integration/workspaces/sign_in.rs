//! Sign-in with the site's OpenID provider (issue 42), against a real one: zitadel/oidc's example
//! provider (`tests/tools/oidc-provider`, built from its Go module: its login form, RSA-signed ID
//! tokens, discovery and keys), with the users and groups each test gives it. One test signs in
//! through the HTTP exchanges a browser makes and tries what an attacker would (replays, another
//! browser's state, forged cookies, cross-site sign-out, a return to another site); the other
//! drives the page in headless Chromium: sign in, launch, sign out, and a second user; the
//! groups claim deciding the catalogue and, through `outfit serve`, a PodPolicy on the pod.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::OnceLock,
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use outfit_test_support::http::{Answer, Call};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{native::WEB_FIELDS, support::*};
use crate::{
    control_plane::ControlPlane,
    e2e::{Webhook, register},
};

/// The provider's binary, built once per test process (Go's cache makes it quick after
/// `hack/prepare.sh` built it).
fn provider_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oidc-provider");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/tools/oidc-provider");
        let status = std::process::Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(source)
            .status()
            .expect("the Go toolchain builds tests/tools/oidc-provider");
        assert!(status.success(), "go build of tests/tools/oidc-provider failed");
        out
    })
}

/// A running provider, stopped on drop.
pub(super) struct Provider {
    child: tokio::process::Child,
    pub(super) issuer: String,
    pub(super) port: u16,
    /// Its users' file and the client secret the backend reads ([`oidc_config`]).
    dir: std::path::PathBuf,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The users every test signs in as: alice in gpu-users and staff, bob in staff only.
fn users() -> Value {
    json!({
        "alice-id": {"ID": "alice-id", "Username": "alice", "Password": "alice-password",
                     "Email": "alice@example.org", "EmailVerified": true, "Groups": ["gpu-users", "staff"]},
        "bob-id": {"ID": "bob-id", "Username": "bob", "Password": "bob-password",
                   "Email": "bob@example.org", "EmailVerified": true, "Groups": ["staff"]},
    })
}

impl Provider {
    /// Starts the provider with `users` and one client whose redirect URL is `redirect`.
    pub(super) async fn start(name: &str, redirect: &str) -> Provider {
        let dir = std::env::temp_dir().join(format!("outfit-oidc-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let users_file = dir.join("users.json");
        std::fs::write(&users_file, users().to_string()).unwrap();
        let mut child = tokio::process::Command::new(provider_binary())
            .arg("-users")
            .arg(&users_file)
            .args(["-client-id", "outfit", "-client-secret", "the-client-secret"])
            .args(["-redirect-uri", redirect])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OpenID provider");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let issuer = eventually_line(&mut lines).await;
        let port = issuer
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the issuer names its port");
        Provider {
            child,
            issuer,
            port,
            dir,
        }
    }
}

async fn eventually_line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the provider printed its issuer within 30 s")
        .unwrap()
        .expect("the provider printed its issuer")
}

/// The `oidc` configuration of a backend on `port` signing in with `provider`.
pub(super) fn oidc_config(provider: &Provider, port: u16, name: &str) -> String {
    let secret = provider.dir.join(format!("secret-{name}"));
    std::fs::write(&secret, "the-client-secret\n").unwrap();
    format!(
        "oidc:\n  issuerUrl: '{}'\n  clientId: outfit\n  clientSecretFile: '{}'\n  redirectUrl: 'http://127.0.0.1:{port}/auth/callback'\n",
        provider.issuer,
        secret.display()
    )
}

/// `GET`s (or sends `call`) to `port`, within 30 s.
pub(super) async fn send(port: u16, call: Call<'_>) -> Answer {
    call.send(outfit_test_support::http::loopback(port), Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn location(answer: &Answer) -> String {
    answer
        .headers
        .get("location")
        .unwrap_or_else(|| panic!("a redirect, got {} {}", answer.status, answer.text()))
        .to_str()
        .unwrap()
        .to_owned()
}

/// The `name=value` pairs of an answer's Set-Cookie headers.
pub(super) fn set_cookies(answer: &Answer) -> Vec<String> {
    answer
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
        .collect()
}

/// The path and query of `url` (an absolute URL on 127.0.0.1, or already a path).
pub(super) fn path_of(url: &str) -> String {
    match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/".to_owned(), |i| rest[i..].to_owned()),
        None => url.to_owned(),
    }
}

/// A browser's sign-in as `user` up to the provider's answer: the path of outfit's callback the
/// provider sends the browser to, and the sign-in cookie outfit set.
pub(super) async fn through_the_provider(
    backend: u16,
    provider: &Provider,
    user: &str,
    to: &str,
) -> (String, String) {
    let login = send(backend, Call::new("GET", &format!("/auth/login?to={to}"))).await;
    assert_eq!(login.status, 303, "{}", login.text());
    let cookie = set_cookies(&login).pop().expect("the sign-in cookie");
    let authorize = location(&login);
    assert!(authorize.starts_with(&provider.issuer), "{authorize}");
    for part in ["code_challenge_method=S256", "state=", "nonce=", "scope=openid"] {
        assert!(authorize.contains(part), "{part}: {authorize}");
    }
    let form = send(provider.port, Call::new("GET", &path_of(&authorize))).await;
    let form_path = path_of(&location(&form));
    let request_id = form_path
        .split("authRequestID=")
        .nth(1)
        .expect("the auth request's id");
    let body = format!("id={request_id}&username={user}&password={user}-password");
    let checked = send(
        provider.port,
        Call::new("POST", "/login/username")
            .content_type("application/x-www-form-urlencoded")
            .body(body),
    )
    .await;
    let callback = send(provider.port, Call::new("GET", &path_of(&location(&checked)))).await;
    let back = location(&callback);
    assert!(
        back.starts_with(&format!("http://127.0.0.1:{backend}/auth/callback?")),
        "{back}"
    );
    (path_of(&back), cookie)
}

/// The session cookie (`name=value`) of `user` signed in through `provider`.
pub(super) async fn session_of(backend: u16, provider: &Provider, user: &str) -> String {
    let (callback, sign_in) = through_the_provider(backend, provider, user, "/").await;
    let done = send(
        backend,
        Call::new("GET", &callback).headers(&[("cookie", &sign_in)]),
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.text());
    set_cookies(&done)
        .into_iter()
        .find(|c| c.starts_with("outfit-session="))
        .expect("a session")
}

/// Seed 000's policy, matched on the owner's groups as the backend records them, trusted from
/// `provisioners` (a YAML flow mapping).
pub(super) fn gpu_policy(provisioners: &str) -> String {
    format!(
        r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {{name: gpus-for-gpu-users}}
spec:
  match:
    requesters: {{groups: [gpu-users]}}
    owner:
      annotation: outfit.dev/user-id
      groupsAnnotation: outfit.dev/user-groups
      provisioners: {provisioners}
  add: {{env: [{{name: GPU, value: granted}}]}}
"#
    )
}

/// `outfit serve` with `policies`, registered for the pods of `namespace`; its policy directory.
pub(super) async fn webhook_with(
    client: &kube::Client,
    namespace: &str,
    policies: &str,
) -> (Webhook, PathBuf) {
    let dir = std::env::temp_dir().join(format!("outfit-{namespace}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policies.yaml"), policies).unwrap();
    let webhook = Webhook::start_with(&["--policies", dir.to_str().unwrap()], &[]);
    register(client, &webhook, namespace, namespace).await;
    (webhook, dir)
}

/// The value of `GPU` in the pod's container, if the policy gave it one.
pub(super) fn gpu(pod: &Pod) -> Option<String> {
    let container = &pod.spec.as_ref()?.containers[0];
    let env = container.env.as_ref()?.iter().find(|e| e.name == "GPU")?;
    env.value.clone()
}

pub(super) fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_holds_against_replays_forgeries_and_other_sites() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-sign-in";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let port = free_port();
    let provider = Provider::start("http", &format!("http://127.0.0.1:{port}/auth/callback")).await;
    let extra = format!(
        "adminGroups: [gpu-users]\n{}",
        oidc_config(&provider, port, "http")
    );
    let backend = Backend::start_on(plane, ns, &manifests, &extra, plane.kubeconfig(), port).await;

    // Unauthenticated, the native API says where to sign in.
    let (status, refused) = backend.call(Caller::Anonymous, "GET", "/api/v1/me", None).await;
    assert_eq!(
        (status, &refused["signIn"]),
        (401, &json!("/auth/login")),
        "{refused}"
    );

    // Alice signs in and comes back where she began; her session says who she is and her groups.
    let (callback, sign_in) = through_the_provider(port, &provider, "alice", "/ws/alice%3Fx%3D1").await;
    let done = send(port, Call::new("GET", &callback).headers(&[("cookie", &sign_in)])).await;
    assert_eq!(
        (done.status, location(&done)),
        (303, "/ws/alice?x=1".to_owned()),
        "{}",
        done.text()
    );
    let cookies = set_cookies(&done);
    let session = cookies
        .iter()
        .find(|c| c.starts_with("outfit-session="))
        .expect("a session")
        .clone();
    assert!(
        cookies.contains(&"outfit-sign-in=".to_owned()),
        "the sign-in cookie is removed: {cookies:?}"
    );
    let me = send(
        port,
        Call::new("GET", "/api/v1/me").headers(&[("cookie", &session)]),
    )
    .await;
    let me = me.json().unwrap();
    assert_eq!(me["username"], "alice", "{me}");
    assert_eq!(me["via"], "session", "{me}");
    assert_eq!(me["groups"], json!(["gpu-users", "staff"]), "{me}");
    assert_eq!(me["admin"], true, "the groups claim decides adminGroups: {me}");

    // The same answer again (a replay, even with the sign-in cookie copied) signs no one in.
    let replay = send(port, Call::new("GET", &callback).headers(&[("cookie", &sign_in)])).await;
    assert_eq!(replay.status, 403, "{}", replay.text());
    assert!(replay.text().contains("already finished"), "{}", replay.text());

    // An answer meant for another browser's sign-in: without its cookie, or with another's.
    let (bobs_callback, _bobs_cookie) = through_the_provider(port, &provider, "bob", "/").await;
    let no_cookie = send(port, Call::new("GET", &bobs_callback)).await;
    assert_eq!(no_cookie.status, 400, "{}", no_cookie.text());
    let (_, mallorys_cookie) = through_the_provider(port, &provider, "alice", "/").await;
    let crossed = send(
        port,
        Call::new("GET", &bobs_callback).headers(&[("cookie", &mallorys_cookie)]),
    )
    .await;
    assert_eq!(crossed.status, 400, "{}", crossed.text());
    assert!(crossed.text().contains("state"), "{}", crossed.text());

    // A session cookie made up, or a sign-in cookie under the session's name, is nobody.
    let forged = r#"outfit-session={"u":"root","g":["gpu-users"],"e":99999999999}"#;
    let swapped = sign_in.replacen("outfit-sign-in=", "outfit-session=", 1);
    for cookie in [forged, swapped.as_str()] {
        let answer = send(
            port,
            Call::new("GET", "/api/v1/me").headers(&[("cookie", cookie)]),
        )
        .await;
        assert_eq!(answer.status, 401, "{cookie}: {}", answer.text());
    }

    // A return to another site goes home instead.
    let (callback, cookie) = through_the_provider(port, &provider, "bob", "//evil.example.org/").await;
    let done = send(port, Call::new("GET", &callback).headers(&[("cookie", &cookie)])).await;
    assert_eq!(location(&done), "/");

    // Sign-out: refused from another site's page, done from the page's own.
    let from_evil = [
        ("cookie", session.as_str()),
        ("origin", "https://evil.example.org"),
    ];
    let out = send(
        port,
        Call::new("POST", "/auth/logout")
            .json(&json!({}))
            .headers(&from_evil),
    )
    .await;
    assert_eq!(out.status, 403, "{}", out.text());
    let own = [("cookie", session.as_str())];
    let out = send(
        port,
        Call::new("POST", "/auth/logout").json(&json!({})).headers(&own),
    )
    .await;
    assert_eq!(out.status, 204, "{}", out.text());
    let cleared = out.headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("outfit-session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(send(port, Call::new("GET", "/auth/logout")).await.status, 405);
    // A copy of the cookie kept from before the sign-out is nobody's any more.
    let copy = send(port, Call::new("GET", "/api/v1/me").headers(&own)).await;
    assert_eq!(copy.status, 401, "{}", copy.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_signs_in_with_the_sites_provider_launches_and_signs_out() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-sign-in-page";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let web = manifests.put("web.yaml", WEB_FIELDS);
    // The groups claim decides a PodPolicy too: this backend runs as the cluster's admin, whose
    // group is the provisioner here.
    let policy = gpu_policy("{groups: ['system:masters']}");
    let (webhook, policies) = webhook_with(&client, ns, &policy).await;
    let port = free_port();
    let provider = Provider::start("page", &format!("http://127.0.0.1:{port}/auth/callback")).await;
    let extra = format!(
        "catalogue:\n\
         - {{name: web, url: '{web}', title: Web server, description: An nginx}}\n\
         - {{name: gpu, url: '{web}', title: GPU server, description: For gpu-users, groups: [gpu-users]}}\n\
         {}",
        oidc_config(&provider, port, "page")
    );
    let backend = Backend::start_on(plane, ns, &manifests, &extra, plane.kubeconfig(), port).await;
    let url = format!("http://127.0.0.1:{}/", backend.port);
    let summary = browser_session(
        "sign_in.py",
        [
            "--url",
            &url,
            "--user",
            "alice:alice-password",
            "--user",
            "bob:bob-password",
            "--manifest",
            "web",
            "--timeout",
            "90",
        ],
    )
    .await;
    // The groups claim decides the catalogue: alice (gpu-users) sees the GPU entry, bob does not.
    assert_eq!(summary["alice"]["catalogue"], json!(["gpu", "web"]), "{summary}");
    assert_eq!(summary["bob"]["catalogue"], json!(["web"]), "{summary}");
    // Alice's workspace, launched through her session, is hers alone.
    let launched = summary["alice"]["launched"].as_str().expect("alice launched one");
    assert!(launched.starts_with("web-alice"), "{summary}");
    assert_eq!(
        summary["bob"]["rows"],
        json!([]),
        "bob sees none of alice's: {summary}"
    );
    assert_eq!(summary["alice"]["signed_out"], true, "{summary}");
    // Launched in the browser, alice's pod got the policy by her groups from the provider.
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get(launched)
        .await
        .expect("alice's pod");
    let groups = annotation(&pod, "outfit.dev/user-groups");
    assert_eq!(groups.as_deref(), Some("gpu-users\nstaff"));
    assert_eq!(gpu(&pod).as_deref(), Some("granted"), "{:?}", pod.metadata);
    webhook.assert_running();
    let _ = std::fs::remove_dir_all(&policies);
}
