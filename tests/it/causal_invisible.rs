//! Issue #34, MariaDB: causal mode changes where reads run and nothing else an application can
//! observe. A commit's GTID comes from its own OK packet (session tracking of `last_gtid`), so
//! `ROW_COUNT()`, `FOUND_ROWS()`, the warnings, the OK's info string and `@@last_gtid` after a
//! write read as in `session` mode and on a direct connection — with the mariadb CLI and
//! PyMySQL; after a failed write too (`FOUND_ROWS()` still the last read's 3, not the 1 of a
//! query the router asked). A failed write that committed nothing leaves the session's reads on the replica
//! (placement proven by `@@server_id`, the replica's SQL thread stopped).

use std::process::Command;
use std::time::Duration;

use mysql::prelude::Queryable;

use crate::causal_mysql::{client, my_router, my_router_in};
use crate::support::{dbs, eventually, unique_name, Dbs, Kind, MyEnv};

/// What the mariadb CLI prints for `script` against `port` (statements echoed, errors inline).
fn cli(my: &MyEnv, port: u16, script: &str) -> String {
    let out = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--force", "-vvv"])
        .arg(format!("-u{}", my.user))
        .arg(format!("-p{}", my.password))
        .arg(format!("-P{port}"))
        .arg(format!("-D{}", my.database))
        .args(["-e", script])
        .output()
        .expect("run the mariadb CLI");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // Timings vary from run to run; what the statements returned does not.
    text.lines().map(|l| l.split(" (0.").next().unwrap_or(l)).collect::<Vec<_>>().join("\n")
}

/// A fresh table with three rows, created on the primary and caught up on the replica.
fn table(my: &MyEnv, prefix: &str) -> String {
    let t = unique_name(prefix);
    let mut c = my.primary_client();
    c.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(3))")).expect("create");
    c.query_drop(format!("INSERT INTO {t} VALUES (10, 'x'), (11, 'y'), (12, 'z')")).expect("rows");
    my.wait_replica_caught_up(Duration::from_secs(20));
    t
}

/// Writes, each followed by what a client reads about it on the same connection.
fn script(t: &str) -> String {
    format!(
        "SELECT SQL_CALC_FOUND_ROWS id FROM {t} LIMIT 1;\n\
         INSERT IGNORE INTO {t} VALUES (1, 'a'), (1, 'b'), (2, 'c');\n\
         SELECT ROW_COUNT(), FOUND_ROWS(), @@warning_count, @@last_gtid LIKE '0-1-%';\n\
         SHOW WARNINGS;\n\
         UPDATE {t} SET v = 'zz' WHERE id < 10;\n\
         SELECT ROW_COUNT(), FOUND_ROWS();\n\
         BEGIN;\n\
         INSERT INTO {t} VALUES (3, 'd');\n\
         COMMIT;\n\
         SELECT ROW_COUNT(), @@warning_count, @@last_gtid LIKE '0-1-%';\n\
         SELECT id FROM {t} WHERE id >= 10;\n\
         INSERT INTO {t} VALUES (1, 'dup');\n\
         SHOW WARNINGS;\n\
         SELECT ROW_COUNT(), FOUND_ROWS(), @@error_count;\n"
    )
}

#[test]
fn mariadb_cli_reads_the_same_row_count_found_rows_and_warnings_in_causal_and_session_mode() {
    let my = &dbs().my;
    let mut outputs = Vec::new();
    for mode in ["direct", "session", "causal"] {
        let t = table(my, "invisible_cli");
        let router = (mode != "direct").then(|| my_router_in(my, "session", &format!("read_your_writes = \"{mode}\"")));
        let port = router.as_ref().map_or(my.primary_port, |r| r.port());
        outputs.push((mode, cli(my, port, &script(&t)).replace(&t, "t")));
    }
    let (_, direct) = &outputs[0];
    assert!(direct.contains("ROW_COUNT()") && direct.contains("1062"), "the script ran: {direct}");
    for (mode, out) in &outputs[1..] {
        assert_eq!(out, direct, "{mode} mode reads what a direct connection reads");
    }
}

/// PyMySQL: per statement, the rows, `rowcount`, `lastrowid`, the OK's warning count and info
/// string (the part of the OK packet that changes shape under session tracking), or the error.
const PYMYSQL: &str = r#"
import sys, pymysql
port, user, password, db, t = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db, autocommit=True)
cur = c.cursor()
for sql in [
    f"SELECT SQL_CALC_FOUND_ROWS id FROM {t} LIMIT 1",
    f"INSERT IGNORE INTO {t} VALUES (1, 'a'), (1, 'b'), (2, 'c')",
    "SELECT ROW_COUNT(), FOUND_ROWS(), @@warning_count",
    "SHOW WARNINGS",
    f"UPDATE {t} SET v = 'zz' WHERE id < 10",
    "SELECT ROW_COUNT()",
    f"SELECT id FROM {t} WHERE id >= 10",
    f"INSERT INTO {t} VALUES (1, 'dup')",
    "SELECT ROW_COUNT(), FOUND_ROWS(), @@error_count",
]:
    try:
        cur.execute(sql)
        r = c._result
        print(sql, "|", cur.fetchall(), cur.rowcount, cur.lastrowid, r.warning_count, r.message)
    except pymysql.err.MySQLError as e:
        print(sql, "| error", e.args[0])
"#;

#[test]
fn pymysql_reads_the_same_counts_warnings_and_info_in_causal_and_session_mode() {
    let my = &dbs().my;
    let mut outputs = Vec::new();
    for mode in ["direct", "session", "causal"] {
        let t = table(my, "invisible_py");
        let router = (mode != "direct").then(|| my_router_in(my, "session", &format!("read_your_writes = \"{mode}\"")));
        let port = router.as_ref().map_or(my.primary_port, |r| r.port());
        let out = Command::new("/usr/bin/python3")
            .args(["-c", PYMYSQL, &port.to_string(), &my.user, &my.password, &my.database, &t])
            .output()
            .expect("run PyMySQL (python3-pymysql, installed by .ci/deps.sh)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        outputs.push((mode, text.replace(&t, "t")));
    }
    let (_, direct) = &outputs[0];
    assert!(direct.contains("Rows matched: 2") && direct.contains("error 1062"), "the script ran: {direct}");
    for (mode, out) in &outputs[1..] {
        assert_eq!(out, direct, "{mode} mode reads what a direct connection reads");
    }
}

/// `(count of rows, @@server_id)` of one read.
fn read(c: &mut mysql::Conn, t: &str) -> (u64, u64) {
    let sql = format!("SELECT COUNT(*), @@server_id FROM {t}");
    c.query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: no row"))
}

#[test]
fn mariadb_a_failed_write_leaves_reads_on_the_replica_and_a_committed_one_does_not() {
    const PRIMARY: u64 = 1;
    const REPLICA: u64 = 2;
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = table(my, "causal_failed");
    let mut c = client(&router, my);
    eventually(Duration::from_secs(15), "reads on the replica", || read(&mut c, &t) == (3, REPLICA));
    env.pause_replication(Kind::Mariadb);
    let dup = c.query_drop(format!("INSERT INTO {t} VALUES (10, 'dup')")).expect_err("a duplicate key");
    assert!(matches!(&dup, mysql::Error::MySqlError(e) if e.code == 1062), "{dup}");
    assert_eq!(read(&mut c, &t), (3, REPLICA), "nothing committed: the read stays on the replica");
    let token: Option<String> = c.query_first("SHOW querypilot.causal_token").expect("show");
    assert_eq!(token.as_deref(), Some(""), "no position to wait for");

    c.query_drop(format!("INSERT INTO {t} VALUES (1, 'a')")).expect("write");
    assert_eq!(read(&mut c, &t), (4, PRIMARY), "a committed write: the stopped replica does not have it");
    c.query_drop(format!("INSERT INTO {t} VALUES (1, 'a')")).expect_err("a duplicate key");
    assert_eq!(read(&mut c, &t), (4, PRIMARY), "a later failure does not forget the earlier write");
    let token: String = c.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    let mut other = client(&router, my);
    other.query_drop(format!("SET querypilot.causal_token = '{token}'")).expect("the issued token is accepted");
    assert_eq!(read(&mut other, &t), (4, PRIMARY), "the token's holder reads the write");
    env.resume_replication(Kind::Mariadb);
    eventually(Duration::from_secs(20), "back on the replica once it applied the write", || {
        read(&mut c, &t) == (4, REPLICA)
    });
}

/// A client's own `session_track_system_variables` would stop commits reporting their GTID:
/// in causal mode it is refused clearly (text, multi-statement and prepared), and writes go on
/// leaving positions; other modes pass it to the server.
#[test]
fn mariadb_session_tracking_stays_the_routers_in_causal_mode() {
    let my = &dbs().my;
    let code = |r: Result<(), mysql::Error>| match r {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    };
    let router = my_router(my, "read_your_writes = \"causal\"");
    let mut c = client(&router, my);
    assert_eq!(code(c.query_drop("SET SESSION session_track_system_variables = 'autocommit'")), 1235);
    assert_eq!(code(c.query_drop("SELECT 1; SET @@session_track_system_variables = ''")), 1235);
    assert_eq!(code(c.prep("SET session_track_system_variables = ?").map(drop)), 1235);
    let t = table(my, "causal_track");
    c.query_drop(format!("INSERT INTO {t} VALUES (1, 'a')")).expect("write");
    let token: String = c.query_first("SHOW querypilot.causal_token").expect("show").expect("a row");
    assert!(token.starts_with("gtid:0-1-"), "the write left a position: {token:?}");
    let session = my_router(my, "read_your_writes = \"session\"");
    let mut s = client(&session, my);
    s.query_drop("SET SESSION session_track_system_variables = 'autocommit'").expect("passed on in session mode");
}

/// A failure that kept changes is never taken for one that kept none: a multi-row INSERT into
/// a MyISAM table keeps the rows before its duplicate, and a procedure commits its first
/// INSERT before the second fails. With the replica stopped, the next read of each must see
/// the kept row, so it runs on the primary.
#[test]
fn mariadb_a_failure_that_kept_rows_sends_the_next_read_to_the_primary() {
    const PRIMARY: u64 = 1;
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let (m, t, p) = (unique_name("causal_myisam"), unique_name("causal_proc_t"), unique_name("causal_proc"));
    let mut admin = my.primary_client();
    admin.query_drop(format!("CREATE TABLE {m} (id INT PRIMARY KEY) ENGINE=MyISAM")).expect("myisam");
    admin.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(3))")).expect("innodb");
    let body = format!("BEGIN INSERT INTO {t} VALUES (1, 'a'); INSERT INTO {t} VALUES (1, 'b'); END");
    admin.query_drop(format!("CREATE PROCEDURE {p}() {body}")).expect("procedure");
    my.wait_replica_caught_up(Duration::from_secs(20));
    env.pause_replication(Kind::Mariadb);
    let mut c = client(&router, my);
    let kept = c.query_drop(format!("INSERT INTO {m} VALUES (5), (6), (5)")).expect_err("a duplicate key");
    assert!(matches!(&kept, mysql::Error::MySqlError(e) if e.code == 1062), "{kept}");
    assert_eq!(read(&mut c, &m), (2, PRIMARY), "the rows MyISAM kept are read");
    let mut c = client(&router, my);
    let failed = c.query_drop(format!("CALL {p}()")).expect_err("the second INSERT fails");
    assert!(matches!(&failed, mysql::Error::MySqlError(e) if e.code == 1062), "{failed}");
    assert_eq!(read(&mut c, &t), (1, PRIMARY), "the procedure's first INSERT is read");
    env.resume_replication(Kind::Mariadb);
}
