//! The parts of a PostgreSQL startup packet that become session settings: the `options`
//! parameter (PostgreSQL 55.2.1 / libpq's `PGOPTIONS`: `-c name=value` and `--name=value`
//! switches) and client encoding names. Sans-IO and pure.

/// Why an `options` startup parameter was refused (the server refuses the same ones).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// A switch other than `-c` / `--name=value` (those set server-wide state, or nothing the
    /// router can apply per client).
    #[error("invalid command-line argument for server process: {0}")]
    Unsupported(String),
    /// `-c name` or `--name` without `=value`.
    #[error("-c {0} requires a value")]
    MissingValue(String),
}

/// Splits `options` the way the server does (whitespace separates arguments, a backslash
/// escapes the next character) and returns the `(name, value)` settings of its `-c` and `--`
/// switches, in order. Dashes in names become underscores, as the server's `ParseLongOption`.
pub fn parse_options(options: &str) -> Result<Vec<(String, String)>, OptionsError> {
    let args = split_args(options);
    let mut out = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let setting = if let Some(long) = arg.strip_prefix("--") {
            long.to_owned()
        } else if let Some(short) = arg.strip_prefix("-c") {
            if short.is_empty() {
                it.next().ok_or_else(|| OptionsError::MissingValue(String::new()))?
            } else {
                short.to_owned()
            }
        } else {
            return Err(OptionsError::Unsupported(arg));
        };
        let Some((name, value)) = setting.split_once('=') else { return Err(OptionsError::MissingValue(setting)) };
        out.push((name.replace('-', "_"), value.to_owned()));
    }
    Ok(out)
}

fn split_args(s: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return args;
        }
        let mut arg = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_ascii_whitespace()) {
            match c {
                '\\' => arg.extend(chars.next()),
                c => arg.push(c),
            }
        }
        args.push(arg);
    }
}

/// The server's name for a client encoding when it is a spelling of UTF-8 (`utf8`, `'utf-8'`,
/// `Unicode`), which covers what drivers send; other names are the server's to canonicalize.
pub fn canonical_utf8(name: &str) -> Option<&'static str> {
    let key: String = name.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_lowercase();
    matches!(key.as_str(), "utf8" | "unicode").then_some("UTF8")
}

/// Whether `encoding` (the server's canonical name) is a client-only multi-byte encoding whose
/// trailing bytes can be ASCII (`\`, letters): its statements cannot be lexed as if they were
/// UTF-8 or a single-byte encoding.
pub fn ascii_unsafe_encoding(encoding: &str) -> bool {
    ["SJIS", "SHIFT_JIS_2004", "BIG5", "GBK", "UHC", "GB18030", "JOHAB"]
        .iter()
        .any(|e| e.eq_ignore_ascii_case(encoding))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn parses_every_spelling_of_a_setting() {
        assert_eq!(
            parse_options("-c statement_timeout=1234 -cDateStyle=SQL,DMY --search-path=a,b -c geqo=off"),
            Ok(pairs(&[
                ("statement_timeout", "1234"),
                ("DateStyle", "SQL,DMY"),
                ("search_path", "a,b"),
                ("geqo", "off")
            ]))
        );
        assert_eq!(parse_options("  "), Ok(vec![]));
        assert_eq!(
            parse_options(r"-c application_name=my\ app -c x.y=a\\b"),
            Ok(pairs(&[("application_name", "my app"), ("x.y", r"a\b")]))
        );
        assert_eq!(parse_options("-c search_path="), Ok(pairs(&[("search_path", "")])));
    }

    #[test]
    fn refuses_what_it_cannot_apply() {
        assert_eq!(parse_options("-B 100"), Err(OptionsError::Unsupported("-B".into())));
        assert_eq!(parse_options("-c"), Err(OptionsError::MissingValue(String::new())));
        assert_eq!(parse_options("-c work_mem"), Err(OptionsError::MissingValue("work_mem".into())));
        assert_eq!(parse_options("--work_mem"), Err(OptionsError::MissingValue("work_mem".into())));
        assert_eq!(parse_options("work_mem=1"), Err(OptionsError::Unsupported("work_mem=1".into())));
    }

    #[test]
    fn knows_the_spellings_of_utf8_and_the_unsafe_encodings() {
        for s in ["utf8", "UTF8", "utf-8", "'utf-8'", "Unicode"] {
            assert_eq!(canonical_utf8(s), Some("UTF8"), "{s}");
        }
        assert_eq!(canonical_utf8("latin9"), None);
        assert!(ascii_unsafe_encoding("SJIS") && ascii_unsafe_encoding("gb18030"));
        assert!(!ascii_unsafe_encoding("LATIN9") && !ascii_unsafe_encoding("EUC_JP") && !ascii_unsafe_encoding("UTF8"));
    }
}
