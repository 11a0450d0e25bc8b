//! The PostgreSQL runner: byte-level clients (`pg_raw`) so each route is exactly the protocol
//! it names — simple Query, unnamed Parse/Bind/Execute/Sync, a named statement, a pipeline of
//! several Parse/Bind/Execute before one Sync.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::{counters, Class, Outcome, PinKind, Place, Route, Runner, Sql, Wire};
use crate::pg_raw::{bind, code, columns, execute, parse, query, sync, tags, Msg, Raw};
use crate::support::{eventually, Dbs};

/// The table's PostgreSQL translation.
pub struct Pg;

/// Names of named statements, unique in the process.
static NAMED: AtomicU32 = AtomicU32::new(0);

/// `[create, check (one row, first value 1), remove]` of a pin's state, named after `t`.
fn pin_sql(t: &str, kind: PinKind, base: u32) -> [String; 3] {
    let key = i64::from(std::process::id()) * 100_000 + i64::from(base);
    match kind {
        PinKind::TempTable => [
            format!("CREATE TEMP TABLE {t}_tmp (x int)"),
            format!("SELECT count(*) + 1 FROM {t}_tmp"),
            format!("DROP TABLE {t}_tmp"),
        ],
        PinKind::AdvisoryLock => [
            format!("SELECT pg_advisory_lock({key})"),
            format!(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() \
                 AND (classid::bigint << 32) | objid::bigint = {key}"
            ),
            format!("SELECT pg_advisory_unlock({key})"),
        ],
        PinKind::Cursor => [
            format!("DECLARE {t}_cur SCROLL CURSOR WITH HOLD FOR SELECT 1"),
            format!("FETCH ABSOLUTE 1 FROM {t}_cur"),
            format!("CLOSE {t}_cur"),
        ],
        PinKind::Listen => [
            format!("LISTEN {t}_ch"),
            format!("SELECT count(*) FROM pg_listening_channels() c WHERE c = '{t}_ch'"),
            format!("UNLISTEN {t}_ch"),
        ],
        PinKind::UserVariable => panic!("the table maps no PostgreSQL statement to {kind:?}"),
    }
}

/// The messages of one statement's answer as an outcome: the last result's rows, or its error.
fn outcome(msgs: &[Msg]) -> Outcome {
    let mut rows = Vec::new();
    let mut total = 0;
    for (tag, body) in msgs {
        match tag {
            b'T' => rows.clear(),
            b'D' => {
                rows.push(text_row(body));
                total += 1;
            }
            b'E' => return Outcome::Failed { code: code(body), rows_before: total },
            _ => {}
        }
    }
    Outcome::Done(rows)
}

/// Every message up to and including ReadyForQuery, or up to the router closing the connection
/// (after a FATAL).
fn answer(conn: &mut Raw) -> Vec<Msg> {
    let mut out = Vec::new();
    while let Some(m) = conn.recv() {
        let done = m.0 == b'Z';
        out.push(m);
        if done {
            break;
        }
    }
    out
}

fn text_row(body: &[u8]) -> Vec<String> {
    columns(body).into_iter().map(|v| v.map_or("NULL".into(), |v| String::from_utf8_lossy(&v).into_owned())).collect()
}

impl Runner for Pg {
    type Client = Raw;
    const WIRE: Wire = Wire::Pg;
    /// `admin_shutdown`: the server's own FATAL after `pg_terminate_backend`, which the router
    /// relays (#36).
    const ENDED: &'static str = "57P01";

    fn schema(env: &Dbs, t: &str) {
        let mut ddl = format!(
            "CREATE TABLE {t} (id int PRIMARY KEY);\nCREATE TABLE {t}_log (r text);\n\
             CREATE FUNCTION {t}_boom(s regclass) RETURNS text LANGUAGE plpgsql VOLATILE AS $$ BEGIN \
             IF nextval(s) = 1 THEN RAISE EXCEPTION 'scenario: injected serialization failure' USING ERRCODE = '40001'; \
             END IF; RETURN 'done'; END $$;\n"
        );
        for n in counters() {
            ddl.push_str(&format!("CREATE SEQUENCE {t}_c{n};\n"));
        }
        env.pg.primary_client().batch_execute(&ddl).unwrap_or_else(|e| panic!("scenario schema: {e}"));
        env.pg.wait_replica_caught_up(Duration::from_secs(30));
    }

    fn open(env: &Dbs, port: u16) -> Raw {
        Raw::login(port, &env.pg.database, &env.pg.password)
            .unwrap_or_else(|e| panic!("login through the router: {e:?}"))
    }

    fn render(t: &str, sql: &Sql, base: u32) -> String {
        match sql {
            Sql::Count(id) => format!(
                "SELECT count(*), CASE WHEN pg_is_in_recovery() THEN 'replica' ELSE 'primary' END FROM {t} WHERE id = {}",
                base + id
            ),
            Sql::Begin { read_only: true } => "BEGIN READ ONLY".into(),
            Sql::Begin { read_only: false } => "BEGIN".into(),
            Sql::Backend => {
                "SELECT pg_backend_pid(), CASE WHEN pg_is_in_recovery() THEN 'replica' ELSE 'primary' END".into()
            }
            Sql::PinOn(kind) => pin_sql(t, *kind, base)[0].clone(),
            Sql::PinHeld(kind) => pin_sql(t, *kind, base)[1].clone(),
            Sql::PinOff(kind) => pin_sql(t, *kind, base)[2].clone(),
            Sql::Victim { counter, rows_first: false } => {
                format!("INSERT INTO {t}_log VALUES ({t}_boom('{t}_c{}'))", base + counter)
            }
            Sql::Victim { counter, rows_first: true } => format!(
                "SELECT CASE WHEN g < 3000 THEN repeat('x', 1000) ELSE {t}_boom('{t}_c{}') END FROM generate_series(1, 3000) g",
                base + counter
            ),
            other => panic!("{other:?} is rendered alike for both wires by the executor"),
        }
    }

    fn run(conn: &mut Raw, route: Route, text: &str) -> Outcome {
        let unnamed = |sql: &str| [parse("", sql), bind("", &[], 0), execute(), sync()].concat();
        match route {
            Route::Text => conn.send(&query(text)),
            Route::Multi => conn.send(&query(&format!("SELECT 1; {text}"))),
            Route::Extended => conn.send(&unnamed(text)),
            Route::Prepared => {
                let name = format!("qp_s{}", NAMED.fetch_add(1, Ordering::Relaxed));
                conn.send(&[parse(&name, text), sync()].concat());
                if let failed @ Outcome::Failed { .. } = outcome(&conn.until_ready()) {
                    return failed;
                }
                conn.send(&[bind(&name, &[], 0), execute(), sync()].concat());
            }
        }
        let msgs = answer(conn);
        // One statement, one answer: a retry the client can see (a second RowDescription after
        // a failed attempt's) is not a retry before the first byte.
        let descriptions = msgs.iter().filter(|(tag, _)| *tag == b'T').count();
        let statements = if route == Route::Multi { 2 } else { 1 };
        assert!(descriptions <= statements, "{route:?} {text}: {descriptions} RowDescriptions: {}", tags(&msgs));
        outcome(&msgs)
    }

    fn pipeline(conn: &mut Raw, texts: &[String]) -> Vec<Outcome> {
        let mut batch: Vec<u8> =
            texts.iter().flat_map(|t| [parse("", t), bind("", &[], 0), execute()].concat()).collect();
        batch.extend(sync());
        conn.send(&batch);
        let mut outs = Vec::new();
        let mut rows = Vec::new();
        for (tag, body) in conn.until_ready() {
            match tag {
                b'D' => rows.push(text_row(&body)),
                b'C' | b'I' => outs.push(Outcome::Done(std::mem::take(&mut rows))),
                b'E' => {
                    outs.push(Outcome::Failed { code: code(&body), rows_before: rows.len() });
                    break;
                }
                _ => {}
            }
        }
        outs.resize(texts.len(), Outcome::Skipped);
        outs
    }

    fn code(class: Class) -> &'static str {
        match class {
            Class::StatementPooling | Class::TokenRoute => "0A000",
            Class::ReadOnlyTransaction => "25006",
            Class::Serialization => "40001",
            Class::UndefinedTable => "42P01",
            Class::InTransaction => "25001",
        }
    }

    fn runs(env: &Dbs, t: &str, counter: u32) -> i64 {
        let sql = format!("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {t}_c{counter}");
        env.pg.primary_client().query_one(&sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
    }

    fn kill(env: &Dbs, on: Place, id: Option<&str>) {
        let pg = &env.pg;
        let port = if on == Place::Primary { pg.primary_port } else { pg.replica_port };
        let mut su = pg.superuser_client(port);
        let which = match id {
            Some(id) => format!("pid = {id}"),
            None => format!("usename = '{}' AND pid <> pg_backend_pid()", pg.user),
        };
        let sql = format!("SELECT coalesce(array_agg(pid), '{{}}') FROM pg_stat_activity WHERE {which}");
        let pids: Vec<i32> = su.query_one(&sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}")).get(0);
        assert!(!pids.is_empty(), "{sql}: no connection to kill");
        let kill = "SELECT pg_terminate_backend(p) FROM unnest($1::int[]) p";
        su.execute(kill, &[&pids]).unwrap_or_else(|e| panic!("{kill}: {e}"));
        let alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)";
        eventually(Duration::from_secs(20), "the server connections are gone", || {
            su.query_one(alive, &[&pids]).map(|r| r.get::<_, i64>(0) == 0).unwrap_or(false)
        });
    }

    fn closed(conn: &mut Raw) -> bool {
        conn.send_lossy(&query("SELECT 1"));
        answer(conn).last().is_none_or(|m| m.0 != b'Z')
    }
}
