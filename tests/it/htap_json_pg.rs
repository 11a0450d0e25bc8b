//! Issue #35, the same rule shape against a PostgreSQL analytics pool: the original's JSON array
//! lands in `labels && ARRAY[..]::int[]` on the harness's hot standby. The translation also
//! requires `pg_is_in_recovery()`, a function MariaDB does not have and that is true only on the
//! standby, and PostgreSQL's `tags` has a row MariaDB's lacks (id 70, which overlaps every
//! non-empty array of the test): a client that gets it got PostgreSQL's answer.

use mysql::prelude::Queryable;

use crate::htap_duckdb::{ARRAYS, MARIADB_ROWS, NOT_ARRAY, ORIGINAL};
use crate::router::{pg_pool, Router};
use crate::scripts::{jdbc, python};
use crate::support::{dbs, unique_name};

/// `tags` on PostgreSQL: MariaDB's rows as `int[]`, plus row 70 that only PostgreSQL holds.
const PG_ROWS: &str =
    "(1, '{1,2}'), (2, '{3}'), (3, '{7,8}'), (4, '{}'), (5, NULL), (6, '{5,9,1}'), (70, '{1,2,3,4,5,7}')";

struct PgHtap {
    db: String,
    table: String,
    router: Router,
}

impl PgHtap {
    fn start() -> PgHtap {
        let (pg, my) = (&dbs().pg, &dbs().my);
        let table = unique_name("tags_pg");
        pg.primary_client()
            .batch_execute(&format!(
                "CREATE TABLE {table} (id int, labels int[]); INSERT INTO {table} VALUES {PG_ROWS}"
            ))
            .expect("postgres table");
        pg.wait_replica_caught_up(std::time::Duration::from_secs(30));
        let db = unique_name("htap_pgj");
        let mut c = my.primary_client();
        c.query_drop(format!("CREATE DATABASE {db}")).expect("database");
        c.query_drop(format!("CREATE TABLE {db}.tags (id INT PRIMARY KEY, labels JSON)")).expect("table");
        c.query_drop(format!("INSERT INTO {db}.tags VALUES {MARIADB_ROWS}")).expect("rows");
        let translated = format!("SELECT id FROM {table} WHERE labels && ARRAY[1,2]::int[] AND pg_is_in_recovery()");
        let router = Router::start(&format!(
            "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
             [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{pg_default}\n\
             [pools.oltp]\nprotocol = \"mysql\"\nusername = \"{mu}\"\npassword = \"{mp}\"\ndatabase = \"{db}\"\nmax_connections = 4\n\
             acquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {mport} }}]\n\n\
             [pools.analytics]\nprotocol = \"postgres\"\nmode = \"transaction\"\nusername = \"{pu}\"\npassword = \"{pp}\"\n\
             database = \"{pd}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
             backends = [{{ host = \"127.0.0.1\", port = {pport} }}]\n\n\
             [routing]\ndefault_pool = \"pg\"\n\n[routing.mysql]\ndefault_pool = \"oltp\"\n\n\
             [[translation.rules]]\noriginal_sql = \"{ORIGINAL}\"\ntranslated_sql = \"{translated}\"\n\
             target_pool = \"analytics\"\n",
            mu = my.user,
            mp = my.password,
            mport = my.primary_port,
            pu = pg.user,
            pp = pg.password,
            pd = pg.database,
            pport = pg.replica_port,
            // PostgreSQL clients' own statements run on the primary, where `tags` is not.
            pg_default = pg_pool("pg", pg.primary_port, "transaction", 4)
                .replace("[pools.pg]\n", "[pools.pg]\nprotocol = \"postgres\"\n"),
        ));
        PgHtap { db, table, router }
    }

    /// The line a client prints for `value`: the ids PostgreSQL itself answers for the array.
    fn expected(&self, how: &str, value: &str) -> String {
        let array = value.replace('[', "{").replace(']', "}");
        let rows = dbs()
            .pg
            .replica_client()
            .query(&format!("SELECT id FROM {} WHERE labels && $1::text::int[] ORDER BY id", self.table), &[&array])
            .expect("direct query");
        let ids: Vec<String> = rows.iter().map(|r| r.get::<_, i32>(0).to_string()).collect();
        format!("{how} {value} ids{}", ids.iter().map(|i| format!(" {i}")).collect::<String>())
    }
}

impl Drop for PgHtap {
    fn drop(&mut self) {
        let _ = dbs().my.primary_client().query_drop(format!("DROP DATABASE {}", self.db));
        let _ = dbs().pg.primary_client().batch_execute(&format!("DROP TABLE {}", self.table));
    }
}

/// PyMySQL (literals and parameters) and Connector/J (server-side `?`): PostgreSQL's rows for
/// every array, the empty one included (the translation's `::int[]` gives it a type), and the
/// non-array refused.
#[test]
fn the_seed_rule_shape_runs_on_a_postgres_pool_with_any_array() {
    let h = PgHtap::start();
    let my = &dbs().my;
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    let port = h.router.port().to_string();
    let args: Vec<&str> =
        ["127.0.0.1", &port, &my.user, &my.password, &h.db].into_iter().chain(values.iter().copied()).collect();
    let out = python("pymysql_htap_json.py", &args);
    let mut expected = Vec::new();
    for (value, _) in ARRAYS {
        expected.push(h.expected("literal", value));
        expected.push(h.expected("param", value));
    }
    expected.push(format!("literal {NOT_ARRAY} error 1210"));
    expected.push(format!("param {NOT_ARRAY} error 1210"));
    assert_eq!(out, expected);
    let from_pg = expected.iter().filter(|l| l.ends_with(" 70")).count();
    assert_eq!(from_pg, 6, "every non-empty array, both ways, answered by PostgreSQL: {expected:?}");

    let url = format!("jdbc:mariadb://127.0.0.1:{port}/{}?useSsl=false&useServerPrepStmts=true", h.db);
    let out = jdbc("JdbcHtapJson.java", &url, &my.user, &my.password, &values);
    let mut expected: Vec<String> = ARRAYS.iter().map(|(v, _)| h.expected("prepared", v)).collect();
    expected.push(format!("prepared {NOT_ARRAY} error 1210 HY000"));
    assert_eq!(out, expected);
    assert_eq!(expected.iter().filter(|l| l.ends_with(" 70")).count(), 3, "{expected:?}");
}

/// asyncpg (which describes before it binds, and sends the array as `text` in binary) with
/// `$1` in the JSON-array slot, against the PostgreSQL analytics pool: described as PostgreSQL
/// describes the translation (`id int4`) with the parameter as `text`, then PostgreSQL's rows
/// for every array (row 70 and `pg_is_in_recovery()` are the standby's alone), the non-array
/// refused with 22023 and the session going on.
#[test]
fn asyncpg_prepares_the_seed_rule_shape_on_a_postgres_pool() {
    let h = PgHtap::start();
    let pg = &dbs().pg;
    let dsn = format!("postgresql://{}:{}@127.0.0.1:{}/pg", pg.user, pg.password, h.router.listen[1].port());
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    let args: Vec<&str> = [dsn.as_str()].into_iter().chain(values.iter().copied()).collect();
    let out = python("asyncpg_htap_json.py", &args);
    let mut expected = vec!["described text | id:int4".to_owned()];
    for (value, _) in ARRAYS {
        expected.push(h.expected("fetch", value));
        expected.push(h.expected("prepared", value));
    }
    expected.push(format!("fetch {NOT_ARRAY} error 22023"));
    expected.push(format!("prepared {NOT_ARRAY} error 22023"));
    expected.push("after 1".to_owned());
    assert_eq!(out, expected);
    assert_eq!(expected.iter().filter(|l| l.ends_with(" 70")).count(), 6, "answered by PostgreSQL: {expected:?}");
}
