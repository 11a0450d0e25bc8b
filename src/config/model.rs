//! The typed, validated configuration that the rest of the router consumes. Every value here has
//! passed validation: pools named anywhere exist, regexes compile, limits are in range.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::value::{
    Balance, ClientAuth, ClientTls, Engine, LogFormat, NormalizationStrategy, PatternKind, PoolMode, PoolRole,
    Protocol, ReadYourWrites, ReplicaFallback, TlsMode, UnknownDatabase,
};

/// `[general]`: process-wide settings.
#[derive(Debug, Clone, PartialEq)]
pub struct General {
    /// Pool mode of pools that do not set `mode`. Reload: yes (new checkouts).
    pub pool_mode: PoolMode,
    /// CPU ids to run one core on each; `None` means every CPU the process may use. Restart only.
    pub cores: Option<Vec<usize>>,
    /// How long shutdown waits for sessions to finish before closing them.
    pub shutdown_drain: Duration,
    /// Log filter, e.g. "info" or "querypilot=debug,info".
    pub log_level: String,
    /// File the log is appended to (reopened on SIGHUP and SIGUSR1); `None` = stdout. Restart only.
    pub log_file: Option<PathBuf>,
    /// Log line format. Restart only.
    pub log_format: LogFormat,
    /// #40: the Unix socket a new binary started with `--take-over` connects to, to take the
    /// listeners and the sessions; created mode 0600, only this user may use it. `None` = no
    /// hand-over. Restart only.
    pub handover_socket: Option<PathBuf>,
    /// #40: during a hand-over, how long sessions busy in a transaction may take to become idle
    /// and move; those still busy then are closed. Reload: yes (the next hand-over).
    pub handover_wait: Duration,
}

/// One `[[listeners]]` entry: a socket clients connect to. Restart only, except `tls`.
#[derive(Debug, Clone, PartialEq)]
pub struct Listener {
    /// Unique name, used as the `listener` metrics label; defaults to "<protocol>-<index>".
    pub name: String,
    /// The protocol clients speak on this socket.
    pub protocol: Protocol,
    /// Address and port to bind (every core binds it with SO_REUSEPORT).
    pub bind: SocketAddr,
    /// Accept clients without checking a password even on a non-loopback address.
    pub allow_anonymous: bool,
    /// Password exchange demanded from postgres clients; always the default on mysql listeners,
    /// where setting it is an error.
    pub auth_method: ClientAuth,
    /// Cap on concurrent client connections on this listener (whole process); `None` = no cap.
    pub max_client_connections: Option<NonZeroU32>,
    /// Largest client message accepted, in bytes (1 KiB ..= 1 GiB); larger frames are refused
    /// before any allocation.
    pub max_message_size: usize,
    /// TLS for the listener's clients (#38). Reload: yes (new connections; established ones
    /// keep the session they have).
    pub tls: ListenerTls,
}

/// A listener's TLS for its clients (#38): the router as a TLS server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListenerTls {
    /// `tls`: disable (default), allow or require.
    pub mode: ClientTls,
    /// `tls_cert_file`: the router's PEM certificate chain (required unless `disable`).
    pub cert_file: Option<PathBuf>,
    /// `tls_key_file`: the PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// `tls_client_ca_file`: PEM bundle client certificates must lead to; set, a client
    /// without such a certificate fails the handshake (mutual TLS). `None` = none asked for.
    pub client_ca_file: Option<PathBuf>,
    /// `tls_client_cert_user`: the client certificate's CN or a DNS SAN must equal the login
    /// user. Needs `client_ca_file`.
    pub client_cert_user: bool,
    /// `tls_resumption`: clients may resume earlier sessions with tickets sealed under a key
    /// made at each load (start, reload), the one TLS state the cores share. Default false.
    pub resumption: bool,
    /// The server configuration built from the files: filled by whoever reads them (start and
    /// reload), `None` until then and with `mode = disable`; never rendered.
    pub server: Option<TlsServer>,
}

/// An immutable rustls server configuration, shared by every core: each new handshake on a
/// listener uses the one the core's current snapshot holds.
#[derive(Clone)]
pub struct TlsServer {
    /// The configuration every new client handshake of the listener is made with.
    pub config: Arc<rustls::ServerConfig>,
    /// SHA-256 over the files it was built from.
    pub files: [u8; 32],
    /// The `tls-server-end-point` channel binding data of its certificate (RFC 5929 4.1), which
    /// SCRAM-SHA-256-PLUS clients of a handshake made with it bind their proofs to; `None` for a
    /// certificate whose signature names no hash (Ed25519, RSA-PSS), which is offered no binding.
    pub end_point: Option<Arc<[u8]>>,
}

impl PartialEq for TlsServer {
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files
    }
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsServer")
    }
}

/// One `[pools.<name>]` table: a set of interchangeable backends and how to use them.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The table name, as referenced by routing and shown in metrics.
    pub name: String,
    /// Pool mode, resolved against `general.pool_mode`.
    pub mode: PoolMode,
    /// Primary or replica; defaults to `replica` for the pool named by `routing.read_pool` (and
    /// no primary pool setting), `primary` otherwise (#19).
    pub role: PoolRole,
    /// The backends' protocol when it differs from the client's (cross-protocol bridge);
    /// `None` means "the client's protocol".
    pub protocol: Option<Protocol>,
    /// What the (PostgreSQL-protocol) backends are: PostgreSQL, or a generic engine that
    /// speaks its wire protocol (#35).
    pub engine: Engine,
    /// Backend user; `None` means the client's own credentials are passed through.
    pub username: Option<String>,
    /// Backend password (never logged; redacted by [`super::Config::redacted_toml`]).
    pub password: Option<String>,
    /// Backend database; defaults to the pool name.
    pub database: String,
    /// At least one backend.
    pub backends: Vec<Backend>,
    /// Connection-count limits.
    pub limits: PoolLimits,
    /// Connection and statement timeouts.
    pub timeouts: PoolTimeouts,
    /// Pass the rows of extended-protocol Executes to the client unchanged, in bulk, instead of
    /// message by message (PostgreSQL clients of a PostgreSQL pool only; see tuning.md).
    pub raw_passthrough: bool,
    /// Relay `LOAD DATA LOCAL INFILE` file requests to clients that enabled them (MySQL pools only).
    pub local_infile: bool,
    /// Retry of failed statements on another backend.
    pub retry: RetryPolicy,
    /// Backend health probing.
    pub health: HealthCheck,
    /// How checkouts spread over the backends (#22).
    pub balance: Balance,
    /// How connections to the backends are encrypted (#38). Reload: yes (new connections).
    pub tls: BackendTls,
    /// How many statements of one shape, or of one user, may hold connections at once (#41).
    /// Reload: yes (the pool is rebuilt; statements running keep their permits).
    pub shape_limits: ShapeLimits,
}

/// A pool's limits per statement shape and its fair share between users (#41), applied where
/// a statement checks out a connection (transaction and statement modes; a session-mode pool
/// lends a connection for a whole session, which no statement limit can help).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShapeLimits {
    /// `adaptive_limit` (default false): learn a concurrency limit for every shape from its
    /// latency and the pool's queue (see `pool::limit`).
    pub adaptive: bool,
    /// `limit_wait` (default "1s"): how long a statement over its limit waits for its turn
    /// before it is refused; never longer than `acquire_timeout`.
    pub wait: Duration,
    /// `[pools.<name>.max_concurrent]`: a fixed limit per shape, keyed by the shape's
    /// `fingerprint_hex` as `GET /api/stats/digests` shows it. A fixed limit wins over a learned one.
    pub max_concurrent: std::collections::BTreeMap<u64, NonZeroU32>,
    /// `fair_share` (default false): while another user waits, no user holds more than its
    /// weighted share of the pool's connections.
    pub fair_share: bool,
    /// `[pools.<name>.share_weights]`: users' weights in the fair share (default 1 each).
    pub share_weights: std::collections::BTreeMap<String, NonZeroU32>,
}

impl ShapeLimits {
    /// Whether anything is limited at all (most pools: no, and checkouts skip the limiter).
    pub fn any(&self) -> bool {
        self.adaptive || self.fair_share || !self.max_concurrent.is_empty()
    }
}

/// A pool's TLS to its backends (#38): every connection the router opens to them uses it
/// (sessions, health probes, auth queries, causal reads, cancel requests).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendTls {
    /// `tls`: disable (default), prefer, require, verify-ca or verify-full.
    pub mode: TlsMode,
    /// `tls_ca_file`: PEM bundle the server's chain is verified against (verify modes only);
    /// `None` = the built-in Mozilla roots.
    pub ca_file: Option<PathBuf>,
    /// `tls_cert_file`: PEM client certificate chain for mutual TLS (with `key_file`).
    pub cert_file: Option<PathBuf>,
    /// `tls_key_file`: PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// `tls_server_name`: SNI and the name verify-full checks; `None` = each backend's own
    /// `tls_server_name`, else its host.
    pub server_name: Option<String>,
    /// The client configuration built from the files: filled by whoever reads them (start and
    /// reload), `None` until then and with `mode = disable`; never rendered.
    pub client: Option<TlsClient>,
}

/// An immutable rustls client configuration, shared by every core (the only TLS state that
/// crosses cores; sessions live in their connections).
#[derive(Clone)]
pub struct TlsClient {
    /// The configuration every connection of the pool is made with.
    pub config: Arc<rustls::ClientConfig>,
    /// SHA-256 over the files it was built from: a reload that changed none of them leaves the
    /// pool (and its open connections) as it is.
    pub files: [u8; 32],
}

impl PartialEq for TlsClient {
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files
    }
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsClient")
    }
}

impl Pool {
    /// The protocol spoken to this pool's backends by a client speaking `client`.
    pub fn backend_protocol(&self, client: Protocol) -> Protocol {
        self.protocol.unwrap_or(client)
    }

    /// Whether the pool logs in with its own credentials rather than the client's.
    pub fn has_credentials(&self) -> bool {
        self.username.is_some() && self.password.is_some()
    }
}

/// `[auth]`: the secrets clients of pass-through pools (no `username`) are checked with (#23).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Auth {
    /// PgBouncer-style auth file (`"user" "secret"` per line); re-read on every reload.
    pub file: Option<PathBuf>,
    /// The auth file's entries, user → secret text (plaintext, `md5…`, `SCRAM-SHA-256$…` or
    /// MySQL's `*HEX`): filled by whoever reads the file (start and reload), never rendered.
    pub users: std::sync::Arc<std::collections::BTreeMap<String, String>>,
    /// Failed logins a source address may have per minute (on each core) before it is refused
    /// unchecked until that minute is over; 0 = no limit.
    pub max_failed_logins: u32,
    /// The auth query, when `pg_query_user` or `mysql_query_user` is set: secrets of users
    /// without a file entry are fetched from the pool's backend.
    pub query: Option<AuthQuery>,
    /// `allow_empty_password`: a MySQL account whose stored password is empty may log in
    /// through the router without one (off: an empty secret never authenticates, #33).
    pub allow_empty_password: bool,
    /// `mock_salt_key`: what the mock SCRAM salts of unknown users are derived from (#33);
    /// `None`: a random key per process start. Never rendered.
    pub mock_salt_key: Option<String>,
    /// The key itself, filled by whoever loads the configuration (from `mock_salt_key`, else
    /// the process's random one, kept across reloads).
    pub mock_seed: [u8; 32],
}

/// The auth query (#23): how secrets are fetched from the backend, per backend protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthQuery {
    /// For PostgreSQL backends (`pg_query_user`); `$1` stands for the user name.
    pub pg: Option<QuerySpec>,
    /// For MySQL backends (`mysql_query_user`); `?` stands for the user name.
    pub mysql: Option<QuerySpec>,
    /// How long a fetched secret (or an unknown user) is trusted before it is fetched again.
    pub cache_ttl: Duration,
}

/// One protocol's auth query.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySpec {
    /// The user the query runs as; its own secret comes from the auth file (none: trust).
    pub user: String,
    /// The query; the last column of its first row is the secret.
    pub sql: String,
}

/// The PostgreSQL auth query unless `[auth] pg_query` says otherwise: the role's stored
/// secret, whether it may log in and how many seconds its password stays valid (#33; the
/// router reads the columns by name and checks both as the server does). Schema-qualified,
/// and run with `search_path = pg_catalog, pg_temp` whatever the connection carries.
pub const DEFAULT_PG_AUTH_QUERY: &str = "SELECT rolname, rolcanlogin, \
     pg_catalog.date_part('epoch', rolvaliduntil) - pg_catalog.date_part('epoch', pg_catalog.now()) AS valid_for, \
     rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1";

/// The MySQL auth query unless `[auth] mysql_query` says otherwise: every account of the user
/// and every anonymous one, with `Host` and `plugin`, so the router picks the account the
/// server would (the most specific host admitting the client, #33).
pub const DEFAULT_MYSQL_AUTH_QUERY: &str = "SELECT User, Host, plugin, authentication_string FROM mysql.user \
     WHERE User = ? OR User = ''";

/// `[auth] cache_ttl` unless set.
pub const DEFAULT_AUTH_CACHE_TTL: Duration = Duration::from_secs(60);

/// One backend server of a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    /// Host name or IP address.
    pub host: String,
    /// TCP port (1..=65535).
    pub port: u16,
    /// Relative share of new connections.
    pub weight: NonZeroU32,
    /// A replica lagging more than this (by replay time) gets no reads.
    pub max_replica_lag: Option<Duration>,
    /// A replica lagging more than this many bytes of WAL/binlog gets no reads.
    pub max_replica_lag_bytes: Option<u64>,
    /// The name this backend's certificate is checked against and sent as SNI when the pool
    /// uses TLS (#38), over the pool's `tls_server_name` and the host: for backends listed by
    /// address whose certificates carry their own names.
    pub tls_server_name: Option<String>,
}

/// Connection-count limits of a pool, exact for the whole process (all cores together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// Connections kept open per backend even when idle.
    pub min_connections: u32,
    /// Most connections per backend; at least `min_connections`. On a pass-through pool the
    /// cap of all users together.
    pub max_connections: NonZeroU32,
    /// On a pass-through pool, most connections per backend for one user (#23); `None` =
    /// `max_connections`.
    pub max_user_connections: Option<NonZeroU32>,
    /// Prepared statements kept per backend connection before the oldest is closed.
    pub max_prepared_statements: NonZeroU32,
}

/// Timeouts of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolTimeouts {
    /// How long a client waits for a free connection.
    pub acquire: Duration,
    /// How long an idle connection above `min_connections` is kept.
    pub idle: Duration,
    /// An idle connection unused for at least this long is checked (closed or written to by
    /// the server?) before it is lent; younger ones are lent unchecked. Zero: always checked.
    pub idle_check: Duration,
    /// TCP connect plus backend authentication.
    pub connect: Duration,
    /// Statement timeout enforced by the router; `None` = none.
    pub query: Option<Duration>,
    /// How long a client may stay silent while it holds a backend connection inside a
    /// transaction or mid-statement (COPY, LOAD DATA LOCAL, an unfinished extended-protocol
    /// batch) before the router closes it; `None` = forever.
    pub idle_transaction: Option<Duration>,
    /// `failover_wait` (#40): how long a checkout of a primary-role pool waits while no backend
    /// is writable (a failover in progress), on top of `acquire`; zero: no wait, the pool
    /// falls back to its healthy backends as before. Reload: yes.
    pub failover_wait: Duration,
}

/// `[pools.<name>.retry]`: how failed statements are retried on another backend (only when the
/// error is retryable, nothing was relayed yet and no transaction is open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first; 1 means no retry.
    pub maximum_attempts: NonZeroU32,
    /// Backoff before the first retry, doubled each time.
    pub backoff_base: Duration,
    /// Ceiling of the backoff; at least `backoff_base`.
    pub backoff_max: Duration,
    /// Randomize each backoff (full jitter) so clients do not retry in lockstep.
    pub jitter: bool,
    /// No retry starts after this much time since the first attempt.
    pub deadline: Duration,
    /// Tell the client (NOTICE / warning) that its statement was retried.
    pub notify_client: bool,
}

/// `[pools.<name>.health]`: backend health probing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// Time between probes.
    pub interval: Duration,
    /// A probe slower than this fails.
    pub timeout: Duration,
    /// Consecutive failures that mark a backend down.
    pub failure_threshold: NonZeroU32,
    /// Consecutive successes that mark a down backend up again.
    pub success_threshold: NonZeroU32,
    /// What a generic engine's probe runs (`None`: [`DEFAULT_CHECK_QUERY`]).
    pub check_query: Option<Arc<str>>,
}

/// The query that checks a generic engine's backend (`health.check_query`, #35).
pub const DEFAULT_CHECK_QUERY: &str = "SELECT 1";

/// `[routing]`: where statements go.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    /// Pool for statements no rule claims (and for all statements without a split).
    pub default_pool: Option<String>,
    /// Send reads to `read_pool` and writes to `write_pool`.
    pub read_write_split: bool,
    /// Reads go here when splitting.
    pub read_pool: Option<String>,
    /// Writes (and anything not provably a read) go here when splitting.
    pub write_pool: Option<String>,
    /// `[routing.mysql]` (or the `mysql_default_pool` alias): MySQL clients' own split and
    /// default, replacing the four keys above for them; `None` when MySQL clients share those.
    pub mysql: Option<MysqlRouting>,
    /// How a session reads its own writes.
    pub read_your_writes: ReadYourWrites,
    /// What to do with a read when no replica is eligible.
    pub replica_fallback: ReplicaFallback,
    /// `read_your_writes = "causal"`: how long a read waits for a replica to replay the
    /// session's last commit before it goes to the primary (zero: no wait).
    pub causal_wait: Duration,
    /// What a client's database name that no pool serves gets.
    pub unknown_database: UnknownDatabase,
    /// MySQL stored functions (`schema.name`, lower case) the operator vouches for: a call may
    /// run on a replica. Every other stored function counts as volatile, since the server does
    /// not enforce `DETERMINISTIC` / `READS SQL DATA` (#19).
    pub replica_safe_functions: Vec<String>,
    /// The per-core plan cache.
    pub cache: CacheConfig,
    /// Rules matching statement shapes (template, regex or fingerprint hash).
    pub pattern_rules: Vec<PatternRule>,
    /// Rules matching SQL text by regex and/or the session's user, database and protocol.
    pub rules: Vec<RegexRule>,
}

impl Routing {
    /// The pool a statement from a `protocol` client goes to when no rule claims it and it is
    /// not a read sent to the read pool: the protocol's `write_pool` when splitting, else its
    /// `default_pool` (MySQL clients with `[routing.mysql]` fall back to the top-level
    /// `default_pool`). Validation guarantees `Some` for every listener's protocol.
    pub fn primary_pool(&self, protocol: Protocol) -> Option<&str> {
        match (protocol, &self.mysql) {
            (Protocol::MySql, Some(m)) => {
                let split = m.write_pool.as_deref().filter(|_| m.read_write_split);
                split.or(m.default_pool.as_deref()).or(self.default_pool.as_deref())
            }
            _ => {
                let split = self.write_pool.as_deref().filter(|_| self.read_write_split);
                split.or(self.default_pool.as_deref())
            }
        }
    }

    /// The pool reads of `protocol` clients are split to; `None` when they are not split.
    pub fn read_pool_of(&self, protocol: Protocol) -> Option<&str> {
        match (protocol, &self.mysql) {
            (Protocol::MySql, Some(m)) => m.read_pool.as_deref().filter(|_| m.read_write_split),
            _ => self.read_pool.as_deref().filter(|_| self.read_write_split),
        }
    }
}

/// `[routing.mysql]`: the split and default of MySQL clients, read like the top-level keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MysqlRouting {
    /// Send MySQL clients' reads to `read_pool` and their writes to `write_pool`.
    pub read_write_split: bool,
    /// MySQL clients' reads go here when splitting.
    pub read_pool: Option<String>,
    /// MySQL clients' writes go here when splitting.
    pub write_pool: Option<String>,
    /// MySQL clients' pool without a split (alias: `routing.mysql_default_pool`).
    pub default_pool: Option<String>,
}

/// `[routing.cache]`: the per-core plan cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Whether routing decisions are cached per fingerprint.
    pub enabled: bool,
    /// How statements are normalized into the cache key.
    pub normalization_strategy: NormalizationStrategy,
    /// Entries per core.
    pub size: NonZeroUsize,
}

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleTarget {
    /// Route to this pool.
    Pool(String),
    /// Refuse the statement with this message.
    Reject(String),
}

/// One `[[routing.pattern_rules]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternRule {
    /// Unique among all routing rules; shown as the decision reason.
    pub name: String,
    /// How `pattern` matches.
    pub kind: PatternKind,
    /// A template, a regex (known to compile) or a decimal u64 fingerprint.
    pub pattern: String,
    /// What a match does.
    pub target: RuleTarget,
    /// Rules are tried by ascending priority: the lowest matching one wins.
    pub priority: i32,
    /// `retry = { ... }`: the retry policy of statements this rule routes, replacing their
    /// pool's `[pools.<name>.retry]` (#11). `None`: the pool's applies.
    pub retry: Option<RetryPolicy>,
    /// Lets the rule send statements that are not replica-safe to a replica-role pool (#19).
    /// Dangerous: a write, lock or volatile function then runs on a replica.
    pub allow_writes: bool,
}

impl PatternRule {
    /// The fingerprint of a `hash` rule (validated to be a decimal u64); `None` for other kinds.
    pub fn hash(&self) -> Option<u64> {
        match self.kind {
            PatternKind::Hash => self.pattern.trim().parse().ok(),
            PatternKind::Template | PatternKind::Regex => None,
        }
    }
}

/// One `[[routing.rules]]` entry; every present matcher must match.
#[derive(Debug, Clone, PartialEq)]
pub struct RegexRule {
    /// Unique among all routing rules; shown as the decision reason.
    pub name: String,
    /// Regex over the SQL text (known to compile).
    pub pattern: Option<String>,
    /// Exact client user name.
    pub user: Option<String>,
    /// Exact database name the client asked for.
    pub database: Option<String>,
    /// The client's protocol.
    pub protocol: Option<Protocol>,
    /// What a match does.
    pub target: RuleTarget,
    /// Rules are tried by ascending priority: the lowest matching one wins.
    pub priority: i32,
    /// `retry = { ... }`: the retry policy of statements this rule routes, replacing their
    /// pool's `[pools.<name>.retry]` (#11). `None`: the pool's applies.
    pub retry: Option<RetryPolicy>,
    /// Lets the rule send statements that are not replica-safe to a replica-role pool (#19).
    /// Dangerous: a write, lock or volatile function then runs on a replica.
    pub allow_writes: bool,
}

/// One `[[translation.rules]]` entry: rewrite a statement shape before sending it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslationRule {
    /// The statement as clients send it (literals become slots).
    pub original_sql: String,
    /// What is sent instead, reusing the original's literals.
    pub translated_sql: String,
    /// The pool the translated statement goes to.
    pub target_pool: String,
}

/// `[metrics]`: the Prometheus endpoint and the admin API next to it. Restart only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    /// Serve `/metrics` and the admin API.
    pub enabled: bool,
    /// Address of `/metrics`; the admin API uses the same IP and the next port.
    pub bind: SocketAddr,
    /// Bearer token the admin API demands; required off loopback.
    pub admin_token: Option<String>,
}

impl Metrics {
    /// The admin API address: `bind`'s IP at port + 1. Port 0 (ephemeral, for tests) stays 0;
    /// validation refuses port 65535, which has no successor.
    pub fn admin_bind(&self) -> SocketAddr {
        let port = match self.bind.port() {
            0 => 0,
            p => p.saturating_add(1),
        };
        SocketAddr::new(self.bind.ip(), port)
    }
}
