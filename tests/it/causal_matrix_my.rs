//! Issue #34's matrix, MariaDB side: with the replica's SQL thread stopped, a session's reads
//! and the reads of a connection it handed its token to never miss its writes, whichever path
//! carried the write — {text, COM_STMT_PREPARE/EXECUTE, multi-statement text} × {plain INSERT,
//! INSERT ... WITH (CTE), procedure CALL, a trigger's write, `DO` of a function that inserts,
//! `SELECT` of it in a transaction, XA two-phase commit} × {the writing session itself, a token
//! by SHOW on it and SET on another connection, the token as connection attribute
//! `querypilot.causal_token` (the MySQL handshake's stand-in for a startup parameter; PyMySQL
//! and Connector/J)} — with the `mysql` crate, PyMySQL and Connector/J (client- and
//! server-side prepare). LOAD DATA LOCAL INFILE (MariaDB's COPY) has its own test, through a
//! write pool with `local_infile`: alone, prepared, in a multi-statement text and between BEGIN
//! and COMMIT, each writer having read on the replica first. An autocommit `SELECT f(n)` of the
//! inserting function, whose GTID only the connection's next OK reports, has its own test too.
//! Where each read ran is proven by `@@server_id`; a fresh session's read on the stopped
//! replica proves it is stale.

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, LocalInfileHandler};

use crate::causal_mysql::{client, my_router, my_router_with};
use crate::router::Router;
use crate::scripts::{self, Staged};
use crate::support::{eventually, unique_name, Dbs, Kind, MyEnv};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;

/// The write kinds, each as the statements one connection sends in turn, with `{n}` for the
/// row's id: the text path sends them as they are, the prepared path prepares each with `?`
/// in place of `{n}`, the multi-statement path sends them in one text after a `SELECT 1`.
/// XA's statements prepare in MariaDB (`XA` is in its preparable set), so two-phase commit
/// runs on every path. `SELECT f(n)` of the inserting function is a kind here only inside
/// `BEGIN ... COMMIT`: in autocommit its GTID is collected as the connection goes back
/// ([`mariadb_matrix_an_autocommit_function_write_hands_out_its_collected_position`]).
fn writes(t: &str) -> [(&'static str, Vec<String>); 7] {
    [
        ("plain", vec![format!("INSERT INTO {t} VALUES ({{n}})")]),
        ("cte", vec![format!("INSERT INTO {t} WITH c AS (SELECT {{n}} AS id) SELECT id FROM c")]),
        ("call", vec![format!("CALL {t}_p({{n}})")]),
        ("trigger", vec![format!("INSERT INTO {t}_src VALUES ({{n}})")]),
        ("do", vec![format!("DO {t}_f({{n}})")]),
        ("function in a transaction", vec!["BEGIN".into(), format!("SELECT {t}_f({{n}})"), "COMMIT".into()]),
        (
            "xa",
            vec![
                "XA START 'qp_matrix'".into(),
                format!("INSERT INTO {t} VALUES ({{n}})"),
                "XA END 'qp_matrix'".into(),
                "XA PREPARE 'qp_matrix'".into(),
                "XA COMMIT 'qp_matrix'".into(),
            ],
        ),
    ]
}

/// Sends `write`'s statements with id `n` on `path`.
fn send(w: &mut Conn, write: &[String], path: &str, n: u64) -> mysql::Result<()> {
    let text = |sql: &String| sql.replace("{n}", &n.to_string());
    match path {
        "text" => write.iter().try_for_each(|sql| w.query_drop(text(sql))),
        "prepared" => write.iter().try_for_each(|sql| {
            if sql.contains("{n}") {
                w.exec_drop(sql.replace("{n}", "?"), (n,))
            } else {
                w.exec_drop(sql, ())
            }
        }),
        _ => w.query_drop(format!("SELECT 1; {}", write.iter().map(text).collect::<Vec<_>>().join("; "))),
    }
}

/// `t` (read), `t_src` whose trigger writes into `t`, procedure `t_p` and function `t_f`
/// (`MODIFIES SQL DATA`, returns its argument) that insert into `t`.
pub(crate) fn schema(my: &MyEnv) -> String {
    let t = unique_name("causal_matrix");
    let mut c = my.primary_client();
    for sql in [
        format!("CREATE TABLE {t} (id INT PRIMARY KEY)"),
        format!("CREATE TABLE {t}_src (id INT PRIMARY KEY)"),
        format!("CREATE TRIGGER {t}_tr AFTER INSERT ON {t}_src FOR EACH ROW INSERT INTO {t} VALUES (NEW.id)"),
        format!("CREATE PROCEDURE {t}_p(i INT) INSERT INTO {t} VALUES (i)"),
        format!(
            "CREATE FUNCTION {t}_f(i INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO {t} VALUES (i); RETURN i; END"
        ),
    ] {
        c.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    my.wait_replica_caught_up(Duration::from_secs(20));
    t
}

/// `(rows with id n, @@server_id)`.
pub(crate) fn read(c: &mut Conn, t: &str, n: u64) -> (u64, u64) {
    let sql = format!("SELECT COUNT(*), @@server_id FROM {t} WHERE id = {n}");
    c.query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: no row"))
}

/// The writer `w` reads row `n` of `t` on the primary, and so do a connection given its token
/// by `SET` (which read the stopped replica before) and one given it as connection attribute.
fn assert_read_everywhere(router: &Router, my: &MyEnv, mut w: Conn, t: &str, n: u64, cell: &str) {
    assert_eq!(read(&mut w, t, n), (1, PRIMARY), "{cell}: the writer reads its write");
    let token: String = w.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    let mut other = client(router, my);
    assert_eq!(read(&mut other, t, n), (0, REPLICA), "{cell}: without the token: the stale replica");
    other.query_drop(format!("SET querypilot.causal_token = '{token}'")).expect("set the token");
    assert_eq!(read(&mut other, t, n), (1, PRIMARY), "{cell}: the token's holder reads the write");
    let attrs = std::collections::HashMap::from([("querypilot.causal_token", token.as_str())]);
    let mut by_attr = Conn::new(my.opts(router.port(), &my.user, &my.password).connect_attrs(Some(attrs)))
        .unwrap_or_else(|e| panic!("{cell}: connect with the token as attribute: {e}"));
    assert_eq!(read(&mut by_attr, t, n), (1, PRIMARY), "{cell}: the attribute's token is waited for");
}

#[test]
fn mariadb_matrix_no_read_misses_a_write_whatever_path_carried_it() {
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = schema(my);
    let mut probe = client(&router, my);
    eventually(Duration::from_secs(15), "reads on the replica", || read(&mut probe, &t, 0).1 == REPLICA);
    env.pause_replication(Kind::Mariadb);
    let mut n = 0u64;
    let mut cells = 0;
    for (kind, write) in writes(&t) {
        for path in ["text", "prepared", "multi"] {
            n += 1;
            let cell = format!("{kind} × {path}");
            let mut w = client(&router, my);
            send(&mut w, &write, path, n).unwrap_or_else(|e| panic!("{cell}: write: {e}"));
            assert_read_everywhere(&router, my, w, &t, n, &cell);
            cells += 1;
        }
    }
    pymysql_cells(&router, my, &t, &mut n);
    jdbc_cells(&router, my, &t, &mut n);
    env.resume_replication(Kind::Mariadb);
    assert_eq!(cells, 21);
}

/// PyMySQL, text (an XA transaction's statements one by one) and multi-statement: writes each
/// kind, hands the token over to a second connection by `SET` and to a third as connection
/// attribute `querypilot.causal_token` (#34: PyMySQL sends its `_connect_attrs` as they are at
/// connect); prints `cell writer_count writer_server other_count other_server attr_count
/// attr_server`, then `attr_bad ERRNO` for an invalid token as attribute.
const PYMYSQL: &str = r#"
import sys, pymysql
from pymysql.constants import CLIENT
port, user, password, db, t, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
def conn(token=None):
    c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db,
                        autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS, defer_connect=True)
    if token is not None:
        c._connect_attrs["querypilot.causal_token"] = token
    c.connect()
    return c
def read(c, i):
    cur = c.cursor(); cur.execute(f"SELECT COUNT(*), @@server_id FROM {t} WHERE id = {i}"); return cur.fetchone()
writes = {"plain": [f"INSERT INTO {t} VALUES ({{}})"], "cte": [f"INSERT INTO {t} WITH c AS (SELECT {{}} AS id) SELECT id FROM c"],
          "call": [f"CALL {t}_p({{}})"], "trigger": [f"INSERT INTO {t}_src VALUES ({{}})"], "do": [f"DO {t}_f({{}})"],
          "xa": ["XA START 'qp_py'", f"INSERT INTO {t} VALUES ({{}})", "XA END 'qp_py'", "XA PREPARE 'qp_py'", "XA COMMIT 'qp_py'"]}
for kind, sqls in writes.items():
    for path in ["text", "multi"]:
        n += 1
        w = conn(); cur = w.cursor()
        for sql in ([s.format(n) for s in sqls] if path == "text" else ["SELECT 1; " + "; ".join(s.format(n) for s in sqls)]):
            cur.execute(sql)
            while cur.nextset(): pass
        mine = read(w, n)
        cur.execute("SHOW querypilot.causal_token"); token = cur.fetchone()[0]
        o = conn(); o.cursor().execute(f"SET querypilot.causal_token = '{token}'")
        theirs = read(o, n)
        print(f"{kind}/{path}", *mine, *theirs, *read(conn(token), n))
try:
    conn("nonsense"); print("attr_bad none")
except pymysql.MySQLError as e:
    print("attr_bad", e.args[0])
"#;

fn pymysql_cells(router: &Router, my: &MyEnv, t: &str, n: &mut u64) {
    let out = Command::new("/usr/bin/python3")
        .args(["-c", PYMYSQL, &router.port().to_string(), &my.user, &my.password, &my.database, t, &n.to_string()])
        .output()
        .expect("run PyMySQL (python3-pymysql, installed by .ci/deps.sh)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.pop(), Some("attr_bad 1231"), "an invalid token as attribute is refused as a bad SET: {text}");
    assert_eq!(lines.len(), 12, "{text}");
    for line in lines {
        let fields: Vec<&str> = line.split(' ').collect();
        let want = ["1", "1", "1", "1", "1", "1"];
        assert_eq!(fields.get(1..), Some(&want[..]), "{line}: all read the write, on the primary");
    }
    *n += 12;
}

/// Connector/J, client-side prepare (the driver writes the values into a text query) and
/// server-side (`useServerPrepStmts`: COM_STMT_PREPARE/EXECUTE), each write kind; the writer,
/// the connection given its token by `SET` and the one given it as connection attribute
/// (`connectionAttributes`, #34) all read the write, on the primary.
fn jdbc_cells(router: &Router, my: &MyEnv, t: &str, n: &mut u64) {
    for prepare in ["false", "true"] {
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useServerPrepStmts={prepare}",
            router.port(),
            my.database
        );
        let mut lines =
            crate::scripts::jdbc("JdbcCausalMatrixMy.java", &url, &my.user, &my.password, &[t, &n.to_string()]);
        let bad = lines.pop();
        assert_eq!(bad.as_deref(), Some("attr_bad 1231"), "an invalid token as attribute is refused as a bad SET");
        assert_eq!(lines.len(), 6, "useServerPrepStmts={prepare}: {lines:?}");
        for line in &lines {
            let fields: Vec<&str> = line.split(' ').collect();
            let want = ["1", "1", "1", "1", "1", "1"];
            assert_eq!(
                fields.get(1..),
                Some(&want[..]),
                "useServerPrepStmts={prepare} {line}: both read it on the primary"
            );
        }
        *n += 6;
    }
}

/// LOAD DATA LOCAL INFILE's paths through the `mysql` crate: the statement alone, after a
/// `SELECT 1` in one multi-statement text, between `BEGIN` and `COMMIT` sent one by one, and
/// all three in one text.
const INFILE_PATHS: [&str; 5] = ["text", "prepared", "multi", "begin-commit", "begin-commit-multi"];

/// Loads row `n` into `t` through `w` on `path` (one of [`INFILE_PATHS`]).
fn load(w: &mut Conn, t: &str, path: &str, n: u64) -> mysql::Result<()> {
    w.set_local_infile_handler(Some(LocalInfileHandler::new(move |_, file| writeln!(file, "{n}"))));
    let load = format!("LOAD DATA LOCAL INFILE 'row.csv' INTO TABLE {t}");
    match path {
        "text" => w.query_drop(load),
        "prepared" => w.exec_drop(load, ()),
        "multi" => w.query_drop(format!("SELECT 1; {load}")),
        "begin-commit" => ["BEGIN", &load, "COMMIT"].into_iter().try_for_each(|sql| w.query_drop(sql)),
        _ => w.query_drop(format!("BEGIN; {load}; COMMIT")),
    }
}

/// #34's matrix for LOAD DATA LOCAL INFILE (the MariaDB side of COPY), through a write pool
/// with `local_infile`: each path of the `mysql` crate, PyMySQL and Connector/J × {the writer
/// itself, the token by SHOW + SET on another connection, the token as connection attribute}.
/// Each writer first reads on the replica (so its session sits on the read pool when it
/// loads). LOAD DATA is a text-only statement: the server refuses to prepare it.
#[test]
fn mariadb_matrix_load_data_local_infile_leaves_its_position_on_every_path() {
    let env = Dbs::private();
    let my = &env.my;
    let routing = "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"";
    let router = my_router_with(my, "local_infile = true\n", routing);
    let t = schema(my);
    let mut probe = client(&router, my);
    eventually(Duration::from_secs(15), "reads on the replica", || read(&mut probe, &t, 0).1 == REPLICA);
    env.pause_replication(Kind::Mariadb);
    let mut n = 0u64;
    for path in INFILE_PATHS {
        n += 1;
        let cell = format!("LOAD DATA × {path}");
        let mut w = client(&router, my);
        assert_eq!(read(&mut w, &t, n), (0, REPLICA), "{cell}: the writer reads on the replica before");
        load(&mut w, &t, path, n).unwrap_or_else(|e| panic!("{cell}: load: {e}"));
        assert_read_everywhere(&router, my, w, &t, n, &cell);
    }
    let py = crate::scripts::python(
        "pymysql_causal_infile.py",
        &[&router.port().to_string(), &my.user, &my.password, &my.database, &t, &n.to_string()],
    );
    assert_infile_cells("PyMySQL", &py, 4);
    n += 4;
    for prepare in ["false", "true"] {
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&allowLocalInfile=true&allowMultiQueries=true&useServerPrepStmts={prepare}",
            router.port(),
            my.database
        );
        let lines =
            crate::scripts::jdbc("JdbcCausalInfileMy.java", &url, &my.user, &my.password, &[&t, &n.to_string()]);
        assert_infile_cells(&format!("Connector/J useServerPrepStmts={prepare}"), &lines, 5);
        n += 5;
    }
    env.resume_replication(Kind::Mariadb);
}

/// `want` lines `PATH BEFORE_COUNT BEFORE_SERVER WRITER_COUNT WRITER_SERVER OTHER_COUNT
/// OTHER_SERVER ATTR_COUNT ATTR_SERVER` of a connector's LOAD DATA cells: the writer read the
/// stopped replica before; then it, the token's holder by SET and the attribute's all read
/// the loaded row, on the primary.
fn assert_infile_cells(client: &str, lines: &[String], want: usize) {
    assert_eq!(lines.len(), want, "{client}: {lines:?}");
    for line in lines {
        let fields: Vec<&str> = line.split(' ').collect();
        let all = ["0", "2", "1", "1", "1", "1", "1", "1"];
        assert_eq!(fields.get(1..), Some(&all[..]), "{client} {line}: none stale, all on the primary");
    }
}

/// `SELECT f(n)` of the inserting function in autocommit: its result set ends in an EOF packet
/// (the router never offers its backends `CLIENT_DEPRECATE_EOF`), which carries no session
/// state, so the GTID of the implicit commit is owed: the router collects it as the session
/// gives the connection back (transaction pooling: right after the statement). The writer's
/// reads then wait for that GTID (the stopped replica has not applied it: the primary serves
/// them), and `SHOW querypilot.causal_token` hands it out, which sends its holder's reads (by
/// `SET` or connection attribute) to the primary too — {text, prepared, multi-statement} × {a
/// writer that wrote nothing before, one whose earlier position the replica applied before it
/// stopped (the token must be newer than that older one)}, with the `mysql` crate, PyMySQL
/// (text, multi-statement, `cursor.execute` with parameters) and Connector/J (Statement,
/// PreparedStatement and multi-statement Statement, client- and server-side prepare). Every
/// path's token is the function's commit position. The connectors' writers are opened (and
/// the earlier positions written) before the SQL thread stops, so their programs run in two
/// stages ([`Staged`]).
/// Also: `''`, what SHOW answers for a session that needs no position, is accepted back.
#[test]
fn mariadb_matrix_an_autocommit_function_write_hands_out_its_collected_position() {
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = schema(my);
    let mut probe = client(&router, my);
    eventually(Duration::from_secs(15), "reads on the replica", || read(&mut probe, &t, 0).1 == REPLICA);
    let mut writers = Vec::new();
    for (i, path) in ["text", "prepared", "multi"].into_iter().enumerate() {
        for earlier in [false, true] {
            let mut w = client(&router, my);
            if earlier {
                w.query_drop(format!("INSERT INTO {t} VALUES ({})", 1000 + i * 2)).expect("an earlier write");
            }
            writers.push((path, earlier, w));
        }
    }
    let port = router.port().to_string();
    let py_args = [port.as_str(), &my.user, &my.password, &my.database, &t, "100"];
    let py = Staged::start(&mut scripts::python_command("pymysql_causal_function.py", &py_args), "PyMySQL");
    let url = format!("jdbc:mariadb://127.0.0.1:{port}/{}?useSsl=false&allowMultiQueries=true", my.database);
    let jdbc_args = [t.as_str(), "200"];
    let program = "JdbcCausalFunctionMy.java";
    let jdbc = Staged::start(&mut scripts::jdbc_command(program, &url, &my.user, &my.password, &jdbc_args), program);
    my.wait_replica_caught_up(Duration::from_secs(20));
    let mut fresh = client(&router, my);
    let empty: String = fresh.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    assert_eq!(empty, "", "a session that wrote nothing needs no position");
    let mut failures = Vec::new();
    if let Err(e) = fresh.query_drop("SET querypilot.causal_token = ''") {
        failures.push(format!("the empty token's SET refused: {e}"));
    }
    let attrs = std::collections::HashMap::from([("querypilot.causal_token", "")]);
    if let Err(e) = Conn::new(my.opts(router.port(), &my.user, &my.password).connect_attrs(Some(attrs))) {
        failures.push(format!("the empty token as attribute refused: {e}"));
    }
    env.pause_replication(Kind::Mariadb);
    failures.extend(connector_function_cells("Connector/J", &jdbc.finish(), 12));
    let write = vec![format!("SELECT {t}_f({{n}})")];
    for (n, (path, earlier, mut w)) in (1u64..).zip(writers) {
        let cell = format!("autocommit SELECT f(n) × {path} × earlier position: {earlier}");
        let older: String = w.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
        send(&mut w, &write, path, n).unwrap_or_else(|e| panic!("{cell}: write: {e}"));
        let checks = function_cell(&router, my, &t, n, &mut w, &older);
        failures.extend(checks.into_iter().map(|f| format!("{cell}: {f}")));
    }
    failures.extend(connector_function_cells("PyMySQL", &py.finish(), 6));
    env.resume_replication(Kind::Mariadb);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// What went wrong in `want` lines `cell=C token0=T writer=R token=T before=R set=R attr=R` of a
/// connector's autocommit `SELECT f(n)` cells (`pymysql_causal_function.py`,
/// `JdbcCausalFunctionMy.java`): a writer with an earlier position held its token before
/// (`first` ones none); the holder by SET read the stopped replica before; then the writer, the
/// holder by SET and the one by connection attribute all read the row, on the primary, and the
/// token is a GTID position newer than the one before on every path (the function's commit,
/// collected).
fn connector_function_cells(client: &str, lines: &[String], want: usize) -> Vec<String> {
    let mut failures = Vec::new();
    if lines.len() != want {
        failures.push(format!("{client}: {} cells, not {want}: {lines:#?}", lines.len()));
    }
    for line in lines {
        let field = |key: &str| {
            line.split(' ').find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('='))).unwrap_or("?")
        };
        let mut fail = |what: String| failures.push(format!("{client} {}: {what} ({line})", field("cell")));
        let token0 = field("token0");
        if field("cell").ends_with("/earlier") != token0.starts_with("gtid:") {
            fail(format!("the token before the write was '{token0}'"));
        }
        if field("before") != format!("0/{REPLICA}") {
            fail("the other connection did not read the stopped replica before its SET".into());
        }
        let on_primary = format!("1/{PRIMARY}");
        for (key, who) in [("writer", "the writer"), ("set", "the holder by SET"), ("attr", "the holder by attribute")]
        {
            if field(key) != on_primary {
                fail(format!("{who} read {}, not {on_primary}", field(key)));
            }
        }
        if let Some(why) = not_collected(field("token"), token0) {
            fail(why);
        }
    }
    failures
}

/// Why `token`, what SHOW answered after an autocommit `SELECT f(n)`, is not the function's
/// collected commit position: not a GTID position, or the `older` one held before the write.
fn not_collected(token: &str, older: &str) -> Option<String> {
    if !token.starts_with("gtid:") {
        Some(format!("SHOW answered '{token}', not the function's commit position"))
    } else if token == older {
        Some(format!("SHOW answered '{token}', the position held before the write"))
    } else {
        None
    }
}

/// The checks of one cell of [`mariadb_matrix_an_autocommit_function_write_hands_out_its_collected_position`]
/// once `w`, which held token `older` before, wrote row `n`: what went wrong, if anything
/// (every cell runs, so a failure shows which paths hold).
fn function_cell(
    router: &crate::router::Router,
    my: &MyEnv,
    t: &str,
    n: u64,
    w: &mut Conn,
    older: &str,
) -> Vec<String> {
    let mut failures = Vec::new();
    let check = |failures: &mut Vec<String>, what: &str, got: (u64, u64)| {
        if got != (1, PRIMARY) {
            failures.push(format!("{what} read (rows, @@server_id) = {got:?}, not (1, {PRIMARY})"));
        }
    };
    check(&mut failures, "the writer", read(w, t, n));
    let token: String = w.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    let mut other = client(router, my);
    assert_eq!(read(&mut other, t, n), (0, REPLICA), "without the token: the stale replica");
    match other.query_drop(format!("SET querypilot.causal_token = '{token}'")) {
        Ok(()) => check(&mut failures, &format!("the holder of token '{token}' by SET"), read(&mut other, t, n)),
        Err(e) => failures.push(format!("SET of token '{token}' refused: {e}")),
    }
    let attrs = std::collections::HashMap::from([("querypilot.causal_token", token.as_str())]);
    match Conn::new(my.opts(router.port(), &my.user, &my.password).connect_attrs(Some(attrs))) {
        Ok(mut by_attr) => {
            check(&mut failures, &format!("the holder of token '{token}' by attribute"), read(&mut by_attr, t, n))
        }
        Err(e) => failures.push(format!("token '{token}' as attribute refused: {e}")),
    }
    failures.extend(not_collected(&token, older));
    failures
}

/// A pooled connection that ran an autocommit `SELECT f(n)` still owes that commit's GTID (the
/// result set's EOF packet carried none; the server reports it with the connection's next OK
/// packet). It is collected for the writer as the connection goes back, and must never reach
/// another client as that client's position: a fresh session that only sets a variable on the
/// same pool needs no position afterwards (#34).
#[test]
fn mariadb_an_owed_gtid_is_never_credited_to_the_next_session() {
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = schema(my);
    let mut writer = client(&router, my);
    for n in 1..=3 {
        let _: Option<u64> = writer.query_first(format!("SELECT {t}_f({n})")).expect("the inserting function");
        let token: String = writer.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
        assert!(token.starts_with("gtid:"), "the writer holds its collected position, not '{token}'");
        let mut next = client(&router, my);
        next.query_drop("SET autocommit = 1").expect("an OK packet on a pooled primary connection");
        let token: String = next.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
        assert_eq!(token, "", "round {n}: the next session wrote nothing, yet holds a position");
    }
}
