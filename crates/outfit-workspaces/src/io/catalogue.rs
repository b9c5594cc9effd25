//! The manifests the native API and the page offer (the config's `catalogue`), each with the env
//! fields its containers declare, which a launch may set. A manifest is fetched when first asked
//! for and remembered for a minute, so the page's polls do not fetch it again and again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use outfit_workspaces_core::{model::config::CatalogueEntry, workspace::manifest};
use serde::Serialize;

use crate::io::{auth::Identity, fetch::Fetcher};

/// How long a fetched manifest's fields are remembered.
const REMEMBER: Duration = Duration::from_secs(60);

/// One env var a launch may set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Field {
    /// The container that declares it.
    pub container: String,
    /// The variable.
    pub name: String,
    /// The manifest's value.
    pub default: String,
}

/// One entry as the API answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = CatalogueItem)]
pub struct Item {
    /// The entry's name.
    pub name: String,
    /// Its title.
    pub title: String,
    /// What it is.
    pub description: String,
    /// The fields a launch may set.
    pub fields: Vec<Field>,
    /// Why the manifest could not be read; such an entry can't be launched.
    pub error: Option<String>,
    /// The cluster it is always launched on, when the catalogue names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// The env fields of `manifest`: every plain `value` a container declares, except the ones the
/// backend always sets.
pub fn fields(manifest: &str) -> Result<Vec<Field>, manifest::ManifestError> {
    let pod = manifest::read_pod(manifest)?;
    let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
    Ok(containers
        .into_iter()
        .flat_map(|c| {
            let container = c.name;
            c.env
                .into_iter()
                .flatten()
                .filter(|e| e.value_from.is_none() && !manifest::MANDATORY_ENV.contains(&e.name.as_str()))
                .map(move |e| Field {
                    container: container.clone(),
                    name: e.name,
                    default: e.value.unwrap_or_default(),
                })
        })
        .collect())
}

/// Whether `identity` may launch `entry`.
pub fn may_launch(entry: &CatalogueEntry, identity: &Identity) -> bool {
    entry.groups.is_empty() || entry.groups.iter().any(|g| identity.groups.contains(g))
}

/// Manifests fetched: entry name → when, and its fields or why there are none.
type Fetched = HashMap<String, (Instant, Result<Vec<Field>, String>)>;

/// The catalogue, with the fields of each manifest as last fetched.
#[derive(Clone)]
pub struct Catalogue {
    entries: Arc<[CatalogueEntry]>,
    fetcher: Fetcher,
    fetched: Arc<Mutex<Fetched>>,
}

impl std::fmt::Debug for Catalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogue")
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Catalogue {
    /// The catalogue of `entries`, fetched with `fetcher`.
    pub fn new(entries: &[CatalogueEntry], fetcher: Fetcher) -> Self {
        Self {
            entries: entries.into(),
            fetcher,
            fetched: Arc::default(),
        }
    }

    /// The entry called `name`.
    pub fn entry(&self, name: &str) -> Option<&CatalogueEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The entries `identity` may launch, with their fields.
    pub async fn items(&self, identity: &Identity) -> Vec<Item> {
        let mut items = Vec::new();
        for entry in self.entries.iter().filter(|e| may_launch(e, identity)) {
            let (fields, error) = match self.fields_of(entry).await {
                Ok(fields) => (fields, None),
                Err(error) => (Vec::new(), Some(error)),
            };
            items.push(Item {
                name: entry.name.clone(),
                title: entry.title.clone().unwrap_or_else(|| entry.name.clone()),
                description: entry.description.clone(),
                fields,
                error,
                cluster: entry.cluster.clone(),
            });
        }
        items
    }

    async fn fields_of(&self, entry: &CatalogueEntry) -> Result<Vec<Field>, String> {
        if let Some((at, fields)) = self.fetched.lock().expect("catalogue").get(&entry.name)
            && at.elapsed() < REMEMBER
        {
            return fields.clone();
        }
        let fields = match self.fetcher.fetch(&entry.url).await {
            Ok(text) => fields(&text).map_err(|e| e.to_string()),
            // The URL may be internal: the log names it, callers are told why.
            Err(error) => {
                tracing::warn!(entry = %entry.name, %error, "catalogue manifest unavailable");
                Err(format!("the manifest could not be fetched: {}", error.reason()))
            }
        };
        self.fetched
            .lock()
            .expect("catalogue")
            .insert(entry.name.clone(), (Instant::now(), fields.clone()));
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::auth;

    #[test]
    fn fields_are_the_declared_plain_values() {
        let manifest = r#"
apiVersion: v1
kind: Pod
metadata: {name: jupyter}
spec:
  containers:
  - name: notebook
    image: jupyter
    env:
    - {name: FILE, value: ""}
    - {name: THEME, value: dark}
    - {name: SD_UID, value: x}
    - name: SECRET
      valueFrom: {secretKeyRef: {name: s, key: k}}
  - name: sidecar
    image: s
"#;
        assert_eq!(
            fields(manifest).unwrap(),
            [
                Field {
                    container: "notebook".into(),
                    name: "FILE".into(),
                    default: String::new()
                },
                Field {
                    container: "notebook".into(),
                    name: "THEME".into(),
                    default: "dark".into()
                },
            ]
        );
        assert!(fields("kind: Service\napiVersion: v1\nmetadata: {name: x}").is_err());
    }

    #[test]
    fn entries_with_groups_are_for_their_members() {
        let entry = |groups: &[&str]| CatalogueEntry {
            name: "gpu".into(),
            url: "u".into(),
            title: None,
            description: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            cluster: None,
            pre_pull: true,
        };
        let alice = auth::identity("alice", vec!["gpu-users".into()], &[], false).unwrap();
        let bob = auth::identity("bob", vec![], &[], false).unwrap();
        assert!(may_launch(&entry(&[]), &bob));
        assert!(may_launch(&entry(&["gpu-users"]), &alice));
        assert!(!may_launch(&entry(&["gpu-users"]), &bob));
    }
}
