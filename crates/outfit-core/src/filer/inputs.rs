//! The documents the filer family reads, as they are added: which ConfigMaps and Secrets are its
//! own, and what each holds. Nothing here refuses a document: a malformed one is kept with the
//! problem it has, which the plan turns into a warning on the pods it concerns.

use std::collections::{BTreeMap, BTreeSet};

use base64::{Engine, prelude::BASE64_STANDARD};
use serde_json::Value;

use super::{
    names::{is_object_name, secret_name},
    template::Template,
    upstream::{
        ACCESS_KEY, CONFIG_MAP_KIND, EXISTING_SHARES, FILERS_KEY, FILERS_LIST, SECRET_KEY, SECRET_KIND,
        SECRET_SUFFIX, TEMPLATE, TEMPLATE_KEY,
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
    pub(super) secrets: BTreeMap<(String, String), SecretKeys>,
    /// The `-conn-secret` Secrets the cluster's watches may not read: whether they exist is not
    /// known.
    pub(super) unreadable_secrets: BTreeSet<String>,
    /// How many ConfigMaps and Secrets were taken.
    pub(super) config_map_count: usize,
    pub(super) secret_count: usize,
}

/// What the family knows of an SVM's Secret: whether each S3 key is set (present and not empty).
/// A key's value is kept only when plain values are asked for; with `secretKeyRef`s only its
/// being set is (the string is then empty), so no Secret value is ever held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SecretKeys {
    /// `S3_ACCESS`, when set.
    pub(super) access: Option<String>,
    /// `S3_SECRET`, when set.
    pub(super) secret: Option<String>,
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
        if kind == SECRET_KIND && name.ends_with(SECRET_SUFFIX) {
            return Ok(Input::Secret);
        }
        if kind == CONFIG_MAP_KIND {
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
    filers_of(&document.value)
}

fn filers_of(config_map: &Value) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    struct Filer {
        vserver: String,
        #[serde(default)]
        url: String,
    }
    let text = config_map
        .get("data")
        .and_then(|d| d.get(FILERS_KEY))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("data.{FILERS_KEY}: missing"))?;
    let filers: Vec<Filer> =
        serde_json::from_str(text).map_err(|e| format!("data.{FILERS_KEY}: invalid JSON: {e}"))?;
    Ok(filers.into_iter().map(|f| (f.vserver, f.url)).collect())
}

/// The vservers a `filers-list` ConfigMap lists, or why its `data.filers` cannot be read.
pub fn listed_vservers(config_map: &Value) -> Result<Vec<String>, String> {
    Ok(filers_of(config_map)?.into_keys().collect())
}

/// The Secrets the SVMs of `object` need, when it is the `filers-list` of the injector's
/// namespace: `<svm>-conn-secret` for each vserver, those that cannot name a Secret left out (no
/// such Secret can exist, so the SVM is skipped as for a missing one). What the cluster watches,
/// one watch per name ([`crate::vocab::Names::Listed`]).
pub fn listed_secret_names(object: &Value, injector_namespace: &str) -> Vec<String> {
    let is_filers_list = object.get("kind").and_then(Value::as_str) == Some(CONFIG_MAP_KIND)
        && object.pointer("/metadata/name").and_then(Value::as_str) == Some(FILERS_LIST)
        && object_namespace(object) == Some(injector_namespace);
    if !is_filers_list {
        return Vec::new();
    }
    let Ok(filers) = filers_of(object) else {
        return Vec::new();
    };
    secret_names(filers.keys().map(String::as_str))
}

/// The Secrets of these SVMs, each once, those that cannot name a Secret left out: what `outfit
/// manifests` grants outfit to read.
pub fn secret_names<'s>(svms: impl IntoIterator<Item = &'s str>) -> Vec<String> {
    let mut names: Vec<String> = svms
        .into_iter()
        .map(secret_name)
        .filter(|name| is_object_name(name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
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

/// A Secret's S3 keys, from `data` (base64) or `stringData`: with `values`, each set key's value;
/// without, only whether it is set (its value is neither decoded nor kept). A Secret with neither
/// `data` nor `stringData` has no key set (the API server leaves `data` out of an empty Secret).
pub(super) fn secret_keys(document: &Document, values: bool) -> SecretKeys {
    let data = document.value.get("data").and_then(Value::as_object);
    let string_data = document.value.get("stringData").and_then(Value::as_object);
    let key = |key: &str| -> Option<String> {
        let plain = string_data.and_then(|d| d.get(key)).and_then(Value::as_str);
        let encoded = || data.and_then(|d| d.get(key)).and_then(Value::as_str);
        if !values {
            // Base64 of an empty value is empty: being set needs no decoding.
            return plain
                .or_else(encoded)
                .filter(|v| !v.is_empty())
                .map(|_| String::new());
        }
        let value = match plain {
            Some(plain) => plain.to_owned(),
            None => String::from_utf8(BASE64_STANDARD.decode(encoded()?).ok()?).ok()?,
        };
        (!value.is_empty()).then_some(value)
    };
    SecretKeys {
        access: key(ACCESS_KEY),
        secret: key(SECRET_KEY),
    }
}
