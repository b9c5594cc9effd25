//! Building a [`PolicySet`]: the builder that compiles documents into it, what the caller decides
//! about loading, and what loading reports.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::set::PolicySet;
use crate::{
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    family::{Family, FamilyBuilder, FamilySet, LoadOptions},
    fieldpath::FieldPath,
    kinds::FAMILIES,
    vocab::{FastMap, NAMESPACE_NAME_LABEL, Origin, PolicyKind, PolicyRef},
};

impl Default for PolicySet {
    fn default() -> Self {
        Self::empty()
    }
}

impl PolicySet {
    /// A set with no policies.
    pub fn empty() -> Self {
        Self::builder().build().0
    }

    /// Starts loading documents into a new set of the built-in kinds.
    pub fn builder() -> PolicySetBuilder {
        PolicySetBuilder::default()
    }
}

/// What [`PolicySetBuilder::add`] did with a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// A policy was compiled into the set.
    Policy(PolicyRef),
    /// A `Namespace` supplied labels for matching.
    Namespace(String),
    /// Not a kind outfit reads; the string says what it was.
    Skipped(String),
}

/// What loading found besides the policies themselves.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Policies rejected, each left out of the set.
    pub errors: Vec<PolicyError>,
    /// Problems that did not stop a policy from loading.
    pub warnings: Vec<LoadWarning>,
    /// Documents of kinds outfit does not read.
    pub skipped: Vec<(Origin, String)>,
}

/// What the caller decides about loading, rather than the documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSettings {
    /// The namespace of namespaced policies whose documents name none (`default`).
    pub default_namespace: String,
    /// The namespace of the filer injector's `filers-list` and sidecar template (`das`).
    pub filer_namespace: String,
    /// S3 keys as plain env values in filer sidecars, as StatCan does (off: `secretKeyRef`s).
    pub filer_plain_secrets: bool,
    /// Objects the cluster's watches may not read (RBAC refused them), by kind and name: their
    /// absence says nothing of them. Empty for files, where a missing document is missing.
    pub unreadable: Vec<(String, String)>,
}

impl Default for LoadSettings {
    fn default() -> Self {
        Self {
            default_namespace: "default".to_owned(),
            filer_namespace: "das".to_owned(),
            filer_plain_secrets: false,
            unreadable: Vec::new(),
        }
    }
}

impl LoadSettings {
    fn options(&self) -> LoadOptions<'_> {
        LoadOptions {
            default_namespace: &self.default_namespace,
            filer_namespace: &self.filer_namespace,
            filer_plain_secrets: self.filer_plain_secrets,
            unreadable: &self.unreadable,
        }
    }
}

/// Collects documents, compiling each policy as it is added, then builds a [`PolicySet`].
pub struct PolicySetBuilder {
    settings: LoadSettings,
    families: &'static [&'static dyn Family],
    /// One per family, made when its first document arrives (or at `build`).
    builders: Vec<Option<Box<dyn FamilyBuilder>>>,
    namespaces: FastMap<String, Map<String, Value>>,
    seen: HashMap<PolicyRef, Origin>,
    report: LoadReport,
    annotate: bool,
    warn: bool,
    max_patch_bytes: usize,
}

impl std::fmt::Debug for PolicySetBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySetBuilder")
            .field("settings", &self.settings)
            .field("policies", &self.seen.len())
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl Default for PolicySetBuilder {
    fn default() -> Self {
        Self::with_families(FAMILIES)
    }
}

impl PolicySetBuilder {
    /// A builder for the policies of another kinds table than the built-in one (a test's, say).
    pub fn with_families(families: &'static [&'static dyn Family]) -> Self {
        Self {
            settings: LoadSettings::default(),
            families,
            builders: families.iter().map(|_| None).collect(),
            namespaces: FastMap::default(),
            seen: HashMap::new(),
            report: LoadReport::default(),
            annotate: false,
            warn: true,
            max_patch_bytes: usize::MAX,
        }
    }

    /// The namespace of namespaced policies whose documents name none (`default` unless set).
    pub fn default_namespace(mut self, namespace: &str) -> Self {
        namespace.clone_into(&mut self.settings.default_namespace);
        self
    }

    /// Every setting at once.
    pub fn settings(mut self, settings: LoadSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Whether admissions list the policies that changed an object in its `outfit.dev/mutated-by`
    /// annotation (off unless set: the CLI and the webhook turn it on by default).
    pub fn annotate(mut self, annotate: bool) -> Self {
        self.annotate = annotate;
        self
    }

    /// Whether admissions carry warnings for the requesting user (on unless set).
    pub fn warnings(mut self, warn: bool) -> Self {
        self.warn = warn;
        self
    }

    /// The most bytes of JSON an admission's patch may take (none unless set: the webhook sets
    /// its `--max-patch-bytes`). An object whose patch would take more is refused
    /// ([`PatchTooLarge`](crate::decision::PatchTooLarge)), found while the patch is planned
    /// (PodDefaults) or written, so that neither it nor its operations are ever held whole.
    pub fn max_patch_bytes(mut self, bytes: usize) -> Self {
        self.max_patch_bytes = bytes;
        self
    }

    /// Compiles one document. A rejected policy is recorded in the report and also returned.
    pub fn add(&mut self, document: &Document) -> Result<Added, PolicyError> {
        let result = self.compile(document);
        match &result {
            Err(error) => self.report.errors.push(error.clone()),
            Ok(Added::Skipped(what)) => self.report.skipped.push((document.origin.clone(), what.clone())),
            Ok(_) => {}
        }
        result
    }

    /// Compiles every document; rejected ones are recorded in the report.
    pub fn add_all<'d>(&mut self, documents: impl IntoIterator<Item = &'d Document>) {
        for document in documents {
            let _ = self.add(document);
        }
    }

    /// Errors, warnings and skipped documents so far.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    fn compile(&mut self, document: &Document) -> Result<Added, PolicyError> {
        let (api_version, kind) = (document.api_version(), document.kind());
        let group = api_version.split_once('/').map_or("", |(group, _)| group);
        if let Some(index) = self.families.iter().position(|f| f.claims(group, kind)) {
            let family = self.families[index];
            let settings = &self.settings;
            let builder = self.builders[index].get_or_insert_with(|| family.builder(&settings.options()));
            if let Some(why) = builder.declines(document) {
                return Ok(Added::Skipped(why));
            }
            let seen = &mut self.seen;
            let mut admit = |reference: &PolicyRef| remember(seen, reference, document);
            let reference = builder.add(document, &mut self.report.warnings, &mut admit)?;
            return Ok(Added::Policy(reference));
        }
        if (api_version, kind) == ("v1", "Namespace") {
            let name = document.name().to_owned();
            let mut labels = document
                .value
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            labels.insert(NAMESPACE_NAME_LABEL.to_owned(), Value::String(name.clone()));
            self.namespaces.insert(name.clone(), labels);
            return Ok(Added::Namespace(name));
        }
        Ok(Added::Skipped(format!("{kind} ({api_version})")))
    }

    /// Builds the indexed set, and returns it with the load report. Policies a family leaves out
    /// while building (both sides of a Gatekeeper schema conflict) are reported as errors.
    pub fn build(mut self) -> (PolicySet, LoadReport) {
        let options = self.settings.options();
        let families: Vec<Box<dyn FamilySet>> = self
            .families
            .iter()
            .zip(self.builders)
            .map(|(family, builder)| {
                let mut builder = builder.unwrap_or_else(|| family.builder(&options));
                builder.finish(&mut self.report.warnings);
                builder.build(&mut self.report.errors)
            })
            .collect();
        let kinds: Vec<PolicyKind> = self
            .families
            .iter()
            .flat_map(|f| f.kinds().iter().copied())
            .collect();
        let counts: Vec<usize> = families
            .iter()
            .map(|f| kinds.iter().map(|&kind| f.count(kind)).sum())
            .collect();
        let len = counts.iter().sum();
        let holding = (0..families.len()).filter(|&p| counts[p] > 0).collect();
        let self_recorded = self
            .families
            .iter()
            .filter(|f| f.records_itself())
            .flat_map(|f| f.kinds().iter().copied())
            .collect();
        (
            PolicySet {
                families,
                holding,
                kinds,
                len,
                namespaces: self.namespaces,
                annotate: self.annotate,
                warn: self.warn,
                max_patch_bytes: self.max_patch_bytes,
                self_recorded,
            },
            self.report,
        )
    }
}

/// Rejects a second policy with the same identity; the first stays.
fn remember(
    seen: &mut HashMap<PolicyRef, Origin>,
    reference: &PolicyRef,
    document: &Document,
) -> Result<(), PolicyError> {
    if let Some(first) = seen.get(reference) {
        return Err(PolicyError {
            origin: document.origin.clone(),
            policy: reference.clone(),
            field: FieldPath::new("metadata.name"),
            problem: Problem::DuplicatePolicy { first: first.clone() },
        });
    }
    seen.insert(reference.clone(), document.origin.clone());
    Ok(())
}
