//! What talks to the outside: the API server's calls ([`cluster`]), the watches ([`cache`]),
//! manifests fetched over HTTP ([`fetch`]), what the native API offers ([`catalogue`]), who calls
//! ([`auth`], by TokenReview), and the counters `/metrics` serves ([`metrics`]).

pub mod auth;
pub mod cache;
pub mod catalogue;
pub mod cluster;
pub mod fetch;
pub mod metrics;
