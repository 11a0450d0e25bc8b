//! Tests of the PostgreSQL codec: golden bytes, round trips, chunking invariance, property-based
//! robustness and the authentication vectors.

// Tests build fixtures by slicing and fail by panicking; the codec's no-panic lints are for the codec.
#![allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod auth;
mod backend;
mod binding;
mod challenge;
mod framer;
mod frontend;
mod prop;

mod startup;

/// Builds a tagged message from a type byte and body, independently of the encoder under test.
pub(super) fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(&(i32::try_from(body.len() + 4).unwrap_or(i32::MAX)).to_be_bytes());
    v.extend_from_slice(body);
    v
}
