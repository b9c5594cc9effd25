//! What the two APIs' creates ask for, as they read it (pure data): deic-dk's `create_pod` body
//! and the native API's launch.

use serde::Deserialize;

use super::manifest::Settings;

/// `create_pod`'s request.
#[derive(Debug, Clone, Deserialize)]
pub struct CreateRequest {
    /// The manifest's URL.
    pub yaml_url: String,
    /// The user.
    pub user_id: String,
    /// Container name → env var → value.
    #[serde(default)]
    pub settings: Option<Settings>,
}

/// A launch request (the native API's create): a catalogue entry and the env to set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Launch {
    /// The catalogue entry's name.
    pub manifest: String,
    /// Container name → env var → value.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, BTreeMap<String, String>>))]
    pub settings: Settings,
    /// The cluster to launch on, when the catalogue entry names none; the default one when
    /// unset.
    #[serde(default)]
    pub cluster: Option<String>,
    /// A snapshot of the user's to make the workspace's home from (`GET /api/v1/storage` lists
    /// them); unset: the home as it is, or its newest ready snapshot when it is gone.
    #[serde(default)]
    pub snapshot: Option<String>,
}
