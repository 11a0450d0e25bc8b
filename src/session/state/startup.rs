//! The parts of a PostgreSQL startup packet that become session settings: the `options`
//! parameter (PostgreSQL 55.2.1 / libpq's `PGOPTIONS`: `-c name=value` and `--name=value`
//! switches) and client encoding names. Sans-IO and pure.

use crate::protocol::pg::sqlstate;

/// Why an `options` startup parameter was refused, with the server's own words: a malformed
/// switch must neither reach a server as a statement nor set anything else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// A switch other than `-c` / `--name=value` (those set server-wide state, or nothing the
    /// router can apply per client), an argument that is no switch, or `-c` without argument.
    #[error("invalid command-line argument for server process: {0}")]
    Unsupported(String),
    /// `-c name` or `--name` without `=value`; holds the switch as written (`-c name`, `--name`).
    #[error("{0} requires a value")]
    MissingValue(String),
    /// `-c=value` or `--=value`: a setting without a name, which no server has.
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownParameter(String),
}

impl OptionsError {
    /// The SQLSTATE PostgreSQL refuses the same `options` with.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Self::UnknownParameter(_) => sqlstate::UNDEFINED_OBJECT,
            Self::Unsupported(_) | Self::MissingValue(_) => sqlstate::SYNTAX_ERROR,
        }
    }
}

/// Splits `options` the way the server does (whitespace separates arguments, a backslash
/// escapes the next character) and returns the `(name, value)` settings of its `-c` and `--`
/// switches, in order. Dashes in names become underscores, as the server's `ParseLongOption`.
/// A lone `--` ends the switches, as the server's `getopt` treats it; an argument after it is
/// refused like any argument that is not a switch.
pub fn parse_options(options: &str) -> Result<Vec<(String, String)>, OptionsError> {
    let args = split_args(options);
    let mut out = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (setting, shown) = if arg == "--" {
            return match it.next() {
                Some(extra) => Err(OptionsError::Unsupported(extra)),
                None => Ok(out),
            };
        } else if let Some(long) = arg.strip_prefix("--") {
            (long.to_owned(), arg.clone())
        } else if let Some(short) = arg.strip_prefix("-c") {
            let setting =
                if short.is_empty() { it.next().ok_or(OptionsError::Unsupported(arg))? } else { short.to_owned() };
            let shown = format!("-c {setting}");
            (setting, shown)
        } else {
            return Err(OptionsError::Unsupported(arg));
        };
        let Some((name, value)) = setting.split_once('=') else { return Err(OptionsError::MissingValue(shown)) };
        if name.is_empty() {
            return Err(OptionsError::UnknownParameter(String::new()));
        }
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
mod tests;
