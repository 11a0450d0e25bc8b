//! Session-state tracking the router asks of its backends for itself (MariaDB
//! `session_track_system_variables`, Client/Server Protocol "OK_Packet", session state info):
//! an OK packet from a connection with `CLIENT_SESSION_TRACK` is turned into the OK the client
//! would get from a direct connection under its own capabilities, and the value of `last_gtid`
//! it reported, if any, is handed to the caller. The commit's own OK thus tells the router its
//! GTID (#34) with no extra round trip and nothing left for the client to notice.
//!
//! Bounded: reads only inside the payload; a GTID value past [`MAX_GTID_VALUE`] bytes is not
//! returned but reported [`GtidChange::Unreadable`].

use super::capability::CLIENT_SESSION_TRACK;
use super::error::DecodeError;
use super::response::{session_state_changes, OkPacket, SERVER_SESSION_STATE_CHANGED, SESSION_TRACK_SYSTEM_VARIABLES};

/// The session variable whose change carries the GTID of the transaction just committed.
pub const LAST_GTID: &[u8] = b"last_gtid";

/// Longest `last_gtid` value returned (a GTID is `domain-server-seq`, three decimal numbers).
pub const MAX_GTID_VALUE: usize = 64;

/// What an OK packet said about `last_gtid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GtidChange<'a> {
    /// Not reported: nothing was written to the binary log by this statement (or tracking of
    /// `last_gtid` is off on the connection).
    Unchanged,
    /// The new value (the last one, when the block reports it more than once).
    Value(&'a [u8]),
    /// The block reports a change the router cannot read (malformed, or too long).
    Unreadable,
}

/// An OK packet as the client must see it, and what its session state said of `last_gtid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntrackedOk<'a> {
    /// The packet without session state and with `SERVER_SESSION_STATE_CHANGED` cleared.
    pub ok: OkPacket<'a>,
    /// The `last_gtid` it reported.
    pub gtid: GtidChange<'a>,
}

/// Decodes `payload`, an OK packet (header 0x00) from a connection with capabilities
/// `backend_caps`, dropping its session state: the client did not ask for it (the router never
/// offers `CLIENT_SESSION_TRACK`), and whatever the server tracks is the router's own.
pub fn untrack_ok(payload: &[u8], backend_caps: u64) -> Result<UntrackedOk<'_>, DecodeError> {
    let mut ok = OkPacket::decode(payload, backend_caps)?;
    let gtid = match ok.session_state.take() {
        Some(block) => last_gtid(block),
        None => GtidChange::Unchanged,
    };
    ok.status &= !SERVER_SESSION_STATE_CHANGED;
    Ok(UntrackedOk { ok, gtid })
}

/// Appends `payload`, an OK packet from a connection with `backend_caps`, as a client with
/// `client_caps` must receive it; returns what it said of `last_gtid`. From a connection
/// without `CLIENT_SESSION_TRACK` the bytes are copied as they are.
pub fn relay_ok<'a>(
    payload: &'a [u8],
    backend_caps: u64,
    client_caps: u64,
    out: &mut Vec<u8>,
) -> Result<GtidChange<'a>, DecodeError> {
    if backend_caps & CLIENT_SESSION_TRACK == 0 {
        out.extend_from_slice(payload);
        return Ok(GtidChange::Unchanged);
    }
    let UntrackedOk { ok, gtid } = untrack_ok(payload, backend_caps)?;
    // Servers write a non-empty info string length-prefixed whether or not the client tracks
    // state (MariaDB's and MySQL's `net_send_ok`), and client libraries read it so: with no
    // state block, the tracking layout is exactly what a direct connection sends.
    ok.encode(client_caps | CLIENT_SESSION_TRACK, out);
    Ok(gtid)
}

/// The last `last_gtid` change in a session state block.
pub fn last_gtid(block: &[u8]) -> GtidChange<'_> {
    let mut found = GtidChange::Unchanged;
    for change in session_state_changes(block) {
        let Ok(change) = change else { return GtidChange::Unreadable };
        if change.kind != SESSION_TRACK_SYSTEM_VARIABLES {
            continue;
        }
        match change.system_variable() {
            Some((name, value)) if name.eq_ignore_ascii_case(LAST_GTID) => {
                found = if value.len() <= MAX_GTID_VALUE { GtidChange::Value(value) } else { GtidChange::Unreadable };
            }
            Some(_) => {}
            None => return GtidChange::Unreadable,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::capability::{CLIENT_PROTOCOL_41, CLIENT_TRANSACTIONS};

    const CLIENT: u64 = CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS;
    const BACKEND: u64 = CLIENT | CLIENT_SESSION_TRACK;

    /// MariaDB 10.11's OK for an autocommit INSERT with `last_gtid` tracked (captured).
    const INSERT_OK: &[u8] = b"\x00\x01\x01\x02@\x00\x00\x00\x13\x00\x11\tlast_gtid\x060-1-10";

    #[test]
    fn a_commits_ok_yields_its_gtid_and_the_clients_plain_ok() {
        let mut out = Vec::new();
        assert_eq!(relay_ok(INSERT_OK, BACKEND, CLIENT, &mut out), Ok(GtidChange::Value(b"0-1-10")));
        // affected 1, insert id 1, status AUTOCOMMIT only, no warnings, no info.
        assert_eq!(out, b"\x00\x01\x01\x02\x00\x00\x00");
    }

    #[test]
    fn the_info_string_is_written_as_a_client_without_tracking_reads_it() {
        let info = b"Rows matched: 1  Changed: 1  Warnings: 0";
        let mut tracked = b"\x00\x01\x00\x22\x00\x01\x00".to_vec();
        tracked.push(info.len() as u8);
        tracked.extend_from_slice(info);
        let mut out = Vec::new();
        assert_eq!(relay_ok(&tracked, BACKEND, CLIENT, &mut out), Ok(GtidChange::Unchanged));
        assert_eq!(out, tracked, "status, warnings and length-prefixed info as the server sends them untracked");
    }

    #[test]
    fn other_tracked_entries_are_dropped_and_the_last_gtid_wins() {
        // autocommit changed, schema changed, then last_gtid reported twice.
        let block: &[u8] = b"\x00\x0e\x0aautocommit\x02ON\x01\x04\x03app\
                             \x00\x10\x09last_gtid\x050-1-7\x00\x10\x09last_gtid\x050-1-8";
        let mut ok = b"\x00\x00\x00\x02\x40\x00\x00\x00".to_vec();
        ok.push(block.len() as u8);
        ok.extend_from_slice(block);
        let mut out = Vec::new();
        assert_eq!(relay_ok(&ok, BACKEND, CLIENT, &mut out), Ok(GtidChange::Value(b"0-1-8")));
        assert_eq!(out, b"\x00\x00\x00\x02\x00\x00\x00");
    }

    #[test]
    fn untracked_connections_are_copied_byte_for_byte() {
        let plain = b"\x00\x00\x00\x02\x40\x00\x00anything";
        let mut out = Vec::new();
        assert_eq!(relay_ok(plain, CLIENT, CLIENT, &mut out), Ok(GtidChange::Unchanged));
        assert_eq!(out, plain);
    }

    #[test]
    fn malformed_or_oversized_gtid_entries_are_unreadable_never_a_value() {
        assert_eq!(last_gtid(b"\x00\x05\x09last"), GtidChange::Unreadable, "entry cut short");
        assert_eq!(last_gtid(b"\x00\x02\x09l"), GtidChange::Unreadable, "name longer than its entry");
        let long = [&b"\x00\x4c\x09last_gtid\x41"[..], &[b'1'; 65]].concat();
        assert_eq!(last_gtid(&long), GtidChange::Unreadable);
        assert_eq!(last_gtid(b"\x01\x04\x03app"), GtidChange::Unchanged, "a schema change only");
        assert!(untrack_ok(b"\x00\x00", BACKEND).is_err());
    }

    #[test]
    fn no_input_panics_and_every_relayed_ok_decodes_without_state() {
        // Every prefix of the captured packets, and every single-byte corruption of them.
        for base in [INSERT_OK, b"\x00\x00\x00\x02\x40\x00\x00\x00\x04\x01\x02\x01\x41"] {
            for cut in 0..=base.len() {
                check(&base[..cut]);
            }
            for i in 0..base.len() {
                for b in [0x00, 0x01, 0x7f, 0xfb, 0xfc, 0xfe, 0xff] {
                    let mut v = base.to_vec();
                    v[i] = b;
                    check(&v);
                }
            }
        }
    }

    fn check(payload: &[u8]) {
        let mut out = Vec::new();
        if relay_ok(payload, BACKEND, CLIENT, &mut out).is_ok() {
            let ok = OkPacket::decode(&out, BACKEND).expect("the relayed OK decodes");
            assert_eq!((ok.session_state, ok.status & SERVER_SESSION_STATE_CHANGED), (None, 0));
        }
    }
}
