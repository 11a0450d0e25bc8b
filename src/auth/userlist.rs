//! PgBouncer's auth file format (`userlist.txt`), so operators can reuse theirs: one
//! `"user" "secret"` per line, both double-quoted with `""` standing for a quote inside; blank
//! lines and lines starting with `;` or `#` are comments; anything after the second field is
//! ignored, as PgBouncer does.

use std::collections::BTreeMap;

/// Why an auth file was refused: the first bad line, by number, never with its secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserlistError {
    /// A line that is neither a comment nor two quoted fields.
    #[error("line {line}: expected \"user\" \"secret\"")]
    Malformed {
        /// 1-based line number.
        line: usize,
    },
    /// The same user twice: which entry wins would be a guess.
    #[error("line {line}: user \"{user}\" is listed twice")]
    Duplicate {
        /// 1-based line number of the second entry.
        line: usize,
        /// The user.
        user: String,
    },
}

/// Parses an auth file into user → secret text (see [`crate::auth::Verifier::parse`]).
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, UserlistError> {
    let mut users = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        let (user, rest) = quoted(trimmed).ok_or(UserlistError::Malformed { line })?;
        let (secret, _) = quoted(rest.trim_start()).ok_or(UserlistError::Malformed { line })?;
        if user.is_empty() {
            return Err(UserlistError::Malformed { line });
        }
        if users.contains_key(&user) {
            return Err(UserlistError::Duplicate { line, user });
        }
        users.insert(user, secret);
    }
    Ok(users)
}

/// One `"…"` field at the start of `s` with `""` unescaped, and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut rest = s.strip_prefix('"')?;
    let mut out = String::new();
    loop {
        let end = rest.find('"')?;
        out.push_str(rest.get(..end)?);
        rest = rest.get(end + 1..)?;
        match rest.strip_prefix('"') {
            Some(after) => {
                out.push('"');
                rest = after;
            }
            None => return Some((out, rest)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pgbouncer_entries_and_comments() {
        let text = "; PgBouncer comment\n# another\n\n\"alice\" \"SCRAM-SHA-256$4096:c2FsdA==$a:b\"\n  \"bob\"   \"md5abc\" trailing\n\"q\"\"uote\" \"pa\"\"ss\"\n";
        let users = parse(text).expect("valid");
        assert_eq!(users.len(), 3);
        assert_eq!(users.get("alice").map(String::as_str), Some("SCRAM-SHA-256$4096:c2FsdA==$a:b"));
        assert_eq!(users.get("bob").map(String::as_str), Some("md5abc"));
        assert_eq!(users.get("q\"uote").map(String::as_str), Some("pa\"ss"));
    }

    #[test]
    fn bad_lines_are_named_without_their_secret() {
        assert_eq!(parse("\"alice\" secret\n"), Err(UserlistError::Malformed { line: 1 }));
        assert_eq!(parse("\n\"alice\" \"unterminated\n"), Err(UserlistError::Malformed { line: 2 }));
        assert_eq!(parse("\"\" \"x\"\n"), Err(UserlistError::Malformed { line: 1 }));
        let dup = parse("\"a\" \"one\"\n\"a\" \"two\"\n").unwrap_err();
        assert_eq!(dup, UserlistError::Duplicate { line: 2, user: "a".into() });
        assert!(!dup.to_string().contains("two"));
    }
}
