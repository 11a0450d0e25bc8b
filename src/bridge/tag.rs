//! CommandComplete tags (PostgreSQL docs, "Message Formats", CommandComplete) → the affected-rows
//! count of a MySQL OK packet.

/// Rows affected according to `tag`: the last number of `INSERT 0 n`, `UPDATE n`, `DELETE n`,
/// `MERGE n`, `SELECT n` (CREATE TABLE AS), `COPY n`, `MOVE n`, `FETCH n`; 0 for other commands.
#[must_use]
pub fn affected_rows(tag: &str) -> u64 {
    let mut words = tag.split_ascii_whitespace();
    let counted = matches!(words.next(), Some("INSERT" | "UPDATE" | "DELETE" | "MERGE" | "SELECT" | "COPY" | "MOVE" | "FETCH"));
    if !counted {
        return 0;
    }
    words.last().and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags() {
        assert_eq!(affected_rows("INSERT 0 3"), 3);
        assert_eq!(affected_rows("UPDATE 12"), 12);
        assert_eq!(affected_rows("DELETE 0"), 0);
        assert_eq!(affected_rows("MERGE 4"), 4);
        assert_eq!(affected_rows("SELECT 7"), 7);
        assert_eq!(affected_rows("COPY 18446744073709551615"), u64::MAX);
        assert_eq!(affected_rows("CREATE TABLE"), 0);
        assert_eq!(affected_rows("BEGIN"), 0);
        assert_eq!(affected_rows(""), 0);
        assert_eq!(affected_rows("INSERT 0 x"), 0);
    }
}
