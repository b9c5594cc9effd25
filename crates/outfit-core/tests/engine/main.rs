//! outfit-core through its public API, as its callers use it: one test binary (it links once), a
//! module per area.

mod gatekeeper;
mod gatekeeper_idempotence;
mod support;
