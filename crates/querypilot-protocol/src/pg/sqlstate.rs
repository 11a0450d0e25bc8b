//! SQLSTATE codes the router reports or reacts to (PostgreSQL docs Appendix A "PostgreSQL Error
//! Codes"), plus the router's own class `QP`.

/// Class 08: the peer broke the wire protocol.
pub const PROTOCOL_VIOLATION: &str = "08P01";
/// Class 08: an established connection failed.
pub const CONNECTION_FAILURE: &str = "08006";
/// Class 08: no backend connection could be established.
pub const SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION: &str = "08001";
/// Class 08: the router refuses the connection for a reason a retry cannot overcome.
pub const SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION: &str = "08004";
/// Class 0A: the request uses a feature the router does not support.
pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// Class 26: no prepared statement of that name.
pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// Class 25: statement sent inside a transaction that already failed.
pub const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
/// Class 25: a statement that may change data where only reads may run.
pub const READ_ONLY_SQL_TRANSACTION: &str = "25006";
/// Class 25: the client stayed silent too long inside a transaction.
pub const IDLE_IN_TRANSACTION_SESSION_TIMEOUT: &str = "25P03";
/// Class 28: authentication failed.
pub const INVALID_PASSWORD: &str = "28P01";
/// Class 28: the user may not connect (unknown user, no matching rule).
pub const INVALID_AUTHORIZATION_SPECIFICATION: &str = "28000";
/// Class 3D: unknown database.
pub const INVALID_CATALOG_NAME: &str = "3D000";
/// Class 40: serialization failure; the transaction may be retried.
pub const SERIALIZATION_FAILURE: &str = "40001";
/// Class 40: deadlock detected; the transaction may be retried.
pub const DEADLOCK_DETECTED: &str = "40P01";
/// Class 42: SQL syntax error.
pub const SYNTAX_ERROR: &str = "42601";
/// Class 42: undefined object (an unrecognized configuration parameter).
pub const UNDEFINED_OBJECT: &str = "42704";
/// Class 42: a prepared statement of that name already exists.
pub const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
/// Class 53: insufficient resources (the router's shape limiter or fair share, #41: distinct
/// from 53300, a pool with no free connection).
pub const INSUFFICIENT_RESOURCES: &str = "53000";
/// Class 53: out of memory (the router's client buffer budget, #33).
pub const OUT_OF_MEMORY: &str = "53200";
/// Class 53: too many connections.
pub const TOO_MANY_CONNECTIONS: &str = "53300";
/// Class 54: a limit was exceeded (e.g. message too large).
pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
/// Class 57: statement canceled by request or timeout.
pub const QUERY_CANCELED: &str = "57014";
/// Class 57: the server (or router) is shutting down.
pub const ADMIN_SHUTDOWN: &str = "57P01";
/// The router's own class: a route hint names a target that cannot be used for this statement.
pub const ROUTE_HINT_NOT_HONORED: &str = "QP001";
