//! Issue #22, the MariaDB half: causal reads (`read_your_writes = "causal"`) with GTIDs against
//! the harness's MariaDB primary (server id 1) and GTID replica (server id 2). Where a read ran
//! is proven by `@@server_id`; the replica's SQL thread is stopped (`STOP SLAVE SQL_THREAD`) on
//! private environments only.

use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;

use crate::causal::metric;
use crate::router::Router;
use crate::routing_api::{enc, http};
use crate::support::{dbs, eventually, unique_name, Dbs, Kind, MyEnv};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;

/// A router for MySQL clients: `mywrite` on the primary, `myread` on the replica (probed every
/// 100 ms), split on, `routing` lines added to `[routing]`.
pub(crate) fn my_router(my: &MyEnv, routing: &str) -> Router {
    my_router_in(my, "transaction", routing)
}

/// [`my_router`] with both pools in pool mode `mode`.
pub(crate) fn my_router_in(my: &MyEnv, mode: &str, routing: &str) -> Router {
    start(my, mode, "", routing)
}

/// [`my_router`] with `write_keys` (lines such as `local_infile = true`) added to the write
/// pool `mywrite`.
pub(crate) fn my_router_with(my: &MyEnv, write_keys: &str, routing: &str) -> Router {
    start(my, "transaction", write_keys, routing)
}

fn start(my: &MyEnv, mode: &str, write_keys: &str, routing: &str) -> Router {
    let pool = |name: &str, port: u16, keys: &str| {
        format!(
            "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
             max_connections = 20\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n{keys}\n\
             [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
            u = my.user,
            p = my.password,
            d = my.database,
        )
    };
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\n{routing}\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n",
        pool("mywrite", my.primary_port, write_keys),
        pool("myread", my.replica_port, ""),
    ))
}

pub(crate) fn client(router: &Router, my: &MyEnv) -> Conn {
    Conn::new(my.opts(router.port(), &my.user, &my.password)).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

/// `(count of rows with id, @@server_id)` of one read through `c`.
fn read(c: &mut Conn, table: &str, id: Option<u64>) -> (u64, u64) {
    let filter = id.map(|id| format!(" WHERE id = {id}")).unwrap_or_default();
    let sql = format!("SELECT COUNT(*), @@server_id FROM {table}{filter}");
    c.query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: no row"))
}

fn causal_reads(router: &Router, outcome: &str) -> f64 {
    metric(router, &format!("sqp_causal_reads_total{{core=\"0\",pool=\"myread\",outcome=\"{outcome}\"}}"))
}

/// The dry-run's causal view (#22) of a read of `table` for a session whose position is
/// `token` (none: it wrote nothing).
fn causal_dry_run(router: &Router, table: &str, token: Option<&str>) -> serde_json::Value {
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let token = token.map(|t| format!("&causal_token={}", enc(t))).unwrap_or_default();
    let sql = enc(&format!("SELECT COUNT(*) FROM {table}"));
    let (status, v) = http(admin, "GET", &format!("/api/routing/test?protocol=mysql&sql={sql}{token}"), None);
    assert_eq!(status, 200, "{v}");
    v["causal"].clone()
}

#[test]
fn mariadb_causal_reads_see_the_sessions_writes_and_return_to_the_replica() {
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_my");
    my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("create");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let mut writer = client(&router, my);
    eventually(Duration::from_secs(15), "reads on the replica", || read(&mut writer, &t, None) == (0, REPLICA));

    env.pause_replication(Kind::Mariadb);
    writer.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("write");
    assert_eq!(read(&mut writer, &t, None), (1, PRIMARY), "the writer reads its row, on the primary");
    assert!(causal_reads(&router, "fell_back_to_primary") >= 1.0, "the fallback is counted");
    let mut other = client(&router, my);
    assert_eq!(read(&mut other, &t, None), (0, REPLICA), "a session that did not write reads the stopped replica");

    // The causal token hands the writer's GTID position to another connection.
    let token: String = writer.query_first("SHOW querypilot.causal_token").expect("show token").expect("a row");
    assert!(token.starts_with("gtid:0-1-"), "token {token}");
    let bad = other.query_drop("SET querypilot.causal_token = 'nonsense'").expect_err("an invalid token is refused");
    assert!(matches!(&bad, mysql::Error::MySqlError(e) if e.code == 1231), "{bad}");
    assert_eq!(read(&mut other, &t, None), (0, REPLICA), "a refused token changes nothing");
    other.query_drop(format!("SET querypilot.causal_token = '{token}'")).expect("hand the token over");
    assert_eq!(read(&mut other, &t, None), (1, PRIMARY), "the token's holder reads the write too");

    // The dry-run shows the session's position and why the stopped replica does not qualify.
    let view = causal_dry_run(&router, &t, Some(&token));
    let replica = &view["replicas"][0];
    assert_eq!(
        (view["position"].as_str(), view["fallback"].as_str()),
        (Some(token.as_str()), Some("primary")),
        "{view}"
    );
    assert_eq!((replica["why"].as_str(), replica["qualifies"].as_bool()), (Some("behind"), Some(false)), "{view}");
    assert!(replica["applied"].as_str().is_some_and(|a| a.starts_with("gtid:0-1-")), "{view}");
    let fresh = causal_dry_run(&router, &t, None);
    assert_eq!(fresh["replicas"][0]["why"].as_str(), Some("no_write"), "{fresh}");
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let (status, _) = http(admin, "GET", "/api/routing/test?protocol=mysql&sql=SELECT+1&causal_token=nonsense", None);
    assert_eq!(status, 400, "an invalid token is refused by the dry-run too");
    writer.query_drop("START TRANSACTION").expect("begin");
    writer.query_drop(format!("INSERT INTO {t} VALUES (2)")).expect("write in a transaction");
    writer.query_drop("COMMIT").expect("commit");
    assert_eq!(read(&mut writer, &t, None), (2, PRIMARY), "a writing transaction's commit counts too");

    env.resume_replication(Kind::Mariadb);
    eventually(Duration::from_secs(20), "the same session's reads back on the replica", || {
        read(&mut writer, &t, None) == (2, REPLICA)
    });
    eventually(Duration::from_secs(10), "the dry-run to show the replica caught up", || {
        causal_dry_run(&router, &t, Some(&token))["replicas"][0]["why"] == "caught_up"
    });
    let on_replica = causal_reads(&router, "served_by_replica") + causal_reads(&router, "waited");
    assert!(on_replica >= 1.0, "the read on the caught-up replica is counted");

    env.pause_replication(Kind::Mariadb);
    writer.query_drop(format!("INSERT INTO {t} VALUES (3)")).expect("write");
    assert_eq!(read(&mut writer, &t, None), (3, PRIMARY));
    writer.reset().expect("COM_RESET_CONNECTION through the router");
    assert_eq!(read(&mut writer, &t, None), (2, REPLICA), "COM_RESET_CONNECTION forgets the session's writes");

    // With replica_fallback = "error" the read fails instead of reaching the primary.
    let strict = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"0s\"\nreplica_fallback = \"error\"");
    let mut c = client(&strict, my);
    c.query_drop(format!("INSERT INTO {t} VALUES (4)")).expect("write");
    let sql = format!("SELECT COUNT(*), @@server_id FROM {t}");
    let refused = c.query_first::<(u64, u64), _>(&sql).expect_err("no replica applied the write");
    assert!(
        matches!(&refused, mysql::Error::MySqlError(e) if e.code == 1105 && e.message.contains("applied")),
        "{refused}"
    );
    assert_eq!(causal_reads(&strict, "error"), 1.0, "the refusal is counted");
    env.resume_replication(Kind::Mariadb);
}

/// An application pool of MySQL clients: 8 long-lived connections, each running "write one
/// row, then read it ten times" requests. Returns (reads on the replica, stale reads, reads).
fn app_pool_workload(router: &Router, my: &MyEnv, table: &str) -> (usize, usize, usize) {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..8u64)
            .map(|w| {
                s.spawn(move || {
                    let mut c = client(router, my);
                    let (mut on_replica, mut stale, mut reads) = (0, 0, 0);
                    for r in 0..15 {
                        let id = w * 1000 + r;
                        c.query_drop(format!("INSERT INTO {table} VALUES ({id})")).expect("write");
                        for _ in 0..10 {
                            let (count, server) = read(&mut c, table, Some(id));
                            reads += 1;
                            on_replica += usize::from(server == REPLICA);
                            stale += usize::from(count != 1);
                        }
                    }
                    (on_replica, stale, reads)
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().expect("worker")).fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    })
}

#[test]
fn mariadb_app_pool_reads_mostly_from_the_replica_in_causal_mode_and_never_stale() {
    let my = &dbs().my;
    let mut shares = Vec::new();
    for mode in ["causal", "session"] {
        let t = unique_name("causal_my_app");
        my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("create");
        my.wait_replica_caught_up(Duration::from_secs(20));
        let router = my_router(my, &format!("read_your_writes = \"{mode}\""));
        let (on_replica, stale, reads) = app_pool_workload(&router, my, &t);
        let share = on_replica as f64 / reads as f64;
        println!(
            "MariaDB read_your_writes = {mode}: {on_replica} of {reads} reads on the replica ({:.1}%), {stale} stale",
            share * 100.0
        );
        assert_eq!(stale, 0, "{mode}: a read missed the row its request wrote");
        let view = causal_dry_run(&router, &t, Some("gtid:0-1-1"));
        let ignored = mode == "session";
        assert_eq!(view["position"].is_null(), ignored, "{mode}: a token matters only in causal mode: {view}");
        shares.push(share);
    }
    assert!(shares[0] > 0.5, "causal: most reads on the replica, got {:.1}%", shares[0] * 100.0);
    assert!(shares[1] < 0.05, "session: reads collapse onto the primary, got {:.1}%", shares[1] * 100.0);
}

/// #34: COM_CHANGE_USER's connection attributes carry a causal token as the handshake's do
/// (raw packets: the `mysql` crate resends its login's attributes). With the replica's SQL
/// thread stopped, a session logged in without a token reads the replica; changed to the same
/// user with the writer's token as attribute (the change resets what the session knew), it
/// reads the write on the primary. A malformed token is refused with 1231, as at the handshake.
#[test]
fn mariadb_change_user_takes_the_token_of_its_connection_attributes() {
    use crate::mysql_commands::Raw;
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_cu");
    my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("create");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let primary: u64 = my.primary_client().query_first("SELECT @@server_id").expect("id").expect("row");
    env.pause_replication(Kind::Mariadb);
    let mut w = client(&router, my);
    w.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("write");
    let token: String = w.query_first("SHOW querypilot.causal_token").expect("show").expect("a token");
    let sql = format!("SELECT COUNT(*), @@server_id FROM {t}");
    let login = || Raw::login_to(router.port(), &my.user, &my.password, &my.database);
    let mut raw = login();
    let (row, _) = raw.query_row(&sql).expect("read");
    assert_ne!(row, ["1".to_owned(), primary.to_string()], "no token: the replica");
    let attrs = [("querypilot.causal_token", token.as_str())];
    raw.change_user(&my.user, &my.password, &my.database, &attrs).expect("change user with the token");
    let (row, _) = raw.query_row(&sql).expect("read");
    assert_eq!(row, ["1".to_owned(), primary.to_string()], "the token's write, on the primary");
    let bad = login().change_user(&my.user, &my.password, &my.database, &[("querypilot.causal_token", "gtid:x")]);
    assert_eq!(bad, Err(1231), "a malformed token");
    env.resume_replication(Kind::Mariadb);
}
