//! Client secrets for pass-through pools (#23): the verifiers a client is checked with when
//! its pool has no credentials of its own, and the PgBouncer-style auth file they come from.
//!
//! L0: pure. It parses text it is given; reading the auth file belongs to whoever loads the
//! configuration (start and reload), the password exchanges to the sessions.

pub mod limiter;
pub mod userlist;
pub mod verifier;

pub use limiter::FailureLimiter;
pub use userlist::{parse as parse_userlist, UserlistError};
pub use verifier::{Verifier, VerifierError};
