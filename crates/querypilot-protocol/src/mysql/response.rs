//! Generic server responses (Client/Server Protocol, "Generic Response Packets" and
//! "COM_STMT_PREPARE Response"): OK with session-state tracking, ERR, EOF, the prepare OK, and the
//! first-byte classification a relay uses to follow a response stream without decoding it all.

use super::capability::{CLIENT_DEPRECATE_EOF, CLIENT_PROTOCOL_41, CLIENT_SESSION_TRACK, CLIENT_TRANSACTIONS};
use super::codec::{put_lenenc_bytes, put_lenenc_int, put_u16, put_u32, Reader};
use super::error::DecodeError;
use super::framer::MAX_PACKET_PAYLOAD;

/// Status flag: a transaction is open.
pub const SERVER_STATUS_IN_TRANS: u16 = 0x0001;
/// Status flag: autocommit is on.
pub const SERVER_STATUS_AUTOCOMMIT: u16 = 0x0002;
/// Status flag: another result set follows.
pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
/// Status flag: the query used a bad index.
pub const SERVER_STATUS_NO_GOOD_INDEX_USED: u16 = 0x0010;
/// Status flag: the query used no index.
pub const SERVER_STATUS_NO_INDEX_USED: u16 = 0x0020;
/// Status flag: a read-only cursor was opened for `COM_STMT_EXECUTE`.
pub const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x0040;
/// Status flag: the cursor's last row was sent.
pub const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x0080;
/// Status flag: the current database was dropped.
pub const SERVER_STATUS_DB_DROPPED: u16 = 0x0100;
/// Status flag: `NO_BACKSLASH_ESCAPES` SQL mode is on (changes how literals must be lexed).
pub const SERVER_STATUS_NO_BACKSLASH_ESCAPES: u16 = 0x0200;
/// Status flag: a prepared statement's metadata changed.
pub const SERVER_STATUS_METADATA_CHANGED: u16 = 0x0400;
/// Status flag: the query was slow.
pub const SERVER_QUERY_WAS_SLOW: u16 = 0x0800;
/// Status flag: the result set holds OUT parameters.
pub const SERVER_PS_OUT_PARAMS: u16 = 0x1000;
/// Status flag: a read-only transaction is open.
pub const SERVER_STATUS_IN_TRANS_READONLY: u16 = 0x2000;
/// Status flag: the OK packet carries session state changes.
pub const SERVER_SESSION_STATE_CHANGED: u16 = 0x4000;
/// Status flag (MariaDB): `ANSI_QUOTES` SQL mode is on.
pub const SERVER_STATUS_ANSI_QUOTES: u16 = 0x8000;

/// The SQL-mode bits a server's status flags report for its connection, which change how SQL
/// text tokenizes: (`NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`). Every server reports the first;
/// only MariaDB reports the second (at login and after any statement, however the mode was
/// set), so on a server whose `server_version` does not name MariaDB it is `None`: unseen.
pub fn sql_mode_flags(status: u16, server_version: &str) -> (bool, Option<bool>) {
    let ansi = server_version.contains("MariaDB").then_some(status & SERVER_STATUS_ANSI_QUOTES != 0);
    (status & SERVER_STATUS_NO_BACKSLASH_ESCAPES != 0, ansi)
}

/// Session state change type: a system variable changed (name, value).
pub const SESSION_TRACK_SYSTEM_VARIABLES: u8 = 0;
/// Session state change type: the current schema changed.
pub const SESSION_TRACK_SCHEMA: u8 = 1;
/// Session state change type: some session state changed ("1").
pub const SESSION_TRACK_STATE_CHANGE: u8 = 2;
/// Session state change type: GTIDs.
pub const SESSION_TRACK_GTIDS: u8 = 3;
/// Session state change type: transaction characteristics.
pub const SESSION_TRACK_TRANSACTION_CHARACTERISTICS: u8 = 4;
/// Session state change type: transaction state.
pub const SESSION_TRACK_TRANSACTION_STATE: u8 = 5;

/// The `OK_Packet`, borrowed from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OkPacket<'a> {
    /// Rows affected.
    pub affected_rows: u64,
    /// Last `AUTO_INCREMENT` id.
    pub last_insert_id: u64,
    /// `SERVER_*` status flags.
    pub status: u16,
    /// Warning count.
    pub warnings: u16,
    /// Human-readable information.
    pub info: &'a [u8],
    /// Raw session state change block (with `CLIENT_SESSION_TRACK` and
    /// `SERVER_SESSION_STATE_CHANGED`); walk it with [`session_state_changes`].
    pub session_state: Option<&'a [u8]>,
}

impl<'a> OkPacket<'a> {
    /// Decodes an OK packet (header 0x00, or 0xFE where it replaces EOF) under capabilities `caps`.
    pub fn decode(payload: &'a [u8], caps: u64) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        match r.u8("OK header")? {
            0x00 | 0xFE => {}
            got => return Err(DecodeError::UnexpectedHeader { packet: "OK", got }),
        }
        let mut ok = Self {
            affected_rows: r.lenenc_int("affected rows")?,
            last_insert_id: r.lenenc_int("last insert id")?,
            ..Self::default()
        };
        if caps & CLIENT_PROTOCOL_41 != 0 {
            ok.status = r.u16("status flags")?;
            ok.warnings = r.u16("warnings")?;
        } else if caps & CLIENT_TRANSACTIONS != 0 {
            ok.status = r.u16("status flags")?;
        }
        if caps & CLIENT_SESSION_TRACK == 0 {
            ok.info = r.rest();
            return Ok(ok);
        }
        // Servers omit the info string entirely when it is empty and nothing changed.
        if !r.is_empty() {
            ok.info = r.lenenc_bytes("info")?;
        }
        if ok.status & SERVER_SESSION_STATE_CHANGED != 0 && !r.is_empty() {
            ok.session_state = Some(r.lenenc_bytes("session state")?);
        }
        Ok(ok)
    }

    /// Appends the packet with header 0x00.
    pub fn encode(&self, caps: u64, out: &mut Vec<u8>) {
        self.encode_with_header(0x00, caps, out);
    }

    /// Appends the packet with header 0xFE, as it ends a result set under `CLIENT_DEPRECATE_EOF`.
    pub fn encode_as_eof(&self, caps: u64, out: &mut Vec<u8>) {
        self.encode_with_header(0xFE, caps, out);
    }

    fn encode_with_header(&self, header: u8, caps: u64, out: &mut Vec<u8>) {
        out.push(header);
        put_lenenc_int(out, self.affected_rows);
        put_lenenc_int(out, self.last_insert_id);
        if caps & CLIENT_PROTOCOL_41 != 0 {
            put_u16(out, self.status);
            put_u16(out, self.warnings);
        } else if caps & CLIENT_TRANSACTIONS != 0 {
            put_u16(out, self.status);
        }
        if caps & CLIENT_SESSION_TRACK == 0 {
            out.extend_from_slice(self.info);
            return;
        }
        if !self.info.is_empty() || self.session_state.is_some() {
            put_lenenc_bytes(out, self.info);
        }
        if let Some(state) = self.session_state {
            put_lenenc_bytes(out, state);
        }
    }
}

/// One entry of an OK packet's session state block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionStateChange<'a> {
    /// `SESSION_TRACK_*` type.
    pub kind: u8,
    /// The entry's data, whose layout depends on `kind`.
    pub data: &'a [u8],
}

impl<'a> SessionStateChange<'a> {
    /// The new current schema, for a `SESSION_TRACK_SCHEMA` entry.
    #[must_use]
    pub fn schema(&self) -> Option<&'a [u8]> {
        if self.kind != SESSION_TRACK_SCHEMA {
            return None;
        }
        Reader::new(self.data).lenenc_bytes("schema").ok()
    }

    /// `(name, value)` for a `SESSION_TRACK_SYSTEM_VARIABLES` entry.
    #[must_use]
    pub fn system_variable(&self) -> Option<(&'a [u8], &'a [u8])> {
        if self.kind != SESSION_TRACK_SYSTEM_VARIABLES {
            return None;
        }
        let mut r = Reader::new(self.data);
        Some((r.lenenc_bytes("variable name").ok()?, r.lenenc_bytes("variable value").ok()?))
    }
}

/// Walks a session state block: each entry is a type byte and a `string<lenenc>` of data. A
/// malformed entry yields one error and ends the walk.
pub fn session_state_changes(block: &[u8]) -> impl Iterator<Item = Result<SessionStateChange<'_>, DecodeError>> {
    let mut r = Reader::new(block);
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || r.is_empty() {
            return None;
        }
        let entry = r
            .u8("state change type")
            .and_then(|kind| Ok(SessionStateChange { kind, data: r.lenenc_bytes("state change data")? }));
        failed = entry.is_err();
        Some(entry)
    })
}

/// The `ERR_Packet`, borrowed from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrPacket<'a> {
    /// MySQL error number.
    pub code: u16,
    /// SQLSTATE, present under the 4.1 protocol (after a `#` marker).
    pub sql_state: Option<[u8; 5]>,
    /// Human-readable message.
    pub message: &'a [u8],
}

impl<'a> ErrPacket<'a> {
    /// Decodes an ERR packet. The SQLSTATE is taken when the `#` marker is present, so errors sent
    /// before capabilities are agreed (e.g. "too many connections") decode too.
    pub fn decode(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        match r.u8("ERR header")? {
            0xFF => {}
            got => return Err(DecodeError::UnexpectedHeader { packet: "ERR", got }),
        }
        let code = r.u16("error code")?;
        if code == 0xFFFF {
            return Err(DecodeError::Unsupported("MariaDB progress report"));
        }
        let sql_state = if r.peek() == Some(b'#') {
            r.u8("SQLSTATE marker")?;
            Some(r.array("SQLSTATE")?)
        } else {
            None
        };
        Ok(Self { code, sql_state, message: r.rest() })
    }

    /// Appends the packet.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0xFF);
        put_u16(out, self.code);
        if let Some(state) = self.sql_state {
            out.push(b'#');
            out.extend_from_slice(&state);
        }
        out.extend_from_slice(self.message);
    }
}

/// The 4.1 `EOF_Packet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EofPacket {
    /// Warning count.
    pub warnings: u16,
    /// `SERVER_*` status flags.
    pub status: u16,
}

impl EofPacket {
    /// Decodes a 4.1 EOF packet (exactly 5 bytes).
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        match r.u8("EOF header")? {
            0xFE => {}
            got => return Err(DecodeError::UnexpectedHeader { packet: "EOF", got }),
        }
        let eof = Self { warnings: r.u16("warnings")?, status: r.u16("status flags")? };
        r.finish("EOF")?;
        Ok(eof)
    }

    /// Appends the packet.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0xFE);
        put_u16(out, self.warnings);
        put_u16(out, self.status);
    }
}

/// What the first payload of a command response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// An OK packet (0x00).
    Ok,
    /// An ERR packet (0xFF).
    Err,
    /// An EOF packet (0xFE, shorter than 9 bytes).
    Eof,
    /// A `LOCAL INFILE` request (0xFB) naming a client file.
    LocalInfile,
    /// A result set with this many columns.
    ResultSet {
        /// Column count (never 0).
        column_count: u64,
    },
}

/// Classifies the first payload of a response to a command.
pub fn classify_response(payload: &[u8]) -> Result<ResponseKind, DecodeError> {
    match payload.first() {
        None => Err(DecodeError::Truncated { field: "response header" }),
        Some(0x00) => Ok(ResponseKind::Ok),
        Some(0xFF) => Ok(ResponseKind::Err),
        Some(0xFE) if payload.len() < 9 => Ok(ResponseKind::Eof),
        Some(0xFB) => Ok(ResponseKind::LocalInfile),
        Some(_) => match Reader::new(payload).lenenc_int("column count")? {
            // Only an over-long encoding (`FC 00 00`, `FE` + zeros) can say 0 here; a relay that
            // trusted it would wait for no column definitions and misread what follows.
            0 => Err(DecodeError::InvalidValue { field: "column count", value: 0 }),
            column_count => Ok(ResponseKind::ResultSet { column_count }),
        },
    }
}

/// What a payload inside a result set's row stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// A text or binary row.
    Row,
    /// The terminator: EOF, or an OK with header 0xFE under `CLIENT_DEPRECATE_EOF`.
    End,
    /// An ERR packet ending the result set early.
    Err,
}

/// Classifies a payload in a row stream. A row can start with 0xFE only when its first value is
/// longer than 2^24 bytes, so it spans packets: that is what tells it from the terminator.
#[must_use]
pub fn classify_row(payload: &[u8], caps: u64) -> RowKind {
    let end_limit = if caps & CLIENT_DEPRECATE_EOF != 0 { MAX_PACKET_PAYLOAD } else { 9 };
    match payload.first() {
        Some(0xFF) => RowKind::Err,
        Some(0xFE) if payload.len() < end_limit => RowKind::End,
        _ => RowKind::Row,
    }
}

/// `COM_STMT_PREPARE_OK`: the statement id and the shape of what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StmtPrepareOk {
    /// Server-assigned statement id.
    pub stmt_id: u32,
    /// Number of result columns (column definitions follow).
    pub num_columns: u16,
    /// Number of parameters (parameter definitions follow).
    pub num_params: u16,
    /// Warning count.
    pub warnings: u16,
}

impl StmtPrepareOk {
    /// Decodes the prepare OK. MySQL 8's optional metadata flag after the warnings is ignored.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        match r.u8("prepare OK header")? {
            0x00 => {}
            got => return Err(DecodeError::UnexpectedHeader { packet: "COM_STMT_PREPARE_OK", got }),
        }
        let stmt_id = r.u32("statement id")?;
        let num_columns = r.u16("column count")?;
        let num_params = r.u16("parameter count")?;
        r.u8("reserved")?;
        let warnings = if r.is_empty() { 0 } else { r.u16("warnings")? };
        Ok(Self { stmt_id, num_columns, num_params, warnings })
    }

    /// Appends the 12-byte packet.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0x00);
        put_u32(out, self.stmt_id);
        put_u16(out, self.num_columns);
        put_u16(out, self.num_params);
        out.push(0x00);
        put_u16(out, self.warnings);
    }
}

/// Adds one to the warning count of a 4.1 OK packet (header 0x00) or EOF packet, in place and
/// saturating; returns the count it had. `None` (payload untouched) for anything else.
pub fn add_warning(payload: &mut [u8]) -> Option<u16> {
    let at = match payload.first()? {
        0x00 => {
            let mut r = Reader::new(payload);
            r.u8("OK header").ok()?;
            r.lenenc_int("affected rows").ok()?;
            r.lenenc_int("last insert id").ok()?;
            r.u16("status flags").ok()?;
            payload.len() - r.remaining()
        }
        0xFE if payload.len() < 9 => 1,
        _ => return None,
    };
    let field = payload.get_mut(at..at + 2)?;
    let old = u16::from_le_bytes([*field.first()?, *field.get(1)?]);
    field.copy_from_slice(&old.saturating_add(1).to_le_bytes());
    Some(old)
}

#[cfg(test)]
mod warning_tests {
    use super::*;

    #[test]
    fn ok_and_eof_packets_gain_one_warning_and_nothing_else_changes() {
        let ok = OkPacket {
            affected_rows: 300,
            last_insert_id: 70_000,
            status: 0x0002,
            warnings: 4,
            info: b"Rows matched: 1",
            session_state: None,
        };
        let mut bytes = Vec::new();
        ok.encode(CLIENT_PROTOCOL_41, &mut bytes);
        assert_eq!(add_warning(&mut bytes), Some(4));
        assert_eq!(OkPacket::decode(&bytes, CLIENT_PROTOCOL_41), Ok(OkPacket { warnings: 5, ..ok }));

        let mut eof = Vec::new();
        EofPacket { warnings: u16::MAX, status: 0x0022 }.encode(&mut eof);
        assert_eq!(add_warning(&mut eof), Some(u16::MAX));
        assert_eq!(EofPacket::decode(&eof), Ok(EofPacket { warnings: u16::MAX, status: 0x0022 }), "saturates");
    }

    #[test]
    fn other_payloads_are_left_alone() {
        for payload in
            [&b"\xff\x28\x04#40001deadlock"[..], b"\x03", b"", b"\x00\x01", b"\xfe\x00\x00\x00\x00\x00\x00\x00\x00\x00"]
        {
            let mut copy = payload.to_vec();
            assert_eq!(add_warning(&mut copy), None, "{payload:?}");
            assert_eq!(copy, payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS;

    #[test]
    fn sql_mode_flags_read_ansi_quotes_only_from_mariadb() {
        let both = SERVER_STATUS_AUTOCOMMIT | SERVER_STATUS_NO_BACKSLASH_ESCAPES | SERVER_STATUS_ANSI_QUOTES;
        assert_eq!(sql_mode_flags(both, "5.5.5-10.11.19-MariaDB-deb12"), (true, Some(true)));
        assert_eq!(sql_mode_flags(SERVER_STATUS_AUTOCOMMIT, "5.5.5-10.11.19-MariaDB"), (false, Some(false)));
        // MySQL never sets 0x8000: its silence says nothing about ANSI_QUOTES.
        assert_eq!(sql_mode_flags(SERVER_STATUS_NO_BACKSLASH_ESCAPES, "8.0.36"), (true, None));
    }

    #[test]
    fn golden_ok() {
        // From the manual: OK with autocommit, no rows, no info.
        let bytes = [0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00];
        let ok = OkPacket::decode(&bytes, CAPS).unwrap();
        assert_eq!(ok, OkPacket { status: SERVER_STATUS_AUTOCOMMIT, ..OkPacket::default() });
        let mut out = Vec::new();
        ok.encode(CAPS, &mut out);
        assert_eq!(out, bytes);
        // 300 affected rows, insert id 7, info text without session tracking.
        let ok = OkPacket {
            affected_rows: 300,
            last_insert_id: 7,
            status: 3,
            warnings: 1,
            info: b"Rows matched: 300",
            session_state: None,
        };
        let mut out = Vec::new();
        ok.encode(CAPS, &mut out);
        let mut want = vec![0x00, 0xFC, 0x2C, 0x01, 0x07, 0x03, 0x00, 0x01, 0x00];
        want.extend_from_slice(b"Rows matched: 300");
        assert_eq!(out, want);
        assert_eq!(OkPacket::decode(&out, CAPS).unwrap(), ok);
    }

    #[test]
    fn golden_ok_with_session_state() {
        let caps = CAPS | CLIENT_SESSION_TRACK;
        let mut bytes = vec![0x00, 0x00, 0x00, 0x02, 0x40, 0x00, 0x00, 0x00, 0x0D];
        bytes.extend_from_slice(&[0x01, 0x05, 0x04, b's', b'h', b'o', b'p']);
        bytes.extend_from_slice(&[0x00, 0x04, 0x01, b'a', 0x01, b'1']);
        let ok = OkPacket::decode(&bytes, caps).unwrap();
        assert_eq!(ok.status, SERVER_STATUS_AUTOCOMMIT | SERVER_SESSION_STATE_CHANGED);
        assert_eq!(ok.info, b"");
        let block = ok.session_state.unwrap();
        let changes: Vec<_> = session_state_changes(block).collect::<Result<_, _>>().unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].schema(), Some(&b"shop"[..]));
        assert_eq!(changes[1].system_variable(), Some((&b"a"[..], &b"1"[..])));
        assert_eq!(changes[0].system_variable(), None);
        let mut out = Vec::new();
        ok.encode(caps, &mut out);
        assert_eq!(out, bytes);
        // Empty OK under session tracking omits info entirely.
        let mut out = Vec::new();
        OkPacket::default().encode_as_eof(caps, &mut out);
        assert_eq!(out, [0xFE, 0, 0, 0, 0, 0, 0]);
        assert_eq!(OkPacket::decode(&out, caps).unwrap(), OkPacket::default());
    }

    #[test]
    fn malformed_session_state_stops_walk() {
        let items: Vec<_> = session_state_changes(&[0x01, 0x09, b'x']).collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].is_err());
    }

    #[test]
    fn golden_err() {
        let bytes = b"\xff\x48\x04#HY000No tables used";
        let err = ErrPacket::decode(bytes).unwrap();
        assert_eq!(err, ErrPacket { code: 1096, sql_state: Some(*b"HY000"), message: b"No tables used" });
        let mut out = Vec::new();
        err.encode(&mut out);
        assert_eq!(&out[..], &bytes[..]);
        // Pre-handshake error without a SQLSTATE marker.
        let err = ErrPacket::decode(b"\xff\x10\x04Too many connections").unwrap();
        assert_eq!((err.code, err.sql_state, err.message), (1040, None, &b"Too many connections"[..]));
        assert_eq!(ErrPacket::decode(b"\xff\xff\xff\x01"), Err(DecodeError::Unsupported("MariaDB progress report")));
    }

    #[test]
    fn golden_eof() {
        let eof = EofPacket::decode(&[0xFE, 0x00, 0x00, 0x02, 0x00]).unwrap();
        assert_eq!(eof, EofPacket { warnings: 0, status: SERVER_STATUS_AUTOCOMMIT });
        let mut out = Vec::new();
        EofPacket { warnings: 3, status: 0x22 }.encode(&mut out);
        assert_eq!(out, [0xFE, 0x03, 0x00, 0x22, 0x00]);
        assert!(EofPacket::decode(&[0xFE, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn classification() {
        assert_eq!(classify_response(&[0x00, 0, 0, 2, 0, 0, 0]), Ok(ResponseKind::Ok));
        assert_eq!(classify_response(b"\xff\x48\x04"), Ok(ResponseKind::Err));
        assert_eq!(classify_response(&[0xFE, 0, 0, 2, 0]), Ok(ResponseKind::Eof));
        assert_eq!(classify_response(b"\xfbdata.csv"), Ok(ResponseKind::LocalInfile));
        assert_eq!(classify_response(&[0x03]), Ok(ResponseKind::ResultSet { column_count: 3 }));
        assert_eq!(classify_response(&[0xFC, 0x2C, 0x01]), Ok(ResponseKind::ResultSet { column_count: 300 }));
        assert!(classify_response(&[]).is_err());
        let deprecate = CLIENT_PROTOCOL_41 | CLIENT_DEPRECATE_EOF;
        let long_ok = [&[0xFE, 0, 0, 2, 0, 0, 0][..], &[b'i'; 20]].concat();
        assert_eq!(classify_row(&long_ok, deprecate), RowKind::End);
        assert_eq!(classify_row(&long_ok, CLIENT_PROTOCOL_41), RowKind::Row);
        assert_eq!(classify_row(&[0xFE, 0, 0, 2, 0], CLIENT_PROTOCOL_41), RowKind::End);
        assert_eq!(classify_row(&[0x01, b'x'], deprecate), RowKind::Row);
        assert_eq!(classify_row(&[0xFF, 1, 2], deprecate), RowKind::Err);
        let huge_row = vec![0xFE; MAX_PACKET_PAYLOAD];
        assert_eq!(classify_row(&huge_row, deprecate), RowKind::Row);
    }

    #[test]
    fn golden_prepare_ok() {
        let bytes = [0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x03, 0x00, 0x00, 0x04, 0x00];
        let ok = StmtPrepareOk::decode(&bytes).unwrap();
        assert_eq!(ok, StmtPrepareOk { stmt_id: 1, num_columns: 2, num_params: 3, warnings: 4 });
        let mut out = Vec::new();
        ok.encode(&mut out);
        assert_eq!(out, bytes);
    }

    proptest! {
        #[test]
        fn ok_round_trip(affected in any::<u64>(), id in any::<u64>(), status in any::<u16>(), warnings in any::<u16>(),
                         info in prop::collection::vec(any::<u8>(), 0..40), state in prop::option::of(prop::collection::vec(any::<u8>(), 0..40))) {
            let caps = CAPS | CLIENT_SESSION_TRACK;
            let status = if state.is_some() { status | SERVER_SESSION_STATE_CHANGED } else { status & !SERVER_SESSION_STATE_CHANGED };
            let ok = OkPacket { affected_rows: affected, last_insert_id: id, status, warnings, info: &info, session_state: state.as_deref() };
            let mut out = Vec::new();
            ok.encode(caps, &mut out);
            prop_assert_eq!(OkPacket::decode(&out, caps).unwrap(), ok);
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..48), caps in any::<u64>()) {
            let _ = OkPacket::decode(&bytes, caps);
            let _ = ErrPacket::decode(&bytes);
            let _ = EofPacket::decode(&bytes);
            let _ = classify_response(&bytes);
            let _ = classify_row(&bytes, caps);
            let _ = StmtPrepareOk::decode(&bytes);
            let _ = session_state_changes(&bytes).count();
        }
    }
}

#[cfg(test)]
mod zero_column_tests {
    use super::*;

    #[test]
    fn an_over_long_zero_column_count_is_refused() {
        for payload in [&[0xFC, 0x00, 0x00][..], &[0xFE, 0, 0, 0, 0, 0, 0, 0, 0][..]] {
            assert!(classify_response(payload).is_err(), "{payload:?}");
        }
        assert_eq!(classify_response(&[0x02]).ok(), Some(ResponseKind::ResultSet { column_count: 2 }));
    }
}
