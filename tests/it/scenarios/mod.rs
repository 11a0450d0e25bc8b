//! Issue #37: one table of protocol-neutral session scenarios, run against both wires.
//!
//! Each [`Scenario`] is data: a router setup and a list of [`Step`]s over neutral statements
//! ([`Sql`]) sent on a [`Route`], each with what must come of it ([`Expect`]). A runner per wire
//! ([`pg::PgRunner`], [`my::MyRunner`]) turns a statement into its wire's SQL and a route into
//! its wire's client calls, and reports where it ran. Placement is always proven by the server
//! that answered (`pg_is_in_recovery()`, `@@server_id`), never by rows alone. A step that means
//! nothing on one wire is an explicit [`Step::Only`] with the reason, never a silent skip.
//!
//! Each wire runs the whole table on its own private environment (replication is paused by
//! some scenarios), one router per scenario, and reports every failing scenario at once. A
//! scenario that shows a bug of one wire's router is marked [`Known`]: it must keep failing at
//! that step on that wire (and pass on the other) until the bug is fixed and the mark removed.

mod my;
mod pg;
mod table;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::router::Router;
use crate::support::{eventually, unique_name, Dbs, Kind};

pub use table::table;

/// The two client protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// PostgreSQL clients, a primary and a streaming hot standby.
    Pg,
    /// MySQL clients, a MariaDB primary and its GTID replica.
    My,
}

/// How a statement travels from the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// PostgreSQL simple Query; MySQL COM_QUERY.
    Text,
    /// PostgreSQL unnamed Parse/Bind/Execute/Sync; MySQL COM_STMT_PREPARE, EXECUTE, CLOSE.
    Extended,
    /// PostgreSQL named statement (Parse+Sync, then Bind/Execute/Sync); MySQL a prepared
    /// statement kept open and executed.
    Prepared,
    /// The statement after `SELECT 1; ` in one text (a multi-statement simple Query / COM_QUERY).
    Multi,
}

/// Every route, for scenarios that must hold on each.
pub const ROUTES: [Route; 4] = [Route::Text, Route::Extended, Route::Prepared, Route::Multi];

/// Where a statement ran, as the server says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// `pg_is_in_recovery()` false / `@@server_id` 1.
    Primary,
    /// `pg_is_in_recovery()` true / `@@server_id` 2.
    Replica,
}

/// Session state that lives on one server connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinKind {
    /// PostgreSQL `CREATE TEMP TABLE`; MySQL `CREATE TEMPORARY TABLE`.
    TempTable,
    /// PostgreSQL `pg_advisory_lock`; MySQL `GET_LOCK`.
    AdvisoryLock,
    /// PostgreSQL `DECLARE ... WITH HOLD`.
    Cursor,
    /// PostgreSQL `LISTEN`.
    Listen,
    /// MySQL `SET @x`.
    UserVariable,
}

/// A protocol-neutral statement; each runner renders it in its wire's SQL. Ids are local to
/// the scenario (the runner offsets them) in the wire's table `(id int primary key)`.
#[derive(Clone, Debug)]
pub enum Sql {
    /// Inserts row `id`.
    Insert(u32),
    /// One row: how many rows have `id` (0/1) and where it ran.
    Count(u32),
    /// Opens a transaction, read-only or not.
    Begin { read_only: bool },
    /// `SET TRANSACTION READ ONLY`.
    SetTransactionReadOnly,
    /// Commits.
    Commit,
    /// Rolls back.
    Rollback,
    /// `SHOW querypilot.causal_token`: its value is kept for [`Sql::SetToken`].
    ShowToken,
    /// `SET querypilot.causal_token = '<the token last shown>'`.
    SetToken,
    /// Creates the pin's state.
    PinOn(PinKind),
    /// One row whose first value is `1` when the pin's state is there on this connection.
    PinHeld(PinKind),
    /// Removes the pin's state.
    PinOff(PinKind),
    /// `BEGIN; INSERT id; COMMIT` as one text: a transaction spanning statements.
    TxBlock(u32),
    /// A statement whose first run fails with a serialization failure (40001 / 1213) and
    /// which succeeds when run again; `counter` counts its runs. Without `rows_first` it is an
    /// INSERT whose error is the first thing it answers; with it a SELECT that sends ~3 MB of
    /// rows before failing, so the client has bytes of the answer when it fails.
    Victim { counter: u32, rows_first: bool },
    /// A read of a table that does not exist.
    Missing,
    /// One row: the server's id of the connection it ran on (`pg_backend_pid()`,
    /// `CONNECTION_ID()`) and where it ran, for [`Step::Kill`].
    Backend,
}

/// Error classes, each mapped to the wire's code by the runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The router's statement-pooling refusal (0A000 / 1235).
    StatementPooling,
    /// A write in a read-only transaction (25006 / 1792).
    ReadOnlyTransaction,
    /// Serialization failure / deadlock (40001 / 1213).
    Serialization,
    /// Undefined table (42P01 / 1146).
    UndefinedTable,
    /// A token statement on a route the router refuses it on (MySQL prepare: 1235).
    TokenRoute,
    /// Transaction characteristics changed inside a transaction (25001 / 1568).
    InTransaction,
}

/// What must come of a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Success, rows ignored.
    Ok,
    /// A [`Sql::Count`] row: `seen` is whether the row is there (`None`: either), `on` where
    /// the statement ran.
    Row { seen: Option<bool>, on: Place },
    /// The first value of the first row.
    Value(&'static str),
    /// An error of `class`; `after_rows`: rows of the same answer reached the client first.
    Error { class: Class, after_rows: bool },
    /// Not run: a pipeline skipped it after an earlier error.
    Skipped,
    /// The session ended because its backend connection was lost with state it held: the
    /// statement fails with what the wire's server sends a client whose connection was killed
    /// (57P01 / 1927), and the router closes the client's connection.
    Ended,
}

/// One step of a scenario.
#[derive(Clone, Debug)]
pub enum Step {
    /// Client connection `c` (0 or 1) sends `sql` on `route`.
    Run { c: usize, route: Route, sql: Sql, expect: Expect },
    /// Connection `c` sends the statements as one unit (PostgreSQL: extended-protocol
    /// pipeline with one Sync; MySQL: one multi-statement COM_QUERY), each with its expectation.
    Pipeline { c: usize, stmts: Vec<(Sql, Expect)> },
    /// Stops replaying on the replica (changes are still received).
    Pause,
    /// Resumes replaying and waits until the replica caught up.
    Resume,
    /// Waits until the replica has everything the primary committed.
    CaughtUp,
    /// Sleeps (a read-your-writes window elapsing).
    Wait(Duration),
    /// How many times the [`Sql::Victim`] of `counter` ran, read directly on the primary.
    Runs { counter: u32, expect: i64 },
    /// Ends backend connections from a superuser connection to the server at `on`
    /// (`pg_terminate_backend`, `KILL CONNECTION`), as a server restart or an operator would,
    /// and waits until the server has closed them: on the primary, the one connection `c`'s
    /// session shows as its own (a connection id is read there on both wires); on the replica,
    /// every connection of the router's user.
    Kill { c: usize, on: Place },
    /// `step` applies to `wire` only, for `why`.
    Only { wire: Wire, why: &'static str, step: Box<Step> },
}

/// The router a scenario runs through: split reads/writes over the wire's primary and replica.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Pool mode of both pools.
    pub mode: &'static str,
    /// `routing.read_your_writes`.
    pub ryw: &'static str,
    /// Whether the primary pool retries serialization failures (3 attempts).
    pub retry: bool,
}

/// A router bug one wire has and the table documents: the scenario still runs on that wire
/// and must fail there (so the mark goes as soon as the bug is fixed), and pass on the other.
#[derive(Clone, Copy, Debug)]
pub struct Known {
    /// The wire with the bug.
    pub wire: Wire,
    /// The step that fails because of it (any other failure is a failure).
    pub step: usize,
    /// What is wrong, where.
    pub bug: &'static str,
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Unique name, in failure reports.
    pub name: String,
    /// The router.
    pub setup: Setup,
    /// A bug of one wire's router this scenario shows.
    pub known: Option<Known>,
    /// What happens, in order.
    pub steps: Vec<Step>,
}

/// What came of one statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Success, with the rows of the last result (text values, `NULL` for null).
    Done(Vec<Vec<String>>),
    /// The wire's error code (SQLSTATE / error number) and how many rows came first.
    Failed { code: String, rows_before: usize },
    /// Not run.
    Skipped,
}

/// A wire's translation of the table. Stateless: the executor owns the environment and the
/// connections ([`Fixture`]) and hands the runner what a call needs.
pub trait Runner {
    /// A client connection of the wire.
    type Client;
    /// Which wire this is.
    const WIRE: Wire;
    /// The code of [`Expect::Ended`]'s error.
    const ENDED: &'static str;
    /// Creates the table `t`, the victim function and its [`counters`] on the primary.
    fn schema(env: &Dbs, t: &str);
    /// A client connection to the router on `port`.
    fn open(env: &Dbs, port: u16) -> Self::Client;
    /// Renders the statements whose SQL differs between the wires ([`Sql::Count`],
    /// [`Sql::Begin`], pins, [`Sql::Victim`]) for scenario-local ids offset by `base`.
    fn render(t: &str, sql: &Sql, base: u32) -> String;
    /// Sends `text` on `client` over `route`.
    fn run(client: &mut Self::Client, route: Route, text: &str) -> Outcome;
    /// Sends `texts` as one unit on `client`; one outcome per statement.
    fn pipeline(client: &mut Self::Client, texts: &[String]) -> Vec<Outcome>;
    /// The wire's code for `class`.
    fn code(class: Class) -> &'static str;
    /// How many times the [`Sql::Victim`] of `counter` ran (read on the primary directly).
    fn runs(env: &Dbs, t: &str, counter: u32) -> i64;
    /// Ends server connection `id` (`None`: every connection of the router's user) on the
    /// server at `on` and waits until they are gone.
    fn kill(env: &Dbs, on: Place, id: Option<&str>);
    /// Whether the router closed `client`'s connection (a ping finds it closed).
    fn closed(client: &mut Self::Client) -> bool;
}

/// Every counter a [`Sql::Victim`] of the table may use (each runner creates them up front:
/// a counter must survive the failure it counts, so it cannot be made by the failing statement).
fn counters() -> impl Iterator<Item = u32> {
    (1..=table().len() as u32).flat_map(|i| (1..=5).map(move |k| i * 1000 + k))
}

/// One wire's run: its environment, its table (whose name prefixes every object of the run)
/// and the client connections to the current scenario's router, opened on first use.
struct Fixture<C> {
    env: Dbs,
    t: String,
    conns: Vec<Option<C>>,
    port: Option<u16>,
}

/// Per-scenario state of the executor.
struct Ctx {
    base: u32,
    token: String,
    paused: bool,
}

/// Runs every scenario of the table through `R` on `env`; panics listing every scenario that
/// failed.
pub fn run_table<R: Runner>(env: Dbs) {
    let t = unique_name("scen");
    R::schema(&env, &t);
    let mut fx = Fixture::<R::Client> { env, t, conns: Vec::new(), port: None };
    let mut failures = Vec::new();
    let scenarios = table();
    for (i, sc) in scenarios.iter().enumerate() {
        let mut ctx = Ctx { base: (i as u32 + 1) * 1000, token: String::new(), paused: false };
        let started = std::time::Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| run_scenario::<R>(&mut fx, sc, &mut ctx)));
        if ctx.paused {
            replication::<R>(&fx.env, true);
        }
        let took = started.elapsed();
        let known = sc.known.filter(|k| k.wire == R::WIRE);
        let result = result.map_err(|e| message(&*e));
        match (result, known) {
            (Err(why), Some(k)) if why.contains(&format!("step {} ", k.step)) => {
                println!("{:?} {}: fails as known ({}): {why}", R::WIRE, sc.name, k.bug)
            }
            (Ok(()), None) => println!("{:?} {}: ok ({took:.1?})", R::WIRE, sc.name),
            (Ok(()), Some(k)) => {
                failures.push(format!("{}: passes, but is marked as failing for: {}; remove the mark", sc.name, k.bug))
            }
            (Err(why), _) => {
                println!("{:?} {}: FAILED ({took:.1?}): {why}", R::WIRE, sc.name);
                failures.push(format!("{}: {why}", sc.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{:?}: {} of {} scenarios failed:\n{}",
        R::WIRE,
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}

/// The text of a caught panic.
fn message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// Runs one scenario through a router of its own.
fn run_scenario<R: Runner>(fx: &mut Fixture<R::Client>, sc: &Scenario, ctx: &mut Ctx) {
    let text = match R::WIRE {
        Wire::Pg => {
            let e = &fx.env.pg;
            config(R::WIRE, &sc.setup, (e.primary_port, e.replica_port), (&e.user, &e.password, &e.database))
        }
        Wire::My => {
            let e = &fx.env.my;
            config(R::WIRE, &sc.setup, (e.primary_port, e.replica_port), (&e.user, &e.password, &e.database))
        }
    };
    let router = Router::start(&text);
    fx.port = Some(router.port());
    let result = catch_unwind(AssertUnwindSafe(|| {
        // The router marks the replica healthy on its first probe: reads reach it from then on.
        let probe = render::<R>(&fx.t, &Sql::Count(0), ctx);
        eventually(Duration::from_secs(20), "reads on the replica", || {
            let got = R::run(conn::<R>(fx, 0), Route::Text, &probe);
            matches!(got, Outcome::Done(rows) if place(&rows) == Some(Place::Replica))
        });
        for (n, step) in sc.steps.iter().enumerate() {
            exec::<R>(fx, step, ctx, &format!("step {n} {step:?}"));
        }
    }));
    // Clients first: an open one would hold the router's drain for its whole window.
    fx.conns.clear();
    fx.port = None;
    drop(router);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Client connection `c` to the current router, opened on first use.
fn conn<R: Runner>(fx: &mut Fixture<R::Client>, c: usize) -> &mut R::Client {
    if fx.conns.len() <= c {
        fx.conns.resize_with(c + 1, || None);
    }
    let port = fx.port.expect("a router");
    let env = &fx.env;
    fx.conns[c].get_or_insert_with(|| R::open(env, port))
}

/// Stops (`run` false) or resumes replay on the wire's replica.
fn replication<R: Runner>(env: &Dbs, run: bool) {
    let kind = match R::WIRE {
        Wire::Pg => Kind::Pg,
        Wire::My => Kind::Mariadb,
    };
    if run {
        env.resume_replication(kind);
    } else {
        env.pause_replication(kind);
    }
}

/// Waits until the wire's replica has everything its primary committed.
fn caught_up<R: Runner>(env: &Dbs) {
    let limit = Duration::from_secs(30);
    match R::WIRE {
        Wire::Pg => env.pg.wait_replica_caught_up(limit),
        Wire::My => env.my.wait_replica_caught_up(limit),
    }
}

/// `sql` in the wire's SQL: the statements both wires write alike here, the rest by the runner.
fn render<R: Runner>(t: &str, sql: &Sql, ctx: &Ctx) -> String {
    match sql {
        Sql::Insert(id) => format!("INSERT INTO {t} VALUES ({})", ctx.base + id),
        Sql::SetTransactionReadOnly => "SET TRANSACTION READ ONLY".into(),
        Sql::Commit => "COMMIT".into(),
        Sql::Rollback => "ROLLBACK".into(),
        Sql::ShowToken => "SHOW querypilot.causal_token".into(),
        Sql::SetToken => format!("SET querypilot.causal_token = '{}'", ctx.token),
        Sql::TxBlock(id) => format!("BEGIN; INSERT INTO {t} VALUES ({}); COMMIT", ctx.base + id),
        Sql::Missing => format!("SELECT * FROM {t}_missing"),
        Sql::Count(_)
        | Sql::Begin { .. }
        | Sql::PinOn(_)
        | Sql::PinHeld(_)
        | Sql::PinOff(_)
        | Sql::Victim { .. }
        | Sql::Backend => R::render(t, sql, ctx.base),
    }
}

fn exec<R: Runner>(fx: &mut Fixture<R::Client>, step: &Step, ctx: &mut Ctx, what: &str) {
    match step {
        Step::Run { c, route, sql, expect } => {
            let text = render::<R>(&fx.t, sql, ctx);
            let got = R::run(conn::<R>(fx, *c), *route, &text);
            check::<R>(&got, expect, &format!("{what}: {text}"));
            if *expect == Expect::Ended {
                assert!(R::closed(conn::<R>(fx, *c)), "{what}: the router closed the client's connection");
                fx.conns[*c] = None;
            }
            if let (Sql::ShowToken, Outcome::Done(rows)) = (sql, &got) {
                ctx.token = first(rows).unwrap_or_default();
            }
        }
        Step::Pipeline { c, stmts } => {
            let texts: Vec<String> = stmts.iter().map(|(s, _)| render::<R>(&fx.t, s, ctx)).collect();
            let got = R::pipeline(conn::<R>(fx, *c), &texts);
            assert_eq!(got.len(), stmts.len(), "{what}: one outcome per statement: {got:?}");
            for ((text, (_, expect)), got) in texts.iter().zip(stmts).zip(&got) {
                check::<R>(got, expect, &format!("{what}: {text}"));
            }
        }
        Step::Pause => {
            replication::<R>(&fx.env, false);
            ctx.paused = true;
        }
        Step::Resume => {
            replication::<R>(&fx.env, true);
            ctx.paused = false;
            caught_up::<R>(&fx.env);
        }
        Step::CaughtUp => caught_up::<R>(&fx.env),
        Step::Wait(d) => std::thread::sleep(*d),
        Step::Runs { counter, expect } => {
            assert_eq!(R::runs(&fx.env, &fx.t, ctx.base + counter), *expect, "{what}: runs of the victim statement")
        }
        Step::Kill { c, on: Place::Primary } => {
            let text = render::<R>(&fx.t, &Sql::Backend, ctx);
            let Outcome::Done(rows) = R::run(conn::<R>(fx, *c), Route::Text, &text) else {
                panic!("{what}: the session's server connection id")
            };
            assert_eq!(place(&rows), Some(Place::Primary), "{what}: where the id was read: {rows:?}");
            R::kill(&fx.env, Place::Primary, first(&rows).as_deref());
        }
        Step::Kill { on: Place::Replica, .. } => R::kill(&fx.env, Place::Replica, None),
        Step::Only { wire, why, step } => {
            if *wire == R::WIRE {
                exec::<R>(fx, step, ctx, what);
            } else {
                let step = what.split(' ').take(2).collect::<Vec<_>>().join(" ");
                println!("{:?}: {step} is for {wire:?} only: {why}", R::WIRE);
            }
        }
    }
}

fn first(rows: &[Vec<String>]) -> Option<String> {
    rows.first().and_then(|r| r.first()).cloned()
}

/// The placement column (the second) of a [`Sql::Count`] row.
fn place(rows: &[Vec<String>]) -> Option<Place> {
    match rows.first().and_then(|r| r.get(1)).map(String::as_str) {
        Some("primary") => Some(Place::Primary),
        Some("replica") => Some(Place::Replica),
        _ => None,
    }
}

fn check<R: Runner>(got: &Outcome, expect: &Expect, what: &str) {
    match (expect, got) {
        (Expect::Ok, Outcome::Done(_)) | (Expect::Skipped, Outcome::Skipped) => {}
        (Expect::Row { seen, on }, Outcome::Done(rows)) => {
            assert_eq!(place(rows), Some(*on), "{what}: where it ran: {rows:?}");
            if let Some(seen) = seen {
                let count = first(rows);
                assert_eq!(count.as_deref(), Some(if *seen { "1" } else { "0" }), "{what}: whether the row is seen");
            }
        }
        (Expect::Value(v), Outcome::Done(rows)) => assert_eq!(first(rows).as_deref(), Some(*v), "{what}: {rows:?}"),
        (Expect::Ended, Outcome::Failed { code, .. }) => assert_eq!(code, R::ENDED, "{what}: the session ended"),
        (Expect::Error { class, after_rows }, Outcome::Failed { code, rows_before }) => {
            assert_eq!(code, R::code(*class), "{what}: error {class:?}");
            assert_eq!(*rows_before > 0, *after_rows, "{what}: rows before the error: {rows_before}");
        }
        _ => panic!("{what}: expected {expect:?}, got {got:?}"),
    }
}

/// The router config of `setup` on `wire` over `primary` and `replica` ports, pools logging in
/// as `user`/`password` to `database`.
fn config(wire: Wire, setup: &Setup, ports: (u16, u16), login: (&str, &str, &str)) -> String {
    let (user, password, database) = login;
    let pool = |name: &str, port: u16| {
        format!(
            "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"{database}\"\n\
             max_connections = 8\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
             [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
            mode = setup.mode,
        )
    };
    let retry = if setup.retry {
        "[pools.primary.retry]\nmaximum_attempts = 3\nbackoff_base = \"10ms\"\nbackoff_max = \"100ms\"\ndeadline = \"20s\"\n\n"
    } else {
        ""
    };
    let listener = match wire {
        Wire::Pg => "protocol = \"postgres\"\nauth_method = \"md5\"",
        Wire::My => "protocol = \"mysql\"",
    };
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\n{listener}\nbind = \"127.0.0.1:0\"\n\n{}{}{retry}\
         [routing]\nread_write_split = true\nwrite_pool = \"primary\"\nread_pool = \"replica\"\n\
         read_your_writes = \"{}\"\ncausal_wait = \"20ms\"\n",
        pool("primary", ports.0),
        pool("replica", ports.1),
        setup.ryw,
    )
}

#[test]
fn scenarios_pg() {
    run_table::<pg::Pg>(Dbs::private());
}

#[test]
fn scenarios_mysql() {
    run_table::<my::My>(Dbs::private());
}
