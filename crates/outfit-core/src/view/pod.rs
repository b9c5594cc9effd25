//! The view of a pod that PodDefault matching and merging read.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{List, Members, Shape, Str};

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
    #[serde(borrow)]
    pub(crate) spec: Shape<SpecView<'a>>,
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

/// The parts of `spec` PodDefaults read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SpecView<'a> {
    #[serde(borrow)]
    pub(crate) volumes: List<'a>,
    #[serde(borrow)]
    pub(crate) tolerations: List<'a>,
    #[serde(borrow)]
    pub(crate) image_pull_secrets: List<'a>,
    #[serde(borrow)]
    pub(crate) init_containers: List<'a>,
    #[serde(borrow)]
    pub(crate) containers: List<'a>,
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
    pub(crate) env: List<'a>,
    #[serde(borrow)]
    pub(crate) env_from: List<'a>,
    #[serde(borrow)]
    pub(crate) volume_mounts: List<'a>,
    /// Absent and null alike are `None`.
    #[serde(borrow)]
    pub(crate) command: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(crate) args: Option<&'a RawValue>,
}

/// The fields that identify an entry of a pod's keyed list: `name` for most, `name` and
/// `mountPath` for volume mounts, `key` and `effect` for tolerations. Entries that are not objects
/// have none of them.
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

impl<'a> Identity<'a> {
    /// The identity of one raw list entry. Fails only when the entry repeats a key.
    pub(crate) fn of(entry: &'a RawValue) -> Result<Self, serde_json::Error> {
        match serde_json::from_str::<Shape<Identity<'a>>>(entry.get())? {
            Shape::Is(identity) => Ok(identity),
            Shape::Absent | Shape::Wrong => Ok(Identity::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_the_merge_needs_and_skips_the_rest() {
        let text = r#"{"kind":"Pod","apiVersion":"v1","status":{"phase":"Pending"},
            "metadata":{"generateName":"nb-","namespace":"team-a","labels":{"app":"x"},"annotations":null},
            "spec":{"containers":[{"name":"main","env":[{"name":"A","value":"1"}],"command":null}],
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
        let container: Shape<ContainerView<'_>> =
            serde_json::from_str(spec.containers.items().expect("list")[0].get()).expect("container");
        let container = container.get().expect("an object");
        assert_eq!(container.name.as_deref(), Some("main"));
        assert!(container.command.is_none());
        let env = container.env.items().expect("env");
        assert_eq!(Identity::of(env[0]).expect("identity").name.as_deref(), Some("A"));
    }

    #[test]
    fn a_non_object_entry_has_no_identity() {
        let raw: Box<RawValue> = serde_json::from_str(r#""just a string""#).expect("raw");
        let identity = Identity::of(&raw).expect("identity");
        assert!(identity.name.0.is_none() && identity.key.0.is_none());
    }
}
