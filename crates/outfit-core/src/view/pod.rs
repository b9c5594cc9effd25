//! The view of a pod that PodDefault matching and merging read, in one scan of its text.
//!
//! Entries of the keyed lists are read as their identities only (`name`, `mountPath`, `key`,
//! `effect`): the merge compares whole entries only when a PodDefault's entry has the same
//! identity, and then reads that entry from the full object (see `merge::PodText`).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::shapes::{List, Members, Shape, Str};

/// `kind`, `apiVersion`, and the parts of `metadata` and `spec` PodDefaults read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct PodView<'a> {
    #[serde(borrow)]
    pub(crate) kind: Str<'a>,
    #[serde(borrow)]
    pub(crate) api_version: Str<'a>,
    #[serde(borrow)]
    pub(crate) metadata: Shape<MetadataView<'a>>,
    /// Boxed: the view is built field by field and moved a few times on its way out of the
    /// deserializer, and the spec is most of its size (9% of the admission path when not boxed).
    #[serde(borrow)]
    pub(crate) spec: Shape<Box<SpecView<'a>>>,
}

impl<'a> PodView<'a> {
    /// Reads the view from an object's JSON text. Fails only on text serde_json would also refuse
    /// as a `Value`, or on a key repeated within one of the objects the view reads.
    pub(crate) fn parse(json: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Whether this is a core `v1` Pod.
    pub(crate) fn is_pod(&self) -> bool {
        self.kind.as_deref() == Some("Pod") && self.api_version.as_deref() == Some("v1")
    }

    /// `metadata`, when it is an object.
    pub(crate) fn metadata(&self) -> Option<&MetadataView<'a>> {
        self.metadata.get()
    }

    /// `metadata.name`, else `metadata.generateName`, else empty.
    pub(crate) fn name(&self) -> &str {
        let metadata = self.metadata();
        metadata
            .and_then(|m| m.name.as_deref())
            .or_else(|| metadata.and_then(|m| m.generate_name.as_deref()))
            .unwrap_or_default()
    }
}

/// The parts of `metadata` PodDefaults read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct MetadataView<'a> {
    #[serde(borrow)]
    pub(crate) name: Str<'a>,
    #[serde(borrow)]
    pub(crate) generate_name: Str<'a>,
    #[serde(borrow)]
    pub(crate) namespace: Str<'a>,
    #[serde(borrow)]
    pub(crate) labels: Shape<Members<'a>>,
    #[serde(borrow)]
    pub(crate) annotations: Shape<Members<'a>>,
}

/// The entries of a keyed list, read as their identities.
pub(crate) type Entries<'a> = List<Shape<Identity<'a>>>;

/// The parts of `spec` PodDefaults read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SpecView<'a> {
    #[serde(borrow)]
    pub(crate) volumes: Entries<'a>,
    #[serde(borrow)]
    pub(crate) tolerations: Entries<'a>,
    #[serde(borrow)]
    pub(crate) image_pull_secrets: Entries<'a>,
    #[serde(borrow)]
    pub(crate) init_containers: Entries<'a>,
    #[serde(borrow)]
    pub(crate) containers: List<Shape<ContainerView<'a>>>,
    #[serde(borrow)]
    pub(crate) service_account_name: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(crate) automount_service_account_token: Option<&'a RawValue>,
}

/// The parts of a container PodDefaults read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ContainerView<'a> {
    #[serde(borrow)]
    pub(crate) name: Str<'a>,
    #[serde(borrow)]
    pub(crate) env: Entries<'a>,
    /// `envFrom` sources have no identity: PodDefaults compare them whole.
    #[serde(borrow)]
    pub(crate) env_from: List<&'a RawValue>,
    #[serde(borrow)]
    pub(crate) volume_mounts: Entries<'a>,
    /// Absent and null alike are `None`.
    #[serde(borrow)]
    pub(crate) command: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(crate) args: Option<&'a RawValue>,
}

/// The fields that identify an entry of a pod's keyed list: `name` for most, `name` and
/// `mountPath` for volume mounts, `key` and `effect` for tolerations.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Identity<'a> {
    #[serde(borrow)]
    pub(crate) name: Str<'a>,
    #[serde(borrow)]
    pub(crate) mount_path: Str<'a>,
    #[serde(borrow)]
    pub(crate) key: Str<'a>,
    #[serde(borrow)]
    pub(crate) effect: Str<'a>,
}

/// The identity of an entry that is not an object: it has none of the identifying fields.
pub(crate) static NO_IDENTITY: Identity<'static> = Identity {
    name: Str(None),
    mount_path: Str(None),
    key: Str(None),
    effect: Str(None),
};

/// An entry's identity, [`NO_IDENTITY`] when the entry is not an object.
pub(crate) fn identity<'s, 'a>(entry: &'s Shape<Identity<'a>>) -> &'s Identity<'a> {
    entry.get().unwrap_or(&NO_IDENTITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_the_merge_needs_and_skips_the_rest() {
        let text = r#"{"kind":"Pod","apiVersion":"v1","status":{"phase":"Pending"},
            "metadata":{"generateName":"nb-","namespace":"team-a","labels":{"app":"x"},"annotations":null},
            "spec":{"containers":[{"name":"main","env":[{"name":"A","value":"1"},"odd"],"command":null}, 7],
                    "volumes":"oops","serviceAccountName":"sa"}}"#;
        let pod = PodView::parse(text).expect("a view");
        assert!(pod.is_pod());
        assert_eq!(pod.name(), "nb-");
        let metadata = pod.metadata().expect("metadata");
        assert_eq!(metadata.namespace.as_deref(), Some("team-a"));
        assert!(matches!(metadata.annotations, Shape::Absent));
        let spec = pod.spec.get().expect("spec");
        assert!(spec.volumes.items().is_err());
        assert_eq!(spec.service_account_name.map(RawValue::get), Some(r#""sa""#));
        let containers = spec.containers.items().expect("list");
        assert!(matches!(containers[1], Shape::Wrong));
        let container = containers[0].get().expect("an object");
        assert_eq!(container.name.as_deref(), Some("main"));
        assert!(container.command.is_none());
        let env = container.env.items().expect("env");
        assert_eq!(identity(&env[0]).name.as_deref(), Some("A"));
        assert!(identity(&env[1]).name.0.is_none());
    }

    #[test]
    fn a_key_repeated_where_the_view_reads_fails_the_parse() {
        let text = r#"{"spec":{"containers":[{"name":"x","name":"main"}]}}"#;
        assert!(PodView::parse(text).is_err());
        // Repeated keys the view skips are not its concern.
        let text = r#"{"spec":{"containers":[{"name":"main","image":"a","image":"b"}]}}"#;
        assert!(PodView::parse(text).is_ok());
    }
}
