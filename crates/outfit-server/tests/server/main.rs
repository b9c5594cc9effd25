//! `outfit serve` tests: one test binary (one link step), one module per area.

/// Bodies that are not reviews, oversized bodies, deep nesting, silent connections.
mod bad_input;
/// Real AdmissionReview fixtures through the in-process router.
mod fixtures;
/// Admin port and graceful shutdown.
mod lifecycle;
/// Policy reload from the directory: good and bad changes.
mod reload;
mod support;
/// The TLS socket: self-signed CA, certificate rotation through a symlink swap.
mod tls;
/// A kind added through the kinds table alone: loaded, applied, explained, served, installed.
mod toy_kind;
/// outfit's annotation and the warnings sent with an answer, and the switches that turn them off.
mod warnings;
