//! Filer sidecars, as StatCan's filer-sidecar-injector adds them (`cmd/webhook.go`): a notebook
//! pod in a namespace with an `existing-shares` ConfigMap gets, for each S3 share listed there, a
//! goofys sidecar (a native sidecar in `initContainers`, built from the injector's template), its
//! two volumes, a mount under `/home/jovyan/filers/<svm>/<share>` in the notebook container, and
//! env vars naming the buckets. The names (FNV-1a bucket hashes, `filerBucket`, `shortNs`) are
//! StatCan's, so pods injected by either mount the same buckets.
//!
//! Its inputs are plain ConfigMaps and Secrets, read beside the policies: `filers-list` and
//! `filer-sidecar-injector-json` in the injector's namespace (`das` by default), `existing-shares`
//! and the `<svm>-conn-secret` Secrets in the pod's (of which only whether the S3 keys are set,
//! unless plain values are asked for). Everything is resolved per namespace when the
//! set is built (`plan`), so the admission only copies prepared values into the pod (`family`).
//!
//! Fixed where StatCan's code is wrong: every sidecar and volume is kept however many shares
//! there are, the notebook container's own index is patched, S3 keys are `secretKeyRef`s unless
//! plain values are asked for, the template is read by field names, every generated name is
//! checked, and a missing or malformed input skips what it concerns with a warning naming it: the
//! pod is never refused because of a share list. `docs/filer.md` has the whole table.

mod family;
mod inputs;
mod kinds;
mod names;
mod plan;
mod template;
#[cfg(test)]
mod tests;
mod upstream;

pub use family::{FAMILY, FilerSet, Filers};
pub use inputs::{listed_secret_names, listed_vservers, secret_names};
pub use kinds::{CONFIG_MAP, SECRET};
pub use upstream::{
    ACCESS_KEY, EXISTING_SHARES, FILERS_KEY, FILERS_LIST, INJECT_ANNOTATION, MOUNT_ROOT, NOTEBOOK_ENV,
    NOTEBOOK_LABEL, SECRET_KEY, SECRET_SUFFIX, TEMPLATE, TEMPLATE_KEY,
};
