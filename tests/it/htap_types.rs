//! Issue #35, type round trips to MySQL clients from the two PostgreSQL-wire engines the HTAP
//! tests use: PostgreSQL itself (a cross-protocol pool) and DuckDB behind buenavista (a generic
//! engine reached by translation rules). PyMySQL (text rows, with the column metadata it decodes
//! by) and Connector/J (getObject's Java class, text and binary rows) read booleans, integers of
//! every width at their extremes, decimals, floats, dates, times, timestamps with and without
//! time zone, intervals, multibyte text, bytea in both of PostgreSQL's output formats, arrays,
//! JSON and NULLs; values MySQL cannot hold (NaN, Infinity, infinite dates) and values that are
//! not of their column's type fail their statement with a server error, and the session goes on.

use crate::router::Router;
use crate::scripts::{jdbc, python};
use crate::support::{dbs, Buenavista};

/// Every type PostgreSQL sends that the bridge maps, one row (`on_pg` proves where it ran).
const PG_SELECT: &str = "SELECT true AS bo_t, false AS bo_f, 32767::int2 AS i2max, (-32768)::int2 AS i2min, \
     2147483647 AS i4max, (-2147483648)::int4 AS i4min, 9223372036854775807 AS i8max, \
     (-9223372036854775808)::int8 AS i8min, 12345.678::numeric(10,3) AS n103, (-0.001)::numeric AS nneg, \
     (-123456789012345678901234567890.123456789)::numeric AS nbig, 1.5::float4 AS f4, (-2.5e-300)::float8 AS f8, \
     date '2024-02-29' AS d, time '23:59:58.123456' AS tm, timestamp '2024-01-02 03:04:05.123456' AS ts, \
     timestamp(0) '2024-01-02 03:04:05' AS ts0, timestamptz '2024-01-02 03:04:05.678+05' AS tz, \
     interval '1 year 2 mons 3 days 04:05:06.7' AS iv, 'héllo ✓ 日本 🐘'::text AS tx, 'abc'::varchar(10) AS vc, \
     decode('5c00ff4127', 'hex') AS by, ARRAY[1,2,3] AS ai, ARRAY['a','b c',NULL] AS at, \
     '{{1,2},{3,4}}'::int[] AS a2, '{\"k\": [1, null]}'::jsonb AS js, NULL::int AS nul, NULL::text AS nult, \
     version() LIKE 'PostgreSQL%' AS on_pg";

/// Bytea again under `bytea_output = escape` (backslash, NUL, 0xFF, letters, quote).
const PG_BYTEA_ESCAPE: &str =
    "SELECT decode('5c00ff4127', 'hex') AS by_escape, current_setting('bytea_output') AS bytea_output";

/// Values MySQL's types cannot hold: each fails with 1690 (22003).
const PG_BEYOND_MYSQL: [&str; 5] = [
    "SELECT 'NaN'::float8 AS v",
    "SELECT '-Infinity'::float4 AS v",
    "SELECT 'NaN'::numeric AS v",
    "SELECT 'infinity'::date AS v",
    "SELECT '-infinity'::timestamptz AS v",
];

fn pg_statements() -> Vec<&'static str> {
    let mut all = vec!["SET TIME ZONE 'UTC'", PG_SELECT, "SET bytea_output = 'escape'", PG_BYTEA_ESCAPE];
    all.extend(PG_BEYOND_MYSQL);
    all.push("SELECT 1 AS after");
    all
}

/// PostgreSQL's types through a cross-protocol pool: what PyMySQL decodes (with the column
/// type, length, decimals, character set and binary flag it decodes by) and Connector/J's
/// getObject classes, the same in text and binary rows; bytea in both output formats; NaN,
/// Infinity and infinite dates refused with 1690 and the session going on.
#[test]
fn postgres_types_reach_mysql_clients_intact() {
    let router = crate::bridge_mysql_pg::bridge_router("session");
    let pg = &dbs().pg;
    let port = router.port().to_string();
    let mut args = vec!["127.0.0.1", &port, &pg.user, &pg.password, &pg.database];
    args.extend(pg_statements());
    assert_eq!(python("pymysql_types.py", &args), PG_PYMYSQL, "PyMySQL");
    for server_prepare in [false, true] {
        let url =
            format!("jdbc:mariadb://127.0.0.1:{port}/{}?useSsl=false&useServerPrepStmts={server_prepare}", pg.database);
        let out = jdbc("JdbcTypes.java", &url, &pg.user, &pg.password, &pg_statements());
        assert_eq!(out, PG_JDBC, "Connector/J, useServerPrepStmts={server_prepare}");
    }
}

/// DuckDB's types, as buenavista labels and prints them.
const DUCK_SEED: &str =
    "CREATE TABLE types AS SELECT 1 AS id, true AS bo, (-128)::TINYINT AS i1, 255::UTINYINT AS u1, \
     (-32768)::SMALLINT AS i2, 2147483647::INTEGER AS i4, (-9223372036854775808)::BIGINT AS i8min, \
     9223372036854775807::BIGINT AS i8max, 170141183460469231731687303715884105727::HUGEINT AS hi, \
     12345.678::DECIMAL(10,3) AS d103, (-0.0000001)::DECIMAL(18,7) AS d7, 1.5::REAL AS r, (-1.5e300)::DOUBLE AS f8, \
     DATE '2024-02-29' AS d, TIME '23:59:58.123456' AS tm, TIMESTAMP '2024-01-02 03:04:05.123456' AS ts, \
     TIMESTAMPTZ '2024-01-02 03:04:05.678+05' AS tz, 'héllo ✓ 日本 🐘' AS tx, '\\x5C\\x00\\xFFA'::BLOB AS bl, \
     ['a', 'b'] AS sl, {'k': 1} AS st; \
     INSERT INTO types (id) VALUES (2); \
     CREATE TABLE odd_uint AS SELECT 4294967295::UINTEGER AS v; \
     CREATE TABLE odd_nan AS SELECT 'nan'::DOUBLE AS v";

const DUCK_SELECT: &str = "SELECT * FROM types WHERE id = 1";
/// The mariadb CLI's statement: the raw text of the values it prints.
const DUCK_CLI: &str = "SELECT d7, hi, f8 FROM types WHERE id = 1";
const DUCK_ODD: [&str; 2] = ["SELECT v FROM odd_uint", "SELECT v FROM odd_nan"];

fn duck_router(bv: &Buenavista) -> Router {
    let my = &dbs().my;
    let rule = |sql: &str| {
        format!("[[translation.rules]]\noriginal_sql = \"{sql}\"\ntranslated_sql = \"{sql}\"\ntarget_pool = \"analytics\"\n\n")
    };
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.oltp]\nprotocol = \"mysql\"\nusername = \"{mu}\"\npassword = \"{mp}\"\ndatabase = \"{md}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {mport} }}]\n\n\
         [pools.analytics]\nprotocol = \"postgres\"\nengine = \"generic\"\nusername = \"duck\"\npassword = \"duck\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {duck} }}]\n\n\
         [routing.mysql]\ndefault_pool = \"oltp\"\n\n{rules}",
        mu = my.user,
        mp = my.password,
        md = my.database,
        mport = my.primary_port,
        duck = bv.port,
        rules = [DUCK_SELECT, DUCK_CLI, DUCK_ODD[0], DUCK_ODD[1]].map(rule).concat(),
    ))
}

/// DuckDB's types as buenavista sends them (every integer but BIGINT labelled `int4`, REAL as
/// `float8`, HUGEINT as `numeric`, decimals in Python's exponent form, lists and structs as text
/// and JSON): what PyMySQL and Connector/J (text and binary rows) read, each statement seen by
/// DuckDB; a UINTEGER above `int4` (buenavista's label) fails with 1105 and NaN with 1690, not as
/// a wrapped integer or NaN, and the session goes on on MariaDB. The mariadb CLI shows the
/// decimal DuckDB sent as `-1E-7` in MySQL's plain notation.
#[test]
fn duckdb_types_reach_mysql_clients_intact() {
    let bv = Buenavista::start(DUCK_SEED);
    let router = duck_router(&bv);
    let my = &dbs().my;
    let port = router.port().to_string();
    let nulls = DUCK_SELECT.replace("= 1", "= 2");
    let statements = [DUCK_SELECT, &nulls, DUCK_ODD[0], DUCK_ODD[1], "SELECT @@server_id AS after"];
    let mut args = vec!["127.0.0.1", &port, &my.user, &my.password, &my.database];
    args.extend(statements);
    assert_eq!(python("pymysql_types.py", &args), DUCK_PYMYSQL, "PyMySQL");
    for server_prepare in [false, true] {
        let url =
            format!("jdbc:mariadb://127.0.0.1:{port}/{}?useSsl=false&useServerPrepStmts={server_prepare}", my.database);
        let out = jdbc("JdbcTypes.java", &url, &my.user, &my.password, &statements);
        assert_eq!(out, DUCK_JDBC, "Connector/J, useServerPrepStmts={server_prepare}");
    }
    let cli = crate::scripts::run(
        std::process::Command::new("mariadb")
            .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--skip-column-names"])
            .arg(format!("-u{}", my.user))
            .arg(format!("-p{}", my.password))
            .arg(format!("-P{port}"))
            .arg(&my.database)
            .args(["-e", DUCK_CLI]),
        "mariadb CLI",
    );
    assert_eq!(cli, ["-0.0000001\t170141183460469231731687303715884105727\t-1.5e+300"]);
    assert_eq!(bv.ran(DUCK_CLI), 1, "{}", bv.log_text());
    // PyMySQL, Connector/J twice (the server-side prepare is described there once more) and the CLI.
    assert!(bv.ran("FROM types WHERE id = 1") >= 4, "{}", bv.log_text());
    assert_eq!(bv.ran("FROM odd_uint"), bv.ran("FROM odd_nan"), "{}", bv.log_text());
    assert!(bv.ran("FROM odd_uint") >= 3, "{}", bv.log_text());
}

const PG_PYMYSQL: &[&str] = &[
    "ok",
    "bo_t type=1 len=1 dec=0 charset=63 binary=1 value=1",
    "bo_f type=1 len=1 dec=0 charset=63 binary=1 value=0",
    "i2max type=2 len=6 dec=0 charset=63 binary=1 value=32767",
    "i2min type=2 len=6 dec=0 charset=63 binary=1 value=-32768",
    "i4max type=3 len=11 dec=0 charset=63 binary=1 value=2147483647",
    "i4min type=3 len=11 dec=0 charset=63 binary=1 value=-2147483648",
    "i8max type=8 len=20 dec=0 charset=63 binary=1 value=9223372036854775807",
    "i8min type=8 len=20 dec=0 charset=63 binary=1 value=-9223372036854775808",
    "n103 type=246 len=12 dec=3 charset=63 binary=1 value=Decimal('12345.678')",
    "nneg type=246 len=67 dec=31 charset=63 binary=1 value=Decimal('-0.001')",
    "nbig type=246 len=67 dec=31 charset=63 binary=1 value=Decimal('-123456789012345678901234567890.123456789')",
    "f4 type=4 len=12 dec=31 charset=63 binary=1 value=1.5",
    "f8 type=5 len=22 dec=31 charset=63 binary=1 value=-2.5e-300",
    "d type=10 len=10 dec=0 charset=63 binary=1 value=datetime.date(2024, 2, 29)",
    "tm type=11 len=17 dec=6 charset=63 binary=1 value=datetime.timedelta(seconds=86398, microseconds=123456)",
    "ts type=12 len=26 dec=6 charset=63 binary=1 value=datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)",
    "ts0 type=12 len=19 dec=0 charset=63 binary=1 value=datetime.datetime(2024, 1, 2, 3, 4, 5)",
    "tz type=12 len=26 dec=6 charset=63 binary=1 value=datetime.datetime(2024, 1, 1, 22, 4, 5, 678000)",
    "iv type=253 len=262140 dec=0 charset=45 binary=0 value='1 year 2 mons 3 days 04:05:06.7'",
    "tx type=253 len=262140 dec=0 charset=45 binary=0 value='héllo ✓ 日本 🐘'",
    "vc type=253 len=40 dec=0 charset=45 binary=0 value='abc'",
    r#"by type=252 len=4294967295 dec=0 charset=63 binary=1 value=b"\\\x00\xffA'""#,
    "ai type=253 len=262140 dec=0 charset=45 binary=0 value='{1,2,3}'",
    r#"at type=253 len=262140 dec=0 charset=45 binary=0 value='{a,"b c",NULL}'"#,
    "a2 type=253 len=262140 dec=0 charset=45 binary=0 value='{{1,2},{3,4}}'",
    r#"js type=245 len=4294967295 dec=0 charset=45 binary=0 value='{"k": [1, null]}'"#,
    "nul type=3 len=11 dec=0 charset=63 binary=1 value=None",
    "nult type=253 len=262140 dec=0 charset=45 binary=0 value=None",
    "on_pg type=1 len=1 dec=0 charset=63 binary=1 value=1",
    "ok",
    r#"by_escape type=252 len=4294967295 dec=0 charset=63 binary=1 value=b"\\\x00\xffA'""#,
    "bytea_output type=253 len=262140 dec=0 charset=45 binary=0 value='escape'",
    "error 1690",
    "error 1690",
    "error 1690",
    "error 1690",
    "error 1690",
    "after type=3 len=11 dec=0 charset=63 binary=1 value=1",
];
const PG_JDBC: &[&str] = &[
    "ok",
    "bo_t TINYINT Boolean true",
    "bo_f TINYINT Boolean false",
    "i2max SMALLINT Integer 32767",
    "i2min SMALLINT Integer -32768",
    "i4max INTEGER Integer 2147483647",
    "i4min INTEGER Integer -2147483648",
    "i8max BIGINT Long 9223372036854775807",
    "i8min BIGINT Long -9223372036854775808",
    "n103 DECIMAL BigDecimal 12345.678",
    "nneg DECIMAL BigDecimal -0.001",
    "nbig DECIMAL BigDecimal -123456789012345678901234567890.123456789",
    "f4 FLOAT Float 1.5",
    "f8 DOUBLE Double -2.5E-300",
    "d DATE Date 2024-02-29",
    "tm TIME Time 23:59:58",
    "ts DATETIME Timestamp 2024-01-02 03:04:05.123456",
    "ts0 DATETIME Timestamp 2024-01-02 03:04:05.0",
    "tz DATETIME Timestamp 2024-01-01 22:04:05.678",
    "iv TEXT String 1 year 2 mons 3 days 04:05:06.7",
    "tx TEXT String héllo ✓ 日本 🐘",
    "vc VARCHAR String abc",
    "by LONGBLOB byte[] 0x5c00ff4127",
    "ai TEXT String {1,2,3}",
    r#"at TEXT String {a,"b c",NULL}"#,
    "a2 TEXT String {{1,2},{3,4}}",
    r#"js JSON String {"k": [1, null]}"#,
    "nul INTEGER null null",
    "nult TEXT null null",
    "on_pg TINYINT Boolean true",
    "ok",
    "by_escape LONGBLOB byte[] 0x5c00ff4127",
    "bytea_output TEXT String escape",
    "error 1690 22003",
    "error 1690 22003",
    "error 1690 22003",
    "error 1690 22003",
    "error 1690 22003",
    "after INTEGER Integer 1",
];
const DUCK_PYMYSQL: &[&str] = &[
    "id type=3 len=11 dec=0 charset=63 binary=1 value=1",
    "bo type=1 len=1 dec=0 charset=63 binary=1 value=1",
    "i1 type=3 len=11 dec=0 charset=63 binary=1 value=-128",
    "u1 type=3 len=11 dec=0 charset=63 binary=1 value=255",
    "i2 type=3 len=11 dec=0 charset=63 binary=1 value=-32768",
    "i4 type=3 len=11 dec=0 charset=63 binary=1 value=2147483647",
    "i8min type=8 len=20 dec=0 charset=63 binary=1 value=-9223372036854775808",
    "i8max type=8 len=20 dec=0 charset=63 binary=1 value=9223372036854775807",
    "hi type=246 len=67 dec=31 charset=63 binary=1 value=Decimal('170141183460469231731687303715884105727')",
    "d103 type=246 len=67 dec=31 charset=63 binary=1 value=Decimal('12345.678')",
    "d7 type=246 len=67 dec=31 charset=63 binary=1 value=Decimal('-1E-7')",
    "r type=5 len=22 dec=31 charset=63 binary=1 value=1.5",
    "f8 type=5 len=22 dec=31 charset=63 binary=1 value=-1.5e+300",
    "d type=10 len=10 dec=0 charset=63 binary=1 value=datetime.date(2024, 2, 29)",
    "tm type=11 len=17 dec=6 charset=63 binary=1 value=datetime.timedelta(seconds=86398, microseconds=123456)",
    "ts type=12 len=26 dec=6 charset=63 binary=1 value=datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)",
    "tz type=12 len=26 dec=6 charset=63 binary=1 value=datetime.datetime(2024, 1, 1, 22, 4, 5, 678000)",
    "tx type=253 len=262140 dec=0 charset=45 binary=0 value='héllo ✓ 日本 🐘'",
    r#"bl type=252 len=4294967295 dec=0 charset=63 binary=1 value=b'\\\x00\xffA'"#,
    "sl type=253 len=262140 dec=0 charset=45 binary=0 value='{a,b}'",
    r#"st type=245 len=4294967295 dec=0 charset=45 binary=0 value='{"k": 1}'"#,
    "id type=3 len=11 dec=0 charset=63 binary=1 value=2",
    "bo type=1 len=1 dec=0 charset=63 binary=1 value=None",
    "i1 type=3 len=11 dec=0 charset=63 binary=1 value=None",
    "u1 type=3 len=11 dec=0 charset=63 binary=1 value=None",
    "i2 type=3 len=11 dec=0 charset=63 binary=1 value=None",
    "i4 type=3 len=11 dec=0 charset=63 binary=1 value=None",
    "i8min type=8 len=20 dec=0 charset=63 binary=1 value=None",
    "i8max type=8 len=20 dec=0 charset=63 binary=1 value=None",
    "hi type=246 len=67 dec=31 charset=63 binary=1 value=None",
    "d103 type=246 len=67 dec=31 charset=63 binary=1 value=None",
    "d7 type=246 len=67 dec=31 charset=63 binary=1 value=None",
    "r type=5 len=22 dec=31 charset=63 binary=1 value=None",
    "f8 type=5 len=22 dec=31 charset=63 binary=1 value=None",
    "d type=10 len=10 dec=0 charset=63 binary=1 value=None",
    "tm type=11 len=17 dec=6 charset=63 binary=1 value=None",
    "ts type=12 len=26 dec=6 charset=63 binary=1 value=None",
    "tz type=12 len=26 dec=6 charset=63 binary=1 value=None",
    "tx type=253 len=262140 dec=0 charset=45 binary=0 value=None",
    "bl type=252 len=4294967295 dec=0 charset=63 binary=1 value=None",
    "sl type=253 len=262140 dec=0 charset=45 binary=0 value=None",
    "st type=245 len=4294967295 dec=0 charset=45 binary=0 value=None",
    "error 1105",
    "error 1690",
    "after type=8 len=21 dec=0 charset=63 binary=1 value=1",
];
const DUCK_JDBC: &[&str] = &[
    "id INTEGER Integer 1",
    "bo TINYINT Boolean true",
    "i1 INTEGER Integer -128",
    "u1 INTEGER Integer 255",
    "i2 INTEGER Integer -32768",
    "i4 INTEGER Integer 2147483647",
    "i8min BIGINT Long -9223372036854775808",
    "i8max BIGINT Long 9223372036854775807",
    "hi DECIMAL BigDecimal 170141183460469231731687303715884105727",
    "d103 DECIMAL BigDecimal 12345.678",
    "d7 DECIMAL BigDecimal -1E-7",
    "r DOUBLE Double 1.5",
    "f8 DOUBLE Double -1.5E300",
    "d DATE Date 2024-02-29",
    "tm TIME Time 23:59:58",
    "ts DATETIME Timestamp 2024-01-02 03:04:05.123456",
    "tz DATETIME Timestamp 2024-01-01 22:04:05.678",
    "tx TEXT String héllo ✓ 日本 🐘",
    "bl LONGBLOB byte[] 0x5c00ff41",
    "sl TEXT String {a,b}",
    r#"st JSON String {"k": 1}"#,
    "id INTEGER Integer 2",
    "bo TINYINT null null",
    "i1 INTEGER null null",
    "u1 INTEGER null null",
    "i2 INTEGER null null",
    "i4 INTEGER null null",
    "i8min BIGINT null null",
    "i8max BIGINT null null",
    "hi DECIMAL null null",
    "d103 DECIMAL null null",
    "d7 DECIMAL null null",
    "r DOUBLE null null",
    "f8 DOUBLE null null",
    "d DATE null null",
    "tm TIME null null",
    "ts DATETIME null null",
    "tz DATETIME null null",
    "tx TEXT null null",
    "bl LONGBLOB null null",
    "sl TEXT null null",
    "st JSON null null",
    "error 1105 HY000",
    "error 1690 22003",
    "after BIGINT UNSIGNED BigInteger 1",
];
