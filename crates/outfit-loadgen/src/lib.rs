//! The parts of the load generator that its benchmarks share with it.

pub mod control_plane;
pub mod harness;
pub mod mix;
