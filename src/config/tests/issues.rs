//! One test per validation issue: each asserts the message, the key path and the line.

use super::*;

/// Asserts that `text` has exactly one issue, on the line containing `at`, with this path and
/// message.
fn expect(text: &str, at: &str, path: &str, message: &str) {
    let issue = one_issue(text);
    assert_eq!(issue.message, message);
    assert_eq!(issue.path, path);
    assert_eq!(issue.line, line_of(text, at), "wrong line for {issue:?}");
}

fn listener(protocol: &str, bind: &str, extra: &str) -> String {
    format!("[[listeners]]\nprotocol = \"{protocol}\"\nbind = \"{bind}\"\n{extra}\n")
}

fn pool(name: &str, extra: &str) -> String {
    format!("[pools.{name}]\nbackends = [{{ host = \"{name}-db\", port = 5432 }}]\n{extra}\n")
}

// ---- listeners ----

#[test]
fn no_listener_is_an_error_at_the_top_of_the_file() {
    let issue = one_issue(&format!("{POOL}{ROUTING}"));
    assert_eq!((issue.line, issue.column, issue.path.as_str()), (1, 1, "listeners"));
    assert_eq!(issue.message, "at least one [[listeners]] entry is required");
}

#[test]
fn duplicate_listener_names() {
    let text = format!(
        "{}{}{POOL}{ROUTING}",
        listener("postgres", "127.0.0.1:1", "name = \"a\""),
        listener("mysql", "127.0.0.1:2", "name = \"a\"")
    );
    let issue = one_issue(&text);
    assert_eq!(issue.message, "duplicate listener name `a` (first used by listeners[0])");
    assert_eq!(issue.path, "listeners[1].name");
    assert_eq!(issue.line, 8);
}

#[test]
fn listener_name_with_spaces() {
    let text = format!("{}{POOL}{ROUTING}", listener("postgres", "127.0.0.1:1", "name = \"my listener\""));
    expect(&text, "name =", "listeners[0].name", "listener names may contain only ASCII letters, digits, '_' and '-'");
}

#[test]
fn identical_binds() {
    let text = format!(
        "{}{}{POOL}{ROUTING}",
        listener("postgres", "127.0.0.1:6432", ""),
        listener("mysql", "127.0.0.1:6432", "")
    );
    let issue = one_issue(&text);
    assert_eq!(
        issue.message,
        "bind 127.0.0.1:6432 of listener `mysql-1` overlaps 127.0.0.1:6432 of listener `postgres-0`"
    );
    assert_eq!((issue.path.as_str(), issue.line, issue.column), ("listeners[1].bind", 7, 8));
}

#[test]
fn wildcard_bind_overlaps_a_specific_address_on_the_same_port() {
    let text = format!(
        "{}{}{POOL}{ROUTING}",
        listener("postgres", "127.0.0.1:6432", ""),
        listener("postgres", "0.0.0.0:6432", "allow_anonymous = true")
    );
    expect(
        &text,
        "0.0.0.0",
        "listeners[1].bind",
        "bind 0.0.0.0:6432 of listener `postgres-1` overlaps 127.0.0.1:6432 of listener `postgres-0`",
    );
}

#[test]
fn ephemeral_ports_never_overlap() {
    let text =
        format!("{}{}{POOL}{ROUTING}", listener("postgres", "127.0.0.1:0", ""), listener("mysql", "127.0.0.1:0", ""));
    assert_eq!(parse_ok(&text).listeners.len(), 2);
}

#[test]
fn bind_must_be_ip_and_port() {
    let text = format!("{}{POOL}{ROUTING}", listener("postgres", "localhost:6432", ""));
    expect(
        &text,
        "localhost",
        "listeners[0].bind",
        "invalid address \"localhost:6432\": expected IP:port such as 127.0.0.1:6432 or [::1]:6432",
    );
}

#[test]
fn unknown_listener_protocol() {
    let text = format!("{}{POOL}{ROUTING}", listener("pgsql", "127.0.0.1:6432", ""));
    expect(
        &text,
        "pgsql",
        "listeners[0].protocol",
        "invalid protocol \"pgsql\": expected one of \"postgres\", \"mysql\"",
    );
}

#[test]
fn auth_method_on_a_mysql_listener() {
    let text = format!("{}{POOL}{ROUTING}", listener("mysql", "127.0.0.1:6033", "auth_method = \"md5\""));
    expect(&text, "auth_method", "listeners[0].auth_method", "auth_method applies only to postgres listeners");
}

#[test]
fn unknown_auth_method() {
    let text = format!("{}{POOL}{ROUTING}", listener("postgres", "127.0.0.1:6432", "auth_method = \"password\""));
    expect(
        &text,
        "auth_method",
        "listeners[0].auth_method",
        "invalid auth method \"password\": expected one of \"scram-sha-256\", \"md5\"",
    );
}

#[test]
fn max_message_size_below_one_kib() {
    let text = format!("{}{POOL}{ROUTING}", listener("postgres", "127.0.0.1:6432", "max_message_size = \"512\""));
    expect(
        &text,
        "max_message_size",
        "listeners[0].max_message_size",
        "max_message_size must be between 1KiB and 1GiB",
    );
}

#[test]
fn max_client_connections_zero() {
    let text = format!("{}{POOL}{ROUTING}", listener("postgres", "127.0.0.1:6432", "max_client_connections = 0"));
    expect(
        &text,
        "max_client_connections",
        "listeners[0].max_client_connections",
        "max_client_connections must be at least 1",
    );
}

#[test]
fn non_loopback_listener_without_credentials() {
    let text = format!("{}{POOL}{ROUTING}", listener("postgres", "0.0.0.0:6432", ""));
    expect(
        &text,
        "0.0.0.0",
        "listeners[0].bind",
        "listener `postgres-0` binds non-loopback 0.0.0.0:6432 but no pool has username and password and there is no [auth] file; set allow_anonymous = true to accept that",
    );
}

#[test]
fn non_loopback_listener_is_fine_with_anonymous_or_credentials() {
    let anonymous = format!("{}{POOL}{ROUTING}", listener("postgres", "10.1.2.3:6432", "allow_anonymous = true"));
    parse_ok(&anonymous);
    let credentials = format!(
        "{}{}{ROUTING}",
        listener("postgres", "[::]:6432", ""),
        pool("main", "username = \"u\"\npassword = \"p\"")
    );
    parse_ok(&credentials);
    let loopback_v6 = format!("{}{POOL}{ROUTING}", listener("postgres", "[::1]:6432", ""));
    parse_ok(&loopback_v6);
}

// ---- routing references ----

#[test]
fn unknown_default_pool() {
    let text = format!("{LISTENER}{POOL}[routing]\ndefault_pool = \"nope\"\n");
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column), (line_of(&text, "nope"), 16));
    assert_eq!((issue.path.as_str(), issue.message.as_str()), ("routing.default_pool", "unknown pool `nope`"));
}

#[test]
fn unknown_split_and_mysql_pools_are_each_reported() {
    let text = format!(
        "{LISTENER}{POOL}[routing]\nread_write_split = true\nread_pool = \"r\"\nwrite_pool = \"w\"\nmysql_default_pool = \"m\"\n"
    );
    let found: Vec<_> = issues(&text).into_iter().map(|i| (i.line, i.path, i.message)).collect();
    assert_eq!(
        found,
        [
            (line_of(&text, "read_pool"), "routing.read_pool".into(), "unknown pool `r`".into()),
            (line_of(&text, "write_pool"), "routing.write_pool".into(), "unknown pool `w`".into()),
            (line_of(&text, "mysql_default_pool"), "routing.mysql_default_pool".into(), "unknown pool `m`".to_string()),
        ]
    );
}

#[test]
fn unknown_pool_in_a_pattern_rule() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"template\"\npattern = \"SELECT ?\"\npool = \"ghost\"\n",
        base()
    );
    expect(&text, "ghost", "routing.pattern_rules[0].pool", "unknown pool `ghost`");
}

#[test]
fn unknown_pool_in_a_regex_rule() {
    let text = format!("{}[[routing.rules]]\nname = \"a\"\nuser = \"bob\"\npool = \"ghost\"\n", base());
    expect(&text, "ghost", "routing.rules[0].pool", "unknown pool `ghost`");
}

#[test]
fn unknown_translation_target_pool() {
    let text = format!("{}[[translation.rules]]\noriginal_sql = \"SELECT 1\"\ntranslated_sql = \"SELECT 2\"\ntarget_pool = \"ghost\"\n", base());
    expect(&text, "ghost", "translation.rules[0].target_pool", "unknown pool `ghost`");
}

#[test]
fn read_write_split_without_read_pool() {
    let text = format!("{}read_write_split = true\nwrite_pool = \"main\"\n", base());
    expect(&text, "read_write_split", "routing.read_write_split", "read_write_split = true requires routing.read_pool");
}

#[test]
fn postgres_listener_without_a_pool_to_route_to() {
    let text = format!("{LISTENER}{POOL}");
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column, issue.path.as_str()), (1, 1, "listeners[0]"));
    assert_eq!(
        issue.message,
        "routing has no pool for listener `postgres-0` (postgres): set routing.default_pool, or routing.write_pool with read_write_split = true"
    );
}

#[test]
fn only_the_listener_lacking_a_pool_is_named() {
    let text = format!(
        "{}{}{POOL}[routing]\nmysql_default_pool = \"main\"\n",
        listener("mysql", "127.0.0.1:6033", ""),
        listener("postgres", "127.0.0.1:6432", "name = \"pg\"")
    );
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.path.as_str()), (5, "listeners[1]"));
    assert!(issue.message.starts_with("routing has no pool for listener `pg` (postgres)"), "{}", issue.message);
}

#[test]
fn mysql_listener_is_served_by_the_write_pool_when_splitting() {
    let text = format!(
        "{}{}{}[routing]\nread_write_split = true\nread_pool = \"r\"\nwrite_pool = \"w\"\n",
        listener("mysql", "127.0.0.1:6033", ""),
        pool("r", ""),
        pool("w", "")
    );
    assert_eq!(parse_ok(&text).routing.primary_pool(Protocol::MySql), Some("w"));
}

// ---- pools ----

#[test]
fn backend_weight_zero() {
    let text = format!("{LISTENER}{ROUTING}[pools.main]\nbackends = [{{ host = \"db\", port = 5432, weight = 0 }}]\n");
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column), (line_of(&text, "weight"), 50));
    assert_eq!(issue.path, "pools.main.backends[0].weight");
    assert_eq!(issue.message, "weight must be at least 1");
}

#[test]
fn backend_port_out_of_range() {
    let text = format!("{LISTENER}{ROUTING}[[pools.main.backends]]\nhost = \"a\"\nport = 70000\n");
    expect(&text, "70000", "pools.main.backends[0].port", "port must be at most 65535");
}

#[test]
fn pool_without_backends_is_located_at_its_table() {
    let text = format!("{LISTENER}{ROUTING}[pools.main]\nusername = \"u\"\n");
    expect(&text, "[pools.main]", "pools.main.backends", "a pool needs at least one backend");
}

#[test]
fn pool_with_an_empty_backend_list() {
    let text = format!("{LISTENER}{ROUTING}[pools.main]\nbackends = []\n");
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column), (line_of(&text, "backends"), 12));
    assert_eq!(issue.message, "a pool needs at least one backend");
}

#[test]
fn duplicate_backend_in_a_pool() {
    let text = format!("{LISTENER}{ROUTING}[pools.main]\nbackends = [\n  {{ host = \"db\", port = 5432 }},\n  {{ host = \"db\", port = 5432 }},\n]\n");
    let issue = one_issue(&text);
    assert_eq!(issue.line, line_of(&text, "[pools.main]") + 3);
    assert_eq!(
        (issue.path.as_str(), issue.message.as_str()),
        ("pools.main.backends[1]", "backend db:5432 is listed twice in this pool")
    );
}

#[test]
fn pool_name_with_a_dot() {
    let text = format!("{LISTENER}{ROUTING}{POOL}[pools.\"a.b\"]\nbackends = [{{ host = \"x\", port = 1 }}]\n");
    expect(&text, "[pools.\"a.b\"]", "pools.a.b", "pool names may contain only ASCII letters, digits, '_' and '-'");
}

#[test]
fn raw_passthrough_with_a_protocol_override() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "protocol = \"postgres\"\nraw_passthrough = true"));
    expect(
        &text,
        "raw_passthrough",
        "pools.main.raw_passthrough",
        "raw_passthrough cannot be combined with a protocol override: bytes cannot be relayed untouched across protocols",
    );
}

#[test]
fn generic_engine_on_a_mysql_pool() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "protocol = \"mysql\"\nengine = \"generic\""));
    expect(
        &text,
        "engine",
        "pools.main.engine",
        "engine = \"generic\" means a PostgreSQL-wire engine; it cannot be combined with protocol = \"mysql\"",
    );
}

#[test]
fn check_query_on_a_postgres_engine_pool() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "[pools.main.health]\ncheck_query = \"SELECT 1\""));
    expect(
        &text,
        "check_query",
        "pools.main.health.check_query",
        "check_query applies to engine = \"generic\" pools; PostgreSQL pools are probed with pg_is_in_recovery()",
    );
    let ok = format!(
        "{LISTENER}{ROUTING}{}",
        pool("main", "engine = \"generic\"\n[pools.main.health]\ncheck_query = \"SELECT 42\"")
    );
    let cfg = Config::parse(&ok, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let main = cfg.pools.iter().find(|p| p.name == "main").expect("pool");
    assert_eq!((main.engine, main.health.check_query.as_deref()), (Engine::Generic, Some("SELECT 42")));
}

#[test]
fn raw_passthrough_on_the_mysql_default_pool() {
    let text = format!("{LISTENER}{ROUTING}{POOL}{}[routing.rules]", pool("my", "raw_passthrough = true"))
        .replace("[routing.rules]", "")
        .replace("default_pool = \"main\"\n", "default_pool = \"main\"\nmysql_default_pool = \"my\"\n");
    expect(
        &text,
        "raw_passthrough",
        "pools.my.raw_passthrough",
        "raw_passthrough is not supported on a pool serving mysql clients",
    );
}

#[test]
fn raw_passthrough_on_a_pool_reached_by_a_mysql_listener() {
    let text =
        format!("{}{ROUTING}{}", listener("mysql", "127.0.0.1:6033", ""), pool("main", "raw_passthrough = true"));
    expect(
        &text,
        "raw_passthrough",
        "pools.main.raw_passthrough",
        "raw_passthrough is not supported on a pool serving mysql clients",
    );
}

#[test]
fn raw_passthrough_on_a_postgres_pool_is_accepted() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "raw_passthrough = true"));
    assert!(parse_ok(&text).pools[0].raw_passthrough);
}

#[test]
fn local_infile_with_a_protocol_override() {
    let text = format!(
        "{}{ROUTING}{}",
        listener("mysql", "127.0.0.1:6033", ""),
        pool("main", "protocol = \"postgres\"\nlocal_infile = true")
    );
    expect(
        &text,
        "local_infile",
        "pools.main.local_infile",
        "local_infile cannot be combined with a protocol override: LOAD DATA LOCAL INFILE exists only between MySQL clients and MySQL servers",
    );
}

#[test]
fn local_infile_on_the_postgres_default_pool() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "local_infile = true"));
    expect(
        &text,
        "local_infile",
        "pools.main.local_infile",
        "local_infile is a MySQL setting and this pool serves postgres clients",
    );
}

#[test]
fn local_infile_on_a_pool_of_a_postgres_rule() {
    let text = format!(
        "{LISTENER}{ROUTING}{POOL}{}[[routing.rules]]\nname = \"r\"\nprotocol = \"postgres\"\npattern = \"^COPY\"\npool = \"bulk\"\n",
        pool("bulk", "local_infile = true")
    );
    expect(
        &text,
        "local_infile",
        "pools.bulk.local_infile",
        "local_infile is a MySQL setting and this pool serves postgres clients",
    );
}

#[test]
fn local_infile_on_a_mysql_pool_is_accepted_and_off_by_default() {
    let text = format!(
        "{LISTENER}{}{ROUTING}{POOL}{}",
        listener("mysql", "127.0.0.1:6033", ""),
        pool("my", "local_infile = true")
    )
    .replace("default_pool = \"main\"\n", "default_pool = \"main\"\nmysql_default_pool = \"my\"\n");
    let config = parse_ok(&text);
    let flag = |name: &str| config.pool(name).map(|p| p.local_infile);
    assert_eq!((flag("my"), flag("main")), (Some(true), Some(false)));
}

#[test]
fn max_connections_below_min_connections() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "min_connections = 5\nmax_connections = 4"));
    expect(
        &text,
        "max_connections",
        "pools.main.max_connections",
        "max_connections (4) must be at least min_connections (5)",
    );
}

#[test]
fn min_connections_above_the_default_max() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "min_connections = 11"));
    expect(
        &text,
        "min_connections",
        "pools.main.min_connections",
        "max_connections (10) must be at least min_connections (11)",
    );
}

#[test]
fn max_prepared_statements_zero() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "max_prepared_statements = 0"));
    expect(&text, "max_prepared", "pools.main.max_prepared_statements", "max_prepared_statements must be at least 1");
}

#[test]
fn zero_acquire_timeout() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "acquire_timeout = \"0s\""));
    expect(&text, "acquire_timeout", "pools.main.acquire_timeout", "acquire_timeout must be greater than 0s");
}

#[test]
fn unknown_pool_mode() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "mode = \"txn\""));
    expect(
        &text,
        "txn",
        "pools.main.mode",
        "invalid pool mode \"txn\": expected one of \"session\", \"transaction\", \"statement\"",
    );
}

#[test]
fn empty_username() {
    let text = format!("{LISTENER}{ROUTING}{}", pool("main", "username = \"\""));
    expect(&text, "username", "pools.main.username", "username must not be empty");
}

#[test]
fn backoff_max_below_backoff_base() {
    let text = format!("{}[pools.main.retry]\nbackoff_base = \"2s\"\nbackoff_max = \"500ms\"\n", base());
    expect(&text, "backoff_max", "pools.main.retry.backoff_max", "backoff_max must be at least backoff_base");
}

#[test]
fn retry_maximum_attempts_zero() {
    let text = format!("{}[pools.main.retry]\nmaximum_attempts = 0\n", base());
    expect(&text, "maximum_attempts", "pools.main.retry.maximum_attempts", "maximum_attempts must be at least 1");
}

#[test]
fn rule_retry_without_maximum_attempts() {
    let text = format!(
        "{}[[routing.rules]]\nname = \"a\"\nuser = \"bob\"\npool = \"main\"\nretry = {{ backoff_base = \"5ms\" }}\n",
        base()
    );
    expect(
        &text,
        "retry =",
        "routing.rules[0].retry.maximum_attempts",
        "required in a rule's retry (2 or more retries, 1 turns the pool's retry off for this rule)",
    );
}

#[test]
fn rule_retry_on_a_reject_rule() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"template\"\npattern = \"SELECT ?\"\nreject = \"no\"\nretry = {{ maximum_attempts = 3 }}\n",
        base()
    );
    expect(
        &text,
        "retry =",
        "routing.pattern_rules[0].retry",
        "retry needs a rule with a pool: a rejected statement runs nowhere",
    );
}

#[test]
fn rule_retry_maximum_attempts_zero() {
    let text = format!(
        "{}[[routing.rules]]\nname = \"a\"\nuser = \"bob\"\npool = \"main\"\nretry = {{ maximum_attempts = 0 }}\n",
        base()
    );
    expect(&text, "retry =", "routing.rules[0].retry.maximum_attempts", "maximum_attempts must be at least 1");
}

#[test]
fn rule_retry_backoff_max_below_backoff_base() {
    let text = format!(
        "{}[[routing.rules]]\nname = \"a\"\nuser = \"bob\"\npool = \"main\"\nretry = {{ maximum_attempts = 3, backoff_base = \"2s\", backoff_max = \"1s\" }}\n",
        base()
    );
    expect(&text, "retry =", "routing.rules[0].retry.backoff_max", "backoff_max must be at least backoff_base");
}

#[test]
fn rule_retry_with_an_unknown_key() {
    let text = format!(
        "{}[[routing.rules]]\nname = \"a\"\nuser = \"bob\"\npool = \"main\"\nretry = {{ maximum_attempts = 3, attempts = 2 }}\n",
        base()
    );
    let issue = one_issue(&text);
    // As for other inline tables, the path names the table and the message the key.
    assert_eq!(issue.path, "routing.rules[0].retry");
    assert_eq!(issue.line, line_of(&text, "retry ="));
    assert!(issue.message.starts_with("unknown field `attempts`"), "{}", issue.message);
}

#[test]
fn health_interval_without_unit() {
    let text = format!("{}[pools.main.health]\ninterval = \"2\"\n", base());
    expect(&text, "interval", "pools.main.health.interval", "invalid duration \"2\": missing unit (ms, s, m or h)");
}

#[test]
fn health_failure_threshold_zero() {
    let text = format!("{}[pools.main.health]\nfailure_threshold = 0\n", base());
    expect(&text, "failure_threshold", "pools.main.health.failure_threshold", "failure_threshold must be at least 1");
}

// ---- rules ----

#[test]
fn regex_pattern_rule_that_does_not_compile() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"regex\"\npattern = \"(select\"\npool = \"main\"\n",
        base()
    );
    expect(&text, "(select", "routing.pattern_rules[0].pattern", "invalid regex: unclosed group");
}

#[test]
fn regex_rule_that_does_not_compile() {
    let text = format!("{}[[routing.rules]]\nname = \"a\"\npattern = \"[a-\"\npool = \"main\"\n", base());
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.path.as_str()), (line_of(&text, "[a-"), "routing.rules[0].pattern"));
    assert!(issue.message.starts_with("invalid regex: "), "{}", issue.message);
}

#[test]
fn hash_pattern_that_is_not_a_u64() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"hash\"\npattern = \"0xdeadbeef\"\npool = \"main\"\n",
        base()
    );
    expect(&text, "0xdeadbeef", "routing.pattern_rules[0].pattern", "a hash pattern must be a decimal u64 fingerprint");
}

#[test]
fn hash_pattern_rule_exposes_its_fingerprint() {
    let text = format!("{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"hash\"\npattern = \"18446744073709551615\"\nreject = \"no\"\n", base());
    assert_eq!(parse_ok(&text).routing.pattern_rules[0].hash(), Some(u64::MAX));
}

#[test]
fn empty_template_pattern() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"template\"\npattern = \"  \"\npool = \"main\"\n",
        base()
    );
    expect(&text, "pattern =", "routing.pattern_rules[0].pattern", "a template pattern must not be empty");
}

#[test]
fn unknown_pattern_type() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"glob\"\npattern = \"x\"\npool = \"main\"\n",
        base()
    );
    expect(
        &text,
        "glob",
        "routing.pattern_rules[0].type",
        "invalid pattern type \"glob\": expected one of \"template\", \"regex\", \"hash\"",
    );
}

#[test]
fn rule_names_are_unique_across_both_lists() {
    let text = format!(
        "{}[[routing.pattern_rules]]\nname = \"dup\"\ntype = \"template\"\npattern = \"SELECT ?\"\npool = \"main\"\n\n[[routing.rules]]\nname = \"dup\"\nuser = \"u\"\npool = \"main\"\n",
        base()
    );
    let issue = one_issue(&text);
    assert_eq!(
        issue.line,
        text.lines().collect::<Vec<_>>().iter().rposition(|l| l.contains("\"dup\"")).map_or(0, |i| i + 1)
    );
    assert_eq!(issue.path, "routing.rules[0].name");
    assert_eq!(issue.message, "duplicate rule name `dup` (first used by routing.pattern_rules[0])");
}

#[test]
fn regex_rule_without_any_matcher() {
    let text = format!("{}[[routing.rules]]\nname = \"a\"\npool = \"main\"\n", base());
    expect(
        &text,
        "[[routing.rules]]",
        "routing.rules[0]",
        "a rule needs at least one matcher: pattern, user, database or protocol",
    );
}

#[test]
fn rule_with_both_pool_and_reject() {
    let text = format!("{}[[routing.rules]]\nname = \"a\"\nuser = \"u\"\npool = \"main\"\nreject = \"no\"\n", base());
    expect(&text, "[[routing.rules]]", "routing.rules[0]", "set exactly one of pool or reject, not both");
}

#[test]
fn rule_with_neither_pool_nor_reject() {
    let text =
        format!("{}[[routing.pattern_rules]]\nname = \"a\"\ntype = \"template\"\npattern = \"SELECT 1\"\n", base());
    expect(&text, "[[routing.pattern_rules]]", "routing.pattern_rules[0]", "set exactly one of pool or reject");
}

#[test]
fn rule_priority_beyond_i32() {
    let text =
        format!("{}[[routing.rules]]\nname = \"a\"\nuser = \"u\"\nreject = \"no\"\npriority = 3000000000\n", base());
    expect(&text, "priority", "routing.rules[0].priority", "priority must be at most 2147483647");
}

#[test]
fn read_your_writes_zero_window() {
    let text = format!("{}read_your_writes = \"0s\"\n", base());
    expect(
        &text,
        "read_your_writes",
        "routing.read_your_writes",
        "a zero window means no read-your-writes; write \"none\"",
    );
}

#[test]
fn cache_size_zero() {
    let text = format!("{}[routing.cache]\nsize = 0\n", base());
    expect(&text, "size", "routing.cache.size", "size must be at least 1");
}

#[test]
fn replica_safe_function_without_its_database() {
    let text = format!("{}replica_safe_functions = [\"shop.price\", \"price\"]\n", base());
    expect(
        &text,
        "\"price\"]",
        "routing.replica_safe_functions[1]",
        "`price` is not `schema.function` (a MySQL stored function named with its database)",
    );
    let config = parse_ok(&format!("{}replica_safe_functions = [\"Shop.Price\"]\n", base()));
    assert_eq!(config.routing.replica_safe_functions, ["shop.price"]);
}

#[test]
fn translation_with_empty_original_sql() {
    let text = format!(
        "{}[[translation.rules]]\noriginal_sql = \"\"\ntranslated_sql = \"SELECT 2\"\ntarget_pool = \"main\"\n",
        base()
    );
    expect(&text, "original_sql", "translation.rules[0].original_sql", "original_sql must not be empty");
}

// ---- general and metrics ----

#[test]
fn empty_cores_list() {
    let text = format!("[general]\ncores = []\n{}", base());
    expect(&text, "cores", "general.cores", "cores must list at least one CPU id; omit the key to use every CPU");
}

#[test]
fn cpu_listed_twice_and_out_of_range() {
    let text = format!("[general]\ncores = [0, 1, 0, 5000]\n{}", base());
    let found: Vec<_> = issues(&text).into_iter().map(|i| (i.line, i.column, i.path, i.message)).collect();
    assert_eq!(
        found,
        [
            (2, 16, "general.cores[2]".into(), "CPU 0 is listed twice".into()),
            (2, 19, "general.cores[3]".into(), "cores must be at most 1023".to_string()),
        ]
    );
    assert_eq!(parse_ok(&format!("[general]\ncores = [3, 1]\n{}", base())).general.cores, Some(vec![3, 1]));
}

#[test]
fn invalid_shutdown_drain() {
    let text = format!("[general]\nshutdown_drain = \"30 seconds\"\n{}", base());
    expect(
        &text,
        "shutdown_drain",
        "general.shutdown_drain",
        "invalid duration \"30 seconds\": unit must be one of ms, s, m, h",
    );
}

#[test]
fn invalid_handover_wait() {
    let text = format!("[general]\nhandover_wait = \"a minute\"\n{}", base());
    expect(
        &text,
        "handover_wait",
        "general.handover_wait",
        "invalid duration \"a minute\": expected a number with a unit, e.g. \"250ms\", \"10s\", \"5m\", \"1h\"",
    );
}

#[test]
fn empty_handover_socket() {
    let text = format!("[general]\nhandover_socket = \"\"\n{}", base());
    expect(&text, "handover_socket", "general.handover_socket", "handover_socket must not be empty");
    let set = parse_ok(&format!("[general]\nhandover_socket = \"/run/qp.sock\"\n{}", base()));
    assert_eq!(set.general.handover_socket, Some(std::path::PathBuf::from("/run/qp.sock")));
    assert_eq!(set.general.handover_wait, std::time::Duration::from_secs(60), "the default");
}

#[test]
fn metrics_on_a_public_address_needs_an_admin_token() {
    let text = format!("{}[metrics]\nenabled = true\nbind = \"0.0.0.0:9090\"\n", base());
    expect(
        &text,
        "bind = \"0.0.0.0",
        "metrics.bind",
        "a non-loopback metrics bind exposes the admin API: set metrics.admin_token",
    );
    let disabled = format!("{}[metrics]\nbind = \"0.0.0.0:9090\"\n", base());
    parse_ok(&disabled);
    let with_token = format!("{}[metrics]\nenabled = true\nbind = \"0.0.0.0:9090\"\nadmin_token = \"s\"\n", base());
    parse_ok(&with_token);
}

#[test]
fn metrics_port_65535_leaves_no_admin_port() {
    let text = format!("{}[metrics]\nbind = \"127.0.0.1:65535\"\n", base());
    expect(&text, "65535", "metrics.bind", "port 65535 leaves no port for the admin API, which listens on port + 1");
}

#[test]
fn empty_admin_token() {
    let text = format!("{}[metrics]\nadmin_token = \"\"\n", base());
    expect(&text, "admin_token", "metrics.admin_token", "admin_token must not be empty");
}

// ---- auth query (#23) ----

#[test]
fn auth_query_without_its_placeholder() {
    let text = format!(
        "{}{POOL}{ROUTING}\n[auth]\npg_query_user = \"qa\"\npg_query = \"SELECT secret FROM s WHERE u = current_user\"\n",
        listener("postgres", "127.0.0.1:6432", "")
    );
    expect(&text, "pg_query =", "auth.pg_query", "pg_query must contain $1, which stands for the user name");
}

#[test]
fn auth_query_without_its_user() {
    let text = format!(
        "{}{POOL}{ROUTING}\n[auth]\nmysql_query = \"SELECT h FROM u WHERE User = ?\"\n",
        listener("postgres", "127.0.0.1:6432", "")
    );
    expect(&text, "mysql_query =", "auth.mysql_query", "mysql_query needs mysql_query_user");
}

#[test]
fn auth_cache_ttl_without_a_query() {
    let text = format!("{}{POOL}{ROUTING}\n[auth]\ncache_ttl = \"5s\"\n", listener("postgres", "127.0.0.1:6432", ""));
    expect(&text, "cache_ttl", "auth.cache_ttl", "cache_ttl needs pg_query_user or mysql_query_user");
}

#[test]
fn auth_query_user_alone_takes_the_default_query_and_ttl() {
    let text = format!("{}{POOL}{ROUTING}\n[auth]\npg_query_user = \"qa\"\n", listener("postgres", "0.0.0.0:6432", ""));
    let config = parse_ok(&text);
    let query = config.auth.query.expect("an auth query");
    let pg = query.pg.expect("for PostgreSQL");
    assert_eq!((pg.user.as_str(), pg.sql.as_str()), ("qa", crate::config::model::DEFAULT_PG_AUTH_QUERY));
    assert_eq!((query.mysql, query.cache_ttl), (None, crate::config::model::DEFAULT_AUTH_CACHE_TTL));
}

// ---- backend TLS (#38) ----

fn tls_pool(extra: &str) -> String {
    format!("{LISTENER}{ROUTING}{}", pool("main", extra))
}

#[test]
fn tls_settings_are_read_with_disable_as_the_default() {
    assert_eq!(parse_ok(&base()).pools[0].tls, crate::config::BackendTls::default());
    let text = tls_pool(
        "tls = \"verify-full\"\ntls_ca_file = \"/etc/qp/ca.pem\"\ntls_cert_file = \"/etc/qp/c.pem\"\n\
         tls_key_file = \"/etc/qp/k.pem\"\ntls_server_name = \"db.internal\"",
    );
    let tls = parse_ok(&text).pools[0].tls.clone();
    assert_eq!(tls.mode, crate::config::TlsMode::VerifyFull);
    assert_eq!(tls.ca_file.as_deref(), Some(std::path::Path::new("/etc/qp/ca.pem")));
    assert_eq!(tls.cert_file.as_deref(), Some(std::path::Path::new("/etc/qp/c.pem")));
    assert_eq!(tls.key_file.as_deref(), Some(std::path::Path::new("/etc/qp/k.pem")));
    assert_eq!(tls.server_name.as_deref(), Some("db.internal"));
    assert!(tls.client.is_none(), "the files are loaded by the control plane, not parsed here");
    let rendered = parse_ok(&text).redacted_toml();
    assert_eq!(parse_ok(&rendered).pools[0].tls, tls, "rendered as written:\n{rendered}");
}

#[test]
fn unknown_tls_mode() {
    expect(
        &tls_pool("tls = \"allow\""),
        "tls = ",
        "pools.main.tls",
        "invalid tls mode \"allow\": expected one of \"disable\", \"prefer\", \"require\", \"verify-ca\", \"verify-full\"",
    );
}

#[test]
fn tls_cert_file_without_key_file() {
    expect(
        &tls_pool("tls = \"require\"\ntls_cert_file = \"c.pem\""),
        "tls_cert_file",
        "pools.main.tls_cert_file",
        "tls_cert_file needs tls_key_file",
    );
}

#[test]
fn tls_key_file_without_cert_file() {
    expect(
        &tls_pool("tls = \"require\"\ntls_key_file = \"k.pem\""),
        "tls_key_file",
        "pools.main.tls_key_file",
        "tls_key_file needs tls_cert_file",
    );
}

#[test]
fn tls_files_with_tls_disabled() {
    expect(
        &tls_pool("tls_ca_file = \"ca.pem\""),
        "tls_ca_file",
        "pools.main.tls_ca_file",
        "tls_ca_file has no effect with tls = \"disable\"",
    );
}

#[test]
fn tls_ca_file_with_a_mode_that_does_not_verify() {
    expect(
        &tls_pool("tls = \"require\"\ntls_ca_file = \"ca.pem\""),
        "tls_ca_file",
        "pools.main.tls_ca_file",
        "tls_ca_file has no effect with tls = \"require\", which does not verify the certificate; use \"verify-ca\" or \"verify-full\"",
    );
}

#[test]
fn tls_server_name_is_kept_for_sni_by_modes_that_do_not_verify() {
    let text = tls_pool("tls = \"require\"\ntls_server_name = \"db.internal\"");
    assert_eq!(parse_ok(&text).pools[0].tls.server_name.as_deref(), Some("db.internal"));
}

#[test]
fn a_backend_names_its_own_tls_server_name() {
    let text = format!(
        "{LISTENER}{ROUTING}[pools.main]\ntls = \"verify-full\"\n\
         backends = [{{ host = \"10.0.0.1\", port = 5432, tls_server_name = \"db1.internal\" }}]\n"
    );
    let config = parse_ok(&text);
    assert_eq!(config.pools[0].backends[0].tls_server_name.as_deref(), Some("db1.internal"));
    let rendered = config.redacted_toml();
    assert_eq!(parse_ok(&rendered).pools[0].backends, config.pools[0].backends, "{rendered}");
}

#[test]
fn a_backend_tls_server_name_that_is_no_name() {
    let text = format!(
        "{LISTENER}{ROUTING}[pools.main]\ntls = \"verify-full\"\n\
         backends = [{{ host = \"10.0.0.1\", port = 5432, tls_server_name = \"db 1\" }}]\n"
    );
    expect(
        &text,
        "tls_server_name",
        "pools.main.backends[0].tls_server_name",
        "tls_server_name \"db 1\" is neither a DNS name nor an IP address",
    );
}

#[test]
fn tls_server_name_that_is_no_name() {
    expect(
        &tls_pool("tls = \"verify-full\"\ntls_server_name = \"db internal\""),
        "tls_server_name",
        "pools.main.tls_server_name",
        "tls_server_name \"db internal\" is neither a DNS name nor an IP address",
    );
}

#[test]
fn tls_is_accepted_on_pools_of_mysql_backends_and_pools_serving_mysql_clients() {
    let of_mysql = format!(
        "{}{ROUTING}{}",
        listener("mysql", "127.0.0.1:6033", ""),
        pool("main", "protocol = \"mysql\"\ntls = \"require\"")
    );
    let serving = format!(
        "{}[routing]\nmysql_default_pool = \"main\"\n\n{}",
        listener("mysql", "127.0.0.1:6033", ""),
        pool("main", "tls = \"verify-full\"")
    );
    for (text, mode) in [(of_mysql, crate::config::TlsMode::Require), (serving, crate::config::TlsMode::VerifyFull)] {
        assert_eq!(parse_ok(&text).pools[0].tls.mode, mode, "{text}");
    }
}

// ---- client TLS (#38) ----

fn tls_listener(keys: &str) -> String {
    format!("{}{POOL}{ROUTING}", listener("postgres", "127.0.0.1:6432", keys))
}

#[test]
fn listener_tls_settings_are_read_with_disable_as_the_default() {
    assert_eq!(parse_ok(&base()).listeners[0].tls, crate::config::ListenerTls::default());
    let text = tls_listener(
        "tls = \"require\"\ntls_cert_file = \"/etc/qp/s.pem\"\ntls_key_file = \"/etc/qp/k.pem\"\n\
         tls_client_ca_file = \"/etc/qp/ca.pem\"\ntls_client_cert_user = true\ntls_resumption = true",
    );
    let tls = parse_ok(&text).listeners[0].tls.clone();
    assert_eq!(tls.mode, crate::config::ClientTls::Require);
    assert_eq!(tls.cert_file.as_deref(), Some(std::path::Path::new("/etc/qp/s.pem")));
    assert_eq!(tls.key_file.as_deref(), Some(std::path::Path::new("/etc/qp/k.pem")));
    assert_eq!(tls.client_ca_file.as_deref(), Some(std::path::Path::new("/etc/qp/ca.pem")));
    assert!(tls.client_cert_user);
    assert!(tls.resumption);
    assert!(tls.server.is_none(), "the files are loaded by the control plane, not parsed here");
    let rendered = parse_ok(&text).redacted_toml();
    assert_eq!(parse_ok(&rendered).listeners[0].tls, tls, "rendered as written:\n{rendered}");
}

#[test]
fn unknown_listener_tls_mode() {
    expect(
        &tls_listener("tls = \"prefer\""),
        "tls = ",
        "listeners[0].tls",
        "invalid listener tls mode \"prefer\": expected one of \"disable\", \"allow\", \"require\"",
    );
}

#[test]
fn listener_tls_without_a_certificate_file() {
    expect(
        &tls_listener("tls = \"allow\"\ntls_key_file = \"k.pem\""),
        "tls = ",
        "listeners[0].tls_cert_file",
        "tls = \"allow\" needs tls_cert_file: the certificate (chain) and key the router presents",
    );
}

#[test]
fn listener_tls_without_a_key_file() {
    expect(
        &tls_listener("tls = \"require\"\ntls_cert_file = \"c.pem\""),
        "tls = ",
        "listeners[0].tls_key_file",
        "tls = \"require\" needs tls_key_file: the certificate (chain) and key the router presents",
    );
}

#[test]
fn listener_tls_files_with_tls_disabled() {
    expect(
        &tls_listener("tls_client_ca_file = \"ca.pem\""),
        "tls_client_ca_file",
        "listeners[0].tls_client_ca_file",
        "tls_client_ca_file has no effect with tls = \"disable\"",
    );
}

#[test]
fn listener_client_cert_user_with_tls_disabled() {
    expect(
        &tls_listener("tls_client_cert_user = true"),
        "tls_client_cert_user",
        "listeners[0].tls_client_cert_user",
        "tls_client_cert_user has no effect with tls = \"disable\"",
    );
}

#[test]
fn listener_resumption_with_tls_disabled() {
    expect(
        &tls_listener("tls_resumption = true"),
        "tls_resumption",
        "listeners[0].tls_resumption",
        "tls_resumption has no effect with tls = \"disable\"",
    );
}

#[test]
fn listener_client_cert_user_without_a_client_ca() {
    expect(
        &tls_listener(
            "tls = \"require\"\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\ntls_client_cert_user = true",
        ),
        "tls_client_cert_user",
        "listeners[0].tls_client_cert_user",
        "tls_client_cert_user needs tls_client_ca_file: only a verified client certificate names a user",
    );
}

#[test]
fn listener_tls_file_that_is_empty() {
    expect(
        &tls_listener("tls = \"require\"\ntls_cert_file = \"\"\ntls_key_file = \"k.pem\""),
        "tls_cert_file",
        "listeners[0].tls_cert_file",
        "tls_cert_file must not be empty",
    );
}

// ---- shape limits (#41) ----

#[test]
fn max_concurrent_keyed_by_something_else_than_a_fingerprint() {
    let text = format!("{LISTENER}{}{ROUTING}", pool("main", "[pools.main.max_concurrent]\n\"select 1\" = 2"));
    expect(
        &text,
        "\"select 1\" = 2",
        "pools.main.max_concurrent.select 1",
        "\"select 1\" is not a shape's fingerprint_hex (16 hex digits, as GET /api/stats/digests shows it)",
    );
}

#[test]
fn max_concurrent_of_zero() {
    let text = format!("{LISTENER}{}{ROUTING}", pool("main", "[pools.main.max_concurrent]\n\"00000000000000ff\" = 0"));
    expect(&text, "= 0", "pools.main.max_concurrent.00000000000000ff", "00000000000000ff must be at least 1");
}

#[test]
fn share_weights_without_fair_share() {
    let text = format!("{LISTENER}{}{ROUTING}", pool("main", "[pools.main.share_weights]\nalice = 2"));
    expect(&text, "alice = 2", "pools.main.share_weights", "share_weights has no effect without fair_share = true");
}

#[test]
fn shape_limits_parse_into_the_pool() {
    let extra = "adaptive_limit = true\nlimit_wait = \"250ms\"\nfair_share = true\n\
                 [pools.main.max_concurrent]\n\"00000000000000ff\" = 3\n[pools.main.share_weights]\nalice = 2";
    let config = parse_ok(&format!("{LISTENER}{}{ROUTING}", pool("main", extra)));
    let limits = &config.pools[0].shape_limits;
    assert!(limits.adaptive && limits.fair_share);
    assert_eq!(limits.wait, std::time::Duration::from_millis(250));
    assert_eq!(limits.max_concurrent.get(&0xff).map(|n| n.get()), Some(3));
    assert_eq!(limits.share_weights.get("alice").map(|n| n.get()), Some(2));
    // The rendered configuration (SHOW CONFIG, GET /api/config) carries them back.
    assert_eq!(parse_ok(&config.redacted_toml()).pools[0].shape_limits, *limits);
}
