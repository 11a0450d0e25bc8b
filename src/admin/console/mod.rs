//! The PgBouncer-style admin console: a client that asks a PostgreSQL listener for the virtual
//! database `querypilot` (or `pgbouncer`) and authenticates as a `[console]` user is handed, once
//! its password is checked on the core, to this module's thread. Each console client then gets a
//! plain thread of its own: console traffic is rare, and here it may wait on the control plane
//! (which gathers every core's counters, or pauses pools) without holding up a data core.
//!
//! The exchange is the simple-query protocol only, as PgBouncer's console: `SHOW ...` answers
//! with rows, `PAUSE`/`RESUME`/`RELOAD`/`SHUTDOWN` act through the control plane, anything else
//! is an error and the session goes on.

mod command;
mod show;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::config::ConsoleRole;
use crate::control::msg::ConsoleClient;
use crate::control::{ControlHandle, SwitchoverError, DEFAULT_SWITCHOVER_TIMEOUT};
use crate::metrics::CounterSnapshot;
use crate::protocol::pg::{
    backend, decode_frame, encode_error, sqlstate, Authentication, Frame, FrontendMessage, Severity, TransactionStatus,
};
use command::{Command, Show};
use show::Table;

/// Largest console message accepted: commands are short.
const MAX_MESSAGE: usize = 64 * 1024;
/// A console client silent this long is disconnected.
const IDLE_LIMIT: Duration = Duration::from_secs(3600);

/// Starts the thread that takes console clients from the cores.
pub fn start(clients: Receiver<ConsoleClient>, control: ControlHandle) -> std::io::Result<()> {
    std::thread::Builder::new().name("qp-console".into()).spawn(move || {
        // Ends when every core has stopped (they hold the senders).
        for client in clients.iter() {
            let control = control.clone();
            let spawned = std::thread::Builder::new().name("qp-console-client".into()).spawn(move || {
                let user = client.user.clone();
                if let Err(e) = Console::new(client, control).run() {
                    tracing::debug!(%user, error = %e, "console client left");
                }
            });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start a console client thread");
            }
        }
    })?;
    Ok(())
}

/// One console client.
struct Console {
    stream: TcpStream,
    buf: Vec<u8>,
    role: ConsoleRole,
    control: ControlHandle,
    out: Vec<u8>,
}

impl Console {
    fn new(client: ConsoleClient, control: ControlHandle) -> Self {
        Self { stream: client.stream, buf: client.leftover, role: client.role, control, out: Vec::new() }
    }

    fn run(mut self) -> std::io::Result<()> {
        self.stream.set_read_timeout(Some(IDLE_LIMIT))?;
        self.greet();
        self.flush()?;
        loop {
            let Some((tag, body)) = self.next()? else { return Ok(()) };
            match tag {
                b'Q' => match FrontendMessage::decode(&Frame { tag, body: &body, total_len: body.len() + 5 }) {
                    Ok(FrontendMessage::Query(sql)) => {
                        let sql = sql.to_owned();
                        self.query(&sql);
                    }
                    _ => self.error(sqlstate::PROTOCOL_VIOLATION, "malformed Query message"),
                },
                b'X' => return Ok(()),
                // The console speaks the simple protocol only; an extended batch gets one error
                // and the ReadyForQuery its Sync waits for.
                b'S' => backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.out),
                b'P' => self.error_only(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    "the admin console supports the simple query protocol only",
                ),
                b'B' | b'D' | b'E' | b'C' | b'H' => {}
                other => {
                    self.error(sqlstate::PROTOCOL_VIOLATION, &format!("unexpected message type {:?}", other as char));
                }
            }
            self.flush()?;
        }
    }

    /// The rest of a login: AuthenticationOk (the core checked the password), the parameters
    /// drivers look for, a key nobody can cancel with, ReadyForQuery.
    fn greet(&mut self) {
        let _ = backend::encode_authentication(&Authentication::Ok, &mut self.out);
        let version = format!("{}/querypilot", env!("CARGO_PKG_VERSION"));
        for (name, value) in [
            ("server_version", version.as_str()),
            ("server_encoding", "UTF8"),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"),
            ("integer_datetimes", "on"),
            ("standard_conforming_strings", "on"),
            ("application_name", "querypilot console"),
        ] {
            let _ = backend::BackendMessage::ParameterStatus { name, value }.encode(&mut self.out);
        }
        let _ = backend::BackendMessage::BackendKeyData { pid: 0, key: rand::random() }.encode(&mut self.out);
        backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.out);
    }

    /// The next whole message, or `None` when the client closed.
    fn next(&mut self) -> std::io::Result<Option<(u8, Vec<u8>)>> {
        loop {
            match decode_frame(&self.buf, MAX_MESSAGE) {
                Ok(Some(f)) => {
                    let (tag, body, len) = (f.tag, f.body.to_vec(), f.total_len);
                    self.buf.drain(..len);
                    return Ok(Some((tag, body)));
                }
                Ok(None) => {}
                Err(e) => {
                    self.fatal(sqlstate::PROTOCOL_VIOLATION, &e.to_string());
                    let _ = self.flush();
                    return Ok(None);
                }
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let out = std::mem::take(&mut self.out);
        self.stream.write_all(&out)
    }

    fn query(&mut self, sql: &str) {
        match Command::parse(sql) {
            Err(message) => self.error(sqlstate::SYNTAX_ERROR, &message),
            Ok(c) if c.needs_admin() && self.role != ConsoleRole::Admin => {
                self.error(INSUFFICIENT_PRIVILEGE, "this command needs a console.admin_users user");
            }
            Ok(c) => self.run_command(c),
        }
    }

    fn run_command(&mut self, command: Command) {
        match command {
            Command::Set => self.done("SET"),
            Command::Show(what) => match self.show(what) {
                Ok(table) => {
                    self.rows(&table);
                    self.done("SHOW");
                }
                Err(e) => self.error(sqlstate::CONNECTION_FAILURE, &e),
            },
            Command::Pause(pool) => {
                let timeout = self.control.current().map(|s| s.config.console.pause_timeout);
                match timeout.and_then(|t| self.control.pause(pool, t)) {
                    Ok(o) if o.in_use == 0 => self.done("PAUSE"),
                    Ok(o) => self.error(
                        sqlstate::QUERY_CANCELED,
                        &format!(
                            "console.pause_timeout passed with {} server connections still in use; the pool stays \
                             paused until RESUME",
                            o.in_use
                        ),
                    ),
                    Err(e) => self.error(sqlstate::CONNECTION_FAILURE, &e.to_string()),
                }
            }
            Command::Resume(pool) => match self.control.resume(pool) {
                Ok(_) => self.done("RESUME"),
                Err(e) => self.error(sqlstate::CONNECTION_FAILURE, &e.to_string()),
            },
            Command::Reconnect(pool) => match self.control.reconnect(pool) {
                Ok(_) => self.done("RECONNECT"),
                Err(e) => self.error(sqlstate::CONNECTION_FAILURE, &e.to_string()),
            },
            Command::Switchover { pool, backend } => {
                match crate::control::switchover(&self.control, &pool, &backend, DEFAULT_SWITCHOVER_TIMEOUT) {
                    Ok(_) => self.done("SWITCHOVER"),
                    // The pool stays paused: as a PAUSE that timed out.
                    Err(e @ SwitchoverError::Control(_)) => self.error(sqlstate::CONNECTION_FAILURE, &e.to_string()),
                    Err(e) => self.error(sqlstate::QUERY_CANCELED, &e.to_string()),
                }
            }
            Command::Kill(pool) => match self.control.kill(pool) {
                Ok(_) => self.done("KILL"),
                Err(e) => self.error(sqlstate::CONNECTION_FAILURE, &e.to_string()),
            },
            Command::Reload => match self.control.reload() {
                Ok(_) => self.done("RELOAD"),
                Err(e) => self.error(sqlstate::CONNECTION_FAILURE, &e.to_string()),
            },
            Command::Shutdown => {
                self.control.drain();
                self.done("SHUTDOWN");
            }
        }
    }

    fn show(&self, what: Show) -> Result<Table, String> {
        let snapshot = self.control.current().map_err(|e| e.to_string())?;
        let reports = self.control.collect().map_err(|e| e.to_string())?;
        let mut merged = CounterSnapshot::default();
        for r in &reports {
            merged.merge(&r.counters);
        }
        Ok(show::table(what, &snapshot.config, &merged, process_memory()))
    }

    fn rows(&mut self, table: &Table) {
        let fields: Vec<backend::FieldDescription<'_>> = table
            .columns
            .iter()
            .map(|(name, kind)| backend::FieldDescription {
                name,
                table_oid: 0,
                column_attr: 0,
                type_oid: kind.oid(),
                type_size: if kind.oid() == 20 { 8 } else { -1 },
                type_modifier: -1,
                format: 0,
            })
            .collect();
        let _ = backend::encode_row_description(&fields, &mut self.out);
        for row in &table.rows {
            let texts: Vec<Option<String>> = row.iter().map(show::Cell::text).collect();
            let values: Vec<Option<&[u8]>> = texts.iter().map(|t| t.as_deref().map(str::as_bytes)).collect();
            let _ = backend::encode_data_row(&values, &mut self.out);
        }
    }

    fn done(&mut self, tag: &str) {
        let _ = backend::BackendMessage::CommandComplete(tag).encode(&mut self.out);
        backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.out);
    }

    fn error(&mut self, code: &str, message: &str) {
        self.error_only(code, message);
        backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.out);
    }

    fn error_only(&mut self, code: &str, message: &str) {
        encode_error(Severity::Error, code, message, &mut self.out);
    }

    fn fatal(&mut self, code: &str, message: &str) {
        encode_error(Severity::Fatal, code, message, &mut self.out);
    }
}

/// insufficient_privilege: a stats user asked for an admin command.
const INSUFFICIENT_PRIVILEGE: &str = "42501";

/// The process's resident and virtual size in bytes (`/proc/self/statm`, counted in 4 KiB pages,
/// the page size of the x86-64 hosts the router targets), or zeros when it cannot be read.
fn process_memory() -> (u64, u64) {
    const PAGE: u64 = 4096;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut fields = statm.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
    let virt = fields.next().unwrap_or(0);
    let resident = fields.next().unwrap_or(0);
    (resident * PAGE, virt * PAGE)
}
