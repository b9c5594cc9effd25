//! What a family of policy kinds is to the rest of outfit: how its documents are compiled, and the
//! step of the engine (and of `explain`) that applies them. A family is one module (PodDefault in
//! `poddefault`, StatCan's filer sidecars in `filer`, the four Gatekeeper mutators in
//! `gatekeeper`) and one line of the kinds table (`kinds`); the policy set, the engine, explain,
//! and the cluster side follow from the table.

use std::{any::Any, fmt};

use serde_json::{Map, Value};

use crate::{
    decision::{Admission, Denial, Request},
    document::Document,
    error::{LoadWarning, PolicyError},
    explain::report::Decision,
    vocab::{FastMap, PolicyKind, PolicyRef},
};

/// A kinds table: the families a policy set, a server and the install manifests know, in the
/// order the engine applies them (`kinds::FAMILIES` is outfit's; a test may add to it).
pub type Table = &'static [&'static dyn Family];

/// A family of policy kinds.
pub trait Family: Sync + fmt::Debug {
    /// Its kinds.
    fn kinds(&self) -> &'static [PolicyKind];

    /// Whether a document of `group` and `kind` (any version) is this family's to compile or to
    /// refuse. By default, exactly its kinds; a family may claim a whole group, so that an unknown
    /// kind in it is an error rather than a document skipped.
    fn claims(&self, group: &str, kind: &str) -> bool {
        self.kinds()
            .iter()
            .any(|k| k.info().group == group && k.as_str() == kind)
    }

    /// A builder for one policy set.
    fn builder(&self, options: &LoadOptions<'_>) -> Box<dyn FamilyBuilder>;

    /// The CustomResourceDefinitions of its kinds that a CRD serves, as a YAML stream (the
    /// kind's module keeps it beside its code), for `outfit manifests`; none by default, as for a
    /// family of built-in kinds.
    fn crds(&self) -> &'static str {
        ""
    }

    /// Whether its step records on the object which of its policies changed it (Kubeflow's
    /// PodDefault annotations), so that outfit's own annotation (`record`) leaves them out.
    fn records_itself(&self) -> bool {
        false
    }
}

/// What loading takes from the caller.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions<'a> {
    /// The namespace of namespaced policies whose documents name none.
    pub default_namespace: &'a str,
    /// The namespace of the filer injector's own ConfigMaps (`filers-list` and the sidecar
    /// template); StatCan deploys it in `das`.
    pub filer_namespace: &'a str,
    /// Whether filer sidecars get the S3 keys as plain values, as StatCan's injector does, rather
    /// than as `secretKeyRef`s.
    pub filer_plain_secrets: bool,
    /// Objects the cluster's watches may not read, by kind and name: a family must not take their
    /// absence for the object's (the filer injector cannot tell whether such a Secret exists).
    pub unreadable: &'a [(String, String)],
}

/// Compiles a family's documents into its part of a policy set.
pub trait FamilyBuilder {
    /// Why a document of a kind the family claims is not its own after all (a ConfigMap of
    /// another name than those it reads), as a note for the load report; `None` to compile it.
    fn declines(&self, _document: &Document) -> Option<String> {
        None
    }

    /// Compiles one document the family claims and keeps the policy, once `admit` accepts its
    /// identity (the set refuses a second policy with the same kind, namespace and name).
    fn add(
        &mut self,
        document: &Document,
        warnings: &mut Vec<LoadWarning>,
        admit: &mut dyn FnMut(&PolicyRef) -> Result<(), PolicyError>,
    ) -> Result<PolicyRef, PolicyError>;

    /// Reports what only the family's documents together show (a PodPolicy naming an Audience
    /// that is not loaded), once every document is added and before [`FamilyBuilder::build`].
    fn finish(&mut self, _warnings: &mut Vec<LoadWarning>) {}

    /// Builds the family's indexed set. Policies left out at this stage (Gatekeeper's schema
    /// conflicts) are reported in `errors`.
    fn build(self: Box<Self>, errors: &mut Vec<PolicyError>) -> Box<dyn FamilySet>;
}

/// What every family reads of the policy set besides its own policies.
#[derive(Debug, Clone, Copy)]
pub struct Context<'s> {
    pub(crate) namespaces: &'s FastMap<String, Map<String, Value>>,
    pub(crate) annotate: bool,
    pub(crate) warn: bool,
    pub(crate) max_patch_bytes: usize,
}

impl<'s> Context<'s> {
    /// Whether admissions list the policies that changed the object in its `outfit.dev/mutated-by`
    /// annotation (`record`). Only then can a policy that matched and changed nothing be told
    /// from one that changed the object on an earlier invocation of the webhook, so only then is it
    /// worth a warning.
    pub fn annotates(&self) -> bool {
        self.annotate
    }

    /// Whether admissions carry warnings for the requesting user (a family may skip the work of
    /// writing them when not).
    pub fn warns(&self) -> bool {
        self.warn
    }

    /// The most bytes of JSON an admission's patch may take: a family that plans operations per
    /// entry of the object (per container) stops planning once they pass it.
    pub fn max_patch_bytes(&self) -> usize {
        self.max_patch_bytes
    }

    /// Labels of a namespace read from a `Namespace` object, if one was loaded.
    pub fn namespace_labels(&self, namespace: &str) -> Option<&'s Map<String, Value>> {
        self.namespaces.get(namespace)
    }
}

/// A family's compiled, indexed policies: its step of the engine and of explain.
pub trait FamilySet: fmt::Debug + Send + Sync + Any {
    /// How many policies of `kind` it holds.
    fn count(&self, kind: PolicyKind) -> usize;

    /// Applies the family's policies to the request's object as the earlier families left it
    /// (their changes are in `admission`), recording its own changes and the policies that made
    /// them; or refuses the object.
    fn apply<'p>(
        &'p self,
        request: &Request<'_>,
        context: &Context<'p>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial>;

    /// Explains each of its policies (see [`ExplainState`]).
    fn explain(&self, request: &Request<'_>, context: &Context<'_>, state: &mut ExplainState<'_>);

    /// The objects its policies may change, for the webhook's registration (`outfit manifests`).
    fn targets(&self) -> Targets;

    /// For callers that need the family's own type.
    fn as_any(&self) -> &dyn Any;
}

/// The objects a family's policies may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Targets {
    /// Objects of these kinds (pods are always registered, so a family of pods alone may say so
    /// or not).
    Kinds(Vec<TargetKind>),
    /// Objects of any kind.
    Everything,
}

impl Targets {
    /// Pods, when the family holds any policy (`any`); else nothing.
    pub fn pods_if(any: bool) -> Targets {
        Targets::Kinds(if any { vec![TargetKind::pod()] } else { Vec::new() })
    }

    /// Both: everything if either is.
    pub fn merge(self, other: Targets) -> Targets {
        match (self, other) {
            (Targets::Kinds(mut a), Targets::Kinds(b)) => {
                a.extend(b);
                Targets::Kinds(a)
            }
            _ => Targets::Everything,
        }
    }
}

/// A kind of object a policy may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetKind {
    /// Its API group (`""` for the core group).
    pub group: String,
    /// Its version, `*` for any.
    pub version: String,
    /// Its kind.
    pub kind: String,
}

impl TargetKind {
    /// `v1` Pods.
    pub fn pod() -> Self {
        Self {
            group: String::new(),
            version: "v1".to_owned(),
            kind: "Pod".to_owned(),
        }
    }
}

/// One explanation in the making, passed from family to family in the table's order.
#[derive(Debug)]
pub struct ExplainState<'a> {
    /// The request's object.
    pub original: &'a Value,
    /// The object as the earlier families left it; a family's explain leaves it as its step does.
    pub current: Value,
    /// The engine's denial, if it refused the object.
    pub denial: Option<&'a Denial>,
    /// Whether an earlier family refused the object (later ones do not run).
    pub denied_before: bool,
    /// The verdicts so far.
    pub decisions: Vec<Decision>,
}
