//! The auth query's text (#23): the configured query with the user name in place of its
//! placeholder, as a literal no name can break out of, and the secret read from its answer.
//! Pure; running it belongs to the pool, which owns backend connections.

/// The PostgreSQL query with every `$1` replaced by `user` as an escape string literal
/// (`E'…'` reads backslashes as escapes whatever `standard_conforming_strings` says, so
/// doubling both `\` and `'` quotes any name).
pub fn bind_pg(query: &str, user: &str) -> String {
    let escaped = user.replace('\\', "\\\\").replace('\'', "''");
    query.replace("$1", &format!("E'{escaped}'"))
}

/// The MySQL query with every `?` replaced by `user` as a hexadecimal literal (`X'…'`),
/// which no `sql_mode` or character set reads differently and no name can close.
pub fn bind_mysql(query: &str, user: &str) -> String {
    let hex: String = user.bytes().map(|b| format!("{b:02X}")).collect();
    let literal = if hex.is_empty() { "''".to_owned() } else { format!("X'{hex}'") };
    query.replace('?', &literal)
}

/// The secret in an auth query's answer: the last column of its first row. `None` when there
/// is no row (an unknown user) or the value is NULL (a user without a password).
pub fn secret_of(rows: &[Vec<Option<String>>]) -> Option<String> {
    rows.first()?.last()?.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_so_they_cannot_end_the_literal() {
        let q = "SELECT rolname, rolpassword FROM pg_authid WHERE rolname = $1";
        assert_eq!(bind_pg(q, "alice"), "SELECT rolname, rolpassword FROM pg_authid WHERE rolname = E'alice'");
        assert_eq!(bind_pg("x = $1", "a'; DROP ROLE b; --"), "x = E'a''; DROP ROLE b; --'");
        assert_eq!(bind_pg("x = $1", "a\\'b"), "x = E'a\\\\''b'");
        assert_eq!(bind_mysql("SELECT 1 FROM t WHERE User = ?", "ab'"), "SELECT 1 FROM t WHERE User = X'616227'");
        assert_eq!(bind_mysql("User = ?", ""), "User = ''");
    }

    #[test]
    fn the_secret_is_the_last_column_of_the_first_row() {
        let row = |v: &[Option<&str>]| v.iter().map(|s| s.map(str::to_owned)).collect::<Vec<_>>();
        assert_eq!(
            secret_of(&[row(&[Some("alice"), Some("md5abc")]), row(&[Some("x"), Some("y")])]),
            Some("md5abc".into())
        );
        assert_eq!(secret_of(&[row(&[Some("alice"), None])]), None, "NULL: no password");
        assert_eq!(secret_of(&[]), None, "no row: unknown user");
    }
}
