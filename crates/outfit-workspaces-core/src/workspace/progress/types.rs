//! What a progress report is made of: where a workspace stands as a whole, its steps and where each
//! stands. Plain data at the bottom of [`report`](super): the steps are read in [`steps`](super::steps),
//! the report is put together in its parent, and [`info`](crate::workspace::info) answers its status, each
//! importing these types from here rather than from one another.

use jiff::Timestamp;
use serde::Serialize;

/// Where a workspace stands as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Status {
    /// Its start has not finished.
    Creating,
    /// It is ready with its Services and tokens.
    Ready,
    /// Its start failed (it is being removed).
    Failed,
    /// It is being deleted.
    Deleting,
    /// It is gone.
    Deleted,
    /// Its cluster can't be reached: shown as last seen, its state unknown until it answers.
    Unknown,
    /// It was stopped and its pod is going; its Workspace keeps it for the next start.
    Stopping,
    /// It was stopped: no pod, its Workspace kept for the next start.
    Stopped,
}

impl Status {
    /// Whether nothing more will happen: the stream ends here.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Ready | Self::Failed | Self::Deleted)
    }

    /// The name used in answers and as the final event's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Creating => "creating",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Deleting => "deleting",
            Self::Deleted => "deleted",
            Self::Unknown => "unknown",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
        }
    }
}

/// Where one step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum StepState {
    /// Not started: an earlier step is not done.
    Pending,
    /// Under way.
    Active,
    /// Finished.
    Done,
    /// The start failed here.
    Failed,
    /// Not needed for this workspace (no storage, say).
    Skipped,
}

/// One step of a start or a delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    /// The step's name.
    pub name: &'static str,
    /// Where it stands.
    pub state: StepState,
    /// What the cluster says about it; "" when nothing.
    pub message: String,
    /// When it finished, when the cluster says.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub at: Option<Timestamp>,
}

/// A workspace's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Progress))]
pub struct Report {
    /// The workspace (pod) name.
    pub workspace: String,
    /// Where it stands as a whole.
    pub status: Status,
    /// How far, 0 to 100.
    #[cfg_attr(feature = "openapi", schema(maximum = 100))]
    pub percent: u8,
    /// The first step not finished; null once everything is.
    pub phase: Option<&'static str>,
    /// What is happening now, or why it failed.
    pub message: String,
    /// Every step, in order.
    pub steps: Vec<Step>,
    /// The last Warning Event about the pod from the cluster (not from the backend).
    pub warning: Option<String>,
}
