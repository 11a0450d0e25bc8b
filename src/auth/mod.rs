//! Client secrets for pass-through pools (#23): the verifiers a client is checked with when
//! its pool has no credentials of its own, the PgBouncer-style auth file they come from, and
//! the auth query's text and cache for those fetched from the backend.
//!
//! L0: pure. It parses text it is given; reading the auth file belongs to whoever loads the
//! configuration (start and reload), the password exchanges to the sessions.

pub mod account;
pub mod cache;
pub mod certificate;
pub mod host;
pub mod limiter;
pub mod mock;
pub mod pass;
pub mod query;
pub mod userlist;
pub mod verifier;

pub use account::{Account, Denial, Rules, Verdict};
pub use cache::{Cached, SecretCache};
pub use limiter::FailureLimiter;
pub use pass::Refusal;
pub use userlist::{parse as parse_userlist, UserlistError};
pub use verifier::{Verifier, VerifierError};
