//! The documents the filer family reads, as they are added: which ConfigMaps and Secrets are its
//! own, and what each holds. Nothing here refuses a document: a malformed one is kept with the
//! problem it has, which the plan turns into a warning on the pods it concerns.

use std::collections::BTreeMap;

use base64::{Engine, prelude::BASE64_STANDARD};
use serde_json::Value;

use super::{
    template::Template,
    upstream::{
        ACCESS_KEY, CONFIG_MAP, EXISTING_SHARES, FILERS_KEY, FILERS_LIST, SECRET, SECRET_KEY, SECRET_SUFFIX,
        TEMPLATE, TEMPLATE_KEY,
    },
};
use crate::{decision::object_namespace, document::Document, vocab::PolicyRef};

/// One SVM's entry of `existing-shares`: its shares, or why they cannot be read.
pub(super) type Shares = Result<Vec<String>, String>;

/// What the family has read so far.
#[derive(Debug, Default)]
pub(super) struct Inputs {
    /// `filers-list`: URL by vserver, or why it cannot be read; `None` until one is read.
    pub(super) filers: Option<Result<BTreeMap<String, String>, String>>,
    /// The sidecar template, or why it cannot be used; `None` until one is read.
    pub(super) template: Option<Result<Template, String>>,
    /// `existing-shares` by namespace: the ConfigMap and each SVM's shares, in the document's order.
    pub(super) shares: BTreeMap<String, (PolicyRef, Vec<(String, Shares)>)>,
    /// The `-conn-secret` Secrets by namespace and name.
    pub(super) secrets: BTreeMap<(String, String), SecretValues>,
    /// How many ConfigMaps and Secrets were taken.
    pub(super) config_map_count: usize,
    pub(super) secret_count: usize,
}

/// What a Secret is known to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SecretValues {
    /// It carries neither `data` nor `stringData` (its metadata alone, say): only its existence
    /// is known.
    Unknown,
    /// `S3_ACCESS` and `S3_SECRET`, each when present.
    Known {
        access: Option<String>,
        secret: Option<String>,
    },
}

/// Which of the family's inputs a document is.
pub(super) enum Input {
    FilersList,
    Template,
    ExistingShares,
    Secret,
}

impl Input {
    /// The input `document` is, or why it is not one (a ConfigMap or Secret of another name).
    pub(super) fn of(document: &Document, namespaces: &Namespaces) -> Result<Self, String> {
        let name = document.name();
        let namespace = namespaces.of(document);
        let filer_namespace = namespaces.injector.as_str();
        let kind = document.kind();
        if kind == SECRET.as_str() && name.ends_with(SECRET_SUFFIX) {
            return Ok(Input::Secret);
        }
        if kind == CONFIG_MAP.as_str() {
            match name {
                EXISTING_SHARES => return Ok(Input::ExistingShares),
                FILERS_LIST if namespace == filer_namespace => return Ok(Input::FilersList),
                TEMPLATE if namespace == filer_namespace => return Ok(Input::Template),
                _ => {}
            }
        }
        Err(format!(
            "{kind} {namespace}/{name} (v1): not an input of the filer injector (its ConfigMaps are {EXISTING_SHARES}, and \
             {FILERS_LIST} and {TEMPLATE} in namespace {filer_namespace}; its Secrets end with {SECRET_SUFFIX})"
        ))
    }
}

/// The namespaces documents are read in.
pub(super) struct Namespaces {
    /// The injector's (`das`).
    pub(super) injector: String,
    /// That of a document naming none (`outfit mutate -n`, `default`).
    pub(super) default: String,
}

impl Namespaces {
    /// The document's namespace.
    pub(super) fn of<'d>(&'d self, document: &'d Document) -> &'d str {
        object_namespace(&document.value).unwrap_or(&self.default)
    }
}

/// `data[key]` of a ConfigMap, or why it is not there.
fn data<'d>(document: &'d Document, key: &str) -> Result<&'d str, String> {
    document
        .value
        .get("data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("data.{key}: missing"))
}

/// `filers-list`: the `filers` array, as a URL by vserver.
pub(super) fn filers(document: &Document) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    struct Filer {
        vserver: String,
        #[serde(default)]
        url: String,
    }
    let text = data(document, FILERS_KEY)?;
    let filers: Vec<Filer> =
        serde_json::from_str(text).map_err(|e| format!("data.{FILERS_KEY}: invalid JSON: {e}"))?;
    Ok(filers.into_iter().map(|f| (f.vserver, f.url)).collect())
}

/// The sidecar template.
pub(super) fn template(document: &Document) -> Result<Template, String> {
    Template::parse(data(document, TEMPLATE_KEY)?).map_err(|e| format!("data.{TEMPLATE_KEY}: {e}"))
}

/// `existing-shares`: each key an SVM, each value a JSON array of share paths.
pub(super) fn existing_shares(document: &Document) -> Vec<(String, Shares)> {
    let Some(data) = document.value.get("data").and_then(Value::as_object) else {
        return Vec::new();
    };
    data.iter()
        .map(|(svm, value)| {
            let shares = value
                .as_str()
                .ok_or_else(|| "must be a string".to_owned())
                .and_then(|text| {
                    serde_json::from_str::<Vec<String>>(text)
                        .map_err(|e| format!("not a JSON array of strings ({e})"))
                });
            (svm.clone(), shares)
        })
        .collect()
}

/// A Secret's S3 keys, from `data` (base64) or `stringData`; [`SecretValues::Unknown`] when it
/// has neither (its metadata alone was read).
pub(super) fn secret_values(document: &Document) -> SecretValues {
    let data = document.value.get("data").and_then(Value::as_object);
    let string_data = document.value.get("stringData").and_then(Value::as_object);
    if data.is_none() && string_data.is_none() {
        return SecretValues::Unknown;
    }
    let value = |key: &str| {
        string_data
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                let encoded = data?.get(key)?.as_str()?;
                let bytes = BASE64_STANDARD.decode(encoded).ok()?;
                String::from_utf8(bytes).ok()
            })
    };
    SecretValues::Known {
        access: value(ACCESS_KEY),
        secret: value(SECRET_KEY),
    }
}
