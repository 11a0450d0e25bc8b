//! Hostile routing cases for MySQL clients (#19), against the harness's MariaDB primary (server
//! id 1) and replica (server id 2) through a read/write split. The replica is made **writable
//! for the test user** on purpose (`READ_ONLY ADMIN`, granted on the primary so it replicates):
//! a statement misrouted to the replica would succeed there silently instead of failing with
//! 1290. Each test proves where statements ran with `@@server_id` and by the rows on each server,
//! and that every acknowledged write is on the primary afterwards.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;

use crate::mysql_commands::Raw;
use crate::router::Router;
use crate::support::{dbs, unique_name};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;
/// `ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION`: what the router answers for a statement that is
/// not replica-safe while the session holds a replica connection.
const HELD_REPLICA: u16 = 1792;
/// `ER_NOT_SUPPORTED_YET`: statement pooling refusing a transaction.
const STATEMENT_POOLING: u16 = 1235;

/// The user the replica lets write (`READ_ONLY ADMIN`): (name, password).
pub(crate) fn replica_writer() -> &'static (String, String) {
    static WRITER: OnceLock<(String, String)> = OnceLock::new();
    WRITER.get_or_init(|| {
        let my = &dbs().my;
        let (user, password) = ("qp_replica_writer".to_owned(), "qp_rw_pw".to_owned());
        let mut root = my.superuser_client(my.primary_port);
        for sql in [
            format!("CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}'"),
            format!("GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'"),
            format!("GRANT READ_ONLY ADMIN ON *.* TO '{user}'@'%'"),
        ] {
            root.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        my.wait_replica_caught_up(Duration::from_secs(30));
        // The premise of every test here: the replica is read-only, yet this user can write
        // on it (a table of the replica's own, which replication never touches).
        let mut direct = my.connect(my.replica_port, &user, &password);
        let read_only: u64 = direct.query_first("SELECT @@read_only").expect("@@read_only").unwrap_or(0);
        assert_eq!(read_only, 1, "the replica runs read-only");
        let own = unique_name("replica_own");
        direct.query_drop(format!("CREATE TABLE {own} (a INT)")).expect("the writer can write on the replica");
        direct.query_drop(format!("DROP TABLE {own}")).expect("drop");
        (user, password)
    })
}

/// A pool named `name` on `port` in `mode`, logging in as the replica writer.
fn pool(name: &str, port: u16, mode: &str) -> String {
    let (u, p) = replica_writer();
    format!(
        "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 4\nacquire_timeout = \"10s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        d = dbs().my.database,
    )
}

/// One MySQL listener; `mywrite` (primary) and `myread` (replica) in `mode`, split on; `extra`
/// is appended to `[routing]`.
pub(crate) fn split_config(mode: &str, extra: &str) -> String {
    let my = &dbs().my;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{w}\n{r}\n\
         [routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\nread_your_writes = \"none\"\n{extra}\n",
        w = pool("mywrite", my.primary_port, mode),
        r = pool("myread", my.replica_port, mode),
    )
}

pub(crate) fn client(router: &Router) -> Conn {
    let (u, p) = replica_writer();
    Conn::new(dbs().my.opts(router.port(), u, p)).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

/// A table `(id INT PRIMARY KEY, v INT)` holding (1, 10), made on the primary and replicated.
pub(crate) fn table() -> String {
    let t = unique_name("safety");
    let my = &dbs().my;
    let mut c = my.superuser_client(my.primary_port);
    c.query_drop(format!("CREATE TABLE {}.{t} (id INT PRIMARY KEY, v INT)", my.database)).expect("create");
    c.query_drop(format!("INSERT INTO {}.{t} VALUES (1, 10)", my.database)).expect("seed");
    my.wait_replica_caught_up(Duration::from_secs(30));
    t
}

/// `v` of row 1 on `port`, read directly.
fn v_on(port: u16, t: &str) -> i64 {
    let my = &dbs().my;
    let sql = format!("SELECT v FROM {}.{t} WHERE id = 1", my.database);
    my.superuser_client(port).query_first(&sql).expect("read v").expect("row 1")
}

/// Asserts `v` on the primary, then (once caught up) the same on the replica: every write ran on
/// the primary and nothing ran on the replica alone.
pub(crate) fn assert_v_everywhere(t: &str, want: i64, what: &str) {
    let my = &dbs().my;
    assert_eq!(v_on(my.primary_port, t), want, "{what}: the primary holds every acknowledged write");
    my.wait_replica_caught_up(Duration::from_secs(30));
    assert_eq!(v_on(my.replica_port, t), want, "{what}: the replica holds what the primary does, nothing more");
}

/// The server that answered `sql`, which ends its select list with `@@server_id`.
fn ran_on(c: &mut Conn, sql: &str) -> u64 {
    let row: mysql::Row = c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).expect("a row");
    let v: mysql::Value = row.as_ref(row.len() - 1).cloned().unwrap_or(mysql::Value::NULL);
    mysql::from_value_opt::<u64>(v).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn refused(c: &mut Conn, sql: &str) -> (u16, String, String) {
    match c.query_drop(sql) {
        Err(mysql::Error::MySqlError(e)) => (e.code, e.state, e.message),
        other => panic!("{sql}: expected a server error, got {other:?}"),
    }
}

/// `SET autocommit=0; SELECT; UPDATE; COMMIT` (issue case 1) runs entirely on the primary in
/// transaction and session pooling; the session keeps going to the primary while autocommit is
/// off, and reads reach the replica again once it is back on.
#[test]
fn autocommit_off_read_modify_write_runs_on_the_primary() {
    for mode in ["transaction", "session"] {
        let t = table();
        let router = Router::start(&split_config(mode, ""));
        let mut c = client(&router);
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{mode}: autocommit reads use the replica");
        c.query_drop("SET autocommit=0").expect("autocommit off");
        let sel = format!("SELECT v, @@server_id FROM {t} WHERE id = 1");
        assert_eq!(ran_on(&mut c, &sel), PRIMARY, "{mode}: the read opening the transaction");
        c.query_drop(format!("UPDATE {t} SET v = v + 100 WHERE id = 1")).expect("update");
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), PRIMARY, "{mode}: inside the transaction");
        c.query_drop("COMMIT").expect("commit");
        assert_eq!(ran_on(&mut c, &sel), PRIMARY, "{mode}: the next implicit transaction");
        c.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")).expect("second update");
        c.query_drop("COMMIT").expect("commit");
        c.query_drop("SET autocommit=1").expect("autocommit on");
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{mode}: autocommit reads use the replica again");
        drop(c);
        assert_v_everywhere(&t, 111, mode);
    }
}

/// A transaction the session declared read-only may read from the replica; a write there is
/// refused by the router (1792 / 25006, naming the reason) and reaches neither server.
#[test]
fn read_only_transactions_may_use_the_replica_and_write_nowhere() {
    for mode in ["transaction", "session"] {
        let t = table();
        let router = Router::start(&split_config(mode, ""));
        let mut c = client(&router);
        c.query_drop("SET SESSION TRANSACTION READ ONLY").expect("read only");
        c.query_drop("SET autocommit=0").expect("autocommit off");
        assert_eq!(ran_on(&mut c, &format!("SELECT v, @@server_id FROM {t}")), REPLICA, "{mode}: declared read-only");
        let (code, state, msg) = refused(&mut c, &format!("UPDATE {t} SET v = v + 100 WHERE id = 1"));
        assert_eq!((code, state.as_str()), (HELD_REPLICA, "25006"), "{mode}: {msg}");
        assert!(msg.contains("replica") && msg.contains("write"), "{mode}: the message names the reason: {msg}");
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{mode}: the transaction goes on");
        c.query_drop("COMMIT").expect("commit");
        c.query_drop("SET SESSION TRANSACTION READ WRITE").expect("read write");
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), PRIMARY, "{mode}: a read-write implicit transaction");
        c.query_drop("ROLLBACK").expect("rollback");
        drop(c);
        assert_v_everywhere(&t, 10, mode);
    }
}

/// A transaction a hint opened on the replica (`route=replica` with autocommit off) holds that
/// connection; a write, a locking read or a new transaction there is refused, never sent.
#[test]
fn a_replica_held_by_a_transaction_takes_no_unsafe_statement() {
    for mode in ["transaction", "session"] {
        let t = table();
        let router = Router::start(&split_config(mode, ""));
        let mut c = client(&router);
        c.query_drop("SET autocommit=0").expect("autocommit off");
        let hinted = format!("/* querypilot: route=replica */ SELECT v, @@server_id FROM {t} WHERE id = 1");
        assert_eq!(ran_on(&mut c, &hinted), REPLICA, "{mode}: the hint opened the transaction on the replica");
        for sql in [
            format!("UPDATE {t} SET v = v + 100 WHERE id = 1"),
            format!("INSERT INTO {t} VALUES (2, 20)"),
            format!("SELECT v FROM {t} WHERE id = 1 FOR UPDATE"),
            "SELECT GET_LOCK('qp_safety', 0)".to_owned(),
            "START TRANSACTION".to_owned(),
        ] {
            let (code, state, msg) = refused(&mut c, &sql);
            assert_eq!((code, state.as_str()), (HELD_REPLICA, "25006"), "{mode}: {sql}: {msg}");
            assert!(msg.contains("a transaction is open"), "{mode}: {sql}: {msg}");
        }
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{mode}: still the replica's transaction");
        // Reads about the held connection itself ask that connection.
        c.query_drop("SHOW WARNINGS").expect("SHOW WARNINGS on the held connection");
        assert_eq!(ran_on(&mut c, "SHOW VARIABLES LIKE 'server_id'"), REPLICA, "{mode}: SHOW on the held connection");
        c.query_drop("COMMIT").expect("commit on the replica");
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), PRIMARY, "{mode}: the next transaction");
        c.query_drop(format!("UPDATE {t} SET v = v + 5 WHERE id = 1")).expect("update on the primary");
        c.query_drop("COMMIT").expect("commit");
        drop(c);
        assert_v_everywhere(&t, 15, mode);
        let my = &dbs().my;
        let rows: u64 = my
            .superuser_client(my.replica_port)
            .query_first(format!("SELECT COUNT(*) FROM {}.{t}", my.database))
            .expect("count")
            .unwrap_or(0);
        assert_eq!(rows, 1, "{mode}: the INSERT reached no server");
    }
}

/// Statement pooling refuses what opens a transaction spanning statements (issue case 2)
/// before anything runs, and every write it acknowledges is on the primary.
#[test]
fn statement_pooling_refuses_transactions_and_loses_no_write() {
    let t = table();
    let router = Router::start(&split_config("statement", ""));
    let mut c = client(&router);
    for sql in ["SET autocommit=0", "SET @@session.autocommit = OFF", "BEGIN", "START TRANSACTION", "XA START 'qp'"] {
        let (code, _, msg) = refused(&mut c, sql);
        assert_eq!(code, STATEMENT_POOLING, "{sql}: {msg}");
        assert!(msg.contains("statement pooling"), "{sql}: {msg}");
    }
    let autocommit: u64 = c.query_first("SELECT @@autocommit").expect("@@autocommit").unwrap_or(0);
    assert_eq!(autocommit, 1, "the refused SET never ran");
    c.query_drop(format!("UPDATE {t} SET v = v + 7 WHERE id = 1")).expect("an autocommit write");
    c.query_drop("COMMIT").expect("a COMMIT outside a transaction is harmless");
    assert_eq!(ran_on(&mut c, &format!("SELECT v, @@server_id FROM {t}")), REPLICA, "reads still split");
    drop(c);
    assert_v_everywhere(&t, 17, "statement");
    // PyMySQL turns autocommit off while connecting (its default): a clear error at connect,
    // not a session whose writes vanish.
    let (u, p) = replica_writer();
    let script = format!(
        "import pymysql\ntry:\n    pymysql.connect(host='127.0.0.1', port={}, user='{u}', password='{p}', database='{}')\n    \
         print('connected')\nexcept pymysql.MySQLError as e:\n    print('refused', e.args[0])\n",
        router.port(),
        dbs().my.database
    );
    let lines = run(Command::new("/usr/bin/python3").args(["-c", &script]), "PyMySQL connect");
    assert_eq!(lines, [format!("refused {STATEMENT_POOLING}")], "PyMySQL in statement pooling");
}

/// Statement pooling: a command that leaves autocommit off behind the check's back (here inside
/// a procedure) ends the session instead of running later writes in a transaction that is then
/// rolled back; nothing it did after that is acknowledged.
#[test]
fn statement_pooling_ends_a_session_a_procedure_left_in_a_transaction() {
    let t = table();
    let my = &dbs().my;
    let proc_name = unique_name("qp_ac_off");
    let mut root = my.superuser_client(my.primary_port);
    root.query_drop(format!("CREATE PROCEDURE {}.{proc_name}() SET autocommit = 0", my.database)).expect("proc");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let router = Router::start(&split_config("statement", ""));
    let mut c = client(&router);
    c.query_drop(format!("CALL {proc_name}()")).expect("the call itself succeeds");
    let after = c.query_drop(format!("UPDATE {t} SET v = v + 100 WHERE id = 1"));
    assert!(after.is_err(), "the session ends instead of acknowledging a write it would roll back");
    drop(c);
    assert_v_everywhere(&t, 10, "statement");
}

/// A server-side cursor (COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY, as Connector/J's
/// useCursorFetch sends) holds its replica connection: a text-protocol UPDATE while it is open
/// (autocommit on) runs on the primary on another connection and the cursor reads on; what would
/// change its meaning there (session state, a transaction start) is refused; a prepared UPDATE
/// (which closes the cursor, as it always did) runs on the primary.
#[test]
fn an_open_cursor_on_the_replica_takes_no_write() {
    for mode in ["transaction", "session", "statement"] {
        let t = table();
        let router = Router::start(&split_config(mode, ""));
        let (u, p) = replica_writer();
        let mut raw = Raw::login_as(router.port(), u, p);
        let (id, _, types) = raw.prepare(&format!("SELECT id FROM {t}"));
        raw.execute_cursor(id);
        assert_eq!(raw.query("SELECT @@server_id"), Ok(vec![REPLICA.to_string()]), "{mode}: the cursor's server");
        let update = format!("UPDATE {t} SET v = v + 100 WHERE id = 1");
        assert_eq!(raw.query(&update), Ok(Vec::new()), "{mode}: a write while the cursor is open");
        assert_eq!(raw.query("SELECT @@server_id"), Ok(vec![REPLICA.to_string()]), "{mode}: back on the cursor's");
        assert_eq!(raw.query("SET @qp_x = 1"), Err(HELD_REPLICA), "{mode}: state that would pin the replica");
        let begin_refused = if mode == "statement" { STATEMENT_POOLING } else { HELD_REPLICA };
        assert_eq!(raw.query("START TRANSACTION"), Err(begin_refused), "{mode}: a transaction there");
        assert_eq!(raw.fetch_all(id, 10, &types), vec![1], "{mode}: the cursor is intact");
        raw.execute_cursor(id);
        let (upd, _, _) = raw.prepare(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"));
        let mut exec = vec![0x17];
        exec.extend_from_slice(&upd.to_le_bytes());
        exec.push(0x00);
        exec.extend_from_slice(&1u32.to_le_bytes());
        raw.command(&exec);
        let ok = raw.read();
        assert_eq!(ok.first(), Some(&0x00), "{mode}: the prepared UPDATE ran: {ok:?}");
        drop(raw);
        assert_v_everywhere(&t, 111, mode);
    }
}

fn run(cmd: &mut Command, what: &str) -> Vec<String> {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");
const ROUNDS: usize = 20;

/// Every round's lines say the primary answered inside the transaction; the last line is the
/// final value.
fn assert_rounds_on_primary(lines: &[String], what: &str) {
    assert_eq!(lines.len(), ROUNDS + 1, "{what}: {lines:?}");
    for (i, line) in lines.iter().take(ROUNDS).enumerate() {
        assert_eq!(line, &format!("round {i} server {PRIMARY} {PRIMARY}"), "{what}");
    }
    assert_eq!(lines.last().map(String::as_str), Some("final 30"), "{what}");
}

/// PyMySQL with its default autocommit=False runs read-modify-write transactions through the
/// split with no error, every statement on the primary, every write kept.
#[test]
fn pymysql_autocommit_off_read_modify_write_through_the_split() {
    for mode in ["transaction", "session"] {
        let t = table();
        let router = Router::start(&split_config(mode, ""));
        let (u, p) = replica_writer();
        let port = router.port().to_string();
        let rounds = ROUNDS.to_string();
        let lines = run(
            Command::new("/usr/bin/python3").arg(Path::new(SCRIPTS).join("pymysql_rmw.py")).args([
                "127.0.0.1",
                &port,
                u,
                p,
                &dbs().my.database,
                &t,
                &rounds,
            ]),
            "PyMySQL read-modify-write",
        );
        assert_rounds_on_primary(&lines, &format!("PyMySQL {mode}"));
        assert_v_everywhere(&t, 30, mode);
    }
}

/// MariaDB Connector/J with setAutoCommit(false) does the same, with client-side and
/// server-side prepared statements.
#[test]
fn jdbc_autocommit_off_read_modify_write_through_the_split() {
    for (mode, server_prepare) in [("transaction", false), ("transaction", true), ("session", true)] {
        let t = table();
        let router = Router::start(&split_config(mode, ""));
        let (u, p) = replica_writer();
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useServerPrepStmts={server_prepare}",
            router.port(),
            dbs().my.database
        );
        let lines = run(
            Command::new("java")
                .args(["-cp", "/usr/share/java/mariadb-java-client.jar"])
                .arg(Path::new(SCRIPTS).join("JdbcReadModifyWrite.java"))
                .args([url.as_str(), u, p, &t, &ROUNDS.to_string()]),
            "JDBC read-modify-write",
        );
        assert_rounds_on_primary(&lines, &format!("JDBC {mode} server prepare {server_prepare}"));
        assert_v_everywhere(&t, 30, mode);
    }
}

/// The server that answered `SELECT f()` where `f` returns `@@server_id`.
fn function_ran_on(c: &mut Conn, f: &str) -> u64 {
    ran_on(c, &format!("SELECT {f}()"))
}

/// MySQL does not check `DETERMINISTIC` / `READS SQL DATA` (issue case 7): a function declared
/// so that writes runs on the primary; a function reaches the replica only when the operator
/// lists it in `routing.replica_safe_functions`.
#[test]
fn stored_functions_reach_a_replica_only_when_listed() {
    let my = &dbs().my;
    let db = &my.database;
    for mode in ["transaction", "session", "statement"] {
        let t = table();
        let (liar, honest) = (unique_name("qp_liar"), unique_name("qp_honest"));
        let mut root = my.superuser_client(my.primary_port);
        root.query_drop(format!(
            "CREATE FUNCTION {db}.{liar}() RETURNS INT DETERMINISTIC READS SQL DATA \
             BEGIN UPDATE {db}.{t} SET v = v + 1 WHERE id = 1; RETURN @@server_id; END"
        ))
        .expect("create the writing function");
        root.query_drop(format!("CREATE FUNCTION {db}.{honest}() RETURNS INT DETERMINISTIC NO SQL RETURN @@server_id"))
            .expect("create the read-only function");
        my.wait_replica_caught_up(Duration::from_secs(30));
        let extra = format!("replica_safe_functions = [\"{db}.{honest}\"]");
        let router = Router::start(&split_config(mode, &extra));
        let mut c = client(&router);
        // The catalog loads in the background after start: until then every stored function is
        // unknown, hence volatile. The listed one reaching the replica shows it has loaded.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while function_ran_on(&mut c, &honest) != REPLICA {
            assert!(std::time::Instant::now() < deadline, "{mode}: the listed function never reached the replica");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(function_ran_on(&mut c, &liar), PRIMARY, "{mode}: an unlisted function, whatever it declares");
        assert_eq!(function_ran_on(&mut c, &liar), PRIMARY, "{mode}: again, from the plan cache");
        drop(c);
        assert_v_everywhere(&t, 12, mode);
    }
}

/// A prepared `SET autocommit = 0` (the binary protocol, as the `mysql` crate's `exec` sends it)
/// changes the session as a text one does: it follows the client to every connection it
/// borrows, and the next client of that pooled connection (one connection, transaction pooling)
/// gets it back with its own settings, not with autocommit off.
#[test]
fn a_prepared_set_autocommit_follows_its_session_only() {
    let t = table();
    let router = crate::mysql_session::my_router("transaction", 1);
    let mut a = crate::mysql_session::client(&router);
    let mut b = crate::mysql_session::client(&router);
    a.exec_drop("SET autocommit = 0", ()).expect("prepared SET");
    let seen_by_b: Option<u64> = b.query_first("SELECT @@autocommit").expect("b reads autocommit");
    assert_eq!(seen_by_b, Some(1), "the next client of the connection does not inherit autocommit = 0");
    let seen_by_a: Option<u64> = a.query_first("SELECT @@autocommit").expect("a reads autocommit");
    assert_eq!(seen_by_a, Some(0), "the setting follows its client");
    a.query_drop("COMMIT").expect("end a's implicit transaction");
    a.query_drop(format!("UPDATE {t} SET v = v + 100 WHERE id = 1")).expect("update in a transaction");
    a.query_drop("ROLLBACK").expect("rollback");
    drop((a, b));
    assert_v_everywhere(&t, 10, "prepared SET autocommit");
}

/// Transaction pooling, one connection: a procedure that turns autocommit off changes the
/// session behind the router's back. The server's status flags show it, so the session keeps
/// its connection (as a pin would) and the next client gets a clean one, with autocommit on.
#[test]
fn autocommit_turned_off_inside_a_procedure_stays_with_its_session() {
    let my = &dbs().my;
    let proc_name = unique_name("qp_ac_off_tx");
    let mut root = my.superuser_client(my.primary_port);
    root.query_drop(format!("CREATE PROCEDURE {}.{proc_name}() SET autocommit = 0", my.database)).expect("proc");
    let router = crate::mysql_session::my_router("transaction", 1);
    let mut a = crate::mysql_session::client(&router);
    a.query_drop(format!("CALL {proc_name}()")).expect("call");
    let seen_by_a: Option<u64> = a.query_first("SELECT @@autocommit").expect("a reads autocommit");
    assert_eq!(seen_by_a, Some(0), "the client keeps what its procedure set");
    drop(a);
    let mut b = crate::mysql_session::client(&router);
    let seen_by_b: Option<u64> = b.query_first("SELECT @@autocommit").expect("b reads autocommit");
    assert_eq!(seen_by_b, Some(1), "the next client of the connection does not inherit autocommit = 0");
}

/// Issue #19 case 4 through MariaDB Connector/J: `useCursorFetch=true` and `setFetchSize(1)`
/// keep a result set open while the same connection sends an UPDATE. With autocommit off the
/// read opened a transaction, so it and the UPDATE run on the primary; with autocommit on the
/// read may use the replica and the UPDATE still runs on the primary. (Connector/J 2.7, the
/// packaged driver, streams the result instead of opening a server-side cursor; the binary
/// cursor itself is covered by `an_open_cursor_on_the_replica_takes_no_write`.)
#[test]
fn jdbc_update_while_a_fetch_result_is_open_never_runs_on_the_replica() {
    let my = &dbs().my;
    let cases =
        [("transaction", false), ("transaction", true), ("session", false), ("session", true), ("statement", true)];
    for (mode, autocommit) in cases {
        let t = table();
        let mut root = my.superuser_client(my.primary_port);
        let rows: Vec<String> = (2..=50).map(|i| format!("({i}, 0)")).collect();
        root.query_drop(format!("INSERT INTO {}.{t} VALUES {}", my.database, rows.join(", "))).expect("rows");
        my.wait_replica_caught_up(Duration::from_secs(30));
        let router = Router::start(&split_config(mode, ""));
        let (u, p) = replica_writer();
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useCursorFetch=true&useServerPrepStmts={}",
            router.port(),
            my.database,
            mode == "session"
        );
        let lines = run(
            Command::new("java")
                .args(["-cp", "/usr/share/java/mariadb-java-client.jar"])
                .arg(Path::new(SCRIPTS).join("JdbcCursorFetch.java"))
                .args([url.as_str(), u, p, &t, &autocommit.to_string()]),
            "JDBC cursor fetch",
        );
        let what = format!("{mode} autocommit={autocommit}");
        let (read, after) = if autocommit { (REPLICA, REPLICA) } else { (PRIMARY, PRIMARY) };
        let want = [format!("read {read}"), "rows 50".to_owned(), format!("update {after}")];
        assert_eq!(lines.get(..3), Some(want.as_slice()), "{what}: {lines:?}");
        if !autocommit {
            // Read inside the next transaction, on the primary (with autocommit on, the replica
            // answers, possibly before it has replayed the UPDATE).
            assert_eq!(lines.get(3).map(String::as_str), Some("final 11"), "{what}");
        }
        assert_v_everywhere(&t, 11, &what);
    }
}
