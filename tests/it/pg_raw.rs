//! A byte-level PostgreSQL client for what real client libraries will not send: text-format
//! extended queries, hand-made pipelines, libpq's Bind/Describe-portal/Execute pattern, and
//! malformed input. It logs in with MD5 (the router's listener is configured for it), and
//! every read has a timeout so a wedged router fails the test instead of hanging it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

/// A router whose PostgreSQL listener authenticates clients with MD5, pool `main` in `mode`.
pub fn md5_router(mode: &str, max: u32) -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, mode, max);
    let toml = pg_config(&[0], &pools, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n");
    Router::start(&toml)
}

/// One backend message: tag and body.
pub type Msg = (u8, Vec<u8>);

/// The fields of an ErrorResponse: code byte and text.
pub type Fields = Vec<(u8, String)>;

/// A raw protocol connection.
pub struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

/// Frames `body` as a tagged message.
pub fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// Parse `name` = `sql`, no declared parameter types.
pub fn parse(name: &str, sql: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, name);
    cstr(&mut b, sql);
    b.extend_from_slice(&0u16.to_be_bytes());
    msg(b'P', &b)
}

/// Bind the unnamed portal to `stmt` with text parameters and one result format for all columns.
pub fn bind(stmt: &str, params: &[&str], result_format: u16) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, "");
    cstr(&mut b, stmt);
    b.extend_from_slice(&0u16.to_be_bytes());
    b.extend_from_slice(&(params.len() as u16).to_be_bytes());
    for p in params {
        b.extend_from_slice(&(p.len() as i32).to_be_bytes());
        b.extend_from_slice(p.as_bytes());
    }
    b.extend_from_slice(&1u16.to_be_bytes());
    b.extend_from_slice(&result_format.to_be_bytes());
    msg(b'B', &b)
}

/// Describe the unnamed portal.
pub fn describe_portal() -> Vec<u8> {
    msg(b'D', b"P\0")
}

/// Execute the unnamed portal, all rows.
pub fn execute() -> Vec<u8> {
    msg(b'E', b"\0\0\0\0\0")
}

/// Sync.
pub fn sync() -> Vec<u8> {
    msg(b'S', b"")
}

/// A simple Query.
pub fn query(sql: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, sql);
    msg(b'Q', &b)
}

/// The startup packet for user `app` and `database`.
pub fn startup(database: &str) -> Vec<u8> {
    startup_packet(0x0003_0000, &[("user", "app"), ("database", database)])
}

/// A StartupMessage asking for protocol `version` (`major << 16 | minor`) with `params`.
pub fn startup_packet(version: u32, params: &[(&str, &str)]) -> Vec<u8> {
    let mut b = version.to_be_bytes().to_vec();
    for (k, v) in params {
        cstr(&mut b, k);
        cstr(&mut b, v);
    }
    b.push(0);
    let mut out = (b.len() as u32 + 4).to_be_bytes().to_vec();
    out.extend_from_slice(&b);
    out
}

impl Raw {
    /// Opens a TCP connection without saying anything.
    pub fn open(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect to router");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
        Raw { s, buf: Vec::new() }
    }

    /// Connects and logs in as app/`password` with MD5; returns the connection or the
    /// server's ErrorResponse fields.
    pub fn login(port: u16, database: &str, password: &str) -> Result<Raw, Vec<(u8, String)>> {
        Self::login_keyed(port, database, password).map(|(r, _, _)| r)
    }

    /// [`Raw::login`], also returning the BackendKeyData's process id and secret key.
    pub fn login_keyed(port: u16, database: &str, password: &str) -> Result<(Raw, i32, i32), Vec<(u8, String)>> {
        let (r, msgs) = Self::login_with(port, &startup(database), password)?;
        let key = msgs.iter().find(|(tag, body)| *tag == b'K' && body.len() == 8).map_or((0, 0), |(_, b)| {
            (i32::from_be_bytes([b[0], b[1], b[2], b[3]]), i32::from_be_bytes([b[4], b[5], b[6], b[7]]))
        });
        Ok((r, key.0, key.1))
    }

    /// Sends the startup packet `packet` (user `app`) and answers MD5 with `password`; returns
    /// the connection and every message of the login up to ReadyForQuery.
    pub fn login_with(port: u16, packet: &[u8], password: &str) -> Result<(Raw, Vec<Msg>), Fields> {
        let mut r = Raw::open(port);
        r.send(packet);
        let mut seen = Vec::new();
        loop {
            let (tag, body) = r.recv().expect("login answer");
            match tag {
                b'R' if body.get(..4) == Some(&5u32.to_be_bytes()[..]) => {
                    let salt = &body[4..8];
                    let inner = format!("{:x}", md5::Md5::digest(format!("{password}app").as_bytes()));
                    let mut outer = inner.into_bytes();
                    outer.extend_from_slice(salt);
                    let mut p = format!("md5{:x}", md5::Md5::digest(&outer)).into_bytes();
                    p.push(0);
                    r.send(&msg(b'p', &p));
                }
                b'E' => return Err(fields(&body)),
                _ => {}
            }
            let done = tag == b'Z';
            seen.push((tag, body));
            if done {
                return Ok((r, seen));
            }
        }
    }

    /// Half-closes the connection.
    pub fn shutdown(&mut self, how: std::net::Shutdown) {
        let _ = self.s.shutdown(how);
    }

    /// Writes bytes as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write to router");
    }

    /// Writes bytes, tolerating a router that already closed the connection.
    pub fn send_lossy(&mut self, bytes: &[u8]) {
        let _ = self.s.write_all(bytes);
    }

    /// The next message; `None` when the router closed the connection.
    pub fn recv(&mut self) -> Option<Msg> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
                if self.buf.len() > len {
                    let m: Vec<u8> = self.buf.drain(..=len).collect();
                    return Some((m[0], m[5..].to_vec()));
                }
            }
            let mut chunk = [0u8; 8192];
            match self.s.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("reading from router: {e}"),
            }
        }
    }

    /// Every message up to and including ReadyForQuery.
    pub fn until_ready(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        loop {
            let m = self.recv().expect("router closed before ReadyForQuery");
            let done = m.0 == b'Z';
            out.push(m);
            if done {
                return out;
            }
        }
    }
}

/// The fields of an ErrorResponse body.
pub fn fields(body: &[u8]) -> Vec<(u8, String)> {
    body.split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| (f[0], String::from_utf8_lossy(&f[1..]).into_owned()))
        .collect()
}

/// The SQLSTATE of an ErrorResponse body.
pub fn code(body: &[u8]) -> String {
    fields(body).into_iter().find(|(k, _)| *k == b'C').map(|(_, v)| v).unwrap_or_default()
}

/// The columns of a DataRow body (`None` for NULL).
pub fn columns(body: &[u8]) -> Vec<Option<Vec<u8>>> {
    let n = u16::from_be_bytes([body[0], body[1]]) as usize;
    let mut pos = 2;
    (0..n)
        .map(|_| {
            let len = i32::from_be_bytes([body[pos], body[pos + 1], body[pos + 2], body[pos + 3]]);
            pos += 4;
            (len >= 0).then(|| {
                let v = body[pos..pos + len as usize].to_vec();
                pos += len as usize;
                v
            })
        })
        .collect()
}

/// The tags of `msgs`, as a string (`"12TDCZ"`), for compact assertions.
pub fn tags(msgs: &[Msg]) -> String {
    msgs.iter().map(|(t, _)| *t as char).collect()
}

use md5::Digest as _;
