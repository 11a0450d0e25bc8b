use super::*;
use crate::protocol::mysql::capability::CLIENT_SESSION_TRACK;

fn eof(status: u16) -> Vec<u8> {
    [&[0xFE, 0, 0][..], &status.to_le_bytes()].concat()
}

/// An OK (no affected rows, no insert id) with `status`, no warnings, no info.
fn ok(status: u16) -> Vec<u8> {
    [&[0x00, 0, 0][..], &status.to_le_bytes(), &[0, 0, 0]].concat()
}

fn mariadb() -> MyInfo {
    MyInfo { server_version: "10.11.6-MariaDB".into(), capabilities: CLIENT_SESSION_TRACK, ..MyInfo::default() }
}

#[test]
fn an_eof_that_flags_a_state_change_leaves_it_owed_until_an_ok_carries_state() {
    let changed = SERVER_SESSION_STATE_CHANGED | 0x0002;
    let mut info = mariadb();
    note_owed(&mut info, &eof(0x0002), true);
    assert!(!info.owes_gtid, "nothing changed: nothing owed (sql_log_bin = 0)");
    note_owed(&mut info, &eof(changed), true);
    assert!(info.owes_gtid, "the EOF flagged a change it cannot carry");
    note_owed(&mut info, &eof(0x0002), true);
    note_owed(&mut info, &ok(0x0002), false);
    assert!(info.owes_gtid, "a later result set, or an OK without state, leaves it pending");
    note_owed(&mut info, &ok(changed), false);
    assert!(!info.owes_gtid, "an OK with state reported it");
}

#[test]
fn a_server_that_does_not_track_last_gtid_owes_nothing() {
    let changed = SERVER_SESSION_STATE_CHANGED | 0x0002;
    let mut mysql = MyInfo { server_version: "8.0.36".into(), ..mariadb() };
    note_owed(&mut mysql, &eof(changed), true);
    let mut untracked = MyInfo { capabilities: 0, ..mariadb() };
    note_owed(&mut untracked, &eof(changed), true);
    assert!(!mysql.owes_gtid && !untracked.owes_gtid);
}
