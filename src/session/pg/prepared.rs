//! Prepared-statement bookkeeping: the client's statements under router-chosen backend names,
//! and the queue of responses the relay must expect, swallow or synthesize.
//!
//! A client statement `s1` becomes `qp_<hash of text, parameter types and schema generation>` on
//! every backend connection, so identical statements of different clients share one backend
//! preparation and a statement can be re-prepared transparently on whichever connection the
//! client borrows next. The schema generation (#18, `pool::SchemaGeneration`) is the one in force
//! when the client prepared: after a schema change the router saw, a client preparing the same
//! text gets a server statement parsed after the change, while a statement prepared before
//! keeps the server statement it was described with (which the server revalidates, reporting
//! `0A000` when its result type changed, as on a direct connection).

use super::Session;
use crate::protocol::pg::{frontend, sqlstate};
use crate::routing::StatementKey;
use crate::session::client_error::PgClientError;
use crate::session::engine::prepared::{self as engine, admission, Refusal};
use crate::sql::analyze::{session_effects, Effect};
use crate::sql::Dialect;

/// The client's statements by name. ahash rather than std's SipHash: hashing the name three
/// times (the late, token and ordinary statements) was a third of the router's work for each
/// Close of a flood of them (#33); its keys are random per map as SipHash's are.
pub(super) type Stmts = std::collections::HashMap<String, std::rc::Rc<Stmt>, ahash::RandomState>;

/// A statement a client prepared.
#[derive(Debug)]
pub struct Stmt {
    /// Identity of text + parameter types; names the statement on backends.
    pub key: u64,
    /// `qp_<key>`.
    pub server_name: String,
    /// A ready Parse message under `server_name`.
    pub parse_msg: Vec<u8>,
    /// Session effects of the statement text (SET and friends), worked out at its first use
    /// (see [`Stmt::effects`]).
    effects: std::cell::OnceCell<Vec<Effect>>,
    /// The client's text, which routing decides on at every execute.
    pub query: String,
    /// The routing key of `query`, computed once at Parse.
    pub route_key: Option<StatementKey>,
    /// What backends prepare (`query`, or its translation) and the declared parameter types.
    pub sent: (String, Vec<u32>),
    /// The schema generation in force when the client prepared it.
    pub generation: u64,
    /// The row type the client was told when it described the statement (see `verify`).
    pub row_type: std::cell::Cell<Option<u64>>,
    /// The client's statement this one's text runs (`EXECUTE name`, renamed in `sent`): it must
    /// be on a connection before this one is parsed there (see `named`).
    pub executes: Option<std::rc::Rc<Stmt>>,
    /// Held until Bind: a `$n` sits in a translation's JSON-array slot (`late`, #35).
    pub late: bool,
}

impl Stmt {
    /// `translated` is what a translation rule rewrote the client's `query` into; it is what
    /// backends prepare. `generation` is the schema generation in force.
    pub fn new(query: &str, translated: Option<&str>, types: &[u32], generation: u64) -> Self {
        let client_query = query;
        let query = translated.unwrap_or(query);
        let key = statement_key(query, types, generation);
        let server_name = server_name(key);
        let mut parse_msg = Vec::with_capacity(query.len() + 32);
        // Encoding fails only on NUL bytes, which the decoder already rejected.
        let _ = frontend::encode_parse(&server_name, query, types, &mut parse_msg);
        Self {
            key,
            server_name,
            parse_msg,
            effects: std::cell::OnceCell::new(),
            query: client_query.to_owned(),
            route_key: None,
            sent: (query.to_owned(), types.to_vec()),
            generation,
            row_type: std::cell::Cell::new(None),
            executes: None,
            late: false,
        }
    }

    /// Session effects of what backends prepare, worked out at the first Bind or `EXECUTE`:
    /// a statement that never runs is never scanned for them (a flood of named Parses costs
    /// no analysis of each text, #33).
    pub fn effects(&self) -> &[Effect] {
        self.effects.get_or_init(|| session_effects(&self.sent.0, Dialect::Postgres).into_effects().collect())
    }

    /// Gives the statement `effects` instead of its own text's: one whose text runs another
    /// statement has that statement's.
    pub fn set_effects(&mut self, effects: &[Effect]) {
        self.effects = std::cell::OnceCell::from(effects.to_vec());
    }

    /// Bytes of text the statement holds (the client's, what backends prepare, the Parse).
    fn held_bytes(&self) -> usize {
        self.query.len() + self.sent.0.len() + self.parse_msg.len()
    }

    /// The same client statement under `generation`: a new server name, for a statement the
    /// server found stale (others sharing the old server statement keep theirs, and get the
    /// server's own verdict on it).
    pub fn regenerated(&self, generation: u64) -> Self {
        let mut fresh = Self::new(&self.query, Some(&self.sent.0), &self.sent.1, generation);
        fresh.route_key = self.route_key;
        fresh.executes = self.executes.clone();
        fresh.set_effects(self.effects());
        fresh
    }
}

impl Session {
    /// Close of a statement or portal: a named statement is the client's name only (the backend
    /// keeps the statement for reuse), answered here; the rest goes to the backend.
    pub(super) async fn on_close(
        &mut self,
        kind: crate::protocol::pg::Target,
        name: &str,
        raw: &[u8],
    ) -> Result<(), super::End> {
        if kind == crate::protocol::pg::Target::Statement && !name.is_empty() {
            self.forget_stmt(name);
            self.ex.answer_here(crate::protocol::pg::tag::backend::CLOSE_COMPLETE);
            return Ok(());
        }
        if kind == crate::protocol::pg::Target::Statement {
            self.progress.unnamed.dropped();
        }
        self.forward_ext(raw, Expect::Close { swallow: false, key: None }).await
    }

    /// Takes the client's statement `name` off its statements and what the session holds (#33).
    pub(super) fn forget_stmt(&mut self, name: &str) -> Option<std::rc::Rc<Stmt>> {
        // No hashing of the name when the session has no statement (a Close flood, #33).
        let stmt = if self.stmts.is_empty() { None } else { self.stmts.remove(name) }?;
        let held = &mut self.progress.stmts_held;
        held.resize(held.bytes().saturating_sub(stmt.query.len() as u64 * 3), 0);
        Some(stmt)
    }

    /// The client dropped all its statements: the session holds none (#33).
    pub(super) fn stmts_cleared(&mut self) {
        self.stmts.clear();
        self.progress.stmts_held.resize(0, 0);
    }

    /// Why the client's named Parse of `name` (text `query`) fails: the name exists (as on the
    /// server, the existing statement stays and the batch fails, #18), or a limit (#33).
    pub(super) fn named_parse_refusal(&mut self, name: &str, query: &str) -> Option<PgClientError> {
        if self.stmts.contains_key(name) {
            return Some(duplicate(name));
        }
        self.statements_refusal(query)
    }

    /// Why the client may not prepare one more named statement, of text `query` (#33): past
    /// `limits.session_prepared_statements`, or past `limits.session_prepared_bytes` of text
    /// held for the session's statements. `None`: it may, and its bytes are counted.
    fn statements_refusal(&mut self, query: &str) -> Option<PgClientError> {
        let limits = self.seat.ctx.config().limits.clone();
        // About three copies of the text (see `held_bytes`).
        let want = query.len().saturating_mul(3) as u64;
        let held = &mut self.progress.stmts_held;
        let mut verdict = admission(&limits, self.stmts.len(), held.bytes(), want, |n, b| held.resize(n, b));
        if matches!(verdict, Err(Refusal::Bytes(_) | Refusal::Budget)) {
            // Closed statements are taken off by estimate as they go: the count is made exact here.
            let exact: u64 = self.stmts.values().map(|s| s.held_bytes() as u64).sum();
            held.resize(exact, limits.client_buffer_budget);
            verdict = admission(&limits, self.stmts.len(), exact, want, |n, b| held.resize(n, b));
        }
        let text = match verdict.err()? {
            Refusal::Count(max) => format!(
                "too many prepared statements: this session has {max} (querypilot limits.session_prepared_statements); \
                 deallocate some first"
            ),
            Refusal::Bytes(max) => format!(
                "out of memory for prepared statements: this session's would hold more than {max} bytes \
                 (querypilot limits.session_prepared_bytes); deallocate some first"
            ),
            Refusal::Budget => {
                let text =
                    "out of memory: the router holds as much for its clients as limits.client_buffer_budget allows";
                return Some(PgClientError::new(sqlstate::OUT_OF_MEMORY, text));
            }
        };
        Some(PgClientError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, text))
    }
}

/// The server's error for a Parse of a statement name the client has already (#18).
pub(super) fn duplicate(name: &str) -> PgClientError {
    PgClientError::new(sqlstate::DUPLICATE_PREPARED_STATEMENT, format!("prepared statement \"{name}\" already exists"))
}

/// Statements let go of between two yields of a session that ends holding many (#33): a
/// statement's texts are three allocations of its length, about 1.5 µs to free for 1 KiB
/// texts, so a slice stays near 50 µs of its core.
const DROP_SLICE: usize = 32;

/// Drops `stmts` a slice at a time, yielding to the core's other tasks between slices. A
/// session ending with its limit of statements (10,000, or 16 MiB of text) freed them all in
/// one poll: 8 ms of its core's loop, every other session of the core waiting behind it.
pub(super) async fn drop_in_slices(stmts: Stmts) {
    let mut left = stmts.into_iter();
    while left.by_ref().take(DROP_SLICE).count() == DROP_SLICE {
        crate::rt::yield_now().await;
    }
}

/// The backend name of statement `key`.
pub(super) fn server_name(key: u64) -> String {
    format!("qp_{key:016x}")
}

/// The key of a statement: its text, parameter types and schema generation.
pub(super) fn statement_key(query: &str, types: &[u32], generation: u64) -> u64 {
    engine::statement_key(0x5150, (query, types, generation))
}

/// The statement key in a server message naming one of the router's statements (`26000
/// prepared statement "qp_…" does not exist`, `42P05 … already exists`): the connection's
/// bookkeeping of that statement was wrong and is corrected from it.
pub(super) fn key_in_message(message: &str) -> Option<u64> {
    let start = message.find("\"qp_")? + 4;
    let hex = message.get(start..start + 16)?;
    if message.get(start + 16..start + 17) != Some("\"") {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Whether a CommandComplete tag reports a schema change that can make a prepared statement's
/// plan, result type or parameter types stale (#18). A new table, index or sequence changes
/// no existing object (PostgreSQL invalidates no plan for it either), and temp-table-heavy
/// applications create tables all the time: those do not count.
pub(super) fn changes_schema(tag: &[u8]) -> bool {
    const UNCHANGING: [&[u8]; 4] = [b"CREATE TABLE", b"CREATE TABLE AS", b"CREATE INDEX", b"CREATE SEQUENCE"];
    let ddl = [&b"ALTER "[..], b"DROP ", b"CREATE "].iter().any(|p| tag.starts_with(p));
    ddl && !UNCHANGING.contains(&tag)
}

/// One response the backend (or the router itself) owes the client, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// ParseComplete; `swallow` when the router injected the Parse; `key` to forget on error.
    Parse { swallow: bool, key: Option<u64> },
    /// BindComplete.
    Bind,
    /// ParameterDescription + RowDescription/NoData.
    DescribeStatement,
    /// RowDescription/NoData.
    DescribePortal,
    /// Rows and CommandComplete/EmptyQueryResponse/PortalSuspended.
    Execute,
    /// CloseComplete; `swallow` when the router evicted a statement; `key` of the evicted
    /// statement, still on the backend when an earlier error makes the server skip the Close.
    Close { swallow: bool, key: Option<u64> },
    /// ReadyForQuery.
    Sync,
    /// A response the router answers itself (ParseComplete `'1'` or CloseComplete `'3'`).
    Synth(u8),
    /// A backend message with this tag answering a message the router sent for its own
    /// purpose, which the client must not see: the ParameterDescription of a statement the
    /// router describes with other parameters than the client's (#35, `late`).
    Swallow(u8),
    /// The DataRow and CommandComplete of the router's probe asking, before the batch's Sync,
    /// whether the implicit transaction wrote (#34): the client sees neither.
    XactProbe,
}

#[cfg(test)]
mod tests;
