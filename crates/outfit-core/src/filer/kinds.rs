//! The filer injector's two kinds in the kinds table, ConfigMaps and Secrets, and which of their
//! objects are watched.

use super::{
    inputs::listed_secret_names,
    upstream::{
        ACCESS_KEY, CONFIG_MAP_KIND, EXISTING_SHARES, FILERS_LIST, SECRET_KEY, SECRET_KIND, TEMPLATE,
    },
};
use crate::vocab::{KindInfo, Names, PolicyKind, Served};

/// ConfigMaps in the kinds table: only the three names the injector reads are watched.
pub const CONFIG_MAP: PolicyKind = PolicyKind::new(&KindInfo {
    name: CONFIG_MAP_KIND,
    group: "",
    versions: &["v1"],
    plural: "configmaps",
    namespaced: true,
    served: Served::BuiltIn {
        names: Names::Exactly(&[EXISTING_SHARES, FILERS_LIST, TEMPLATE]),
        keys_only: &[],
    },
});

/// Secrets in the kinds table: the `<svm>-conn-secret` of each SVM `filers-list` lists, and of
/// them only whether the S3 keys are set (StatCan skips an SVM whose keys are missing or empty;
/// a `secretKeyRef` needs no value), unless plain values are asked for.
pub const SECRET: PolicyKind = PolicyKind::new(&KindInfo {
    name: SECRET_KIND,
    group: "",
    versions: &["v1"],
    plural: "secrets",
    namespaced: true,
    served: Served::BuiltIn {
        names: Names::Listed(listed_secret_names),
        keys_only: &[ACCESS_KEY, SECRET_KEY],
    },
});
