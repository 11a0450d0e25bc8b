//! The MySQL runner: the `mysql` crate (COM_QUERY for text and multi-statement texts,
//! COM_STMT_PREPARE/EXECUTE for prepared routes) against the MariaDB primary (server id 1)
//! and replica (server id 2).

use std::time::Duration;

use mysql::prelude::{Protocol, Queryable};
use mysql::{Conn, QueryResult, Value};

use super::{counters, Class, Outcome, PinKind, Place, Route, Runner, Sql, Wire};
use crate::support::{eventually, Dbs};

/// The table's MySQL translation.
pub struct My;

/// `[create, check (one row, first value 1), remove]` of a pin's state, named after `t`.
fn pin_sql(t: &str, kind: PinKind) -> [String; 3] {
    match kind {
        PinKind::TempTable => [
            format!("CREATE TEMPORARY TABLE {t}_tmp (x INT)"),
            format!("SELECT COUNT(*) + 1 FROM {t}_tmp"),
            format!("DROP TEMPORARY TABLE {t}_tmp"),
        ],
        PinKind::AdvisoryLock => [
            format!("SELECT GET_LOCK('{t}_lock', 0)"),
            format!("SELECT IS_USED_LOCK('{t}_lock') = CONNECTION_ID()"),
            format!("SELECT RELEASE_LOCK('{t}_lock')"),
        ],
        PinKind::UserVariable => [format!("SET @{t}_v = 1"), format!("SELECT @{t}_v"), format!("SET @{t}_v = NULL")],
        PinKind::Cursor | PinKind::Listen => panic!("the table maps no MySQL statement to {kind:?}"),
    }
}

fn text(v: Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}

fn failed(e: mysql::Error, rows_before: usize) -> Outcome {
    match e {
        mysql::Error::MySqlError(e) => Outcome::Failed { code: e.code.to_string(), rows_before },
        other => Outcome::Failed { code: format!("client error: {other}"), rows_before },
    }
}

/// One outcome per result the server sent, up to and including the first error.
fn results<P: Protocol>(r: mysql::Result<QueryResult<'_, '_, '_, P>>) -> Vec<Outcome> {
    let mut r = match r {
        Ok(r) => r,
        Err(e) => return vec![failed(e, 0)],
    };
    let mut outs = Vec::new();
    while let Some(set) = r.iter() {
        let mut rows = Vec::new();
        for row in set {
            match row {
                Ok(row) => rows.push(row.unwrap().into_iter().map(text).collect()),
                Err(e) => {
                    outs.push(failed(e, rows.len()));
                    return outs;
                }
            }
        }
        outs.push(Outcome::Done(rows));
    }
    outs
}

/// A single statement's outcome: its error, or the last result's rows.
fn single(outs: Vec<Outcome>) -> Outcome {
    outs.into_iter().last().unwrap_or(Outcome::Done(Vec::new()))
}

impl Runner for My {
    type Client = Conn;
    const WIRE: Wire = Wire::My;
    /// `ER_CONNECTION_KILLED`: what MariaDB sends a client whose connection was killed.
    const ENDED: &'static str = "1927";

    /// The victim's counters are MyISAM: a failed statement does not roll its count back. The
    /// function says DETERMINISTIC only because a binlogging server creates no function without
    /// one of three declarations; the router sends every unlisted stored function to the
    /// primary whatever it declares.
    fn schema(env: &Dbs, t: &str) {
        let my = &env.my;
        let mut root = my.superuser_client(my.primary_port);
        let keys: Vec<String> = counters().map(|k| format!("({k}, 0)")).collect();
        for sql in [
            format!("CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=InnoDB"),
            format!("CREATE TABLE {t}_n (k INT PRIMARY KEY, n INT) ENGINE=MyISAM"),
            format!("CREATE TABLE {t}_log (r VARCHAR(10))"),
            format!("INSERT INTO {t}_n VALUES {}", keys.join(", ")),
            format!(
                "CREATE FUNCTION {t}_boom(k_ INT) RETURNS VARCHAR(10) DETERMINISTIC MODIFIES SQL DATA BEGIN \
                 UPDATE {t}_n SET n = n + 1 WHERE k = k_; \
                 IF (SELECT n FROM {t}_n WHERE k = k_) = 1 THEN \
                 SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'scenario: injected deadlock'; \
                 END IF; RETURN 'done'; END"
            ),
        ] {
            root.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        my.wait_replica_caught_up(Duration::from_secs(30));
    }

    fn open(env: &Dbs, port: u16) -> Conn {
        let my = &env.my;
        Conn::new(my.opts(port, &my.user, &my.password)).unwrap_or_else(|e| panic!("connect through router: {e}"))
    }

    fn render(t: &str, sql: &Sql, base: u32) -> String {
        match sql {
            Sql::Count(id) => {
                format!("SELECT COUNT(*), ELT(@@server_id, 'primary', 'replica') FROM {t} WHERE id = {}", base + id)
            }
            Sql::Begin { read_only: true } => "START TRANSACTION READ ONLY".into(),
            Sql::Begin { read_only: false } => "START TRANSACTION".into(),
            Sql::Backend => "SELECT CONNECTION_ID(), ELT(@@server_id, 'primary', 'replica')".into(),
            Sql::PinOn(kind) => pin_sql(t, *kind)[0].clone(),
            Sql::PinHeld(kind) => pin_sql(t, *kind)[1].clone(),
            Sql::PinOff(kind) => pin_sql(t, *kind)[2].clone(),
            // An INSERT: no result set, so the ERR is the answer's first packet (a SELECT's
            // column count reaches the client before the function runs; `DO` turns a SIGNAL
            // into a warning).
            Sql::Victim { counter, rows_first: false } => {
                format!("INSERT INTO {t}_log VALUES ({t}_boom({}))", base + counter)
            }
            Sql::Victim { counter, rows_first: true } => {
                format!("SELECT IF(seq < 3000, REPEAT('x', 1000), {t}_boom({})) FROM seq_1_to_3000", base + counter)
            }
            other => panic!("{other:?} is rendered alike for both wires by the executor"),
        }
    }

    fn run(conn: &mut Conn, route: Route, sql: &str) -> Outcome {
        match route {
            Route::Text => single(results(conn.query_iter(sql))),
            Route::Multi => single(results(conn.query_iter(format!("SELECT 1; {sql}")))),
            Route::Extended | Route::Prepared => {
                let stmt = match conn.prep(sql) {
                    Ok(s) => s,
                    Err(e) => return failed(e, 0),
                };
                let out = single(results(conn.exec_iter(&stmt, ())));
                if route == Route::Extended {
                    conn.close(stmt).unwrap_or_else(|e| panic!("COM_STMT_CLOSE: {e}"));
                }
                out
            }
        }
    }

    fn pipeline(conn: &mut Conn, texts: &[String]) -> Vec<Outcome> {
        let mut outs = results(conn.query_iter(texts.join("; ")));
        outs.resize(texts.len(), Outcome::Skipped);
        outs
    }

    fn code(class: Class) -> &'static str {
        match class {
            Class::StatementPooling | Class::TokenRoute => "1235",
            Class::ReadOnlyTransaction => "1792",
            Class::Serialization => "1213",
            Class::UndefinedTable => "1146",
            Class::InTransaction => "1568",
        }
    }

    fn runs(env: &Dbs, t: &str, counter: u32) -> i64 {
        let my = &env.my;
        let sql = format!("SELECT n FROM {t}_n WHERE k = {counter}");
        my.superuser_client(my.primary_port).query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or(-1)
    }

    fn kill(env: &Dbs, on: Place, id: Option<&str>) {
        let my = &env.my;
        let mut su = my.superuser_client(if on == Place::Primary { my.primary_port } else { my.replica_port });
        let which = match id {
            Some(id) => format!("ID = {id}"),
            None => format!("USER = '{}'", my.user),
        };
        let sql = format!("SELECT ID FROM information_schema.PROCESSLIST WHERE {which}");
        let ids: Vec<u64> = su.query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert!(!ids.is_empty(), "{sql}: no connection to kill");
        for id in &ids {
            // One that ended meanwhile is already what this wants.
            let _ = su.query_drop(format!("KILL CONNECTION {id}"));
        }
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        let alive = format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({})", list.join(", "));
        eventually(Duration::from_secs(20), "the server connections are gone", || {
            su.query_first::<i64, _>(&alive).map(|n| n == Some(0)).unwrap_or(false)
        });
    }

    fn closed(conn: &mut Conn) -> bool {
        matches!(conn.query_drop("SELECT 1"), Err(e) if !matches!(e, mysql::Error::MySqlError(_)))
    }
}
