//! The rules a workspace is held to, pure: per-user limits ([`limits`]), when a workspace's
//! time is up ([`culling`]) and who may sign in ([`sign_in`]). Reads only the
//! [`model`](crate::model).

pub mod culling;
pub mod limits;
pub mod sign_in;
