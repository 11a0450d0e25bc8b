//! Capability flags (Client/Server Protocol, "Capability Flags"). MySQL defines the low 32 bits;
//! MariaDB carries its extended capabilities in otherwise reserved handshake bytes, which this
//! codec maps to bits 32–63 of one `u64` so a single value describes a connection.

/// Old "long password" bit; MariaDB calls it `CLIENT_MYSQL` and clears it to announce extended
/// capabilities.
pub const CLIENT_LONG_PASSWORD: u64 = 1;
/// Report found rows instead of affected rows.
pub const CLIENT_FOUND_ROWS: u64 = 1 << 1;
/// Longer column flags in column definitions.
pub const CLIENT_LONG_FLAG: u64 = 1 << 2;
/// A database name is in the handshake response.
pub const CLIENT_CONNECT_WITH_DB: u64 = 1 << 3;
/// Disallow `db.table.column`.
pub const CLIENT_NO_SCHEMA: u64 = 1 << 4;
/// Compression protocol.
pub const CLIENT_COMPRESS: u64 = 1 << 5;
/// ODBC client (unused).
pub const CLIENT_ODBC: u64 = 1 << 6;
/// `LOAD DATA LOCAL INFILE` allowed.
pub const CLIENT_LOCAL_FILES: u64 = 1 << 7;
/// Parser ignores spaces before `(`.
pub const CLIENT_IGNORE_SPACE: u64 = 1 << 8;
/// The 4.1 protocol (status and warnings in OK/EOF, SQLSTATE in ERR).
pub const CLIENT_PROTOCOL_41: u64 = 1 << 9;
/// Interactive client (wait_timeout vs interactive_timeout).
pub const CLIENT_INTERACTIVE: u64 = 1 << 10;
/// TLS: the client sends an SSL request and upgrades before the handshake response.
pub const CLIENT_SSL: u64 = 1 << 11;
/// Ignore SIGPIPE (client-side only).
pub const CLIENT_IGNORE_SIGPIPE: u64 = 1 << 12;
/// Transaction status in OK/EOF.
pub const CLIENT_TRANSACTIONS: u64 = 1 << 13;
/// Old 4.1 flag (unused).
pub const CLIENT_RESERVED: u64 = 1 << 14;
/// 4.1 authentication: 20-byte scramble, 1-byte-length auth response.
pub const CLIENT_SECURE_CONNECTION: u64 = 1 << 15;
/// Several statements per `COM_QUERY`.
pub const CLIENT_MULTI_STATEMENTS: u64 = 1 << 16;
/// Several result sets per command.
pub const CLIENT_MULTI_RESULTS: u64 = 1 << 17;
/// Several result sets per `COM_STMT_EXECUTE`.
pub const CLIENT_PS_MULTI_RESULTS: u64 = 1 << 18;
/// Authentication plugins: plugin names in the handshake, auth switch.
pub const CLIENT_PLUGIN_AUTH: u64 = 1 << 19;
/// Connection attributes in the handshake response.
pub const CLIENT_CONNECT_ATTRS: u64 = 1 << 20;
/// Length-encoded auth response in the handshake response.
pub const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u64 = 1 << 21;
/// Client can handle expired passwords.
pub const CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS: u64 = 1 << 22;
/// Session state change information in OK packets.
pub const CLIENT_SESSION_TRACK: u64 = 1 << 23;
/// OK packets (header 0xFE) replace EOF packets in result sets.
pub const CLIENT_DEPRECATE_EOF: u64 = 1 << 24;
/// Optional result-set metadata (MySQL 8).
pub const CLIENT_OPTIONAL_RESULTSET_METADATA: u64 = 1 << 25;
/// zstd compression level byte in the handshake response (MySQL 8).
pub const CLIENT_ZSTD_COMPRESSION_ALGORITHM: u64 = 1 << 26;
/// Query attributes prefix in `COM_QUERY`/`COM_STMT_EXECUTE` (MySQL 8.0.23). This codec decodes
/// commands without them, so the router must not offer this bit.
pub const CLIENT_QUERY_ATTRIBUTES: u64 = 1 << 27;
/// Multi-factor authentication (MySQL 8.0.27).
pub const CLIENT_MULTI_FACTOR_AUTHENTICATION: u64 = 1 << 28;
/// Capability extension (reserved).
pub const CLIENT_CAPABILITY_EXTENSION: u64 = 1 << 29;
/// Verify the server certificate (client-side only).
pub const CLIENT_SSL_VERIFY_SERVER_CERT: u64 = 1 << 30;
/// Don't reset options after a failed connect (client-side only).
pub const CLIENT_REMEMBER_OPTIONS: u64 = 1 << 31;

/// MariaDB: progress reports (ERR packets with code 0xFFFF). Not decoded here: do not offer.
pub const MARIADB_CLIENT_PROGRESS: u64 = 1 << 32;
/// MariaDB: `COM_MULTI`.
pub const MARIADB_CLIENT_COM_MULTI: u64 = 1 << 33;
/// MariaDB: `COM_STMT_BULK_EXECUTE`.
pub const MARIADB_CLIENT_STMT_BULK_OPERATIONS: u64 = 1 << 34;
/// MariaDB: extended type info in column definitions. Not decoded here: do not offer.
pub const MARIADB_CLIENT_EXTENDED_TYPE_INFO: u64 = 1 << 35;
/// MariaDB: result-set metadata caching for prepared statements.
pub const MARIADB_CLIENT_CACHE_METADATA: u64 = 1 << 36;
/// MariaDB: per-row results for bulk operations.
pub const MARIADB_CLIENT_BULK_UNIT_RESULTS: u64 = 1 << 37;

/// Mask of the MariaDB extended capabilities (the high half).
pub const MARIADB_EXTENDED_MASK: u64 = 0xFFFF_FFFF << 32;

/// The standard MySQL capability word of `caps` (low 32 bits).
#[must_use]
pub fn lower(caps: u64) -> u32 {
    (caps & 0xFFFF_FFFF) as u32
}

/// The MariaDB extended capability word of `caps` (high 32 bits).
#[must_use]
pub fn extended(caps: u64) -> u32 {
    (caps >> 32) as u32
}

/// Whether `caps` carries MariaDB extended capabilities on the wire: only a peer that clears
/// `CLIENT_LONG_PASSWORD` (MariaDB's `CLIENT_MYSQL`) reads or writes them.
#[must_use]
pub fn uses_extended(caps: u64) -> bool {
    caps & CLIENT_LONG_PASSWORD == 0
}
