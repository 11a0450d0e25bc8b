//! The ParameterStatus set a PostgreSQL client served by a MySQL pool is greeted with. Clients
//! read these to decide how to talk (libpq's server version and string escaping, JDBC's
//! `integer_datetimes`, every driver's `client_encoding`), so they describe what the bridge
//! really does: UTF-8 text (the bridge sets `utf8mb4` on its MySQL connections), ISO dates,
//! integer timestamps, and `standard_conforming_strings = on`: the bridge reads the client's
//! strings that way, re-serialises each literal for MySQL, and runs its MySQL connections with
//! `NO_BACKSLASH_ESCAPES`, so backslashes are ordinary characters at both ends (#33).

/// The PostgreSQL version the bridge reports; clients gate features on it, and the bridge
/// speaks protocol 3.0 as that version does.
const PG_VERSION: &str = "16.0";

/// The parameters for a MySQL server that reported `mysql_version` in its handshake.
#[must_use]
pub fn pg_parameters(mysql_version: &str) -> Vec<(String, String)> {
    let version = format!("{PG_VERSION} (QueryPilot bridge to MySQL {mysql_version})");
    [
        ("server_version", version.as_str()),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO, MDY"),
        ("IntervalStyle", "postgres"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("TimeZone", "UTC"),
        ("is_superuser", "off"),
        ("application_name", ""),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_a_parseable_version_and_utf8() {
        let p = pg_parameters("11.4.2-MariaDB");
        let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let version = get("server_version").unwrap_or_default();
        // libpq parses the leading "major.minor".
        assert!(version.starts_with("16.0 "), "{version}");
        assert!(version.contains("11.4.2-MariaDB"));
        assert_eq!(get("client_encoding"), Some("UTF8"));
        assert_eq!(get("integer_datetimes"), Some("on"));
        assert_eq!(get("standard_conforming_strings"), Some("on"));
    }
}
