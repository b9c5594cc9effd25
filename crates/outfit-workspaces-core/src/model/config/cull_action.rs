//! `cullAction`: what culling does to a workspace that has a Workspace resource.

/// What culling does to a workspace with a Workspace resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CullAction {
    /// Its pod goes; its record (and so its storage) stays, to be started again.
    Stop,
    /// It goes, record and all.
    Delete,
}

impl CullAction {
    /// `stop` or `delete`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "stop" => Ok(Self::Stop),
            "delete" => Ok(Self::Delete),
            other => Err(format!("expected stop or delete, got {other:?}")),
        }
    }
}
