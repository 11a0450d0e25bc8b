//! MySQL commands that the `mysql` crate does not drive, or drives only partly, end to end
//! through the router against the harness's real MariaDB, in every pool mode: server-side
//! cursors (COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY + COM_STMT_FETCH), long data
//! (COM_STMT_SEND_LONG_DATA), COM_FIELD_LIST, COM_STATISTICS, COM_RESET_CONNECTION,
//! COM_CHANGE_USER and the LOCAL INFILE refusal of a pool without `local_infile`. Raw commands are written with the router's own
//! codec over a plain TcpStream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mysql::prelude::Queryable;
use querypilot::protocol::mysql::auth::{native_password_token, MYSQL_NATIVE_PASSWORD};
use querypilot::protocol::mysql::capability::*;
use querypilot::protocol::mysql::response::{SERVER_STATUS_CURSOR_EXISTS, SERVER_STATUS_LAST_ROW_SENT};
use querypilot::protocol::mysql::{
    decode_binary_row, decode_payload, decode_text_row, encode_packets, BinaryValue, ChangeUser, ColumnDefinition41,
    Command, ConnectAttrs, EofPacket, ErrPacket, HandshakeResponse41, HandshakeV10, StmtPrepareOk, ValueType,
};

use crate::mysql_session::{my_config, my_pool};
use crate::router::Router;
use crate::support::{dbs, unique_name};

const MODES: [&str; 3] = ["session", "transaction", "statement"];

/// A router with pool `main` of `max` connections in `mode`, whose clients wait at most 2 s for
/// a connection (so "the pool is held" shows as an error instead of a long wait).
fn router(mode: &str, max: u32) -> Router {
    let pool = my_pool("main", mode, max).replace("acquire_timeout = \"20s\"", "acquire_timeout = \"2s\"");
    Router::start(&my_config(&[0], &pool, "main"))
}

/// The `mysql` crate through the router; logging in needs no backend connection (the client is
/// told `max_allowed_packet` instead of asking the server).
fn client(router: &Router) -> mysql::Conn {
    let my = &dbs().my;
    let opts = my.opts(router.port(), &my.user, &my.password).max_allowed_packet(Some(16 << 20));
    mysql::Conn::new(opts).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

fn server_error(e: mysql::Error) -> (u16, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.state),
        other => panic!("expected a server error, got {other}"),
    }
}

/// A table `(id INT PRIMARY KEY)` with ids 1..=`rows`, made directly on the primary.
fn ids_table(rows: u32) -> String {
    let t = unique_name("my_cmd");
    let mut c = dbs().my.primary_client();
    c.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("create");
    if rows > 0 {
        let values: Vec<String> = (1..=rows).map(|i| format!("({i})")).collect();
        c.query_drop(format!("INSERT INTO {t} VALUES {}", values.join(","))).expect("insert");
    }
    t
}

/// A MySQL client speaking raw packets, logged in as app/app.
pub(crate) struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
    /// The greeting's nonce, which COM_CHANGE_USER's password token is computed against.
    scramble: Vec<u8>,
}

impl Raw {
    pub(crate) fn login(port: u16) -> Raw {
        let my = &dbs().my;
        Raw::login_as(port, &my.user, &my.password)
    }

    /// Logs in as `user`/`password` on the harness's database.
    pub(crate) fn login_as(port: u16, user: &str, password: &str) -> Raw {
        Raw::login_to(port, user, password, &dbs().my.database)
    }

    /// Logs in as `user`/`password` on `database`, offering connection attributes (none sent).
    pub(crate) fn login_to(port: u16, user: &str, password: &str, database: &str) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut raw = Raw { s, buf: Vec::new(), scramble: Vec::new() };
        let greeting = raw.read();
        let hs = HandshakeV10::decode(&greeting).expect("greeting");
        raw.scramble = hs.scramble.to_vec();
        let token = native_password_token(password.as_bytes(), &hs.scramble);
        let resp = HandshakeResponse41 {
            capabilities: CLIENT_LONG_PASSWORD
                | CLIENT_LONG_FLAG
                | CLIENT_CONNECT_WITH_DB
                | CLIENT_PROTOCOL_41
                | CLIENT_TRANSACTIONS
                | CLIENT_SECURE_CONNECTION
                | CLIENT_MULTI_RESULTS
                | CLIENT_PS_MULTI_RESULTS
                | CLIENT_PLUGIN_AUTH
                | CLIENT_CONNECT_ATTRS,
            max_packet_size: 1 << 24,
            charset: hs.charset,
            username: user.as_bytes(),
            auth_response: &token,
            database: Some(database.as_bytes()),
            auth_plugin: Some(MYSQL_NATIVE_PASSWORD),
            connect_attrs: None,
            zstd_level: None,
        };
        let mut p = Vec::new();
        resp.encode(&mut p);
        raw.send(&p, 1);
        let ok = raw.read();
        assert_eq!(ok.first(), Some(&0x00), "login: {ok:?}");
        raw
    }

    /// COM_CHANGE_USER to `user`/`password` on `database` (mysql_native_password), with
    /// connection attributes `attrs`: `Err` with the ERR packet's code when refused.
    pub(crate) fn change_user(
        &mut self,
        user: &str,
        password: &str,
        database: &str,
        attrs: &[(&str, &str)],
    ) -> Result<(), u16> {
        let token = native_password_token(password.as_bytes(), &self.scramble);
        let pairs: Vec<(&[u8], &[u8])> = attrs.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        let mut raw_attrs = Vec::new();
        ConnectAttrs::build(&pairs, &mut raw_attrs);
        let cu = ChangeUser {
            username: user.as_bytes(),
            auth_response: &token,
            database: database.as_bytes(),
            charset: Some(45),
            auth_plugin: Some(MYSQL_NATIVE_PASSWORD),
            connect_attrs: Some(ConnectAttrs::new(&raw_attrs).expect("attributes")),
        };
        let mut p = Vec::new();
        Command::ChangeUser(cu)
            .encode(CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS, &mut p);
        self.command(&p);
        let reply = self.read();
        match reply.first() {
            Some(0x00) => Ok(()),
            Some(0xFF) => Err(ErrPacket::decode(&reply).expect("err").code),
            _ => panic!("COM_CHANGE_USER: unexpected reply {reply:?}"),
        }
    }

    /// COM_QUERY of a one-row query: the row's values as text (NULL as "NULL") and the status
    /// flags of the result's final EOF; `Err` with the ERR packet's code instead.
    pub(crate) fn query_row(&mut self, sql: &str) -> Result<(Vec<String>, u16), u16> {
        self.command(&[&[0x03][..], sql.as_bytes()].concat());
        let count = self.read();
        if count.first() == Some(&0xFF) {
            return Err(ErrPacket::decode(&count).expect("err").code);
        }
        let (defs, _) = self.until_eof()?;
        let (rows, eof) = self.until_eof()?;
        let row = rows.first().expect("a row");
        let values = decode_text_row(row, defs.len()).expect("text row");
        let text = values.iter().map(|v| v.map_or("NULL".to_owned(), |v| String::from_utf8_lossy(v).into_owned()));
        Ok((text.collect(), eof.status))
    }

    pub(crate) fn read(&mut self) -> Vec<u8> {
        loop {
            if let Some(f) = decode_payload(&self.buf, 1 << 26).expect("framing") {
                let p = f.payload.to_vec();
                let n = f.consumed;
                self.buf.drain(..n);
                return p;
            }
            let mut chunk = [0u8; 16384];
            let n = self.s.read(&mut chunk).expect("read from the router");
            assert!(n > 0, "the router closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn send(&mut self, payload: &[u8], seq: u8) {
        let mut out = Vec::new();
        encode_packets(payload, seq, &mut out);
        self.s.write_all(&out).expect("write");
    }

    /// Sends a command (sequence 0).
    pub(crate) fn command(&mut self, payload: &[u8]) {
        self.send(payload, 0);
    }

    /// Reads packets up to and including an EOF; `Err` with the ERR packet's code instead.
    pub(crate) fn until_eof(&mut self) -> Result<(Vec<Vec<u8>>, EofPacket), u16> {
        let mut packets = Vec::new();
        loop {
            let p = self.read();
            match p.first() {
                Some(0xFF) => return Err(ErrPacket::decode(&p).expect("err").code),
                Some(0xFE) if p.len() < 9 => return Ok((packets, EofPacket::decode(&p).expect("eof"))),
                _ => packets.push(p),
            }
        }
    }

    /// COM_STMT_PREPARE; returns the statement id and the result columns' types.
    pub(crate) fn prepare(&mut self, sql: &str) -> (u32, u16, Vec<ValueType>) {
        self.command(&[&[0x16][..], sql.as_bytes()].concat());
        let first = self.read();
        assert_ne!(first.first(), Some(&0xFF), "prepare {sql}: {:?}", ErrPacket::decode(&first));
        let ok = StmtPrepareOk::decode(&first).expect("prepare ok");
        if ok.num_params > 0 {
            self.until_eof().expect("parameter definitions");
        }
        let mut types = Vec::new();
        if ok.num_columns > 0 {
            let (defs, _) = self.until_eof().expect("column definitions");
            types = defs.iter().map(|d| ColumnDefinition41::decode(d).expect("column").value_type()).collect();
        }
        (ok.stmt_id, ok.num_params, types)
    }

    /// COM_STMT_EXECUTE of a parameterless statement with a read-only cursor; returns the
    /// status flags of the metadata's EOF.
    pub(crate) fn execute_cursor(&mut self, id: u32) -> u16 {
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.push(0x01); // CURSOR_TYPE_READ_ONLY
        p.extend_from_slice(&1u32.to_le_bytes());
        self.command(&p);
        let count = self.read();
        assert_ne!(count.first(), Some(&0xFF), "execute: {:?}", ErrPacket::decode(&count));
        let (_, eof) = self.until_eof().expect("column definitions");
        eof.status
    }

    /// COM_STMT_FETCH of `rows` rows of a one-INT-column cursor: the ids and the EOF's status.
    fn fetch(&mut self, id: u32, rows: u32, types: &[ValueType]) -> Result<(Vec<i64>, u16), u16> {
        let mut p = vec![0x1C];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&rows.to_le_bytes());
        self.command(&p);
        let (packets, eof) = self.until_eof()?;
        let ids = packets
            .iter()
            .map(|r| match decode_binary_row(r, types).expect("binary row").first() {
                Some(BinaryValue::I32(v)) => i64::from(*v),
                other => panic!("unexpected value {other:?}"),
            })
            .collect();
        Ok((ids, eof.status))
    }

    /// Fetches the whole cursor `batch` rows at a time.
    pub(crate) fn fetch_all(&mut self, id: u32, batch: u32, types: &[ValueType]) -> Vec<i64> {
        let mut all = Vec::new();
        for _ in 0..100 {
            let (ids, status) = self.fetch(id, batch, types).expect("fetch");
            assert!(ids.len() <= batch as usize);
            all.extend(ids);
            if status & SERVER_STATUS_LAST_ROW_SENT != 0 {
                return all;
            }
        }
        panic!("the cursor never reported its last row");
    }

    /// COM_QUERY whose response is one result set or an OK; returns the first column of each
    /// row as text.
    pub(crate) fn query(&mut self, sql: &str) -> Result<Vec<String>, u16> {
        self.command(&[&[0x03][..], sql.as_bytes()].concat());
        let first = self.read();
        match first.first() {
            Some(0xFF) => return Err(ErrPacket::decode(&first).expect("err").code),
            Some(0x00) => return Ok(Vec::new()),
            _ => {}
        }
        self.until_eof()?;
        let (rows, _) = self.until_eof()?;
        Ok(rows.iter().map(|r| String::from_utf8_lossy(&r[1..1 + usize::from(r[0])]).into_owned()).collect())
    }

    fn stmt_command(&mut self, code: u8, id: u32) {
        let mut p = vec![code];
        p.extend_from_slice(&id.to_le_bytes());
        self.command(&p);
    }
}

/// A prepared SELECT executed with a read-only cursor and fetched in chunks returns every row
/// in every mode. In transaction and statement modes the open cursor holds the backend
/// connection (another client cannot get the pool's only one) until the last row, a COM_STMT_CLOSE
/// or a COM_STMT_RESET frees it; a text query and a re-execution in between work.
#[test]
fn cursors_fetch_in_chunks_and_hold_the_connection_while_open() {
    let t = ids_table(10);
    let want: Vec<i64> = (1..=10).collect();
    for mode in MODES {
        let r = router(mode, 1);
        let mut raw = Raw::login(r.port());
        let (id, _, types) = raw.prepare(&format!("SELECT id FROM {t} ORDER BY id"));
        assert_eq!(raw.fetch(id, 1, &types), Err(1421), "{mode}: fetch without a cursor");
        let status = raw.execute_cursor(id);
        assert_ne!(status & SERVER_STATUS_CURSOR_EXISTS, 0, "{mode}: the server opened a cursor");
        let (first, _) = raw.fetch(id, 3, &types).expect("fetch");
        assert_eq!(first, [1, 2, 3], "{mode}");
        if mode != "session" {
            let err = client(&r).query_first::<i64, _>("SELECT 1").expect_err("the cursor holds the only connection");
            assert!(matches!(err, mysql::Error::MySqlError(_)), "{mode}: {err}");
        }
        assert_eq!(raw.query("SELECT 'between fetches'"), Ok(vec!["between fetches".to_owned()]), "{mode}");
        let mut all = first;
        all.extend(raw.fetch_all(id, 4, &types));
        assert_eq!(all, want, "{mode}: chunked fetch");
        if mode != "session" {
            let one: Option<i64> = client(&r).query_first("SELECT 1").expect("connection free after the last row");
            assert_eq!(one, Some(1), "{mode}");
        }
        drop(raw);
        // Re-executing while a cursor is open starts over; COM_STMT_RESET and COM_STMT_CLOSE
        // end an open cursor and give the connection back.
        let mut raw = Raw::login(r.port());
        let (id, _, types) = raw.prepare(&format!("SELECT id FROM {t} ORDER BY id"));
        raw.execute_cursor(id);
        assert_eq!(raw.fetch(id, 2, &types).expect("fetch").0, [1, 2], "{mode}");
        raw.execute_cursor(id);
        assert_eq!(raw.fetch_all(id, 6, &types), want, "{mode}: re-executed cursor");
        raw.execute_cursor(id);
        raw.fetch(id, 2, &types).expect("fetch");
        raw.stmt_command(0x1A, id); // COM_STMT_RESET
        assert_eq!(raw.read().first(), Some(&0x00), "{mode}: reset answers OK");
        assert_eq!(raw.fetch(id, 1, &types), Err(1421), "{mode}: reset closed the cursor");
        raw.execute_cursor(id);
        raw.fetch(id, 2, &types).expect("fetch");
        raw.stmt_command(0x19, id); // COM_STMT_CLOSE: no answer
        if mode != "session" {
            let one: Option<i64> =
                client(&r).query_first("SELECT 1").expect("closing the statement freed the connection");
            assert_eq!(one, Some(1), "{mode}");
        }
        assert_eq!(raw.query("SELECT 'still here'"), Ok(vec!["still here".to_owned()]), "{mode}");
    }
}

/// A BLOB parameter sent in three COM_STMT_SEND_LONG_DATA pieces, with other clients using
/// the pool in between, arrives whole; the next execute without long data binds normally.
#[test]
fn long_data_arrives_whole_in_every_mode() {
    let t = unique_name("my_long");
    dbs().my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, b LONGBLOB)")).expect("create");
    for (n, mode) in MODES.iter().enumerate() {
        let r = router(mode, 2);
        let mut raw = Raw::login(r.port());
        let (id, params, _) = raw.prepare(&format!("INSERT INTO {t} VALUES (?, ?)"));
        assert_eq!(params, 2);
        let pieces: Vec<Vec<u8>> = (0..3u8).map(|i| (0..200_000u32).map(|j| (j as u8) ^ (i * 85)).collect()).collect();
        for piece in &pieces {
            let mut p = vec![0x18];
            p.extend_from_slice(&id.to_le_bytes());
            p.extend_from_slice(&1u16.to_le_bytes());
            p.extend_from_slice(piece);
            raw.command(&p);
            let busy: Option<i64> = client(&r).query_first("SELECT 1").expect("another client meanwhile");
            assert_eq!(busy, Some(1));
        }
        let row = n as i32 + 1;
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.push(0); // NULL bitmap
        p.push(1); // new parameters bound
        p.extend_from_slice(&[0x03, 0x00, 0xFB, 0x00]); // LONG, LONG_BLOB
        p.extend_from_slice(&row.to_le_bytes()); // the blob came as long data
        raw.command(&p);
        let ok = raw.read();
        assert_eq!(ok.first(), Some(&0x00), "{mode}: execute {:?}", ErrPacket::decode(&ok));
        // Long data is consumed by the execute that used it.
        let mut p2 = vec![0x17];
        p2.extend_from_slice(&id.to_le_bytes());
        p2.push(0);
        p2.extend_from_slice(&1u32.to_le_bytes());
        p2.push(0);
        p2.push(1);
        p2.extend_from_slice(&[0x03, 0x00, 0xFB, 0x00]);
        p2.extend_from_slice(&(row + 10).to_le_bytes());
        p2.extend_from_slice(&[3, b'a', b'b', b'c']);
        raw.command(&p2);
        let ok = raw.read();
        assert_eq!(ok.first(), Some(&0x00), "{mode}: second execute {:?}", ErrPacket::decode(&ok));
        let mut direct = dbs().my.primary_client();
        let got: Option<Vec<u8>> =
            direct.query_first(format!("SELECT b FROM {t} WHERE id = {row}")).expect("read back");
        assert_eq!(got.map(|b| b.len()), Some(600_000), "{mode}");
        let got: Option<Vec<u8>> =
            direct.query_first(format!("SELECT b FROM {t} WHERE id = {row}")).expect("read back");
        assert!(got == Some(pieces.concat()), "{mode}: the blob differs from its pieces");
        let small: Option<Vec<u8>> =
            direct.query_first(format!("SELECT b FROM {t} WHERE id = {}", row + 10)).expect("read back");
        assert_eq!(small.as_deref(), Some(&b"abc"[..]), "{mode}");
    }
}

/// COM_FIELD_LIST lists a table's columns (and 1146 for a missing table); COM_STATISTICS
/// answers with the server's status line; both leave the session usable.
#[test]
fn field_list_and_statistics() {
    let t = unique_name("my_fields");
    dbs()
        .my
        .primary_client()
        .query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(20), born DATE)"))
        .expect("create");
    for mode in MODES {
        let r = router(mode, 1);
        let mut raw = Raw::login(r.port());
        raw.command(&[&[0x04][..], t.as_bytes(), b"\0"].concat());
        let (defs, _) = raw.until_eof().expect("field list");
        let names: Vec<String> = defs
            .iter()
            .map(|d| String::from_utf8_lossy(ColumnDefinition41::decode(d).expect("def").name).into_owned())
            .collect();
        assert_eq!(names, ["id", "name", "born"], "{mode}");
        raw.command(b"\x04no_such_table_here\0");
        assert_eq!(raw.until_eof().map(|_| ()), Err(1146), "{mode}");
        raw.command(&[0x09]);
        let stats = String::from_utf8_lossy(&raw.read()).into_owned();
        assert!(stats.starts_with("Uptime:"), "{mode}: {stats}");
        assert_eq!(raw.query("SELECT 'after'"), Ok(vec!["after".to_owned()]), "{mode}");
        if mode != "session" {
            // The pool's only connection is free again for others.
            let one: Option<i64> = client(&r).query_first("SELECT 1").expect("other client");
            assert_eq!(one, Some(1), "{mode}");
        }
    }
}

/// COM_RESET_CONNECTION forgets user variables, settings, an open transaction and prepared
/// statements, and in transaction mode frees the connection a user variable had pinned.
#[test]
fn reset_connection_forgets_session_state() {
    let t = ids_table(0);
    for mode in MODES {
        let r = router(mode, 1);
        let mut c = client(&r);
        c.query_drop("SET @x = 42").expect("user variable");
        c.query_drop("SET time_zone = '+02:00'").expect("tz");
        if mode != "statement" {
            c.query_drop("BEGIN").expect("begin");
            c.query_drop(format!("INSERT INTO {t} VALUES (7)")).expect("insert");
        }
        c.reset().expect("COM_RESET_CONNECTION");
        let tz: Option<String> = c.query_first("SELECT @@time_zone").expect("tz");
        assert_eq!(tz.as_deref(), Some("SYSTEM"), "{mode}");
        let n: Option<i64> = c.query_first(format!("SELECT COUNT(*) FROM {t}")).expect("count");
        assert_eq!(n, Some(0), "{mode}: the open transaction was not rolled back");
        if mode != "session" {
            let one: Option<i64> = client(&r).query_first("SELECT 1").expect("the pin ended with the reset");
            assert_eq!(one, Some(1), "{mode}");
        }
        // Last: reading a user variable pins the session again.
        let x: Option<Option<i64>> = c.query_first("SELECT @x").expect("@x");
        assert_eq!(x, Some(None), "{mode}: user variable survived");
    }
    // Statement ids issued before the reset are gone.
    let r = router("transaction", 1);
    let mut raw = Raw::login(r.port());
    let (id, _, _) = raw.prepare(&format!("SELECT id FROM {t}"));
    raw.command(&[0x1F]);
    assert_eq!(raw.read().first(), Some(&0x00));
    raw.execute_expecting_error(id, 1243);
}

impl Raw {
    /// COM_STMT_EXECUTE of statement `id` that must fail with error `code`.
    fn execute_expecting_error(&mut self, id: u32, code: u16) {
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&1u32.to_le_bytes());
        self.command(&p);
        let reply = self.read();
        assert_eq!(ErrPacket::decode(&reply).map(|e| e.code), Ok(code), "{reply:?}");
    }
}

/// COM_CHANGE_USER to the same pool user resets the session; to another pool's user (root on
/// the `admin` pool) it moves the session there; a wrong password is 1045 and ends the session.
#[test]
fn change_user_same_pool_other_pool_and_wrong_password() {
    let my = &dbs().my;
    for mode in MODES {
        let admin = my_pool("admin", mode, 2)
            .replace(&format!("username = \"{}\"", my.user), &format!("username = \"{}\"", my.superuser))
            .replace(&format!("password = \"{}\"", my.password), "password = \"\"");
        let r = Router::start(&my_config(&[0], &(my_pool("main", mode, 2) + &admin), "main"));
        let mut c = client(&r);
        c.query_drop("SET @x = 1").expect("user variable");
        c.change_user(mysql::ChangeUserOpts::new()).expect("same user");
        let x: Option<Option<i64>> = c.query_first("SELECT @x").expect("@x");
        assert_eq!(x, Some(None), "{mode}: state must be reset");
        let who: Option<String> = c.query_first("SELECT CURRENT_USER()").expect("user");
        assert!(who.unwrap_or_default().starts_with(&format!("{}@", my.user)), "{mode}");
        let to_admin = mysql::ChangeUserOpts::new()
            .with_user(Some(my.superuser.clone()))
            .with_pass(Some(String::new()))
            .with_db_name(Some("admin".into()));
        c.change_user(to_admin).expect("another pool's user");
        let who: Option<String> = c.query_first("SELECT CURRENT_USER()").expect("user");
        assert!(
            who.unwrap_or_default().starts_with(&format!("{}@", my.superuser)),
            "{mode}: the session moved to pool admin"
        );
        let bad = mysql::ChangeUserOpts::new()
            .with_user(Some(my.user.clone()))
            .with_pass(Some("wrong".into()))
            .with_db_name(Some(my.database.clone()));
        let err = c.change_user(bad).expect_err("wrong password");
        assert_eq!(server_error(err), (1045, "28000".to_owned()), "{mode}");
        assert!(c.query_drop("SELECT 1").is_err(), "{mode}: the session ends after a failed COM_CHANGE_USER");
        let one: Option<i64> = client(&r).query_first("SELECT 1").expect("others unaffected");
        assert_eq!(one, Some(1));
    }
}

/// LOAD DATA LOCAL INFILE on a pool without `local_infile` is refused by the router with 1148
/// and a reason, before any backend sees it, as a text query and as a prepared statement's
/// execute (#34); the session goes on (the relay itself: `mysql_infile`).
#[test]
fn local_infile_is_refused_clearly() {
    let t = ids_table(0);
    for (mode, prepared) in MODES.into_iter().flat_map(|m| [(m, false), (m, true)]) {
        let r = router(mode, 1);
        let mut c = client(&r);
        let load = format!("LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE {t}");
        let err = if prepared { c.exec_drop(load, ()) } else { c.query_drop(load) }.expect_err("refused");
        match err {
            mysql::Error::MySqlError(e) => {
                assert_eq!((e.code, e.state.as_str()), (1148, "42000"), "{mode}");
                assert!(
                    e.message.contains("not enabled on pool \"main\" (pool setting local_infile)"),
                    "{mode}: {}",
                    e.message
                );
            }
            other => panic!("{mode}: expected ERR 1148, got {other}"),
        }
        let one: Option<i64> = c.query_first("SELECT 1").expect("session goes on");
        assert_eq!(one, Some(1));
    }
    let n: Option<i64> = dbs().my.primary_client().query_first(format!("SELECT COUNT(*) FROM {t}")).expect("count");
    assert_eq!(n, Some(0));
}

impl Raw {
    /// Reads one ERR packet and then expects the router to close: returns the error number.
    fn error_then_close(&mut self) -> u16 {
        let p = self.read();
        let code = ErrPacket::decode(&p).unwrap_or_else(|e| panic!("expected ERR, got {p:?}: {e}")).code;
        let mut rest = Vec::new();
        let n = self.s.read_to_end(&mut rest).expect("the router closes the connection");
        assert_eq!(n, 0, "nothing may follow the ERR");
        code
    }
}

/// After login, malformed or oversized packets get an ERR and a close, while a client querying
/// all along never notices; an unknown command is an ERR and the session goes on.
#[test]
fn malformed_and_oversized_commands_get_an_error_and_a_close() {
    let pool = my_pool("main", "transaction", 2);
    let toml = my_config(&[0], &pool, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nmax_message_size = \"4KiB\"\n");
    let r = Router::start(&toml);
    let port = r.port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let (started, first_answer) = std::sync::mpsc::channel();
    let healthy = std::thread::spawn(move || {
        let mut c = Raw::login(port);
        let mut n = 0u32;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            assert_eq!(c.query("SELECT 'fine'"), Ok(vec!["fine".to_owned()]), "healthy query {n}");
            n += 1;
            let _ = started.send(());
        }
        n
    });
    // The bad input must arrive while the healthy client is at work, not before its login
    // (a loaded machine once let the whole test run before its first query).
    first_answer.recv_timeout(Duration::from_secs(30)).expect("the healthy client answered once");
    let cases: [(&str, Vec<u8>, u16); 4] = [
        ("a command announcing 1 MiB over a 4 KiB limit", vec![0x00, 0x00, 0x10, 0x00, 0x03], 1153),
        ("a command announcing a 16 MiB continued packet", vec![0xFF, 0xFF, 0xFF, 0x00, 0x03], 1153),
        (
            "a command with sequence id 5",
            vec![0x09, 0x00, 0x00, 0x05, 0x03, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1'],
            1156,
        ),
        ("a truncated COM_CHANGE_USER", vec![0x02, 0x00, 0x00, 0x00, 0x11, b'a'], 1047),
    ];
    for (what, bytes, code) in cases {
        let mut raw = Raw::login(port);
        raw.s.write_all(&bytes).expect("write");
        assert_eq!(raw.error_then_close(), code, "{what}");
    }
    let mut raw = Raw::login(port);
    raw.command(&[0xEE, 1, 2, 3]);
    assert_eq!(ErrPacket::decode(&raw.read()).map(|e| e.code), Ok(1047), "unknown command");
    assert_eq!(raw.query("SELECT 'goes on'"), Ok(vec!["goes on".to_owned()]));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let n = healthy.join().expect("the healthy client never failed");
    assert!(n > 0, "the healthy client kept querying");
}

/// The greeting offers no TLS; a client that asks for it anyway (SSLRequest) is told clearly
/// that the router has none, and closed.
#[test]
fn ssl_requests_are_refused_clearly() {
    let r = router("transaction", 1);
    let s = TcpStream::connect(("127.0.0.1", r.port())).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut raw = Raw { s, buf: Vec::new(), scramble: Vec::new() };
    let hs = raw.read();
    let caps = HandshakeV10::decode(&hs).expect("greeting").capabilities;
    assert_eq!(caps & CLIENT_SSL, 0, "the router must not offer TLS");
    let mut p = Vec::new();
    querypilot::protocol::mysql::SslRequest {
        capabilities: CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION,
        max_packet_size: 1 << 24,
        charset: 45,
    }
    .encode(&mut p);
    raw.send(&p, 1);
    let err = raw.read();
    let e = ErrPacket::decode(&err).expect("ERR");
    assert_eq!(e.code, 1043);
    assert!(String::from_utf8_lossy(e.message).contains("SSL is not supported"), "{e:?}");
    let mut rest = Vec::new();
    assert_eq!(raw.s.read_to_end(&mut rest).expect("closed"), 0);
}
