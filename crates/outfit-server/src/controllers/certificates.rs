//! The certificate Secret (`serve --tls-secret`): the first replica to start creates it with a
//! fresh CA and serving certificate (create-if-absent: when two race, the API server lets one
//! win, and the other reads what it wrote); every replica watches it and serves its `tls.crt`;
//! the replica that holds the Lease renews and rotates it as [`outfit_http::authority::plan`]
//! says, writing with the `resourceVersion` read.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, SystemTime},
};

use futures::StreamExt;
use k8s_openapi::{ByteString, api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use outfit_http::{
    authority::{self, Lifetimes, Material, Renewal, keys},
    tls::{CertStore, TlsError},
};
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use outfit_k8s::api_error::{brief, brief_watch};

use crate::{controllers::changes::changed, metrics::Metrics};

/// Where the certificate lives and what it is for.
#[derive(Debug, Clone)]
pub struct SecretSettings {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// DNS names of the serving certificate besides localhost, 127.0.0.1 and ::1 (the Service's).
    pub dns_names: Vec<String>,
    /// How long the certificates live.
    pub lifetimes: Lifetimes,
}

impl SecretSettings {
    fn origin(&self) -> String {
        format!("secret {}/{}", self.namespace, self.name)
    }
}

/// Why the certificate Secret could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// The API server refused or could not be reached.
    #[error("{secret}: {}", brief(.source))]
    Api {
        /// `namespace/name`.
        secret: String,
        /// The client's error.
        source: kube::Error,
    },
    /// The Secret lacks a key outfit writes: someone else made it.
    #[error(
        "{secret} has no {key}: it is not one outfit created (delete it to let outfit create its own, or serve with --tls-cert)"
    )]
    Missing {
        /// `namespace/name`.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// The material does not parse, or new material could not be minted.
    #[error("{secret}: {source}")]
    Tls {
        /// `namespace/name`.
        secret: String,
        /// What is wrong.
        source: TlsError,
    },
}

/// The Secret's material, read or created.
pub async fn ensure(client: &Client, settings: &SecretSettings) -> Result<Material, CertificateError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let api_error = |source| CertificateError::Api {
        secret: settings.origin(),
        source,
    };
    if let Some(secret) = api.get_opt(&settings.name).await.map_err(api_error)? {
        return material(&secret, settings);
    }
    let minted =
        authority::mint(SystemTime::now(), settings.lifetimes, &settings.dns_names).map_err(|source| {
            CertificateError::Tls {
                secret: settings.origin(),
                source,
            }
        })?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(settings.name.clone()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "outfit".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data(&minted)),
        ..Secret::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %settings.origin(), "created the CA and serving certificate");
            Ok(minted)
        }
        // Another replica created it first: serve what it wrote.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = api.get(&settings.name).await.map_err(api_error)?;
            material(&secret, settings)
        }
        Err(source) => Err(api_error(source)),
    }
}

fn data(material: &Material) -> BTreeMap<String, ByteString> {
    [
        (keys::CA_BUNDLE, &material.ca_bundle),
        (keys::CA_KEY, &material.ca_key),
        (keys::CERT, &material.cert),
        (keys::KEY, &material.key),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec())))
    .collect()
}

fn material(secret: &Secret, settings: &SecretSettings) -> Result<Material, CertificateError> {
    let get = |key: &'static str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
            .ok_or(CertificateError::Missing {
                secret: settings.origin(),
                key,
            })
    };
    Ok(Material {
        ca_bundle: get(keys::CA_BUNDLE)?,
        ca_key: get(keys::CA_KEY)?,
        cert: get(keys::CERT)?,
        key: get(keys::KEY)?,
    })
}

/// How long the webhook configuration must have trusted a new CA before a leaf it signed is
/// served: the API server reads configurations through a watch, a moment behind ours.
const SETTLE: Duration = Duration::from_secs(2);

/// What the certificate loop reads and tells.
pub struct CertificateLoop {
    /// Serves the Secret's `tls.crt` and `tls.key`.
    pub store: Arc<CertStore>,
    /// Told the Secret's CA bundle (`ca.crt`), for `caBundle`.
    pub ca_bundle: Arc<watch::Sender<Option<String>>>,
    /// Whether this replica holds the Lease (only the holder renews).
    pub leading: watch::Receiver<bool>,
    /// The bundle the webhook configuration trusts.
    pub published: watch::Receiver<Option<String>>,
    /// Where rotations are counted.
    pub metrics: Arc<Metrics>,
}

/// Watches the Secret and serves what it holds; on the leader, renews it when due. Until
/// `shutdown`.
pub async fn run(
    client: Client,
    settings: SecretSettings,
    mut inputs: CertificateLoop,
    shutdown: CancellationToken,
) {
    let api: Api<Secret> = Api::namespaced(client, &settings.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", settings.name));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut latest: Option<Secret> = None;
    // The newest CA, and since when the webhook configuration has trusted it.
    let mut trusted_since: Option<(String, Instant)> = None;
    let tick = (settings.lifetimes.leaf / 12).clamp(Duration::from_millis(100), Duration::from_secs(30));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret))) => {
                    serve(&secret, &settings, &inputs);
                    latest = Some(secret);
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => tracing::warn!(secret = %settings.origin(), error = brief_watch(&error), "cannot watch the certificate Secret; retrying"),
                None => return,
            },
            () = tokio::time::sleep(tick) => {}
            () = changed(&mut inputs.published) => {}
        }
        if !*inputs.leading.borrow() {
            continue;
        }
        if let Some(secret) = &latest
            && let Some(stored) = renew_if_due(&api, secret, &settings, &inputs, &mut trusted_since).await
        {
            serve(&stored, &settings, &inputs);
            latest = Some(stored);
        }
    }
}

/// On the leader: writes the renewed Secret when something is due, and returns it as stored.
async fn renew_if_due(
    api: &Api<Secret>,
    secret: &Secret,
    settings: &SecretSettings,
    inputs: &CertificateLoop,
    trusted_since: &mut Option<(String, Instant)>,
) -> Option<Secret> {
    let material = match material(secret, settings) {
        Ok(material) => material,
        Err(error) => {
            tracing::error!(%error, "cannot renew the certificate");
            return None;
        }
    };
    let trusted = settled(&material, &inputs.published, trusted_since, Instant::now());
    let (renewed, what) = match renew(&material, settings, trusted) {
        Ok(Some(renewed)) => renewed,
        Ok(None) => return None,
        Err(error) => {
            tracing::error!(secret = %settings.origin(), %error, "cannot renew the certificate");
            return None;
        }
    };
    let mut updated = secret.clone();
    updated.data = Some(data(&renewed));
    // The resourceVersion read makes the write conditional: of two writers one wins.
    match api
        .replace(&settings.name, &PostParams::default(), &updated)
        .await
    {
        Ok(stored) => {
            tracing::info!(secret = %settings.origin(), what, "renewed the certificate");
            inputs.metrics.certificate_rotated(what);
            Some(stored)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => None,
        Err(error) => {
            tracing::warn!(secret = %settings.origin(), error = brief(&error), "cannot write the renewed certificate; retrying");
            None
        }
    }
}

/// Whether the webhook configuration has trusted the newest CA for [`SETTLE`] by `now`.
fn settled(
    material: &Material,
    published: &watch::Receiver<Option<String>>,
    trusted_since: &mut Option<(String, Instant)>,
    now: Instant,
) -> bool {
    let Ok(newest) = authority::newest_ca(&material.ca_bundle) else {
        return false;
    };
    let trusted = published
        .borrow()
        .as_deref()
        .is_some_and(|bundle| authority::bundle_contains(bundle, &newest));
    if !trusted {
        *trusted_since = None;
        return false;
    }
    match trusted_since {
        Some((ca, since)) if *ca == newest => now.duration_since(*since) >= SETTLE,
        _ => {
            *trusted_since = Some((newest, now));
            false
        }
    }
}

/// The renewed material and what was renewed, when something is due.
fn renew(
    material: &Material,
    settings: &SecretSettings,
    trusted: bool,
) -> Result<Option<(Material, &'static str)>, TlsError> {
    let now = SystemTime::now();
    let lifetimes = settings.lifetimes;
    Ok(match authority::plan(material, now, lifetimes, trusted)? {
        Renewal::Nothing | Renewal::WaitForBundle => None,
        Renewal::NewCa => Some((authority::with_new_ca(material, now, lifetimes)?, "ca")),
        Renewal::Prune => Some((authority::pruned(material, now)?, "prune")),
        Renewal::NewLeaf => Some((
            authority::with_new_leaf(material, now, lifetimes, &settings.dns_names)?,
            "leaf",
        )),
    })
}

/// Serves the Secret's pair and tells its CA bundle.
fn serve(secret: &Secret, settings: &SecretSettings, inputs: &CertificateLoop) {
    match material(secret, settings) {
        Ok(material) => {
            inputs
                .store
                .offer(material.cert.into_bytes(), material.key.into_bytes());
            inputs.ca_bundle.send_if_modified(|bundle| {
                let modified = bundle.as_deref() != Some(material.ca_bundle.as_str());
                if modified {
                    *bundle = Some(material.ca_bundle);
                }
                modified
            });
        }
        Err(error) => {
            tracing::error!(%error, "the certificate Secret changed into something outfit cannot serve; the previous certificate keeps serving")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leaf of a new CA waits until the webhook configuration has trusted that CA for
    /// [`SETTLE`]; the clock starts again for the next CA.
    #[test]
    fn a_new_ca_counts_as_trusted_only_once_published_for_the_settle_time() {
        let lifetimes = Lifetimes::from_leaf(Duration::from_secs(3600));
        let first = authority::mint(SystemTime::now(), lifetimes, &[]).unwrap();
        let second = authority::with_new_ca(&first, SystemTime::now(), lifetimes).unwrap();
        let (published, receiver) = watch::channel(Some(first.ca_bundle.clone()));
        let mut since = None;
        let start = Instant::now();
        assert!(
            !settled(&second, &receiver, &mut since, start),
            "the new CA is not published yet"
        );
        published.send_replace(Some(second.ca_bundle.clone()));
        assert!(
            !settled(&second, &receiver, &mut since, start),
            "published just now"
        );
        let almost = start + SETTLE - Duration::from_millis(1);
        assert!(!settled(&second, &receiver, &mut since, almost));
        assert!(settled(&second, &receiver, &mut since, start + SETTLE));
        let third = authority::with_new_ca(&second, SystemTime::now(), lifetimes).unwrap();
        published.send_replace(Some(third.ca_bundle.clone()));
        assert!(
            !settled(&third, &receiver, &mut since, start + 2 * SETTLE),
            "a newer CA starts the clock again"
        );
    }
}
