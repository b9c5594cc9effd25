//! outfit's own certificate authority, as it lives in a Kubernetes Secret: a bundle of CAs
//! (`ca.crt`, the newest last), the newest CA's key (`ca.key`) and the serving certificate
//! (`tls.crt`, `tls.key`). [`plan`] decides, from that material, the clock and the CA bundle the
//! webhook configuration holds, what to renew; the helpers here mint it. No I/O.
//!
//! Rotation without a failed admission: a new CA joins the bundle first (the old one stays until
//! it expires), and a leaf signed by it is issued only once the webhook configuration's
//! `caBundle` holds it, so the API server trusts every leaf it can meet, old or new.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls_pki_types::{CertificateDer, pem::PemObject};

use crate::tls::{TlsError, leaf_params};

/// Secret keys of the material.
pub mod keys {
    /// The CA bundle: every CA a served leaf may chain to, the newest last.
    pub const CA_BUNDLE: &str = "ca.crt";
    /// The newest CA's private key.
    pub const CA_KEY: &str = "ca.key";
    /// The serving certificate.
    pub const CERT: &str = "tls.crt";
    /// The serving key.
    pub const KEY: &str = "tls.key";
}

/// How long certificates live; each is renewed when a third of its life is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// The serving certificate's.
    pub leaf: Duration,
    /// A CA's.
    pub ca: Duration,
}

impl Lifetimes {
    /// A leaf of `leaf` and CAs four times as long (90 days and a year by default).
    pub fn from_leaf(leaf: Duration) -> Self {
        Self { leaf, ca: leaf * 4 }
    }
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self::from_leaf(Duration::from_secs(90 * 24 * 3600))
    }
}

/// The PEM material of the Secret.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Material {
    /// `ca.crt`.
    pub ca_bundle: String,
    /// `ca.key`.
    pub ca_key: String,
    /// `tls.crt`.
    pub cert: String,
    /// `tls.key`.
    pub key: String,
}

/// What a certificate says about itself, as far as rotation goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facts {
    subject: Vec<u8>,
    issuer: Vec<u8>,
    not_after: SystemTime,
}

fn facts(der: &CertificateDer<'_>, what: &str) -> Result<Facts, TlsError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| TlsError::Pem {
        path: what.to_owned(),
        message: format!("not an X.509 certificate: {e}"),
    })?;
    let seconds = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0);
    Ok(Facts {
        subject: cert.subject().as_raw().to_vec(),
        issuer: cert.issuer().as_raw().to_vec(),
        not_after: UNIX_EPOCH + Duration::from_secs(seconds),
    })
}

fn certificates(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let ders: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            path: what.to_owned(),
            message: e.to_string(),
        })?;
    if ders.is_empty() {
        return Err(TlsError::Pem {
            path: what.to_owned(),
            message: "no CERTIFICATE block".to_owned(),
        });
    }
    Ok(ders)
}

/// What to do with the material now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// Nothing.
    Nothing,
    /// Add a new CA to the bundle (the newest has a third of its life left, or less); the leaf
    /// stays until the bundle is in the webhook configuration.
    NewCa,
    /// Drop the CAs that have expired from the bundle.
    Prune,
    /// Issue a new serving certificate from the newest CA (the current one has a third of its
    /// life left, or was signed by an older CA).
    NewLeaf,
    /// A new leaf is due, but the webhook configuration does not trust the newest CA yet.
    WaitForBundle,
}

/// What to renew, given the material, the time, the lifetimes, and whether the webhook
/// configuration's `caBundle` trusts the newest CA of the bundle.
pub fn plan(
    material: &Material,
    now: SystemTime,
    lifetimes: Lifetimes,
    newest_ca_published: bool,
) -> Result<Renewal, TlsError> {
    let cas = certificates(&material.ca_bundle, keys::CA_BUNDLE)?
        .iter()
        .map(|der| facts(der, keys::CA_BUNDLE))
        .collect::<Result<Vec<_>, _>>()?;
    let leaf = facts(&certificates(&material.cert, keys::CERT)?[0], keys::CERT)?;
    let newest = cas.last().expect("certificates() returns one at least");
    let left = |not_after: SystemTime| not_after.duration_since(now).unwrap_or(Duration::ZERO);
    if left(newest.not_after) < lifetimes.ca / 3 {
        return Ok(Renewal::NewCa);
    }
    if cas.len() > 1 && cas.iter().any(|ca| ca.not_after <= now) {
        return Ok(Renewal::Prune);
    }
    let leaf_due = leaf.issuer != newest.subject || left(leaf.not_after) < lifetimes.leaf / 3;
    Ok(match (leaf_due, newest_ca_published) {
        (false, _) => Renewal::Nothing,
        (true, true) => Renewal::NewLeaf,
        (true, false) => Renewal::WaitForBundle,
    })
}

/// The PEM blocks of the certificates in `text`, each with its parsed DER.
fn blocks(text: &str, what: &str) -> Result<Vec<(String, CertificateDer<'static>)>, TlsError> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = Vec::new();
    for piece in text.split_inclusive(END).filter(|p| p.contains(END)) {
        let block = format!("{}\n", piece.trim_start());
        let der = certificates(&block, what)?.remove(0);
        blocks.push((block, der));
    }
    if blocks.is_empty() {
        return Err(TlsError::Pem {
            path: what.to_owned(),
            message: "no CERTIFICATE block".to_owned(),
        });
    }
    Ok(blocks)
}

/// The PEM of the newest CA in a bundle.
pub fn newest_ca(bundle: &str) -> Result<String, TlsError> {
    let mut blocks = blocks(bundle, keys::CA_BUNDLE)?;
    Ok(blocks.pop().expect("blocks() returns one at least").0)
}

/// Whether every CA of `wanted` (a PEM bundle) is in `bundle`.
pub fn bundle_contains(bundle: &str, wanted: &str) -> bool {
    let Ok(present) = certificates(bundle, "caBundle") else {
        return false;
    };
    certificates(wanted, keys::CA_BUNDLE).is_ok_and(|wanted| wanted.iter().all(|w| present.contains(w)))
}

/// Mints the first material: a CA (the bundle) and a leaf for `dns_names` signed by it.
pub fn mint(now: SystemTime, lifetimes: Lifetimes, dns_names: &[String]) -> Result<Material, TlsError> {
    let (ca_cert, ca_key) = new_ca(now, lifetimes)?;
    let (cert, key) = leaf(&ca_cert, &ca_key, now, lifetimes, dns_names)?;
    Ok(Material {
        ca_bundle: ca_cert,
        ca_key,
        cert,
        key,
    })
}

/// The material with a new CA appended to the bundle (and its key in place of the old one's);
/// the leaf stays.
pub fn with_new_ca(material: &Material, now: SystemTime, lifetimes: Lifetimes) -> Result<Material, TlsError> {
    let (ca_cert, ca_key) = new_ca(now, lifetimes)?;
    let mut bundle = material.ca_bundle.trim_end().to_owned();
    bundle.push('\n');
    bundle.push_str(&ca_cert);
    Ok(Material {
        ca_bundle: bundle,
        ca_key,
        ..material.clone()
    })
}

/// The material without the CAs that expired by `now` (the newest always stays).
pub fn pruned(material: &Material, now: SystemTime) -> Result<Material, TlsError> {
    let blocks = blocks(&material.ca_bundle, keys::CA_BUNDLE)?;
    let last = blocks.len() - 1;
    let mut bundle = String::new();
    for (index, (block, der)) in blocks.iter().enumerate() {
        if index == last || facts(der, keys::CA_BUNDLE)?.not_after > now {
            bundle.push_str(block);
        }
    }
    Ok(Material {
        ca_bundle: bundle,
        ..material.clone()
    })
}

/// The material with a new leaf for `dns_names`, signed by the newest CA.
pub fn with_new_leaf(
    material: &Material,
    now: SystemTime,
    lifetimes: Lifetimes,
    dns_names: &[String],
) -> Result<Material, TlsError> {
    let newest = newest_ca(&material.ca_bundle)?;
    let (cert, key) = leaf(&newest, &material.ca_key, now, lifetimes, dns_names)?;
    Ok(Material {
        cert,
        key,
        ..material.clone()
    })
}

/// Five minutes of slack for clocks behind ours.
const BACKDATE: Duration = Duration::from_secs(300);

fn offset(time: SystemTime) -> time::OffsetDateTime {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(seconds).unwrap_or(0))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

fn new_ca(now: SystemTime, lifetimes: Lifetimes) -> Result<(String, String), TlsError> {
    let mut params = CertificateParams::default();
    // A name of its own per CA: a leaf's issuer tells which CA signed it.
    let serial = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    params
        .distinguished_name
        .push(DnType::CommonName, format!("outfit CA {serial}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = offset(now - BACKDATE);
    params.not_after = offset(now + lifetimes.ca);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn leaf(
    ca_cert: &str,
    ca_key: &str,
    now: SystemTime,
    lifetimes: Lifetimes,
    dns_names: &[String],
) -> Result<(String, String), TlsError> {
    let ca_key = KeyPair::from_pem(ca_key)?;
    let ca_not_after = facts(&certificates(ca_cert, keys::CA_BUNDLE)?[0], keys::CA_BUNDLE)?.not_after;
    let issuer = Issuer::from_ca_cert_pem(ca_cert, &ca_key)?;
    let mut params = leaf_params(dns_names)?;
    params.not_before = offset(now - BACKDATE);
    // Never past its CA: a chain is only as valid as its shortest link.
    params.not_after = offset((now + lifetimes.leaf).min(ca_not_after));
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn lifetimes() -> Lifetimes {
        Lifetimes::from_leaf(30 * MINUTE)
    }

    fn issuer_of(cert: &str) -> Vec<u8> {
        facts(&certificates(cert, "t").unwrap()[0], "t").unwrap().issuer
    }

    fn subject_of(cert: &str) -> Vec<u8> {
        facts(&certificates(cert, "t").unwrap()[0], "t").unwrap().subject
    }

    #[test]
    fn fresh_material_needs_nothing_until_a_third_of_the_leafs_life_is_left() {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let material = mint(start, lifetimes(), &["outfit.outfit-system.svc".into()]).unwrap();
        assert_eq!(
            plan(&material, start, lifetimes(), true).unwrap(),
            Renewal::Nothing
        );
        assert_eq!(
            plan(&material, start + 19 * MINUTE, lifetimes(), true).unwrap(),
            Renewal::Nothing
        );
        assert_eq!(
            plan(&material, start + 21 * MINUTE, lifetimes(), true).unwrap(),
            Renewal::NewLeaf
        );
        let renewed = with_new_leaf(&material, start + 21 * MINUTE, lifetimes(), &[]).unwrap();
        assert_eq!(renewed.ca_bundle, material.ca_bundle, "the same CA signs it");
        assert_eq!(
            plan(&renewed, start + 21 * MINUTE, lifetimes(), true).unwrap(),
            Renewal::Nothing
        );
    }

    /// The whole rotation: the new CA joins the bundle, the leaf waits until the webhook
    /// configuration trusts it, then switches; the old CA leaves once expired.
    #[test]
    fn a_ca_rotation_publishes_the_new_ca_before_any_leaf_it_signs() {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let life = lifetimes();
        let mut material = mint(start, life, &[]).unwrap();
        let old_ca = material.ca_bundle.clone();
        // Renew leaves along the way as the controller would, until the CA is due (80 min).
        let mut now = start;
        while plan(&material, now, life, true).unwrap() != Renewal::NewCa {
            if plan(&material, now, life, true).unwrap() == Renewal::NewLeaf {
                material = with_new_leaf(&material, now, life, &[]).unwrap();
            }
            now += MINUTE;
        }
        assert!(now > start + 79 * MINUTE && now < start + 82 * MINUTE, "{now:?}");
        material = with_new_ca(&material, now, life).unwrap();
        assert!(bundle_contains(&material.ca_bundle, &old_ca), "the old CA stays");
        let new_ca = newest_ca(&material.ca_bundle).unwrap();
        assert_ne!(new_ca.trim(), old_ca.trim());
        assert_eq!(issuer_of(&material.cert), subject_of(&old_ca), "the leaf stays");
        assert_eq!(plan(&material, now, life, false).unwrap(), Renewal::WaitForBundle);
        assert_eq!(plan(&material, now, life, true).unwrap(), Renewal::NewLeaf);
        material = with_new_leaf(&material, now, life, &[]).unwrap();
        assert_eq!(issuer_of(&material.cert), subject_of(&new_ca));
        assert_eq!(plan(&material, now, life, true).unwrap(), Renewal::Nothing);

        let old_expired = start + life.ca + MINUTE;
        let renewed = with_new_leaf(&material, old_expired - 2 * MINUTE, life, &[]).unwrap();
        assert_eq!(plan(&renewed, old_expired, life, true).unwrap(), Renewal::Prune);
        let pruned = pruned(&renewed, old_expired).unwrap();
        assert!(!bundle_contains(&pruned.ca_bundle, &old_ca));
        assert!(bundle_contains(&pruned.ca_bundle, &new_ca));
    }

    #[test]
    fn a_leaf_never_outlives_its_ca_and_bad_material_is_named() {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let life = Lifetimes {
            leaf: 60 * MINUTE,
            ca: 30 * MINUTE,
        };
        let material = mint(start, life, &[]).unwrap();
        let leaf = facts(&certificates(&material.cert, "t").unwrap()[0], "t").unwrap();
        assert_eq!(leaf.not_after, start + 30 * MINUTE);
        let broken = Material {
            cert: "not a certificate".into(),
            ..material
        };
        let error = plan(&broken, start, life, true).unwrap_err();
        assert!(error.to_string().starts_with("tls.crt: "), "{error}");
    }
}
