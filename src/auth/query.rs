//! The auth query's text (#23): the configured query with the user name in place of its
//! placeholder, as a literal no name can break out of (its answer is read by
//! [`crate::auth::account`]).
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
}
