//! `[limits]`: bounds on what the router holds on a client's behalf (#33), so that one client
//! cannot take the memory the others need. Each limit answers with the server's own error for
//! it; tuning.md ("Security model", "Bounded memory") lists them.

use std::num::NonZeroU32;

use super::check::Checker;
use super::raw::{RawLimits, Sp};
use super::value::parse_size;

/// Default `session_prepared_statements`.
const DEFAULT_STATEMENTS: u32 = 10_000;
/// Default `session_prepared_bytes`: 16 MiB of statement text per session.
const DEFAULT_STATEMENT_BYTES: u64 = 16 << 20;
/// Default `long_data`: 64 MiB, a common `max_allowed_packet`.
const DEFAULT_LONG_DATA: u64 = 64 << 20;
/// Default `client_buffer_budget`: 1 GiB for the whole process.
const DEFAULT_BUDGET: u64 = 1 << 30;
/// Smallest size any of these accepts.
const MIN_SIZE: u64 = 1 << 10;
/// Largest `session_prepared_bytes` and `long_data` (PostgreSQL's and MySQL's own 1 GiB caps).
const MAX_SIZE: u64 = 1 << 30;
/// Largest `client_buffer_budget`.
const MAX_BUDGET: u64 = 1 << 40;

/// What the router holds for clients, per session and for the whole process.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Prepared statements one client session may have (PostgreSQL named statements, MySQL
    /// `COM_STMT_PREPARE` ids).
    pub session_prepared_statements: NonZeroU32,
    /// Bytes of statement text those statements may hold together.
    pub session_prepared_bytes: usize,
    /// Bytes of `COM_STMT_SEND_LONG_DATA` held for one statement until its execute (the
    /// router's `max_allowed_packet`).
    pub long_data: usize,
    /// Bytes every client session of the process may hold together in statement texts, long
    /// data and held batches; past it new work is refused.
    pub client_buffer_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            session_prepared_statements: NonZeroU32::new(DEFAULT_STATEMENTS).unwrap_or(NonZeroU32::MIN),
            session_prepared_bytes: DEFAULT_STATEMENT_BYTES as usize,
            long_data: DEFAULT_LONG_DATA as usize,
            client_buffer_budget: DEFAULT_BUDGET,
        }
    }
}

/// Converts `[limits]`.
pub(crate) fn limits(ck: &mut Checker<'_>, raw: &RawLimits) -> Limits {
    let d = Limits::default();
    Limits {
        session_prepared_statements: ck.nonzero(
            &raw.session_prepared_statements,
            "limits.session_prepared_statements",
            d.session_prepared_statements,
        ),
        session_prepared_bytes: size(ck, &raw.session_prepared_bytes, "limits.session_prepared_bytes", MAX_SIZE)
            .map_or(d.session_prepared_bytes, to_usize),
        long_data: size(ck, &raw.long_data, "limits.long_data", MAX_SIZE).map_or(d.long_data, to_usize),
        client_buffer_budget: size(ck, &raw.client_buffer_budget, "limits.client_buffer_budget", MAX_BUDGET)
            .unwrap_or(d.client_buffer_budget),
    }
}

/// A size of `MIN_SIZE..=max` bytes; anything else is reported and read as absent.
fn size(ck: &mut Checker<'_>, raw: &Option<Sp<String>>, path: &str, max: u64) -> Option<u64> {
    let value = raw.as_ref()?;
    match parse_size(value.get_ref()) {
        Ok(n) if (MIN_SIZE..=max).contains(&n) => Some(n),
        Ok(_) => {
            let key = path.rsplit('.').next().unwrap_or(path);
            ck.report_at(value, path, format!("{key} must be between 1KiB and {}GiB", max >> 30));
            None
        }
        Err(message) => {
            ck.report_at(value, path, message);
            None
        }
    }
}

/// At most 1 GiB here, which fits `usize` on every supported target.
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BASE: &str = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
                        password = \"p\"\nbackends = [{ host = \"db1\", port = 5433 }]\n\n[routing]\ndefault_pool = \"main\"\n";

    fn parse(limits: &str) -> Result<Config, String> {
        Config::parse(&format!("{BASE}\n[limits]\n{limits}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_values() {
        let d = parse("").expect("empty [limits]").limits;
        assert_eq!(d, super::Limits::default());
        assert_eq!((d.session_prepared_statements.get(), d.long_data), (10_000, 64 << 20));
        let l = parse(
            "session_prepared_statements = 5\nsession_prepared_bytes = \"1MiB\"\nlong_data = \"2MiB\"\n\
             client_buffer_budget = \"2GiB\"\n",
        )
        .expect("valid")
        .limits;
        assert_eq!(l.session_prepared_statements.get(), 5);
        assert_eq!((l.session_prepared_bytes, l.long_data, l.client_buffer_budget), (1 << 20, 2 << 20, 2 << 30));
    }

    #[test]
    fn each_bad_value_is_reported_with_its_key() {
        for (text, key, message) in [
            ("session_prepared_statements = 0", "limits.session_prepared_statements", "at least 1"),
            ("session_prepared_bytes = \"100\"", "limits.session_prepared_bytes", "between 1KiB and 1GiB"),
            ("long_data = \"2GiB\"", "limits.long_data", "between 1KiB and 1GiB"),
            ("client_buffer_budget = \"lots\"", "limits.client_buffer_budget", "invalid size"),
            ("held_rows = 1", "held_rows", "unknown field"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(key) && err.contains(message), "{text}: {err}");
        }
    }
}
