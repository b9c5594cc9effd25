//! The rules a workspace is held to, pure: per-user limits ([`limits`]) and when a workspace's
//! time is up ([`culling`]). Reads only the [`model`](crate::model).

pub mod culling;
pub mod limits;
