//! What StatCan's injector reads and writes, by name: its ConfigMaps and their keys, the Secrets'
//! names and keys, the label and annotation it acts on.

/// The ConfigMap of a namespace listing its shares: each key an SVM, each value a JSON array of
/// share paths.
pub const EXISTING_SHARES: &str = "existing-shares";
/// The injector's ConfigMap describing the SVMs (key [`FILERS_KEY`]).
pub const FILERS_LIST: &str = "filers-list";
/// The key of [`FILERS_LIST`]: a JSON array of `{vserver, name, uuid, url}`.
pub const FILERS_KEY: &str = "filers";
/// The injector's ConfigMap holding the sidecar template (key [`TEMPLATE_KEY`]).
pub const TEMPLATE: &str = "filer-sidecar-injector-json";
/// The key of [`TEMPLATE`]: `{"containers": [...], "volumes": [...]}`.
pub const TEMPLATE_KEY: &str = "sidecarconfig.json";
/// The suffix of an SVM's Secret: `<svm with _ as ->-conn-secret`.
pub const SECRET_SUFFIX: &str = "-conn-secret";
/// The Secret key of the S3 access key.
pub const ACCESS_KEY: &str = "S3_ACCESS";
/// The Secret key of the S3 secret key.
pub const SECRET_KEY: &str = "S3_SECRET";
/// The annotation that opts a pod out (`n`, `not`, `false`, `off`) and marks it `injected`.
pub const INJECT_ANNOTATION: &str = "filer-injector-webhook.das-zone.statcan/inject";
/// The label that makes a pod a notebook pod (the Kubeflow notebook controller sets it).
pub const NOTEBOOK_LABEL: &str = "notebook-name";
/// The env var that marks the notebook container.
pub const NOTEBOOK_ENV: &str = "NB_PREFIX";
/// Where the shares are mounted in the notebook container.
pub const MOUNT_ROOT: &str = "/home/jovyan/filers";
/// The kind of the injector's ConfigMaps.
pub(super) const CONFIG_MAP_KIND: &str = "ConfigMap";
/// The kind of the SVMs' Secrets.
pub(super) const SECRET_KIND: &str = "Secret";
