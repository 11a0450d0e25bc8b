//! Issue #34's matrix, bridged cell: a MySQL client on PostgreSQL pools (`[routing.mysql]`
//! splitting to the hot standby) with causal reads. With replay paused on the standby, a read
//! after the session's write — a text INSERT, a prepared one (COM_STMT_PREPARE/EXECUTE), a
//! transaction — never misses it; reads before any write run on the standby. Placement is
//! proven by `pg_stat_wal_receiver` (a row only on the standby). Client: the `mysql` crate.
//! The token cells (written, read with `SHOW`, handed to another connection with `SET`) run
//! PyMySQL; a write whose position cannot be read hands out `primary` (#34).

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::mysql_commands::Raw;
use crate::router::Router;
use crate::support::{eventually, unique_name, Dbs, Kind, PgEnv};

fn pg_pool(pg: &PgEnv, name: &str, port: u16, mode: &str) -> String {
    format!(
        "[pools.{name}]\nprotocol = \"postgres\"\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\n\
         database = \"{d}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
        u = pg.user,
        p = pg.password,
        d = pg.database,
    )
}

fn router(pg: &PgEnv, mode: &str) -> Router {
    router_with(pg, mode, "")
}

/// [`router`] with more of the `[routing]` table (`rules`: e.g. pattern rules).
fn router_with(pg: &PgEnv, mode: &str, rules: &str) -> Router {
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_your_writes = \"causal\"\ncausal_wait = \"20ms\"\n\n\
         [routing.mysql]\nread_write_split = true\nread_pool = \"pg_standby\"\nwrite_pool = \"pg_primary\"\n{rules}",
        pg_pool(pg, "pg_primary", pg.primary_port, mode),
        pg_pool(pg, "pg_standby", pg.replica_port, mode),
    ))
}

/// One way of writing row `n` through a connection.
type Write<'a> = &'a dyn Fn(&mut mysql::Conn, i64);

fn client(router: &Router, env: &Dbs) -> mysql::Conn {
    let pg = &env.pg;
    mysql::Conn::new(env.my.opts(router.port(), &pg.user, &pg.password).db_name(Some(pg.database.as_str())))
        .unwrap_or_else(|e| panic!("connect through the bridge: {e}"))
}

/// `(rows with id n, whether the read ran on the standby)`.
fn read(c: &mut mysql::Conn, t: &str, n: i64) -> (i64, bool) {
    let sql = format!("SELECT COUNT(*), (SELECT COUNT(*) FROM pg_stat_wal_receiver) FROM {t} WHERE id = {n}");
    let (count, receivers): (i64, i64) = c.query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).expect("a row");
    (count, receivers == 1)
}

#[test]
fn bridged_mysql_sessions_never_read_their_writes_stale() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let mut n = 0;
    for mode in ["transaction", "session"] {
        let router = router(pg, mode);
        let mut c = client(&router, &env);
        eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
        env.pause_replication(Kind::Pg);
        let writes: [(&str, Write); 3] = [
            ("text", &|c, n| c.query_drop(format!("INSERT INTO {t} VALUES ({n})")).expect("text insert")),
            ("prepared", &|c, n| c.exec_drop(format!("INSERT INTO {t} VALUES (?)"), (n,)).expect("prepared insert")),
            ("transaction", &|c, n| {
                for sql in ["BEGIN".to_owned(), format!("INSERT INTO {t} VALUES ({n})"), "COMMIT".to_owned()] {
                    c.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                }
            }),
        ];
        for (path, write) in writes {
            n += 1;
            let mut w = client(&router, &env);
            assert!(read(&mut w, &t, n).1, "{mode} {path}: a fresh session reads the standby");
            write(&mut w, n);
            assert_eq!(read(&mut w, &t, n), (1, false), "{mode} {path}: the write is read on the primary");
            assert_eq!(read(&mut client(&router, &env), &t, n), (0, true), "{mode} {path}: the standby is behind");
        }
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(30));
    }
}

/// PyMySQL on the bridge, the token cells: a writer writes (a text INSERT, a transaction),
/// reads its write, reads its token with `SHOW querypilot.causal_token`; a second connection
/// sets that token and reads. Then (after a line on stdin: replay resumed) the writer, whose
/// session has a position now, and a connection without a token read on the standby again.
/// Prints `cell writer_count writer_server token other_count other_server`, then
/// `after writer_server fresh_server`. Servers by `pg_stat_wal_receiver` (`pg_is_in_recovery()`
/// would send every read to the primary: the router cannot prove it replica-safe).
const PYMYSQL_TOKEN: &str = r#"
import sys, time, pymysql
port, user, password, db, t, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
def conn():
    return pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db, autocommit=True)
def read(c, i):
    cur = c.cursor(); cur.execute(f"SELECT COUNT(*), (SELECT COUNT(*) FROM pg_stat_wal_receiver) FROM {t} WHERE id = {i}")
    count, receivers = cur.fetchone()
    return count, "standby" if int(receivers) == 1 else "primary"
cells = {"text": [f"INSERT INTO {t} VALUES ({{}})"], "transaction": ["BEGIN", f"INSERT INTO {t} VALUES ({{}})", "COMMIT"]}
writer = None
for cell, sqls in cells.items():
    n += 1
    w = conn(); cur = w.cursor()
    for sql in sqls: cur.execute(sql.format(n))
    mine = read(w, n)
    cur.execute("SHOW querypilot.causal_token"); token = cur.fetchone()[0]
    o = conn(); o.cursor().execute(f"SET querypilot.causal_token = '{token}'")
    print(cell, *mine, token.split(":")[0] or "-", *read(o, n), flush=True)
    writer = w
sys.stdin.readline()
# The standby replays the backlog as the health probe notices: the first read there ends the wait.
deadline = time.time() + 15
while read(writer, n)[1] != "standby" and time.time() < deadline: time.sleep(0.1)
print("after", read(writer, n)[1], read(conn(), n)[1], flush=True)
"#;

/// Issue #34's bridged cells for the token (PyMySQL, then Connector/J): with replay paused,
/// neither the writer nor the connection handed its token reads stale (both read on the
/// primary), the token is a WAL position, and once the standby replays, the writer's reads and
/// tokenless reads go back to the standby.
#[test]
fn bridged_mysql_tokens_hand_writes_over_and_reads_return_to_the_standby() {
    use std::io::{BufRead, Write as _};
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged_tok");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    for (i, mode) in ["transaction", "session"].into_iter().enumerate() {
        let router = router(pg, mode);
        let mut c = client(&router, &env);
        eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
        env.pause_replication(Kind::Pg);
        let args = [router.port().to_string(), pg.user.clone(), pg.password.clone(), pg.database.clone()];
        let mut py = std::process::Command::new("/usr/bin/python3")
            .args(["-c", PYMYSQL_TOKEN])
            .args(&args)
            .args([t.as_str(), &(i * 10).to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run PyMySQL (python3-pymysql, installed by .ci/deps.sh)");
        let mut lines = std::io::BufReader::new(py.stdout.take().expect("stdout")).lines().map_while(Result::ok);
        for cell in ["text", "transaction"] {
            let line = lines.next().unwrap_or_else(|| panic!("{mode} {cell}: PyMySQL stopped"));
            let want = format!("{cell} 1 primary pg 1 primary");
            assert_eq!(line, want, "{mode}: the writer and the token's holder read the write, on the primary");
        }
        jdbc_cells(&router, pg, &t, 100 + i * 10);
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(30));
        writeln!(py.stdin.as_mut().expect("stdin")).expect("tell PyMySQL replay resumed");
        let after = lines.next().unwrap_or_else(|| panic!("{mode}: PyMySQL stopped"));
        assert_eq!(after, "after standby standby", "{mode}: reads return to the standby once it replayed");
        assert!(py.wait().expect("PyMySQL").success(), "{mode}: PyMySQL failed");
    }
}

/// A bridged write whose commit position cannot be read (the server refuses the router's
/// `pg_current_wal_insert_lsn()` to the pool's user) hands out `primary`, never the older
/// position the standby replayed without it: the writer and the holders of its token (SET,
/// connection attribute) read the write on the primary (#34).
#[test]
fn bridged_mysql_a_lost_position_hands_out_the_primary_token() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged_lost");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let router = router(pg, "transaction");
    let mut c = client(&router, &env);
    eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
    c.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("a first write");
    let older: String = c.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    assert!(older.starts_with("pg:"), "a learned position: {older}");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let mut su = pg.superuser_client(pg.primary_port);
    su.batch_execute("REVOKE EXECUTE ON FUNCTION pg_catalog.pg_current_wal_insert_lsn() FROM PUBLIC").expect("revoke");
    env.pause_replication(Kind::Pg);
    c.query_drop(format!("INSERT INTO {t} VALUES (2)")).expect("a write whose position is unreadable");
    let mut got = vec![("the writer".to_owned(), read(&mut c, &t, 2))];
    let token: String = c.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    let mut other = client(&router, &env);
    assert_eq!(read(&mut other, &t, 2), (0, true), "without the token: the paused standby");
    match other.query_drop(format!("SET querypilot.causal_token = '{token}'")) {
        Ok(()) => got.push((format!("the holder of '{token}' by SET"), read(&mut other, &t, 2))),
        Err(e) => got.push((format!("SET of '{token}' refused: {e}"), (0, true))),
    }
    let attrs = std::collections::HashMap::from([("querypilot.causal_token", token.as_str())]);
    let opts = env.my.opts(router.port(), &pg.user, &pg.password).db_name(Some(pg.database.as_str()));
    match mysql::Conn::new(opts.connect_attrs(Some(attrs))) {
        Ok(mut by_attr) => got.push((format!("the holder of '{token}' by attribute"), read(&mut by_attr, &t, 2))),
        Err(e) => got.push((format!("'{token}' as attribute refused: {e}"), (0, true))),
    }
    su.batch_execute("GRANT EXECUTE ON FUNCTION pg_catalog.pg_current_wal_insert_lsn() TO PUBLIC").expect("grant");
    env.resume_replication(Kind::Pg);
    let stale: Vec<_> = got.iter().filter(|(_, read)| *read != (1, false)).collect();
    assert!(stale.is_empty(), "read on the primary with the row, older token '{older}': {stale:?}");
    assert_eq!(token, "primary", "the position is unknown (older: '{older}')");
}

/// Connector/J, client-side prepare (a text query) and server-side (`useServerPrepStmts`:
/// COM_STMT_PREPARE/EXECUTE, each execute routed): the same cells as PyMySQL's, from row
/// `first` + 1 on, and a third connection given the token as connection attribute (#34).
fn jdbc_cells(router: &Router, pg: &PgEnv, t: &str, first: usize) {
    for (j, prepare) in ["false", "true"].into_iter().enumerate() {
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useServerPrepStmts={prepare}",
            router.port(),
            pg.database
        );
        let from = (first + j * 2).to_string();
        let lines = crate::scripts::jdbc("JdbcCausalBridged.java", &url, &pg.user, &pg.password, &[t, &from]);
        let want = ["plain 1 primary pg 1 primary 1 primary", "transaction 1 primary pg 1 primary 1 primary"];
        assert_eq!(lines, want, "useServerPrepStmts={prepare}: all read the write, on the primary");
    }
}

fn my_pool(my: &crate::support::MyEnv, name: &str, port: u16) -> String {
    format!(
        "[pools.{name}]\nprotocol = \"mysql\"\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\n\
         database = \"{d}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
        u = my.user,
        p = my.password,
        d = my.database,
    )
}

/// The other bridge: PostgreSQL clients (the `postgres` crate, simple and extended queries) on
/// MariaDB pools configured to split to the replica, whose SQL thread is stopped. A row written
/// to the primary directly is missing on the replica, so a read that finds it ran on the
/// primary. A bridged PostgreSQL session is not split today (its reads stay on its pool, the
/// primary), so causal reads do not apply there; what this cell holds is that the session's
/// own writes, by any path, are always read.
#[test]
fn bridged_postgres_sessions_never_read_their_writes_stale() {
    let env = Dbs::private();
    let my = &env.my;
    let t = unique_name("causal_bridged_my");
    my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("table");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let router = Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_write_split = true\nread_pool = \"my_replica\"\nwrite_pool = \"my_primary\"\n\
         read_your_writes = \"causal\"\ncausal_wait = \"20ms\"\n",
        my_pool(my, "my_primary", my.primary_port),
        my_pool(my, "my_replica", my.replica_port),
    ));
    let count = |c: &mut postgres::Client, n: i64| -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {t} WHERE id = {n}");
        let rows = c.simple_query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
                _ => None,
            })
            .expect("a count")
    };
    env.pause_replication(Kind::Mariadb);
    my.primary_client().query_drop(format!("INSERT INTO {t} VALUES (0)")).expect("direct write");
    for (n, path) in [(1, "simple"), (2, "extended"), (3, "transaction")] {
        let mut w = router.pg(&my.database);
        match path {
            "simple" => w.simple_query(&format!("INSERT INTO {t} VALUES ({n})")).map(drop),
            "extended" => w.execute(&format!("INSERT INTO {t} VALUES ({n})"), &[]).map(drop),
            _ => w.batch_execute(&format!("BEGIN; INSERT INTO {t} VALUES ({n}); COMMIT")),
        }
        .unwrap_or_else(|e| panic!("{path}: write: {e}"));
        assert_eq!(count(&mut w, n), 1, "{path}: the writer reads its write");
        assert_eq!(count(&mut w, 0), 1, "{path}: on the primary");
    }
    env.resume_replication(Kind::Mariadb);
}

/// Issue #34's bridged cells for the write kinds (PyMySQL, `tests/connectors/causal_bridged_kinds.py`;
/// Connector/J with client- and server-side prepare, `JdbcCausalBridgedKinds.java`):
/// a CTE that inserts, a VOLATILE function, a STABLE one calling it (in a transaction and
/// alone), a view whose column calls it (a plain read to the parse, in a transaction opened
/// by BEGIN or by `autocommit = 0`), a
/// trigger, `DO`, `CALL` and two-phase commit (`PREPARE TRANSACTION` / `COMMIT PREPARED`),
/// each as separate queries and as one multi-statement text with the write first, in the
/// middle or last; read by the writer, by a connection given its token with `SET`, and by one
/// given it as connection attribute. With replay paused every read sees the write, on the
/// primary. A transaction that only read leaves its session on the standby (the server, asked
/// in the COMMIT's send, said it has no transaction id). `LOAD DATA LOCAL INFILE` and XA are refused with a clear error; so is the token
/// named anywhere in a multi-statement text (nothing of the text runs, no token is taken);
/// so is an invalid token as connection attribute (1231, as a bad SET).
#[test]
fn bridged_mysql_write_kinds_and_multi_statement_texts_are_never_read_stale() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged_kinds");
    // The view: a plain read to the parse, whose column calls the inserting function.
    let view = format!(
        "CREATE SEQUENCE {t}_seq START 900000;\nCREATE VIEW {t}_v AS SELECT {t}_w(nextval('{t}_seq')::int) AS id;"
    );
    let schema = crate::causal_matrix::write_kinds_schema(&t) + "\n" + &view;
    pg.primary_client().batch_execute(&schema).expect("schema");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let router = router(pg, "transaction");
    let mut c = client(&router, &env);
    eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
    env.pause_replication(Kind::Pg);
    let args = [router.port().to_string(), pg.user.clone(), pg.password.clone(), pg.database.clone(), t.clone()];
    let lines = crate::scripts::python("causal_bridged_kinds.py", &[&args[..], &["0".to_owned()]].concat());
    for (prepare, first) in [("false", "10000"), ("true", "20000")] {
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useServerPrepStmts={prepare}",
            router.port(),
            pg.database
        );
        let got = crate::scripts::jdbc("JdbcCausalBridgedKinds.java", &url, &pg.user, &pg.password, &[&t, first]);
        let stale: Vec<&String> = got.iter().filter(|l| !l.ends_with(" 1 primary 1 primary 1 primary")).collect();
        assert!(stale.is_empty(), "Connector/J useServerPrepStmts={prepare}: {stale:#?}");
        assert_eq!(got.len(), 9, "Connector/J useServerPrepStmts={prepare}: every kind ran: {got:#?}");
    }
    env.resume_replication(Kind::Pg);
    let others = ["readonly_tx", "refused", "token_multi", "attr_bad"];
    let (rest, reads): (Vec<&String>, Vec<&String>) =
        lines.iter().partition(|l| others.iter().any(|o| l.starts_with(o)));
    let stale: Vec<&&String> = reads.iter().filter(|l| !l.ends_with(" 1 primary")).collect();
    assert!(stale.is_empty(), "reads that missed the write or ran elsewhere:\n{stale:#?}\nall:\n{lines:#?}");
    assert_eq!(reads.len(), (4 * 10 + 1) * 3, "every path x kind x route ran: {lines:#?}");
    let want = [
        "readonly_tx 0 standby -",
        "refused copy 1235 0 standby",
        "refused xa 1235 0 standby",
        "token_multi first 1235 0 primary -",
        "token_multi middle 1235 0 primary -",
        "token_multi last 1235 0 primary -",
        "token_multi show 1235 0 primary -",
        "attr_bad 1231",
    ];
    assert_eq!(rest, want, "refusals");
}

/// #34: an autocommit statement the MySQL-dialect parse calls a read that runs on the primary
/// (here a pattern rule sends it there; a causal read falling back does too) may still write:
/// a view whose column calls an inserting function. With replay paused, the writer's next read
/// must see the view's insert (on the primary), by a text query and by a prepared one; a read
/// on the primary that wrote nothing leaves the session on the standby (the server said it had
/// no transaction id).
#[test]
fn bridged_autocommit_reads_that_write_through_a_view_are_never_read_stale() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged_view");
    let view = format!(
        "CREATE SEQUENCE {t}_seq START 900000;\nCREATE VIEW {t}_v AS SELECT {t}_w(nextval('{t}_seq')::int) AS id;"
    );
    let schema = crate::causal_matrix::write_kinds_schema(&t) + "\n" + &view;
    pg.primary_client().batch_execute(&schema).expect("schema");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let rules = "\n[[routing.pattern_rules]]\nname = \"on-primary\"\ntype = \"regex\"\n\
                 pattern = \"_v\\\\b|AS on_primary\"\npool = \"pg_primary\"\n";
    for mode in ["transaction", "session"] {
        let router = router_with(pg, mode, rules);
        let mut c = client(&router, &env);
        eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
        env.pause_replication(Kind::Pg);
        let view_read = format!("SELECT id FROM {t}_v");
        let plain_read = format!("SELECT COUNT(*) AS on_primary FROM {t}");
        for path in ["text", "prepared"] {
            let mut w = client(&router, &env);
            let count: Option<i64> = match path {
                "text" => w.query_first(&plain_read),
                _ => w.exec_first(&plain_read, ()),
            }
            .unwrap_or_else(|e| panic!("{mode} {path}: {plain_read}: {e}"));
            assert!(count.is_some(), "{mode} {path}: the primary answered");
            assert!(read(&mut w, &t, 0).1, "{mode} {path}: a read that wrote nothing leaves no position");
            let id: Option<i64> = match path {
                "text" => w.query_first(&view_read),
                _ => w.exec_first(&view_read, ()),
            }
            .unwrap_or_else(|e| panic!("{mode} {path}: {view_read}: {e}"));
            let id = id.expect("the view's row");
            assert_eq!(read(&mut w, &t, id), (1, false), "{mode} {path}: the view's insert is read, on the primary");
            assert_eq!(read(&mut client(&router, &env), &t, id), (0, true), "{mode} {path}: the standby is behind");
        }
        let mut raw = Raw::login_to(router.port(), &pg.user, &pg.password, &pg.database);
        let (_, status) = raw.query_row(&view_read).unwrap_or_else(|e| panic!("{mode}: raw {view_read}: {e}"));
        assert_eq!(
            status & 0x0003,
            0x0002,
            "{mode}: the client is told autocommit and no transaction, as without causal"
        );
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(30));
    }
}

/// #34: COM_CHANGE_USER's connection attributes carry a causal token as the handshake's do
/// (raw packets: the `mysql` crate resends its login's attributes). With replay paused, a
/// session logged in without a token reads the standby; changed to the same user with the
/// writer's token as attribute, it reads the write, on the primary. A malformed token is
/// refused with 1231, as at the handshake.
#[test]
fn bridged_change_user_takes_the_token_of_its_connection_attributes() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged_cu");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let router = router(pg, "transaction");
    let mut c = client(&router, &env);
    eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
    env.pause_replication(Kind::Pg);
    c.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("write");
    let token: String = c.query_first("SHOW querypilot.causal_token").expect("show").expect("a token");
    let sql = format!("SELECT COUNT(*), (SELECT COUNT(*) FROM pg_stat_wal_receiver) FROM {t} WHERE id = 1");
    let login = || Raw::login_to(router.port(), &pg.user, &pg.password, &pg.database);
    assert_eq!(login().query_row(&sql).map(|r| r.0), Ok(vec!["0".to_owned(), "1".to_owned()]), "no token: the standby");
    // Changed before any read: a bridged session cannot change user once a read moved it to
    // the standby pool (1049, "cannot move this session").
    let mut raw = login();
    let attrs = [("querypilot.causal_token", token.as_str())];
    raw.change_user(&pg.user, &pg.password, &pg.database, &attrs).expect("change user with the token");
    assert_eq!(raw.query_row(&sql).map(|r| r.0), Ok(vec!["1".to_owned(), "0".to_owned()]), "the token's write");
    let bad = login().change_user(&pg.user, &pg.password, &pg.database, &[("querypilot.causal_token", "pg:nonsense")]);
    assert_eq!(bad, Err(1231), "a malformed token");
    env.resume_replication(Kind::Pg);
}

/// #34: transactions of a bridged session that commit nothing leave no position, so with
/// replay paused the session's next read still runs on the standby: a read-only transaction
/// ended by a prepared COMMIT (probed as a text one), a failed transaction's COMMIT and its
/// `SET autocommit = 1` (PostgreSQL rolls it back), a ROLLBACK after a write.
#[test]
fn bridged_transactions_that_commit_nothing_leave_no_position() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged_none");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let router = router(pg, "transaction");
    let mut c = client(&router, &env);
    eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
    env.pause_replication(Kind::Pg);
    // WAL the standby has not replayed: a position learned from now on would keep reads off it.
    pg.primary_client().batch_execute(&format!("INSERT INTO {t} VALUES (100)")).expect("direct write");
    let run = |c: &mut mysql::Conn, sqls: &[String]| {
        for sql in sqls {
            match sql.strip_prefix("FAIL ") {
                Some(failing) => drop(c.query_drop(failing).expect_err("fails")),
                None if sql == "PREPARED COMMIT" => c.exec_drop("COMMIT", ()).expect("prepared COMMIT"),
                None => c.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}")),
            }
        }
    };
    let insert = |n: i64| format!("INSERT INTO {t} VALUES ({n})");
    let cells: [(&str, Vec<String>); 4] = [
        ("prepared COMMIT", vec!["BEGIN".into(), format!("SELECT COUNT(*) FROM {t}"), "PREPARED COMMIT".into()]),
        ("failed COMMIT", vec!["BEGIN".into(), insert(1), "FAIL SELECT 1/0".into(), "COMMIT".into()]),
        (
            "failed autocommit",
            vec!["SET autocommit = 0".into(), insert(2), "FAIL SELECT 1/0".into(), "SET autocommit = 1".into()],
        ),
        ("ROLLBACK", vec!["BEGIN".into(), insert(3), "ROLLBACK".into()]),
    ];
    let mut held = Vec::new();
    for (n, (cell, sqls)) in (1..).zip(cells) {
        let mut w = client(&router, &env);
        run(&mut w, &sqls);
        let got = read(&mut w, &t, n);
        if got != (0, true) {
            held.push(format!("{cell}: {got:?}"));
        }
    }
    env.resume_replication(Kind::Pg);
    assert!(held.is_empty(), "nothing committed, yet reads left the standby (or saw a row): {held:?}");
}
