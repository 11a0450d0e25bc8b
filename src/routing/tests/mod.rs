//! Routing tests.
