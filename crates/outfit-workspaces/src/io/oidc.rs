//! The OpenID provider, as outfit's sign-in talks to it (issue 42): its discovery document and
//! keys, the authorization URL of a sign-in (code flow with PKCE, state and nonce), and the code
//! exchanged for an ID token whose signature, issuer, audience, expiry and nonce the
//! `openidconnect` crate checks. The keys are fetched again when a token names a key id they
//! lack (the provider rotated them), at most once a minute.
//!
//! The provider is found at the first sign-in, not at start, so a backend whose provider is away
//! still serves every other caller; a failed discovery is tried again at the next sign-in.

use std::{
    future::Future,
    pin::Pin,
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{Client as HyperClient, connect::HttpConnector};
use openidconnect::{
    AdditionalClaims, AuthorizationCode, Client, ClientId, ClientSecret, CsrfToken, EmptyExtraTokenFields,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IdTokenFields, IdTokenVerifier,
    IssuerUrl, JsonWebKeySet, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    StandardErrorResponse, StandardTokenResponse, TokenResponse,
    core::{
        CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType, CoreGenderClaim,
        CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata,
        CoreRevocableToken, CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
    },
};
use outfit_workspaces_core::model::config::Oidc;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    fetch::{error_chain, https_connector},
    session::{SIGN_IN_TIME, SignInUnderWay, UsedOnce, unix_seconds},
};

/// How long one call to the provider may take.
const CALL_TIME: Duration = Duration::from_secs(10);
/// The largest answer read from the provider (a discovery document, keys, tokens).
const MAX_ANSWER_BYTES: usize = 256 << 10;
/// The keys are fetched again at most this often, however many tokens name unknown keys.
const KEYS_REFETCH_EVERY: Duration = Duration::from_secs(60);

/// The claims of an ID token beyond the standard ones (the groups claim among them), kept as
/// they came.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct OtherClaims {
    #[serde(flatten)]
    claims: Map<String, Value>,
}

impl AdditionalClaims for OtherClaims {}

type TokenAnswer = StandardTokenResponse<
    IdTokenFields<
        OtherClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

/// The client, as discovery makes it: an authorization endpoint, a token endpoint if the
/// document names one.
type OidcClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenAnswer,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a sign-in could not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached or answered nonsense.
    #[error("the sign-in provider could not be reached: {0}")]
    Unreachable(String),
    /// The provider refused to exchange the code.
    #[error("the sign-in provider refused the sign-in: {0}")]
    Refused(String),
    /// The ID token failed a check.
    #[error("the ID token was refused: {0}")]
    BadToken(String),
    /// The answer replays a finished sign-in.
    #[error("this sign-in was already finished; sign in again")]
    Replayed,
}

/// outfit's HTTP client for the provider: no redirects followed, each call on a deadline, each
/// answer capped.
#[derive(Clone)]
struct ProviderHttp {
    client: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// A call to the provider failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct CallFailed(String);

impl ProviderHttp {
    fn new() -> Self {
        let connector = https_connector("an https provider");
        let client = HyperClient::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Self { client }
    }

    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, CallFailed> {
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let answer = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| CallFailed(e.to_string()))?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| CallFailed(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(HttpResponse::from_parts(parts, body.to_vec()))
        };
        tokio::time::timeout(CALL_TIME, answer)
            .await
            .unwrap_or_else(|_| Err(CallFailed(format!("no answer within {CALL_TIME:?}"))))
    }
}

impl<'c> openidconnect::AsyncHttpClient<'c> for ProviderHttp {
    type Error = CallFailed;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, CallFailed>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(ProviderHttp::call(self, request))
    }
}

/// What the provider's discovery gave, and when its keys were fetched.
#[derive(Clone)]
struct Discovered {
    metadata: CoreProviderMetadata,
    keys_fetched: Instant,
}

/// The site's OpenID provider.
pub struct Provider {
    oidc: Oidc,
    http: ProviderHttp,
    discovered: tokio::sync::Mutex<Option<Discovered>>,
    finished: Mutex<UsedOnce>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.oidc.issuer_url)
            .finish_non_exhaustive()
    }
}

/// A sign-in begun: the provider's URL to send the browser to, and what its answer must match.
#[derive(Debug)]
pub struct Begun {
    /// The authorization URL.
    pub url: String,
    /// The state, nonce and PKCE verifier, for the sign-in cookie.
    pub under_way: SignInUnderWay,
}

impl Provider {
    /// The provider of `oidc`; nothing is fetched until the first sign-in.
    pub fn new(oidc: &Oidc) -> Self {
        Self {
            oidc: oidc.clone(),
            http: ProviderHttp::new(),
            discovered: tokio::sync::Mutex::new(None),
            finished: Mutex::new(UsedOnce::default()),
        }
    }

    /// The discovery document (with its keys), fetched the first time.
    async fn discovered(&self) -> Result<Discovered, OidcError> {
        let mut slot = self.discovered.lock().await;
        if let Some(known) = slot.as_ref() {
            return Ok(known.clone());
        }
        let issuer = IssuerUrl::new(self.oidc.issuer_url.clone())
            .map_err(|e| OidcError::Unreachable(format!("issuerUrl: {e}")))?;
        let metadata = CoreProviderMetadata::discover_async(issuer, &self.http)
            .await
            .map_err(|e| OidcError::Unreachable(error_chain(&e)))?;
        let known = Discovered {
            metadata,
            keys_fetched: Instant::now(),
        };
        *slot = Some(known.clone());
        Ok(known)
    }

    /// The keys fetched again, unless they were within the last minute; whether they changed.
    async fn refetch_keys(&self) -> Result<bool, OidcError> {
        let mut slot = self.discovered.lock().await;
        let Some(known) = slot.as_mut() else {
            return Ok(false);
        };
        if known.keys_fetched.elapsed() < KEYS_REFETCH_EVERY {
            return Ok(false);
        }
        known.keys_fetched = Instant::now();
        let keys = JsonWebKeySet::fetch_async(known.metadata.jwks_uri(), &self.http)
            .await
            .map_err(|e| OidcError::Unreachable(format!("fetching its keys: {}", error_chain(&e))))?;
        tracing::info!(
            keys = keys.keys().len(),
            "fetched the sign-in provider's keys again"
        );
        known.metadata = known.metadata.clone().set_jwks(keys);
        Ok(true)
    }

    fn client(&self, metadata: CoreProviderMetadata) -> Result<OidcClient, OidcError> {
        let redirect = RedirectUrl::new(self.oidc.redirect_url.clone())
            .map_err(|e| OidcError::Unreachable(format!("redirectUrl: {e}")))?;
        Ok(OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.oidc.client_id.clone()),
            Some(ClientSecret::new(self.oidc.client_secret.clone())),
        )
        .set_redirect_uri(redirect))
    }

    /// A sign-in that returns to `to` once done.
    pub async fn begin(&self, to: String, now: SystemTime) -> Result<Begun, OidcError> {
        let client = self.client(self.discovered().await?.metadata)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in self.oidc.scopes.iter().filter(|s| *s != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        Ok(Begun {
            url: url.to_string(),
            under_way: SignInUnderWay {
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                verifier: verifier.secret().clone(),
                to,
                expires: unix_seconds(now) + SIGN_IN_TIME.as_secs(),
            },
        })
    }

    /// The verified claims of the ID token `code` is exchanged for, for the sign-in `under_way`
    /// (whose state the provider's answer carried).
    pub async fn finish(
        &self,
        code: String,
        under_way: &SignInUnderWay,
        now: SystemTime,
    ) -> Result<Map<String, Value>, OidcError> {
        let now_seconds = unix_seconds(now);
        if self.finished_states().contains(&under_way.state, now_seconds) {
            return Err(OidcError::Replayed);
        }
        let client = self.client(self.discovered().await?.metadata)?;
        let answer = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| OidcError::Unreachable(format!("its discovery document: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(under_way.verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(|e| OidcError::Refused(error_chain(&e)))?;
        self.finished_states()
            .insert(under_way.state.clone(), under_way.expires, now_seconds);
        let token = answer
            .id_token()
            .ok_or_else(|| OidcError::BadToken("the provider's answer has no ID token".to_owned()))?;
        let nonce = Nonce::new(under_way.nonce.clone());
        let verified = match verify(client.id_token_verifier(), token, &nonce) {
            Err(error) if error.unknown_key && self.refetch_keys().await? => {
                let client = self.client(self.discovered().await?.metadata)?;
                verify(client.id_token_verifier(), token, &nonce)
            }
            other => other,
        };
        verified.map_err(|e| OidcError::BadToken(e.reason))
    }

    fn finished_states(&self) -> std::sync::MutexGuard<'_, UsedOnce> {
        self.finished.lock().expect("finished states")
    }
}

/// Why an ID token failed its checks.
#[derive(Debug)]
struct Unverified {
    reason: String,
    /// It names a key the provider's key set lacks (perhaps rotated since it was fetched).
    unknown_key: bool,
}

type IdToken = openidconnect::IdToken<
    OtherClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

/// The claims of `token`, as JSON, once its signature (by the provider's keys, with one of
/// [`SIGNING_ALGORITHMS`]), issuer, audience, expiry and `nonce` are checked.
fn verify(
    verifier: IdTokenVerifier<'_, CoreJsonWebKey>,
    token: &IdToken,
    nonce: &Nonce,
) -> Result<Map<String, Value>, Unverified> {
    let verifier = verifier.set_allowed_algs(SIGNING_ALGORITHMS.to_vec());
    let claims = token.claims(&verifier, nonce).map_err(|error| Unverified {
        unknown_key: matches!(
            error,
            openidconnect::ClaimsVerificationError::SignatureVerification(
                openidconnect::SignatureVerificationError::NoMatchingKey
            )
        ),
        reason: error.to_string(),
    })?;
    match serde_json::to_value(claims) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Unverified {
            reason: "its claims are not a JSON object".to_owned(),
            unknown_key: false,
        }),
    }
}

/// The signing algorithms an ID token may use: the asymmetric ones, signed by the provider's
/// published keys. Not `none`, and not a MAC keyed with the client secret, which outfit's own
/// configuration holds too.
const SIGNING_ALGORITHMS: [CoreJwsSigningAlgorithm; 9] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

#[cfg(test)]
mod tests {
    use base64::{Engine, prelude::BASE64_STANDARD, prelude::BASE64_URL_SAFE_NO_PAD};
    use openidconnect::{
        Audience, IdTokenClaims, JsonWebKeyId, PrivateSigningKey, StandardClaims, SubjectIdentifier,
        core::CoreEdDsaPrivateSigningKey,
    };
    use ring::signature::Ed25519KeyPair;

    use super::*;

    const ISSUER: &str = "https://login.example.org";
    const CLIENT: &str = "outfit";

    /// An Ed25519 key of the provider's, as its key set publishes it under `kid`.
    fn provider_key(kid: &str) -> CoreEdDsaPrivateSigningKey {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
        let base64 = BASE64_STANDARD.encode(pkcs8.as_ref());
        // PEM's lines are 64 characters at most.
        let lines: Vec<&str> = base64
            .as_bytes()
            .chunks(64)
            .map(|line| std::str::from_utf8(line).unwrap())
            .collect();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        );
        CoreEdDsaPrivateSigningKey::from_ed25519_pem(&pem, Some(JsonWebKeyId::new(kid.to_owned()))).unwrap()
    }

    fn verifier(keys: &[&CoreEdDsaPrivateSigningKey]) -> IdTokenVerifier<'static, CoreJsonWebKey> {
        let keys = keys.iter().map(|k| k.as_verification_key()).collect();
        IdTokenVerifier::new_confidential_client(
            ClientId::new(CLIENT.to_owned()),
            ClientSecret::new("the client secret".to_owned()),
            IssuerUrl::new(ISSUER.to_owned()).unwrap(),
            JsonWebKeySet::new(keys),
        )
    }

    /// A token `key` signs, for `audience` from `issuer`, expiring `expires_in` seconds from now
    /// (negative: already expired), with the nonce `n-1` and a groups claim.
    fn token(key: &CoreEdDsaPrivateSigningKey, issuer: &str, audience: &str, expires_in: i64) -> IdToken {
        let now = chrono::Utc::now();
        let claims = IdTokenClaims::new(
            IssuerUrl::new(issuer.to_owned()).unwrap(),
            vec![Audience::new(audience.to_owned())],
            now + chrono::Duration::seconds(expires_in),
            now - chrono::Duration::seconds(5),
            StandardClaims::new(SubjectIdentifier::new("alice-id".to_owned())),
            OtherClaims {
                claims: serde_json::json!({"groups": ["staff"]})
                    .as_object()
                    .unwrap()
                    .clone(),
            },
        )
        .set_nonce(Some(Nonce::new("n-1".to_owned())));
        IdToken::new(claims, key, CoreJwsSigningAlgorithm::EdDsa, None, None).unwrap()
    }

    fn nonce() -> Nonce {
        Nonce::new("n-1".to_owned())
    }

    #[test]
    fn a_token_of_the_provider_for_outfit_gives_its_claims() {
        let key = provider_key("k1");
        let claims = verify(verifier(&[&key]), &token(&key, ISSUER, CLIENT, 300), &nonce()).unwrap();
        assert_eq!(claims["sub"], "alice-id");
        assert_eq!(claims["groups"], serde_json::json!(["staff"]));
    }

    #[test]
    fn forged_expired_and_misdirected_tokens_are_refused() {
        let key = provider_key("k1");
        let forger = provider_key("k1");
        let cases = [
            (
                "signed by another key under the provider's key id",
                token(&forger, ISSUER, CLIENT, 300),
                "Signature",
            ),
            ("expired", token(&key, ISSUER, CLIENT, -60), "xpired"),
            (
                "for another client",
                token(&key, ISSUER, "another-app", 300),
                "udience",
            ),
            (
                "from another issuer",
                token(&key, "https://evil.example.org", CLIENT, 300),
                "ssuer",
            ),
        ];
        for (what, token, said) in cases {
            let error = verify(verifier(&[&key]), &token, &nonce()).expect_err(what);
            assert!(error.reason.contains(said), "{what}: {}", error.reason);
            assert!(!error.unknown_key, "{what}");
        }
        let wrong_nonce = verify(
            verifier(&[&key]),
            &token(&key, ISSUER, CLIENT, 300),
            &Nonce::new("n-2".to_owned()),
        );
        assert!(wrong_nonce.unwrap_err().reason.contains("once"));
    }

    #[test]
    fn an_unsigned_token_is_refused() {
        let key = provider_key("k1");
        let signed = token(&key, ISSUER, CLIENT, 300);
        let text = serde_json::to_value(&signed).unwrap();
        let payload = text.as_str().unwrap().split('.').nth(1).unwrap().to_owned();
        let header = BASE64_URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let unsigned: IdToken =
            serde_json::from_value(serde_json::json!(format!("{header}.{payload}."))).unwrap();
        let error = verify(verifier(&[&key]), &unsigned, &nonce()).unwrap_err();
        assert!(
            error.reason.to_lowercase().contains("signature") || error.reason.contains("alg"),
            "{}",
            error.reason
        );
    }

    #[test]
    fn a_token_of_a_key_not_yet_fetched_asks_for_the_keys_again() {
        let old = provider_key("k1");
        let rotated = provider_key("k2");
        let error = verify(verifier(&[&old]), &token(&rotated, ISSUER, CLIENT, 300), &nonce()).unwrap_err();
        assert!(error.unknown_key, "{}", error.reason);
        assert!(
            verify(
                verifier(&[&old, &rotated]),
                &token(&rotated, ISSUER, CLIENT, 300),
                &nonce()
            )
            .is_ok()
        );
    }
}
