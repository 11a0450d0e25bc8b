//! Scalar value grammars of the configuration file: durations ("250ms", "30s"), byte sizes
//! ("64MiB") and the keyword enums. Parsing and formatting live together so that
//! [`crate::config::Config::redacted_toml`] writes back exactly what [`parse_duration`] and
//! [`parse_size`] accept.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Duration units accepted in the file, largest first (formatting picks the largest exact one).
const DURATION_UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

/// Binary size units, largest first. Decimal units (KB, MB) are refused on purpose: DBAs mix them
/// up and a factor of 1.024 matters for message limits.
const SIZE_UNITS: [(&str, u64); 4] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];

/// Parses a duration written as an unsigned integer followed by a unit: `ms`, `s`, `m` or `h`
/// (e.g. "250ms", "10s", "5m", "1h", "0s"). A bare number is refused because its unit would be a
/// guess.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (digits, unit) = split_number(s.trim());
    if digits.is_empty() {
        return Err(format!(
            "invalid duration \"{s}\": expected a number with a unit, e.g. \"250ms\", \"10s\", \"5m\", \"1h\""
        ));
    }
    if unit.is_empty() {
        return Err(format!("invalid duration \"{s}\": missing unit (ms, s, m or h)"));
    }
    let Some(&(_, millis_per_unit)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!("invalid duration \"{s}\": unit must be one of ms, s, m, h"));
    };
    let count: u64 = digits.parse().map_err(|_| format!("invalid duration \"{s}\": number too large"))?;
    let millis =
        count.checked_mul(millis_per_unit).ok_or_else(|| format!("invalid duration \"{s}\": number too large"))?;
    Ok(Duration::from_millis(millis))
}

/// Parses a byte size: a bare number of bytes ("512") or a number with a binary unit
/// (`B`, `KiB`, `MiB`, `GiB`), e.g. "64KiB", "16MiB", "1GiB".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = split_number(s.trim());
    if digits.is_empty() {
        return Err(format!(
            "invalid size \"{s}\": expected a number of bytes with an optional unit, e.g. \"64KiB\", \"16MiB\""
        ));
    }
    let multiplier = if unit.is_empty() {
        1
    } else if let Some(&(_, m)) = SIZE_UNITS.iter().find(|(name, _)| *name == unit) {
        m
    } else {
        return Err(format!("invalid size \"{s}\": unit must be one of B, KiB, MiB, GiB"));
    };
    let count: u64 = digits.parse().map_err(|_| format!("invalid size \"{s}\": number too large"))?;
    count.checked_mul(multiplier).ok_or_else(|| format!("invalid size \"{s}\": number too large"))
}

/// Writes a duration in the largest unit that represents it exactly. Sub-millisecond parts, which
/// the file cannot express, are dropped.
pub(crate) fn format_duration(d: Duration) -> String {
    let millis = d.as_millis();
    for (name, per_unit) in DURATION_UNITS {
        let per_unit = u128::from(per_unit);
        if millis != 0 && millis % per_unit == 0 {
            return format!("{}{name}", millis / per_unit);
        }
    }
    format!("{millis}ms")
}

/// Writes a size in the largest binary unit that represents it exactly.
pub(crate) fn format_size(bytes: u64) -> String {
    for (name, per_unit) in SIZE_UNITS {
        if bytes != 0 && bytes % per_unit == 0 && per_unit > 1 {
            return format!("{}{name}", bytes / per_unit);
        }
    }
    bytes.to_string()
}

/// Splits "250ms" into ("250", "ms"); the digits are ASCII only.
fn split_number(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (&s[..end], s[end..].trim_start())
}

/// Declares a keyword enum: `FromStr` with an error listing the accepted words, `as_str`, Display.
macro_rules! keyword_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident => $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// The keyword that names this value in the configuration file.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word),+
                }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok(Self::$variant),)+
                    _ => Err(format!(
                        concat!("invalid ", $what, " \"{}\": expected one of {}"),
                        s,
                        [$(concat!("\"", $word, "\"")),+].join(", ")
                    )),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

keyword_enum!(
    /// A wire protocol, of a listener (what clients speak) or of a pool's backends.
    Protocol, "protocol" {
        /// PostgreSQL frontend/backend protocol v3.
        Postgres => "postgres",
        /// MySQL/MariaDB client/server protocol.
        MySql => "mysql",
    }
);

keyword_enum!(
    /// What a client's database name that no pool serves gets.
    UnknownDatabase, "unknown database policy" {
        /// Refused: 3D000 (PostgreSQL) / 1049 (MySQL), as the server would.
        Error => "error",
        /// Served by the protocol's default pool (the behaviour before this setting existed).
        DefaultPool => "default_pool",
    }
);

keyword_enum!(
    /// How log lines are written.
    LogFormat, "log format" {
        /// Human-readable lines.
        Text => "text",
        /// One JSON object per line, for log shippers.
        Json => "json",
    }
);

keyword_enum!(
    /// How long a client keeps a backend connection (PgBouncer's pool_mode).
    PoolMode, "pool mode" {
        /// For the whole client session.
        Session => "session",
        /// Until the transaction ends.
        Transaction => "transaction",
        /// For one statement only; multi-statement transactions are refused.
        Statement => "statement",
    }
);

keyword_enum!(
    /// How a pattern rule's `pattern` is matched.
    PatternKind, "pattern type" {
        /// A SQL text whose literals are placeholders, matched by fingerprint.
        Template => "template",
        /// A regular expression over the SQL text (`regex` crate syntax).
        Regex => "regex",
        /// A decimal u64 fingerprint as shown by the admin API.
        Hash => "hash",
    }
);

keyword_enum!(
    /// What a PostgreSQL-protocol pool's backends are (#35): PostgreSQL itself, or another
    /// engine that speaks its wire protocol (DuckDB behind buenavista, ...), on which the router
    /// runs only what the client sends plus its configured `health.check_query`.
    Engine, "engine" {
        /// PostgreSQL: health by `pg_is_in_recovery()` and WAL positions, session settings
        /// restored with `RESET`/`SET` on each connection a client is handed.
        Postgres => "postgres",
        /// Another engine: health by `health.check_query`, no settings restored, no role or
        /// replication probing.
        Generic => "generic",
    }
);

keyword_enum!(
    /// How a pool spreads statements over its backends (#22): each checkout outside a
    /// transaction chooses a backend, then reuses an idle connection to it.
    Balance, "balance" {
        /// Smooth weighted round-robin by `weight`; ties go to the backend with the fewest
        /// statements outstanding on this core.
        Weighted => "weighted",
        /// Every healthy backend in turn, ignoring `weight`.
        RoundRobin => "round_robin",
        /// The backend with the fewest outstanding statements (and connections being opened)
        /// per unit of `weight`, in whole units, ties by the weighted round-robin (the default: connections
        /// held by long transactions count, and a fixed pattern of checkouts per request cannot
        /// line up with the rotation; see tuning.md).
        LeastOutstanding => "least_outstanding",
    }
);

keyword_enum!(
    /// What a pool's backends are: the primary takes anything; a replica only statements analysis
    /// proved replica-safe, whatever rule, hint or translation chose it (#19).
    PoolRole, "pool role" {
        /// Writable primary server(s).
        Primary => "primary",
        /// Read-only replica(s): PostgreSQL hot standby, MySQL/MariaDB replica.
        Replica => "replica",
    }
);

keyword_enum!(
    /// What to do with a read when no replica is eligible (all down or lagging).
    ReplicaFallback, "replica fallback" {
        /// Send it to the primary (write) pool.
        Primary => "primary",
        /// Fail the statement.
        Error => "error",
    }
);

keyword_enum!(
    /// How statements are normalized into the plan-cache key.
    NormalizationStrategy, "normalization strategy" {
        /// Lexer-based literal stripping (fast, the default).
        String => "string",
        /// Parse into an AST and fingerprint it (slower, merges formatting variants).
        Ast => "ast",
        /// String first, AST when the lexer cannot decide.
        Auto => "auto",
    }
);

keyword_enum!(
    /// The password exchange a postgres listener demands from clients.
    ClientAuth, "auth method" {
        /// SCRAM-SHA-256 (RFC 5802/7677), the default.
        ScramSha256 => "scram-sha-256",
        /// Legacy MD5 password hashing.
        Md5 => "md5",
    }
);

keyword_enum!(
    /// How a pool's connections to PostgreSQL backends are encrypted (#38), as libpq's
    /// `sslmode` words it.
    TlsMode, "tls mode" {
        /// Plaintext; no SSLRequest is sent. The default.
        Disable => "disable",
        /// TLS when the server accepts it, plaintext when it answers the SSLRequest with `N`;
        /// the certificate is not verified.
        Prefer => "prefer",
        /// TLS or no connection; the certificate is not verified (libpq's `require` without a
        /// root file).
        Require => "require",
        /// TLS with the server's chain verified against `tls_ca_file` (else the built-in roots);
        /// the name is not checked.
        VerifyCa => "verify-ca",
        /// TLS with the chain verified and the certificate valid for `tls_server_name` (by
        /// default the backend's host).
        VerifyFull => "verify-full",
    }
);

impl Default for TlsMode {
    /// Plaintext, as before TLS existed: a configuration that says nothing keeps working.
    fn default() -> Self {
        Self::Disable
    }
}

impl TlsMode {
    /// Whether the server's certificate chain is checked.
    pub fn verifies(self) -> bool {
        matches!(self, Self::VerifyCa | Self::VerifyFull)
    }
}

keyword_enum!(
    /// Whether a listener terminates TLS for its clients (#38).
    ClientTls, "listener tls mode" {
        /// Plaintext only: PostgreSQL's SSLRequest is answered `N`, MySQL's greeting offers no
        /// SSL. The default.
        Disable => "disable",
        /// TLS for clients that ask for it, plaintext for the others.
        Allow => "allow",
        /// TLS only: a plaintext login is refused with the server's own error.
        Require => "require",
    }
);

impl Default for ClientTls {
    /// Plaintext, as the router was before it terminated TLS: a configuration that says
    /// nothing keeps working.
    fn default() -> Self {
        Self::Disable
    }
}

/// How long after a write a session's reads stay on the primary, so it reads its own writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadYourWrites {
    /// Reads may go to replicas right after a write.
    None,
    /// Once a session wrote, all its later reads go to the primary.
    Session,
    /// Reads go to the primary for this long after the session's last write.
    Window(Duration),
    /// After a write, reads go to a replica that has replayed the session's last commit, else
    /// (after `routing.causal_wait`) to the primary (#22). The default.
    Causal,
}

impl FromStr for ReadYourWrites {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Self::None),
            "session" => Ok(Self::Session),
            "causal" => Ok(Self::Causal),
            _ => match parse_duration(s) {
                Ok(d) if d.is_zero() => Err("a zero window means no read-your-writes; write \"none\"".to_string()),
                Ok(d) => Ok(Self::Window(d)),
                Err(_) => Err(format!(
                    "invalid read_your_writes \"{s}\": expected \"session\", \"causal\", \"none\" or a duration like \"2s\""
                )),
            },
        }
    }
}

impl fmt::Display for ReadYourWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Session => f.write_str("session"),
            Self::Causal => f.write_str("causal"),
            Self::Window(d) => f.write_str(&format_duration(*d)),
        }
    }
}
