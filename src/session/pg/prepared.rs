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
}

impl Stmt {
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
            // No hashing of the name when the session has no statement (a Close flood, #33).
            let gone = if self.stmts.is_empty() { None } else { self.stmts.remove(name) };
            self.stmt_forgotten(gone);
            self.ex.answer_here(crate::protocol::pg::tag::backend::CLOSE_COMPLETE);
            return Ok(());
        }
        if kind == crate::protocol::pg::Target::Statement {
            self.progress.unnamed.dropped();
        }
        self.forward_ext(raw, Expect::Close { swallow: false, key: None }).await
    }

    /// Takes a statement the client no longer has off what the session holds (#33).
    pub(super) fn stmt_forgotten(&mut self, stmt: Option<std::rc::Rc<Stmt>>) {
        if let Some(stmt) = stmt {
            let held = &mut self.progress.stmts_held;
            held.resize(held.bytes().saturating_sub(stmt.query.len() as u64 * 3), 0);
        }
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
            let text = format!("prepared statement \"{name}\" already exists");
            return Some(PgClientError::new(sqlstate::DUPLICATE_PREPARED_STATEMENT, text));
        }
        self.statements_refusal(query)
    }

    /// Why the client may not prepare one more named statement, of text `query` (#33): past
    /// `limits.session_prepared_statements`, or past `limits.session_prepared_bytes` of text
    /// held for the session's statements. `None`: it may, and its bytes are counted.
    fn statements_refusal(&mut self, query: &str) -> Option<PgClientError> {
        let limits = self.seat.ctx.config().limits.clone();
        let max = limits.session_prepared_statements.get();
        if self.stmts.len() >= max as usize {
            let text = format!(
                "too many prepared statements: this session has {max} (querypilot limits.session_prepared_statements); \
                 deallocate some first"
            );
            return Some(PgClientError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, text));
        }
        // About three copies of the text (see `held_bytes`).
        let want = query.len().saturating_mul(3) as u64;
        let (max, budget) = (limits.session_prepared_bytes as u64, limits.client_buffer_budget);
        let held = &mut self.progress.stmts_held;
        let now = held.bytes().saturating_add(want);
        if now <= max && held.resize(now, budget) {
            return None;
        }
        // Closed statements are not taken off as they go: the count is made exact here.
        let exact: u64 = self.stmts.values().map(|s| s.held_bytes() as u64).sum();
        held.resize(exact, budget);
        if exact.saturating_add(want) > max {
            let text = format!(
                "out of memory for prepared statements: this session's would hold more than {max} bytes \
                 (querypilot limits.session_prepared_bytes); deallocate some first"
            );
            return Some(PgClientError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, text));
        }
        if !held.resize(exact.saturating_add(want), budget) {
            let text = "out of memory: the router holds as much for its clients as limits.client_buffer_budget allows";
            return Some(PgClientError::new(sqlstate::OUT_OF_MEMORY, text));
        }
        None
    }
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

/// A fixed-seed hash: the same statement gets the same name on every core and connection.
pub(super) fn statement_key(query: &str, types: &[u32], generation: u64) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = ahash::RandomState::with_seeds(0x5150, 0x9e37_79b9, 0x7f4a_7c15, 0x2545_f491).build_hasher();
    query.hash(&mut h);
    types.hash(&mut h);
    generation.hash(&mut h);
    h.finish()
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
mod tests {
    use super::*;
    use crate::protocol::pg::tag::frontend as client;

    #[test]
    fn statements_are_let_go_a_slice_at_a_time() {
        use std::future::Future;
        use std::rc::Rc;
        use std::task::{Context, Poll, Waker};
        let kept = Rc::new(Stmt::new("SELECT 1", None, &[], 0));
        let stmts: Stmts = (0..DROP_SLICE * 3 + 1).map(|i| (format!("s{i}"), kept.clone())).collect();
        let mut dropping = std::pin::pin!(drop_in_slices(stmts));
        let mut cx = Context::from_waker(Waker::noop());
        let mut polls = 1;
        while dropping.as_mut().poll(&mut cx) == Poll::Pending {
            // Between two polls the other tasks of the core run: one slice went each time.
            assert_eq!(Rc::strong_count(&kept), 1 + DROP_SLICE * (3 - polls) + 1, "poll {polls}");
            polls += 1;
        }
        assert_eq!(polls, 4, "three full slices and the last statement");
        assert_eq!(Rc::strong_count(&kept), 1, "every statement let go");
    }

    #[test]
    fn a_statement_is_scanned_for_effects_at_its_first_use_only() {
        let set = Stmt::new("SET search_path = a", None, &[], 0);
        assert!(set.effects.get().is_none(), "not when parsed");
        assert!(!set.effects().is_empty());
        assert!(Stmt::new("SELECT 1", None, &[], 0).effects().is_empty());
        // A statement running another has that one's effects, not its own text's (none).
        let mut outer = Stmt::new("EXECUTE s1", Some("EXECUTE qp_0000000000000001"), &[], 0);
        outer.set_effects(set.effects());
        assert_eq!(outer.effects(), set.effects());
        assert_eq!(outer.regenerated(1).effects(), set.effects(), "kept under a new generation");
    }

    #[test]
    fn same_text_and_types_share_a_name() {
        let a = Stmt::new("SELECT $1", None, &[23], 0);
        let b = Stmt::new("SELECT $1", None, &[23], 0);
        let c = Stmt::new("SELECT $1", None, &[25], 0);
        let d = Stmt::new("SELECT $2", None, &[23], 0);
        assert_eq!(a.server_name, b.server_name);
        assert_ne!(a.server_name, c.server_name);
        assert_ne!(a.server_name, d.server_name);
        assert!(a.server_name.starts_with("qp_") && a.server_name.len() == 19);
        assert_eq!(a.parse_msg.first(), Some(&client::PARSE));
    }

    #[test]
    fn a_regenerated_statement_keeps_its_text_under_a_new_name() {
        let mut s = Stmt::new("SELECT ?", Some("SELECT $1"), &[23], 1);
        s.route_key = None;
        let fresh = s.regenerated(2);
        assert_ne!(fresh.server_name, s.server_name);
        assert_eq!(fresh.key, Stmt::new("SELECT ?", Some("SELECT $1"), &[23], 2).key);
        assert_eq!((fresh.query.as_str(), &fresh.sent), ("SELECT ?", &("SELECT $1".to_owned(), vec![23])));
    }

    #[test]
    fn a_schema_change_gives_a_new_name() {
        let before = Stmt::new("SELECT * FROM t", None, &[], 3);
        let after = Stmt::new("SELECT * FROM t", None, &[], 4);
        assert_ne!(before.server_name, after.server_name);
        assert_ne!(before.key, after.key);
    }

    #[test]
    fn finds_the_router_statement_a_server_message_names() {
        let s = Stmt::new("SELECT 1", None, &[], 0);
        let missing = format!("prepared statement \"{}\" does not exist", s.server_name);
        assert_eq!(key_in_message(&missing), Some(s.key));
        let exists = format!("prepared statement \"{}\" already exists", s.server_name);
        assert_eq!(key_in_message(&exists), Some(s.key));
        assert_eq!(key_in_message("prepared statement \"s1\" does not exist"), None);
        assert_eq!(key_in_message("prepared statement \"qp_0123\" does not exist"), None);
        assert_eq!(key_in_message("prepared statement \"qp_0123456789abcdefx\" does not exist"), None);
        assert_eq!(key_in_message("prepared statement \"qp_zz23456789abcdef\" does not exist"), None);
    }

    #[test]
    fn schema_changes_are_told_by_their_command_tag() {
        for tag in ["ALTER TABLE", "DROP TABLE", "DROP VIEW", "CREATE VIEW", "CREATE FUNCTION", "CREATE RULE"] {
            assert!(changes_schema(tag.as_bytes()), "{tag}");
        }
        for tag in ["CREATE TABLE", "CREATE TABLE AS", "CREATE INDEX", "SELECT 1", "INSERT 0 1", "DEALLOCATE"] {
            assert!(!changes_schema(tag.as_bytes()), "{tag}");
        }
    }
}
