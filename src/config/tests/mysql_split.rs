//! `[routing.mysql]`: MySQL clients' own split and default pool, and its
//! `routing.mysql_default_pool` alias (#24).

use super::*;

const BOTH: &str = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n\n\
    [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:6033\"\n\n\
    [pools.pg]\nbackends = [{ host = \"pg\", port = 5432 }]\n\n\
    [pools.pg_ro]\nbackends = [{ host = \"pg-ro\", port = 5432 }]\n\n\
    [pools.my]\nbackends = [{ host = \"my\", port = 3306 }]\n\n\
    [pools.my_ro]\nbackends = [{ host = \"my-ro\", port = 3306 }]\n\n";

const PG_SPLIT: &str = "[routing]\nread_write_split = true\nread_pool = \"pg_ro\"\nwrite_pool = \"pg\"\n\n";

fn both(mysql: &str) -> String {
    format!("{BOTH}{PG_SPLIT}[routing.mysql]\n{mysql}\n")
}

#[test]
fn each_protocol_splits_between_its_own_pools() {
    let config = parse_ok(&both("read_write_split = true\nread_pool = \"my_ro\"\nwrite_pool = \"my\""));
    let r = &config.routing;
    assert_eq!((r.primary_pool(Protocol::Postgres), r.read_pool_of(Protocol::Postgres)), (Some("pg"), Some("pg_ro")));
    assert_eq!((r.primary_pool(Protocol::MySql), r.read_pool_of(Protocol::MySql)), (Some("my"), Some("my_ro")));
    let roles: Vec<_> = config.pools.iter().map(|p| (p.name.as_str(), p.role)).collect();
    assert_eq!(
        roles,
        [
            ("my", PoolRole::Primary),
            ("my_ro", PoolRole::Replica),
            ("pg", PoolRole::Primary),
            ("pg_ro", PoolRole::Replica)
        ]
    );
}

#[test]
fn a_mysql_table_without_split_sends_every_mysql_statement_to_its_default() {
    let config = parse_ok(&both("default_pool = \"my\""));
    assert_eq!(config.routing.primary_pool(Protocol::MySql), Some("my"));
    assert_eq!(config.routing.read_pool_of(Protocol::MySql), None);
    assert_eq!(config.routing.read_pool_of(Protocol::Postgres), Some("pg_ro"));
}

#[test]
fn mysql_default_pool_is_an_alias_of_the_table_default() {
    let alias = parse_ok(
        &format!("{BOTH}{PG_SPLIT}")
            .replace("write_pool = \"pg\"\n", "write_pool = \"pg\"\nmysql_default_pool = \"my\"\n"),
    );
    let table = parse_ok(&both("default_pool = \"my\""));
    assert_eq!(alias.routing, table.routing);
    // The alias may also fill in the default of a table that sets other keys.
    let mixed = format!("{BOTH}{PG_SPLIT}")
        .replace("write_pool = \"pg\"\n", "write_pool = \"pg\"\nmysql_default_pool = \"my\"\n");
    let mixed = parse_ok(&format!("{mixed}[routing.mysql]\nread_pool = \"my_ro\"\n"));
    assert_eq!(mixed.routing.mysql.as_ref().and_then(|m| m.default_pool.as_deref()), Some("my"));
}

#[test]
fn setting_the_alias_and_the_table_default_is_an_error() {
    let text = format!("{BOTH}{PG_SPLIT}")
        .replace("write_pool = \"pg\"\n", "write_pool = \"pg\"\nmysql_default_pool = \"my\"\n");
    let text = format!("{text}[routing.mysql]\ndefault_pool = \"my\"\n");
    let issue = one_issue(&text);
    assert_eq!(issue.path, "routing.mysql_default_pool");
    assert_eq!(
        issue.message,
        "routing.mysql_default_pool is an alias of routing.mysql.default_pool: set only one of them"
    );
    assert_eq!(issue.line, line_of(&text, "mysql_default_pool"));
}

#[test]
fn unknown_mysql_pools_are_each_reported() {
    let text = both("read_write_split = true\nread_pool = \"r\"\nwrite_pool = \"w\"\ndefault_pool = \"d\"");
    let found: Vec<_> = issues(&text).into_iter().map(|i| (i.path, i.message)).collect();
    assert_eq!(
        found,
        [
            ("routing.mysql.read_pool".to_string(), "unknown pool `r`".to_string()),
            ("routing.mysql.write_pool".into(), "unknown pool `w`".into()),
            ("routing.mysql.default_pool".into(), "unknown pool `d`".into()),
        ]
    );
}

#[test]
fn a_mysql_split_needs_both_pools() {
    let text = both("read_write_split = true\nwrite_pool = \"my\"");
    let issue = one_issue(&text);
    assert_eq!(
        (issue.path.as_str(), issue.message.as_str()),
        ("routing.mysql.read_write_split", "read_write_split = true requires routing.mysql.read_pool")
    );
    assert_eq!(issue.line, line_of(&text, "[routing.mysql]") + 1);
}

#[test]
fn a_mysql_listener_needs_a_pool_from_the_table_or_the_top_level_default() {
    let issue = one_issue(&both("read_pool = \"my_ro\""));
    assert_eq!(issue.path, "listeners[1]");
    assert_eq!(
        issue.message,
        "routing has no pool for listener `mysql-1` (mysql): set routing.mysql.default_pool or routing.default_pool, \
         or routing.mysql.write_pool with routing.mysql.read_write_split = true"
    );
    // The top-level default serves MySQL clients the table leaves without a pool.
    let text =
        both("read_pool = \"my_ro\"").replace("write_pool = \"pg\"\n", "write_pool = \"pg\"\ndefault_pool = \"my\"\n");
    assert_eq!(parse_ok(&text).routing.primary_pool(Protocol::MySql), Some("my"));
}

#[test]
fn a_replica_role_mysql_write_pool_is_an_error() {
    let text = both("read_write_split = true\nread_pool = \"my_ro\"\nwrite_pool = \"my\"")
        .replace("port = 3306 }]\n\n[pools.my_ro]", "port = 3306 }]\nrole = \"replica\"\n\n[pools.my_ro]");
    let issue = one_issue(&text);
    assert_eq!(issue.path, "routing.mysql.write_pool");
    assert_eq!(
        issue.message,
        "pool `my` has role = \"replica\" but routing.mysql.write_pool sends writes to it: give it role = \"primary\""
    );
}

#[test]
fn unknown_keys_in_the_mysql_table_are_refused() {
    let issue = one_issue(&both("default_pool = \"my\"\nread_your_writes = \"none\""));
    assert_eq!(issue.path, "routing.mysql.read_your_writes");
}

#[test]
fn the_mysql_table_renders_and_parses_back() {
    for mysql in ["read_write_split = true\nread_pool = \"my_ro\"\nwrite_pool = \"my\"", "default_pool = \"my\""] {
        let config = parse_ok(&both(mysql));
        assert_eq!(parse_ok(&config.redacted_toml()), config, "{mysql}");
    }
    let alias = format!("{BOTH}{PG_SPLIT}")
        .replace("write_pool = \"pg\"\n", "write_pool = \"pg\"\nmysql_default_pool = \"my\"\n");
    let config = parse_ok(&alias);
    let rendered = config.redacted_toml();
    assert!(rendered.contains("[routing.mysql]") && !rendered.contains("mysql_default_pool"), "{rendered}");
    assert_eq!(parse_ok(&rendered), config);
}
