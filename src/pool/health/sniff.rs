//! Which protocol a backend speaks, asked of the backend itself (#18): a MySQL/MariaDB server
//! greets first (a `HandshakeV10` packet, or an ERR packet when it turns the connection away,
//! as soon as it accepts the TCP connection), while a PostgreSQL server stays silent until the
//! client's startup message. The health probe uses it for a pool whose `protocol` is not
//! configured, instead of guessing from which clients reach the pool.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::config::Protocol;
use crate::rt;

/// How long a silent server is given to greet before it counts as PostgreSQL.
const GREETING_WAIT: Duration = Duration::from_millis(500);

/// The protocol of the server at `addr`, or `None` when it cannot be told (no connection, or
/// bytes that are no MySQL greeting).
pub(super) async fn sniff(addr: SocketAddr, deadline: Instant) -> Option<Protocol> {
    let mut stream = rt::connect(addr, deadline).await.ok()?;
    let wait = GREETING_WAIT.min(deadline.saturating_duration_since(rt::now()));
    let mut buf = Vec::with_capacity(64);
    match rt::within(Some(wait), rt::read_some(&mut stream, &mut buf, 64)).await {
        Err(_) => Some(Protocol::Postgres),
        Ok(Ok(n)) if n > 0 => greeting(&buf),
        Ok(_) => None,
    }
}

/// Whether the first bytes a server sent are a MySQL packet header (sequence id 0) followed by
/// a protocol-10 handshake whose version string starts with a digit, or by an ERR packet whose
/// error number is below 8192. The PostgreSQL connect asks it of the first bytes a backend
/// answers its startup message with: no PostgreSQL reply matches (a message of length 10 or
/// 255 would have a field letter where the digit or the error number's high byte is).
pub(in crate::pool) fn greeting(first: &[u8]) -> Option<Protocol> {
    match first.get(3..7)? {
        [0, 10, version, _] if version.is_ascii_digit() => Some(Protocol::MySql),
        [0, 0xFF, _, high] if *high < 0x20 => Some(Protocol::MySql),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mysql_greeting_or_refusal_is_recognized() {
        assert_eq!(greeting(b"\x5b\x00\x00\x00\x0a5.5.5-10.11.19-MariaDB"), Some(Protocol::MySql));
        assert_eq!(greeting(b"\x17\x00\x00\x00\xff\x10\x04Too many connections"), Some(Protocol::MySql));
        assert_eq!(greeting(b"E\x00\x00\x00\x10"), None, "not a MySQL header");
        assert_eq!(greeting(b"\x5b\x00"), None, "too short to tell");
        assert_eq!(greeting(b"E\x00\x00\x00\xffSFATAL\x00"), None, "a PostgreSQL error of length 255");
        assert_eq!(greeting(b"N\x00\x00\x00\x0aSWARN"), None, "a PostgreSQL notice of length 10");
        assert_eq!(greeting(b"R\x00\x00\x00\x08\x00\x00\x00\x00"), None, "AuthenticationOk");
    }
}
