//! Session settings carried to the other engine for one statement routed there (#24), both
//! ways: each setting a client made (as the router tracks it: the setting's name and the `SET`
//! statement that restores it) either maps to `SET` statements of the other engine, needs none
//! (the setting does not change what a statement there returns), or cannot be mapped, in which
//! case the statement is refused rather than run with different semantics.
//!
//! MySQL to PostgreSQL ([`to_postgres`]):
//!
//! Mapped: `time_zone` (offsets and named zones), the session's transaction isolation level and
//! access mode. Needing none: UTF-8 character sets, `sql_mode` (PostgreSQL always behaves as
//! MySQL's strict, ANSI-quoted modes; the translated text is PostgreSQL's dialect), `autocommit`
//! (the session refuses statements routed across while it is off) and connector housekeeping
//! (timeouts, session tracking, notes). Everything else is unmappable.
//!
//! PostgreSQL to MySQL ([`to_mysql`]): mapped: `TimeZone` (UTC, offsets and named zones), the
//! default transaction isolation and access mode. Needing none: a UTF-8 or `SQL_ASCII`
//! `client_encoding` (the bridge sets `utf8mb4` on every MySQL connection), an ISO `DateStyle`
//! (the bridge writes ISO dates), `standard_conforming_strings = on`, and settings that change no
//! result (`application_name`, `extra_float_digits`, `client_min_messages`, `lc_messages`).
//! Everything else (`search_path`, `statement_timeout`, ...) is unmappable.

use std::fmt;

/// A setting the PostgreSQL backend cannot reproduce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmappable {
    /// The MySQL setting's name.
    pub setting: String,
    /// Why it cannot be carried over.
    pub why: &'static str,
    /// The engine it would be carried to ("PostgreSQL" or "MySQL").
    pub to: &'static str,
}

impl fmt::Display for Unmappable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session setting {} cannot be carried to {}: {}", self.setting, self.to, self.why)
    }
}

impl std::error::Error for Unmappable {}

/// Settings that change nothing a PostgreSQL statement returns.
const NEUTRAL: &[&str] = &[
    "autocommit",
    "sql_mode",
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
    "net_read_timeout",
    "net_write_timeout",
    "wait_timeout",
    "interactive_timeout",
    "sql_notes",
    "sql_warnings",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
];

/// The PostgreSQL `SET` statements for `settings` (pairs of name and the MySQL statement that
/// restores it, as `session::mysql::state` keeps them), or the first setting that cannot be
/// mapped.
pub fn to_postgres<'a>(settings: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Vec<String>, Unmappable> {
    let mut out = Vec::new();
    for (name, stmt) in settings {
        let unmappable = |why| Unmappable { setting: name.to_owned(), why, to: "PostgreSQL" };
        match name {
            "names" => {
                if !is_utf8(charset_of_names(stmt)) {
                    return Err(unmappable("results from PostgreSQL are UTF-8; use SET NAMES utf8mb4"));
                }
            }
            "character_set_results" | "character_set_client" | "character_set_connection" => {
                let v = value_of(stmt);
                if !(is_utf8(&v) || v.eq_ignore_ascii_case("null")) {
                    return Err(unmappable("results from PostgreSQL are UTF-8"));
                }
            }
            "time_zone" => out.push(time_zone(&value_of(stmt)).ok_or_else(|| {
                unmappable("only '+hh:mm' offsets and named zones such as 'UTC' or 'Europe/Berlin' map")
            })?),
            "transaction" => {
                let level = isolation(stmt).ok_or_else(|| unmappable("unknown isolation level"))?;
                out.push(format!("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level}"));
            }
            "transaction_access" => {
                let upper = stmt.to_ascii_uppercase();
                let on = upper.contains("READ ONLY") || matches!(value_of(stmt).as_str(), "1" | "ON" | "on" | "TRUE");
                out.push(format!("SET SESSION default_transaction_read_only = {}", if on { "on" } else { "off" }));
            }
            n if NEUTRAL.contains(&n) => {}
            _ => return Err(unmappable("no PostgreSQL equivalent is known")),
        }
    }
    Ok(out)
}

/// The value of `SET SESSION name = value`, unquoted.
fn value_of(stmt: &str) -> String {
    let v = stmt.split_once('=').map_or("", |(_, v)| v).trim();
    unquote(v).to_owned()
}

fn unquote(v: &str) -> &str {
    for q in ['\'', '"'] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// The character set of `SET NAMES cs [COLLATE c]` / `SET CHARACTER SET cs` / `SET CHARSET cs`.
fn charset_of_names(stmt: &str) -> &str {
    let words: Vec<&str> = stmt.split_whitespace().collect();
    let at = words.iter().position(|w| w.eq_ignore_ascii_case("NAMES") || w.eq_ignore_ascii_case("CHARSET"));
    let at = at.or_else(|| words.iter().position(|w| w.eq_ignore_ascii_case("CHARACTER")).map(|i| i + 1));
    at.and_then(|i| words.get(i + 1)).map_or("", |w| unquote(w.trim_end_matches(';')))
}

fn is_utf8(charset: &str) -> bool {
    ["utf8", "utf8mb4", "utf8mb3"].iter().any(|c| charset.eq_ignore_ascii_case(c))
}

/// PostgreSQL's `SET TIME ZONE` for a MySQL `time_zone` value. An offset becomes an interval,
/// because PostgreSQL reads a bare `'+02:00'` as a POSIX zone, whose sign is the opposite of
/// MySQL's. `SYSTEM` (the MySQL server's own zone) is unknown here.
fn time_zone(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let offset = matches!(bytes.first(), Some(b'+' | b'-'))
        && value.len() == 6
        && bytes.get(3) == Some(&b':')
        && [1, 2, 4, 5].iter().all(|i| bytes.get(*i).is_some_and(u8::is_ascii_digit));
    if offset {
        return Some(format!("SET TIME ZONE INTERVAL '{value}' HOUR TO MINUTE"));
    }
    let named = !value.is_empty()
        && !value.eq_ignore_ascii_case("SYSTEM")
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'))
        && value.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    named.then(|| format!("SET TIME ZONE '{value}'"))
}

/// The isolation level of `SET SESSION TRANSACTION ISOLATION LEVEL x` or
/// `SET SESSION transaction_isolation = 'READ-COMMITTED'`.
fn isolation(stmt: &str) -> Option<&'static str> {
    let norm = stmt.to_ascii_uppercase().replace('-', " ");
    ["READ UNCOMMITTED", "READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"].into_iter().find(|l| norm.contains(l))
}

/// PostgreSQL settings that change nothing a MySQL statement returns through the bridge.
const PG_NEUTRAL: &[&str] = &["application_name", "extra_float_digits", "client_min_messages", "lc_messages"];

/// Zone names PostgreSQL accepts for UTC; MySQL knows them only with its time zone tables
/// loaded, so they become the offset every MySQL server knows.
const UTC_NAMES: &[&str] =
    &["UTC", "Etc/UTC", "GMT", "Etc/GMT", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu"];

/// The MySQL `SET` statements for a PostgreSQL session's `settings` (pairs of lower-cased name
/// and the PostgreSQL statement that restores it, as `session::state` keeps them), or the first
/// setting that cannot be mapped.
pub fn to_mysql<'a>(settings: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Vec<String>, Unmappable> {
    let mut out = Vec::new();
    for (name, stmt) in settings {
        let unmappable = |why| Unmappable { setting: name.to_owned(), why, to: "MySQL" };
        let value = pg_value_of(stmt);
        match name {
            "timezone" => out.push(
                mysql_time_zone(&value)
                    .ok_or_else(|| unmappable("only UTC, offsets and named zones such as 'Europe/Berlin' map"))?,
            ),
            "client_encoding" => {
                let v: String = value.chars().filter(char::is_ascii_alphanumeric).collect();
                if !["utf8", "unicode", "sqlascii"].iter().any(|c| v.eq_ignore_ascii_case(c)) {
                    return Err(unmappable("results from MySQL are UTF-8; use client_encoding UTF8"));
                }
            }
            "datestyle" => {
                if !value.to_ascii_uppercase().starts_with("ISO") {
                    return Err(unmappable("results from MySQL are written in the ISO date style"));
                }
            }
            "standard_conforming_strings" => {
                if !value.eq_ignore_ascii_case("on") {
                    return Err(unmappable("statements routed to MySQL are read with standard conforming strings"));
                }
            }
            "default_transaction_isolation" => {
                let level = isolation(&value).ok_or_else(|| unmappable("unknown isolation level"))?;
                out.push(format!("SET SESSION TRANSACTION ISOLATION LEVEL {level}"));
            }
            "default_transaction_read_only" => {
                let on = matches!(value.to_ascii_lowercase().as_str(), "on" | "true" | "1" | "yes");
                out.push(format!("SET SESSION TRANSACTION {}", if on { "READ ONLY" } else { "READ WRITE" }));
            }
            n if PG_NEUTRAL.contains(&n) => {}
            _ => return Err(unmappable("no MySQL equivalent is known")),
        }
    }
    Ok(out)
}

/// The value of a PostgreSQL `SET "name" TO 'value'` (how the router records startup and
/// reported values), `SET name = value` or `SET TIME ZONE value`, unquoted.
fn pg_value_of(stmt: &str) -> String {
    let upper = stmt.to_ascii_uppercase();
    // The earliest marker: a value may itself hold " TO " or "=".
    let words = [(" TO ", 4), ("=", 1), ("TIME ZONE", 9)];
    let at = words.iter().filter_map(|(w, n)| upper.find(w).map(|i| (i, i + n))).min().map(|(_, end)| end);
    let v = at.and_then(|i| stmt.get(i..)).unwrap_or_default().trim().trim_end_matches(';').trim();
    match v.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => v.to_owned(),
    }
}

/// MySQL's `SET time_zone` for a PostgreSQL `TimeZone` value. PostgreSQL reports an interval
/// zone as `<+05:30>-05:30` (the part in brackets is the offset east of UTC) and reads a bare
/// `+05:30` as a POSIX zone, west of UTC: MySQL's offsets are east of UTC.
fn mysql_time_zone(value: &str) -> Option<String> {
    if UTC_NAMES.iter().any(|z| value.eq_ignore_ascii_case(z)) {
        return Some("SET time_zone = '+00:00'".to_owned());
    }
    if let Some((east, _)) = value.strip_prefix('<').and_then(|r| r.split_once('>')) {
        return offset(east, false);
    }
    if value.starts_with(['+', '-']) {
        return offset(value, true);
    }
    let named = value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'))
        && value.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    named.then(|| format!("SET time_zone = '{value}'"))
}

/// `SET time_zone = '±hh:mm'` for `±h[h][:mm]`, its sign flipped when `west`.
fn offset(text: &str, west: bool) -> Option<String> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'+') => (false, text.get(1..)?),
        Some(b'-') => (true, text.get(1..)?),
        _ => return None,
    };
    let (h, m) = rest.split_once(':').unwrap_or((rest, "0"));
    let digits = |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(h) || !digits(m) {
        return None;
    }
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    let sign = if negative != west { '-' } else { '+' };
    Some(format!("SET time_zone = '{sign}{h:02}:{m:02}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(settings: &[(&str, &str)]) -> Result<Vec<String>, Unmappable> {
        to_postgres(settings.iter().copied())
    }

    #[test]
    fn time_zones_map_with_mysql_signs() {
        assert_eq!(
            map(&[("time_zone", "SET SESSION time_zone = '+05:30'")]),
            Ok(vec!["SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE".to_owned()])
        );
        assert_eq!(
            map(&[("time_zone", "SET SESSION time_zone = 'Europe/Berlin'")]),
            Ok(vec!["SET TIME ZONE 'Europe/Berlin'".to_owned()])
        );
        let system = map(&[("time_zone", "SET SESSION time_zone = 'SYSTEM'")]).expect_err("SYSTEM");
        assert_eq!(system.setting, "time_zone");
        assert!(map(&[("time_zone", "SET SESSION time_zone = @@global.time_zone")]).is_err());
        assert!(map(&[("time_zone", "SET SESSION time_zone = 'x''; DROP TABLE t; --'")]).is_err());
    }

    #[test]
    fn utf8_character_sets_need_nothing_and_others_are_refused() {
        assert_eq!(map(&[("names", "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci")]), Ok(vec![]));
        assert_eq!(map(&[("names", "SET NAMES 'utf8'")]), Ok(vec![]));
        assert_eq!(map(&[("names", "SET CHARACTER SET utf8mb4")]), Ok(vec![]));
        assert_eq!(map(&[("character_set_results", "SET SESSION character_set_results = NULL")]), Ok(vec![]));
        assert!(map(&[("names", "SET NAMES latin1")]).is_err());
        assert!(map(&[("character_set_results", "SET SESSION character_set_results = latin1")]).is_err());
    }

    #[test]
    fn sql_mode_and_housekeeping_need_nothing_unknown_settings_are_refused() {
        let neutral = [
            ("sql_mode", "SET SESSION sql_mode = 'ANSI_QUOTES,STRICT_TRANS_TABLES'"),
            ("autocommit", "SET SESSION autocommit = 1"),
            ("net_write_timeout", "SET SESSION net_write_timeout = 600"),
        ];
        assert_eq!(map(&neutral), Ok(vec![]));
        let e = map(&[("sql_select_limit", "SET SESSION sql_select_limit = 10")]).expect_err("changes results");
        assert_eq!(e.setting, "sql_select_limit");
        assert!(e.to_string().contains("sql_select_limit"));
    }

    #[test]
    fn transaction_characteristics_map() {
        assert_eq!(
            map(&[
                ("transaction", "SET SESSION transaction_isolation = 'READ-COMMITTED'"),
                ("transaction_access", "SET SESSION TRANSACTION READ ONLY"),
            ]),
            Ok(vec![
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
                "SET SESSION default_transaction_read_only = on".to_owned(),
            ])
        );
        assert_eq!(
            map(&[("transaction", "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")]),
            Ok(vec!["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE".to_owned()])
        );
    }
    fn to_my(settings: &[(&str, &str)]) -> Result<Vec<String>, Unmappable> {
        to_mysql(settings.iter().copied())
    }

    #[test]
    fn postgres_time_zones_map_with_mysql_signs() {
        let tz = |v: &str| to_my(&[("timezone", &format!("SET \"TimeZone\" TO '{v}'"))]);
        assert_eq!(tz("Etc/UTC"), Ok(vec!["SET time_zone = '+00:00'".to_owned()]));
        assert_eq!(tz("<+05:30>-05:30"), Ok(vec!["SET time_zone = '+05:30'".to_owned()]), "INTERVAL zone");
        assert_eq!(tz("<-03>+03"), Ok(vec!["SET time_zone = '-03:00'".to_owned()]));
        assert_eq!(tz("+02"), Ok(vec!["SET time_zone = '-02:00'".to_owned()]), "POSIX: west of UTC");
        assert_eq!(tz("Europe/Berlin"), Ok(vec!["SET time_zone = 'Europe/Berlin'".to_owned()]));
        let e = tz("x'; DROP TABLE t; --").expect_err("not a zone");
        assert_eq!((e.setting.as_str(), e.to), ("timezone", "MySQL"));
        assert_eq!(
            to_my(&[("timezone", "SET TIME ZONE 'UTC'")]),
            Ok(vec!["SET time_zone = '+00:00'".to_owned()]),
            "a SET the server did not report back"
        );
    }

    #[test]
    fn postgres_encodings_styles_and_housekeeping() {
        let neutral = [
            ("client_encoding", "SET \"client_encoding\" TO 'UTF8'"),
            ("datestyle", "SET \"DateStyle\" TO 'ISO, DMY'"),
            ("application_name", "SET \"application_name\" TO 'psql'"),
            ("extra_float_digits", "SET extra_float_digits = 3"),
        ];
        assert_eq!(to_my(&neutral), Ok(vec![]));
        assert!(to_my(&[("client_encoding", "SET \"client_encoding\" TO 'LATIN1'")]).is_err());
        assert!(to_my(&[("datestyle", "SET \"DateStyle\" TO 'SQL, DMY'")]).is_err());
        let e = to_my(&[("search_path", "SET search_path = a, b")]).expect_err("no equivalent");
        assert_eq!(e.setting, "search_path");
        assert!(e.to_string().contains("search_path") && e.to_string().contains("MySQL"), "{e}");
        assert_eq!(
            to_my(&[
                ("default_transaction_isolation", "SET default_transaction_isolation = 'serializable'"),
                ("default_transaction_read_only", "SET default_transaction_read_only TO on"),
            ]),
            Ok(vec![
                "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE".to_owned(),
                "SET SESSION TRANSACTION READ ONLY".to_owned(),
            ])
        );
    }
}
