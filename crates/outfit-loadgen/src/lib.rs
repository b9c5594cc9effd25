//! The parts of the load generator that its benchmarks share with it.

pub mod harness;
pub mod mix;
pub mod workspaces;
