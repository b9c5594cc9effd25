//! The plain data everything else reads: labels and annotations ([`keys`]), users ([`user`]),
//! object names ([`names`]), durations ([`duration`]), the isolation and limit settings ([`isolation`],
//! [`limits`]) and
//! the configuration ([`config`]) that holds them. Imports nothing above itself.

pub mod config;
pub mod duration;
pub mod isolation;
pub mod keys;
pub mod limits;
pub mod names;
pub mod user;
