//! A MySQL command of 16 MiB or more arrives in several packets, and the answer's first packet
//! carries the sequence id after the command's last (Client/Server Protocol, "Sending more than
//! 16 MiB"). Answers the router writes itself must do the same as the server's: PyMySQL, as
//! every driver, drops the connection on a sequence id it did not expect. Each case runs
//! directly against the harness's MariaDB and through the router, and both must print the same.

use std::process::Command;

use crate::mysql_session::my_router;
use crate::support::dbs;

/// PyMySQL (default flags: no CLIENT_MULTI_STATEMENTS) sends `sql` with `{x}` replaced by `n`
/// x's, prints "ok" or "error <number>", then the answer of a next statement.
const SEND: &str = r#"
import sys, pymysql
port, user, password, db, n, sql = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db)
cur = c.cursor()
try:
    cur.execute(sql.replace("{x}", "x" * n)); print("ok")
except pymysql.err.MySQLError as e:
    print("error", e.args[0])
cur.execute("SELECT 41 + 1"); print("after", cur.fetchone()[0])
"#;

fn pymysql(port: u16, n: usize, sql: &str) -> String {
    let my = &dbs().my;
    let out = Command::new("/usr/bin/python3")
        .args(["-c", SEND, &port.to_string(), &my.user, &my.password, &my.database, &n.to_string(), sql])
        .output()
        .unwrap_or_else(|e| panic!("run PyMySQL (python3-pymysql, installed by .ci/deps.sh): {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "PyMySQL failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn the_routers_own_answer_to_a_command_of_several_packets_follows_its_last_packet() {
    let router = my_router("transaction", 2);
    // Over 16 MiB: two packets. Two statements from a client that did not enable them: the
    // router refuses the text itself, as the server would (1064).
    let n = 17 << 20;
    let sql = "SELECT 1; SELECT LENGTH('{x}')";
    let direct = pymysql(dbs().my.primary_port, n, sql);
    assert_eq!(direct, "error 1064\nafter 42\n", "directly");
    assert_eq!(pymysql(router.port(), n, sql), direct, "through the router");
}
