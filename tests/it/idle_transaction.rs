//! `idle_transaction_timeout` (#12, "no client waits forever" for the pool): a client that
//! holds a backend connection inside a transaction, mid-COPY or mid-LOAD DATA LOCAL and then
//! goes silent is disconnected after the timeout (PostgreSQL `FATAL 25P03`, MySQL 4031), its
//! transaction is rolled back with the closed backend connection, and the pool's only slot
//! serves the client that was queued behind it. Idle sessions outside a transaction are not
//! touched.

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::LocalInfileHandler;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_infile::client;
use crate::mysql_session::{my_config, my_pool};
use crate::pg_raw::{code, fields, msg, query, Raw};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

const TIMEOUT: &str = "idle_transaction_timeout = \"1s\"\n";

/// A router whose only pool `main` has one connection and a 1 s `idle_transaction_timeout`.
fn pg_router(mode: &str) -> Router {
    let pool = format!("{}{TIMEOUT}", pg_pool("main", dbs().pg.primary_port, mode, 1));
    let toml = pg_config(&[0], &pool, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n");
    Router::start(&with_metrics(&toml, None))
}

fn timeouts_counted(router: &Router) -> f64 {
    let reply = http(addrs(router).0, "GET", "/metrics", &[]);
    sum(&reply.body, "sqp_idle_transaction_timeouts_total", &["pool=\"main\""]).0
}

fn pg_table() -> String {
    let t = unique_name("idle_tx");
    dbs().pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int)")).expect("create");
    t
}

fn pg_ids(t: &str) -> Vec<i32> {
    let rows = dbs().pg.primary_client().query(&format!("SELECT id FROM {t} ORDER BY id"), &[]).expect("select");
    rows.iter().map(|r| r.get(0)).collect()
}

/// Another client, queued behind the silent one for the pool's only connection, inserts `id`.
fn queued_insert(router: &Router, t: &str, id: i32) -> thread::JoinHandle<Duration> {
    let (port, sql) = (router.port(), format!("INSERT INTO {t} VALUES ({id})"));
    thread::spawn(move || {
        let started = Instant::now();
        let mut c = Raw::login(port, "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        c.send(&query(&sql));
        let answer = c.until_ready();
        assert!(answer.iter().all(|(tag, _)| *tag != b'E'), "queued insert failed: {answer:?}");
        started.elapsed()
    })
}

/// Reads until the router's FATAL and the close; returns the error's fields.
fn fatal_then_close(c: &mut Raw) -> Vec<(u8, String)> {
    let (tag, body) = c.recv().expect("an error before the close");
    assert_eq!(tag, b'E', "{:?}", fields(&body));
    assert!(c.recv().is_none(), "the connection is closed after the FATAL");
    fields(&body)
}

#[test]
fn pg_a_client_silent_inside_a_transaction_is_cut_off_and_rolled_back() {
    for mode in ["transaction", "session"] {
        let t = pg_table();
        let router = pg_router(mode);
        let mut silent = Raw::login(router.port(), "main", "app").expect("login");
        silent.send(&query(&format!("BEGIN; INSERT INTO {t} VALUES (1)")));
        let answer = silent.until_ready();
        assert_eq!(answer.last().map(|(_, b)| b.clone()), Some(b"T".to_vec()), "{mode}: in a transaction");
        let queued = queued_insert(&router, &t, 2);
        let f = fatal_then_close(&mut silent);
        assert!(f.contains(&(b'S', "FATAL".into())), "{mode}: {f:?}");
        assert!(f.contains(&(b'C', "25P03".into())), "{mode}: {f:?}");
        let m = f.iter().find(|(k, _)| *k == b'M').map(|(_, v)| v.clone()).unwrap_or_default();
        assert!(m.contains("idle_transaction_timeout (1000 ms)"), "{mode}: {m}");
        let waited = queued.join().expect("queued client");
        assert!(waited < Duration::from_secs(15), "{mode}: the queued client got the connection ({waited:?})");
        assert_eq!(pg_ids(&t), vec![2], "{mode}: the silent client's insert was rolled back");
        assert_eq!(timeouts_counted(&router), 1.0, "{mode}");
    }
}

#[test]
fn pg_a_client_silent_mid_copy_is_cut_off() {
    let t = pg_table();
    let router = pg_router("transaction");
    let mut silent = Raw::login(router.port(), "main", "app").expect("login");
    silent.send(&query(&format!("COPY {t} FROM STDIN")));
    let (tag, _) = silent.recv().expect("CopyInResponse");
    assert_eq!(tag, b'G');
    silent.send(&msg(b'd', b"7\n8\n"));
    let queued = queued_insert(&router, &t, 9);
    let f = fatal_then_close(&mut silent);
    assert!(f.contains(&(b'C', "25P03".into())), "{f:?}");
    queued.join().expect("queued client");
    assert_eq!(pg_ids(&t), vec![9], "the half-sent COPY left nothing behind");
    assert_eq!(timeouts_counted(&router), 1.0);
}

#[test]
fn pg_idle_sessions_outside_a_transaction_are_left_alone() {
    let router = pg_router("session");
    let mut c = Raw::login(router.port(), "main", "app").expect("login");
    c.send(&query("SELECT 1"));
    c.until_ready();
    thread::sleep(Duration::from_millis(2_500));
    c.send(&query("SELECT 2"));
    let answer = c.until_ready();
    let errors: Vec<String> = answer.iter().filter(|(tag, _)| *tag == b'E').map(|(_, body)| code(body)).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(answer.iter().any(|(tag, _)| *tag == b'D'), "{answer:?}");
    assert_eq!(timeouts_counted(&router), 0.0);
}

fn my_router(mode: &str) -> Router {
    let pool = format!("{}{TIMEOUT}local_infile = true\n", my_pool("main", mode, 1));
    Router::start(&with_metrics(&my_config(&[0], &pool, "main"), None))
}

fn my_table() -> String {
    let t = unique_name("my_idle_tx");
    dbs().my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT)")).expect("create");
    t
}

fn my_ids(t: &str) -> Vec<i32> {
    dbs().my.primary_client().query(format!("SELECT id FROM {t} ORDER BY id")).expect("select")
}

fn my_queued_insert(router: &Router, t: &str, id: i32) -> thread::JoinHandle<()> {
    let my = &dbs().my;
    let opts = my.opts(router.port(), &my.user, &my.password);
    let sql = format!("INSERT INTO {t} VALUES ({id})");
    thread::spawn(move || {
        let mut c = mysql::Conn::new(opts).unwrap_or_else(|e| panic!("connect: {e}"));
        c.query_drop(sql).unwrap_or_else(|e| panic!("queued insert: {e}"));
    })
}

#[test]
fn mariadb_a_client_silent_inside_a_transaction_is_cut_off_and_rolled_back() {
    for mode in ["transaction", "session"] {
        let t = my_table();
        let router = my_router(mode);
        let mut silent = client(&router, 4096);
        silent.query_drop("START TRANSACTION").expect("begin");
        silent.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("insert");
        my_queued_insert(&router, &t, 2).join().expect("the queued client got the connection");
        // The error waits on the half-closed socket for 2 s (then the close): a client back
        // within that sees 4031, a later one a lost connection.
        let err = silent.query_drop("COMMIT").expect_err("the silent client was disconnected");
        let text = err.to_string();
        assert!(
            text.contains("4031")
                || text.contains("inactivity")
                || matches!(err, mysql::Error::IoError(_) | mysql::Error::DriverError(_)),
            "{mode}: {text}"
        );
        assert_eq!(my_ids(&t), vec![2], "{mode}: the silent client's insert was rolled back");
        assert_eq!(timeouts_counted(&router), 1.0, "{mode}");
    }
}

#[test]
fn mariadb_a_client_silent_mid_local_infile_is_cut_off() {
    let t = my_table();
    let router = my_router("transaction");
    let mut silent = client(&router, 4096);
    silent.set_local_infile_handler(Some(LocalInfileHandler::new(|_, w| {
        // Several packets of the file, then three seconds of silence.
        let rows: String = (1..2_000).map(|i| format!("{i}\n")).collect();
        w.write_all(rows.as_bytes())?;
        w.flush()?;
        thread::sleep(Duration::from_secs(3));
        Ok(())
    })));
    let queued = my_queued_insert(&router, &t, 9_999);
    let err = silent.query_drop(format!("LOAD DATA LOCAL INFILE 'slow.csv' INTO TABLE {t}"));
    assert!(err.is_err(), "the silent transfer was cut off");
    queued.join().expect("the queued client got the connection");
    assert_eq!(my_ids(&t), vec![9_999], "the half-sent file left nothing behind");
    assert_eq!(timeouts_counted(&router), 1.0);
}

/// A PostgreSQL client on a MariaDB pool (the bridge) is held to the same limit.
#[test]
fn bridged_pg_client_silent_inside_a_transaction_is_cut_off() {
    let my = &dbs().my;
    let toml = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.main]\nprotocol = \"mysql\"\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 1\nacquire_timeout = \"20s\"\n{TIMEOUT}backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\ndefault_pool = \"main\"\n",
        u = my.user,
        p = my.password,
        d = my.database,
        port = my.primary_port,
    );
    let router = Router::start(&with_metrics(&toml, None));
    let t = my_table();
    let mut silent = router.pg(&my.database);
    silent.batch_execute(&format!("BEGIN; INSERT INTO {t} VALUES (1)")).expect("begin and insert");
    let queued = {
        let (port, sql) = (router.port(), format!("INSERT INTO {t} VALUES (2)"));
        let (user, password, db) = (my.user.clone(), my.password.clone(), my.database.clone());
        thread::spawn(move || {
            let mut c = postgres::Config::new()
                .host("127.0.0.1")
                .port(port)
                .user(&user)
                .password(password)
                .dbname(&db)
                .connect(postgres::NoTls)
                .expect("queued client connects");
            c.batch_execute(&sql).expect("queued insert");
        })
    };
    queued.join().expect("the queued client got the connection");
    let err = silent.batch_execute("COMMIT").expect_err("the silent client was disconnected");
    let code = err.as_db_error().map(|e| e.code().code().to_owned());
    assert!(code.as_deref() == Some("25P03") || err.is_closed(), "{err}");
    assert_eq!(my_ids(&t), vec![2], "the silent client's insert was rolled back");
    assert_eq!(timeouts_counted(&router), 1.0);
}
