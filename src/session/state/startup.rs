//! The parts of a PostgreSQL startup packet that become session settings: the `options`
//! parameter (PostgreSQL 55.2.1 / libpq's `PGOPTIONS`: `-c name=value` and `--name=value`
//! switches), client encoding names, the causal token, and what the client is shown of the
//! server's parameters in its greeting. Sans-IO and pure: the login around it does the I/O.

use super::SessionState;
use crate::id::{CancelKey, Token};
use crate::protocol::pg::{backend, sqlstate, Authentication, TransactionStatus};
use crate::routing::causal::{parse_token, TOKEN_NAME};
use crate::session::client_error::PgClientError;

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

/// SQLSTATE for an invalid causal token (#22) or startup setting (invalid_parameter_value).
pub const INVALID_PARAMETER_VALUE: &str = "22023";

/// The client's startup parameters, `options` settings included.
pub struct ClientParams {
    pub values: Vec<(String, String)>,
    /// Whether `options` carried settings (they are checked by the server before the greeting).
    pub options: bool,
}

/// Adds the settings of the `options` startup parameter before the other parameters, which
/// win over them as on the server (`PGOPTIONS='-c x=1'` with `x=2` in the packet gives 2).
pub fn with_options(params: Vec<(String, String)>, options: Option<&str>) -> Result<ClientParams, PgClientError> {
    let from_options =
        parse_options(options.unwrap_or("")).map_err(|e| PgClientError::new(e.sqlstate(), e.to_string()))?;
    let has_options = !from_options.is_empty();
    let mut values: Vec<(String, String)> =
        from_options.into_iter().filter(|(k, _)| !params.iter().any(|(p, _)| p.eq_ignore_ascii_case(k))).collect();
    values.extend(params);
    Ok(ClientParams { values, options: has_options })
}

/// Takes the causal token (#22) out of the startup parameters (a setting of the router, never
/// sent to a server): `querypilot.causal_token` as a parameter of its own or in `options`
/// (`-c querypilot.causal_token=...`). An invalid token refuses the login with 22023, as the
/// server refuses an invalid value of a startup setting.
pub fn causal_token(values: &mut Vec<(String, String)>) -> Result<Option<Token>, PgClientError> {
    let Some(i) = values.iter().position(|(k, _)| k.eq_ignore_ascii_case(TOKEN_NAME)) else { return Ok(None) };
    let (_, token) = values.remove(i);
    values.retain(|(k, _)| !k.eq_ignore_ascii_case(TOKEN_NAME));
    parse_token(&token).map(Some).map_err(|e| PgClientError::new(INVALID_PARAMETER_VALUE, e.to_string()))
}

/// What a client's startup parameters make of its session on a server.
pub struct Greeting {
    /// The client's values that differ from the server's.
    pub state: SessionState,
    /// The server's parameters as the client is shown them: overridden by what it asked for.
    pub shown: Vec<(String, String)>,
    /// Whether the client's values must be checked on a server before the greeting: `options`
    /// settings, which the server refuses or accepts, and values shown in the server's own
    /// spelling, which only the server knows for most of them.
    pub check: bool,
}

/// The greeting `params` get from a server reporting `server`.
pub fn greeting(params: ClientParams, server: &[(String, String)]) -> Greeting {
    let server_value = |name: &str| server.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    // Only parameters that differ from the server's defaults need replaying on borrowed connections.
    let differing: Vec<(String, String)> =
        own_values(params.values).into_iter().filter(|(k, v)| server_value(k) != Some(v.as_str())).collect();
    let state = SessionState::from_startup(differing.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let unknown_spelling = differing.iter().any(|(k, v)| server_value(k).is_some() && !spelled_as_server(k, v));
    let shown = server
        .iter()
        .map(|(name, value)| {
            let own = differing.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
            (name.clone(), own.unwrap_or(value).clone())
        })
        .collect();
    Greeting { state, shown, check: params.options || unknown_spelling }
}

/// The client's own values: what it sent, with the UTF-8 client encoding in the server's
/// spelling, and an empty `application_name` when it sent none (the router's connections carry
/// the router's name, which is not the client's).
fn own_values(mut values: Vec<(String, String)>) -> Vec<(String, String)> {
    for (k, v) in values.iter_mut() {
        if k.eq_ignore_ascii_case("client_encoding") {
            if let Some(canonical) = canonical_utf8(v) {
                *v = canonical.to_owned();
            }
        }
    }
    if !values.iter().any(|(k, _)| k.eq_ignore_ascii_case("application_name")) {
        values.push(("application_name".to_owned(), String::new()));
    }
    values
}

/// Whether the server reports `value` of `name` exactly as the client spelled it.
fn spelled_as_server(name: &str, value: &str) -> bool {
    // The server keeps an application name of printable ASCII below NAMEDATALEN as given.
    let plain_name = value.len() < 64 && value.bytes().all(|b| (b' '..=b'~').contains(&b));
    (name.eq_ignore_ascii_case("application_name") && plain_name)
        || (name.eq_ignore_ascii_case("client_encoding") && value == "UTF8")
}

/// The greeting after authentication: AuthenticationOk, the parameters shown, the client's
/// cancel key and the first ReadyForQuery (PostgreSQL 55.2.2).
pub fn encode_greeting(shown: &[(String, String)], key: CancelKey, out: &mut Vec<u8>) {
    let _ = backend::encode_authentication(&Authentication::Ok, out);
    for (name, value) in shown {
        let _ = (backend::BackendMessage::ParameterStatus { name, value }).encode(out);
    }
    let _ = (backend::BackendMessage::BackendKeyData { pid: key.pid, key: key.secret }).encode(out);
    backend::encode_ready_for_query(TransactionStatus::Idle, out);
}

/// The SQLSTATE a refused startup setting is reported with: the server's, among those it
/// raises for settings (an unknown one becomes invalid_parameter_value).
pub fn startup_sqlstate(code: &str) -> &'static str {
    const CODES: [&str; 7] = [INVALID_PARAMETER_VALUE, "42704", "42501", "55P02", "22P02", "42601", "0A000"];
    CODES.iter().find(|c| **c == code).copied().unwrap_or(INVALID_PARAMETER_VALUE)
}

#[cfg(test)]
mod tests;
