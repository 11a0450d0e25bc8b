//! The MySQL error numbers and SQLSTATEs the router itself sends to clients (MySQL "Server Error
//! Message Reference"), the router's own numbers (9001+, outside the server's ranges), and the
//! framed ERR writer `session::client_error` uses.

use super::framer::encode_framed;
use super::response::ErrPacket;

/// An error number with the SQLSTATE the server pairs it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorNumber {
    /// MySQL error number.
    pub code: u16,
    /// Five-character SQLSTATE.
    pub sql_state: [u8; 5],
}

impl ErrorNumber {
    /// Appends this error as one framed ERR packet with sequence id `seq`; returns the next id.
    pub fn encode(&self, message: &[u8], seq: u8, out: &mut Vec<u8>) -> u8 {
        encode_err(self.code, &self.sql_state, message, seq, out)
    }
}

/// The server went away mid-query (the client-range number clients show for it).
pub const CR_SERVER_LOST: ErrorNumber = ErrorNumber { code: 2013, sql_state: *b"HY000" };
/// Access denied for user (bad credentials).
pub const ER_ACCESS_DENIED_ERROR: ErrorNumber = ErrorNumber { code: 1045, sql_state: *b"28000" };
/// Unknown database.
pub const ER_BAD_DB_ERROR: ErrorNumber = ErrorNumber { code: 1049, sql_state: *b"42000" };
/// Too many connections.
pub const ER_CON_COUNT_ERROR: ErrorNumber = ErrorNumber { code: 1040, sql_state: *b"08004" };
/// The server is shutting down: its answer on each connection it closes, and the router's while
/// it drains.
pub const ER_SERVER_SHUTDOWN: ErrorNumber = ErrorNumber { code: 1053, sql_state: *b"08S01" };
/// Unknown command.
pub const ER_UNKNOWN_COM_ERROR: ErrorNumber = ErrorNumber { code: 1047, sql_state: *b"08S01" };
/// The command is not allowed (e.g. `LOAD DATA LOCAL INFILE` through the router).
pub const ER_NOT_ALLOWED_COMMAND: ErrorNumber = ErrorNumber { code: 1148, sql_state: *b"42000" };
/// A packet exceeded `max_allowed_packet` (the router's payload limit).
pub const ER_NET_PACKET_TOO_LARGE: ErrorNumber = ErrorNumber { code: 1153, sql_state: *b"08S01" };
/// Packets arrived out of order (bad sequence id).
pub const ER_NET_PACKETS_OUT_OF_ORDER: ErrorNumber = ErrorNumber { code: 1156, sql_state: *b"08S01" };
/// Reading from the backend failed: the router lost its backend connection.
pub const ER_NET_READ_ERROR: ErrorNumber = ErrorNumber { code: 1158, sql_state: *b"08S01" };
/// The client stayed silent too long (MySQL 8.0.24's wording for `wait_timeout`; the router
/// sends it for `idle_transaction_timeout`).
pub const ER_CLIENT_INTERACTION_TIMEOUT: ErrorNumber = ErrorNumber { code: 4031, sql_state: *b"HY000" };
/// Lock wait timeout; recognized as retryable outside a transaction.
pub const ER_LOCK_WAIT_TIMEOUT: ErrorNumber = ErrorNumber { code: 1205, sql_state: *b"HY000" };
/// Wrong arguments to a statement command.
pub const ER_WRONG_ARGUMENTS: ErrorNumber = ErrorNumber { code: 1210, sql_state: *b"HY000" };
/// Deadlock; recognized as retryable outside a transaction.
pub const ER_LOCK_DEADLOCK: ErrorNumber = ErrorNumber { code: 1213, sql_state: *b"40001" };
/// Unknown prepared statement handler.
pub const ER_UNKNOWN_STMT_HANDLER: ErrorNumber = ErrorNumber { code: 1243, sql_state: *b"HY000" };
/// The query was interrupted (`KILL QUERY`, cancellation, timeout).
pub const ER_QUERY_INTERRUPTED: ErrorNumber = ErrorNumber { code: 1317, sql_state: *b"70100" };
/// QueryPilot: a routing hint cannot be honoured (e.g. no healthy replica for a forced read).
pub const ER_QP_ROUTE_HINT: ErrorNumber = ErrorNumber { code: 9001, sql_state: *b"QP001" };
/// QueryPilot: no backend connection became free before the pool acquire timeout.
pub const ER_QP_POOL_TIMEOUT: ErrorNumber = ErrorNumber { code: 9002, sql_state: *b"HY000" };
/// QueryPilot (#41): a statement's shape over its concurrency limit, or its user over its share
/// of the pool. The number of "too many connections", which clients know, with SQLSTATE HY000
/// rather than its 08004: the statement is refused, the connection stays (drivers drop a
/// connection on an 08 class).
pub const ER_QP_LIMITED: ErrorNumber = ErrorNumber { code: 1040, sql_state: *b"HY000" };
/// QueryPilot: a pool's backend speaks the other protocol than the client's (#25).
/// SQLSTATE 08004: the router refuses the connection, and no retry can change that.
pub const ER_QP_POOL_PROTOCOL: ErrorNumber = ErrorNumber { code: 9003, sql_state: *b"08004" };

/// Whether a server error number is transient (lock wait timeout, deadlock), so the statement may
/// be retried when no byte was relayed and no transaction is open.
#[must_use]
pub fn is_retryable(code: u16) -> bool {
    code == ER_LOCK_WAIT_TIMEOUT.code || code == ER_LOCK_DEADLOCK.code
}

/// Appends one framed ERR packet (4.1 form, `#` + SQLSTATE) with sequence id `seq`; returns the
/// next sequence id.
pub fn encode_err(code: u16, sql_state: &[u8; 5], message: &[u8], seq: u8, out: &mut Vec<u8>) -> u8 {
    let err = ErrPacket { code, sql_state: Some(*sql_state), message };
    encode_framed(seq, out, |payload| err.encode(payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::framer::decode_packet;

    #[test]
    fn golden_framed_err() {
        let mut out = Vec::new();
        let next = ER_ACCESS_DENIED_ERROR.encode(b"Access denied", 2, &mut out);
        assert_eq!(next, 3);
        let mut want = vec![22, 0, 0, 2, 0xFF, 0x15, 0x04, b'#'];
        want.extend_from_slice(b"28000Access denied");
        assert_eq!(out, want);
        let packet = decode_packet(&out, 1 << 24).unwrap().unwrap();
        let err = ErrPacket::decode(packet.payload).unwrap();
        assert_eq!((err.code, err.sql_state), (1045, Some(*b"28000")));
    }

    #[test]
    fn router_codes_and_retry_classes() {
        let mut out = Vec::new();
        encode_err(ER_QP_ROUTE_HINT.code, &ER_QP_ROUTE_HINT.sql_state, b"x", 1, &mut out);
        assert_eq!(out, [10, 0, 0, 1, 0xFF, 0x29, 0x23, b'#', b'Q', b'P', b'0', b'0', b'1', b'x']);
        assert!(is_retryable(1205) && is_retryable(1213));
        assert!(!is_retryable(1045) && !is_retryable(ER_QP_POOL_TIMEOUT.code));
    }
}
