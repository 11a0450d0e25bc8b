//! Tests of the configuration module: the shipped example, defaults, syntax and unknown-key
//! errors, rendering. Value grammars are in `values`, one test per validation issue in `issues`.

mod issues;
mod mysql_split;
mod values;

use super::*;

const FILE: &str = "querypilot.toml";
const EXAMPLE: &str = include_str!("../../../querypilot.toml.example");

/// A minimal valid configuration: one postgres listener, one pool, a default pool.
const LISTENER: &str = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n\n";
const POOL: &str = "[pools.main]\nbackends = [{ host = \"db\", port = 5432 }]\n\n";
const ROUTING: &str = "[routing]\ndefault_pool = \"main\"\n\n";

fn base() -> String {
    format!("{LISTENER}{POOL}{ROUTING}")
}

fn parse(text: &str) -> Result<Config, ConfigErrors> {
    Config::parse(text, FILE)
}

fn parse_ok(text: &str) -> Config {
    match parse(text) {
        Ok(config) => config,
        Err(errors) => panic!("expected a valid config, got:\n{errors}\n--- text ---\n{text}"),
    }
}

fn issues(text: &str) -> Vec<ConfigIssue> {
    match parse(text) {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(errors) => {
            assert_eq!(errors.file, FILE);
            errors.issues
        }
    }
}

/// The single issue of `text`; fails when there are more, so no test passes by accident.
fn one_issue(text: &str) -> ConfigIssue {
    let mut all = issues(text);
    assert_eq!(all.len(), 1, "expected one issue, got {all:#?}");
    all.remove(0)
}

/// 1-based line of the first line containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    match text.lines().position(|l| l.contains(needle)) {
        Some(i) => i + 1,
        None => panic!("`{needle}` not in text"),
    }
}

#[test]
fn example_file_parses() {
    let config = parse_ok(EXAMPLE);
    let listeners: Vec<_> =
        config.listeners.iter().map(|l| (l.name.as_str(), l.protocol, l.bind.to_string())).collect();
    assert_eq!(
        listeners,
        [
            ("pg", Protocol::Postgres, "127.0.0.1:6432".to_string()),
            ("mysql", Protocol::MySql, "127.0.0.1:6033".to_string())
        ]
    );
    let names: Vec<_> = config.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["my_primary", "my_replicas", "pg_primary", "pg_replicas"]);
    assert!(config.routing.read_write_split);
    assert_eq!(config.routing.read_pool.as_deref(), Some("pg_replicas"));
    assert_eq!(config.routing.primary_pool(Protocol::MySql), Some("my_primary"));
    assert_eq!(config.routing.primary_pool(Protocol::Postgres), Some("pg_primary"));
    assert_eq!(config.routing.rules.len(), 1);
    assert_eq!(config.routing.rules[0].target, RuleTarget::Pool("my_replicas".into()));
    let replicas = config.pool("pg_replicas").map(|p| p.backends.clone()).unwrap_or_default();
    assert_eq!(replicas.len(), 2);
    assert_eq!(replicas[1].max_replica_lag_bytes, Some(16 << 20));
    assert_eq!(config.listeners[1].max_message_size, 16 << 20);
    assert!(config.metrics.enabled);
}

/// Every commented-out key and rule in the example is itself valid once uncommented, so the
/// documentation cannot drift from what the parser accepts.
#[test]
fn example_with_every_commented_setting_enabled_parses() {
    fn setting(line: &str) -> Option<&str> {
        let body = line.strip_prefix("# ")?;
        let is_header = body.starts_with("[[") && body.ends_with("]]");
        let key = body.split(" = ").next()?;
        let is_key =
            body.contains(" = ") && !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        (is_header || is_key).then_some(body)
    }
    let uncommented: Vec<&str> = EXAMPLE.lines().map(|l| setting(l).unwrap_or(l)).collect();
    let text = uncommented.join("\n");
    let enabled = EXAMPLE.lines().filter(|l| setting(l).is_some()).count();
    assert!(enabled >= 25, "only {enabled} commented settings found");
    let config = parse_ok(&text);
    assert_eq!(config.general.cores, Some(vec![0, 1]));
    assert_eq!(config.routing.pattern_rules.len(), 4);
    assert_eq!(config.routing.pattern_rules[0].retry.map(|r| r.maximum_attempts.get()), Some(3));
    assert_eq!(config.routing.rules.len(), 2);
    assert_eq!(config.translations.len(), 1);
    assert_eq!(config.pool("pg_primary").and_then(|p| p.timeouts.query), Some(std::time::Duration::from_secs(60)));
    assert_eq!(
        config.pool("pg_primary").and_then(|p| p.timeouts.idle_transaction),
        Some(std::time::Duration::from_secs(30))
    );
    assert_eq!(config.metrics.admin_token.as_deref(), Some("change-me"));
}

#[test]
fn defaults_are_applied() {
    let config = parse_ok(&base());
    assert_eq!(config.general.pool_mode, PoolMode::Session);
    assert_eq!(config.general.cores, None);
    assert_eq!(config.general.shutdown_drain, std::time::Duration::from_secs(30));
    assert_eq!(config.general.log_level, "info");
    let listener = &config.listeners[0];
    assert_eq!(listener.name, "postgres-0");
    assert!(!listener.allow_anonymous);
    assert_eq!(listener.auth_method, ClientAuth::ScramSha256);
    assert_eq!(listener.max_client_connections, None);
    assert_eq!(listener.max_message_size, 64 << 20);
    let routing = &config.routing;
    assert!(!routing.read_write_split);
    assert_eq!(routing.read_your_writes, ReadYourWrites::Causal);
    assert_eq!(routing.replica_fallback, ReplicaFallback::Primary);
    assert!(routing.replica_safe_functions.is_empty());
    assert_eq!(
        routing.cache,
        CacheConfig {
            enabled: true,
            normalization_strategy: NormalizationStrategy::String,
            size: std::num::NonZeroUsize::new(10_000).unwrap()
        }
    );
    assert!(routing.pattern_rules.is_empty() && routing.rules.is_empty() && config.translations.is_empty());
    assert!(!config.metrics.enabled);
    assert_eq!(config.metrics.bind.to_string(), "127.0.0.1:9090");
    assert_eq!(config.metrics.admin_token, None);
}

#[test]
fn pool_defaults_are_applied() {
    let config = parse_ok(&base());
    let pool = config.pool("main").unwrap();
    let secs = std::time::Duration::from_secs;
    assert_eq!(pool.mode, PoolMode::Session);
    assert_eq!((pool.protocol, &pool.username, &pool.password), (None, &None, &None));
    assert_eq!(pool.database, "main");
    assert_eq!(pool.backends[0].weight.get(), 1);
    assert_eq!((pool.backends[0].max_replica_lag, pool.backends[0].max_replica_lag_bytes), (None, None));
    assert_eq!(
        (pool.limits.min_connections, pool.limits.max_connections.get(), pool.limits.max_prepared_statements.get()),
        (1, 10, 256)
    );
    assert_eq!(
        pool.timeouts,
        PoolTimeouts {
            acquire: secs(30),
            idle: secs(600),
            idle_check: std::time::Duration::ZERO,
            connect: secs(10),
            query: None,
            idle_transaction: None,
            failover_wait: std::time::Duration::ZERO,
        }
    );
    assert!(!pool.raw_passthrough);
    let retry = pool.retry;
    assert_eq!(retry.maximum_attempts.get(), 1);
    assert_eq!((retry.backoff_base, retry.backoff_max), (std::time::Duration::from_millis(10), secs(1)));
    assert_eq!((retry.jitter, retry.deadline, retry.notify_client), (true, secs(5), false));
    let health = &pool.health;
    assert_eq!((health.interval, health.timeout), (secs(2), secs(1)));
    assert_eq!((health.failure_threshold.get(), health.success_threshold.get()), (3, 2));
}

#[test]
fn pool_mode_falls_back_to_general_and_can_be_overridden() {
    let text = format!(
        "[general]\npool_mode = \"transaction\"\n{LISTENER}{POOL}{ROUTING}\
         [pools.other]\nmode = \"statement\"\nbackends = [{{ host = \"db2\", port = 5432 }}]\n"
    );
    let config = parse_ok(&text);
    assert_eq!(config.pool("main").map(|p| p.mode), Some(PoolMode::Transaction));
    assert_eq!(config.pool("other").map(|p| p.mode), Some(PoolMode::Statement));
    assert_eq!(config.pool("missing"), None);
}

#[test]
fn default_listener_names_use_protocol_and_index() {
    let text = format!("{}[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:6033\"\n", base());
    let config = parse_ok(&text);
    let names: Vec<_> = config.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["postgres-0", "mysql-1"]);
}

#[test]
fn pools_are_sorted_by_name_and_found_by_lookup() {
    let text = format!("{LISTENER}{ROUTING}[pools.zeta]\nbackends = [{{ host = \"z\", port = 1 }}]\n{POOL}[pools.alpha]\nbackends = [{{ host = \"a\", port = 1 }}]\n");
    let config = parse_ok(&text);
    let names: Vec<_> = config.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["alpha", "main", "zeta"]);
    for name in names {
        assert_eq!(config.pool(name).map(|p| p.name.as_str()), Some(name));
    }
}

#[test]
fn pool_tables_implied_by_dotted_headers_are_accepted() {
    let text = format!("{LISTENER}{ROUTING}[[pools.main.backends]]\nhost = \"db\"\nport = 5432\n\n[pools.main.retry]\nmaximum_attempts = 3\n");
    let pool = parse_ok(&text).pool("main").cloned().unwrap();
    assert_eq!(pool.backends[0].host, "db");
    assert_eq!(pool.retry.maximum_attempts.get(), 3);
}

#[test]
fn a_routing_rule_may_carry_its_own_retry_policy() {
    let text = format!(
        "{}[[routing.rules]]\nname = \"a\"\nuser = \"bob\"\npool = \"main\"\nretry = {{ maximum_attempts = 4, backoff_base = \"5ms\", jitter = false }}\n\
         [[routing.pattern_rules]]\nname = \"p\"\ntype = \"template\"\npattern = \"SELECT ?\"\npool = \"main\"\n",
        base()
    );
    let config = parse_ok(&text);
    let retry = config.routing.rules[0].retry.expect("the rule's policy");
    assert_eq!(retry.maximum_attempts.get(), 4);
    assert_eq!((retry.backoff_base, retry.jitter), (std::time::Duration::from_millis(5), false));
    // Keys left out take the defaults of `[pools.<name>.retry]`, not the pool's values.
    let defaults = config.pool("main").unwrap().retry;
    assert_eq!(
        (retry.backoff_max, retry.deadline, retry.notify_client),
        (defaults.backoff_max, defaults.deadline, defaults.notify_client)
    );
    assert_eq!(config.routing.pattern_rules[0].retry, None, "no retry key: the pool's policy applies");
}

#[test]
fn unknown_top_level_key_reports_its_line() {
    let text = format!("listen_port = 5\n{}", base());
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column), (line_of(&text, "listen_port"), 1));
    assert_eq!(issue.path, "listen_port");
    assert!(issue.message.starts_with("unknown field `listen_port`"), "{}", issue.message);
}

#[test]
fn unknown_nested_key_reports_its_line_and_path() {
    let text = format!("{}[pools.main.retry]\nmaximum_attempts = 2\nmax_attempts = 3\n", base());
    let issue = one_issue(&text);
    assert_eq!(issue.line, line_of(&text, "max_attempts = 3"));
    assert_eq!(issue.path, "pools.main.retry.max_attempts");
    assert!(issue.message.starts_with("unknown field `max_attempts`"), "{}", issue.message);
}

#[test]
fn unknown_key_in_second_listener_names_its_index() {
    let text = format!("{}[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:6033\"\nport = 1\n", base());
    let issue = one_issue(&text);
    assert_eq!(issue.line, line_of(&text, "port = 1"));
    assert_eq!(issue.path, "listeners[1].port");
}

#[test]
fn unknown_key_in_inline_backend_reports_its_column() {
    let text = format!("{LISTENER}{ROUTING}[pools.main]\nbackends = [{{ host = \"db\", prot = 5432 }}]\n");
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column), (line_of(&text, "prot ="), 28));
    assert_eq!(issue.path, "pools.main.backends");
    assert!(issue.message.starts_with("unknown field `prot`"), "{}", issue.message);
}

#[test]
fn syntax_error_reports_line_and_column() {
    let text = format!("{}[metrics]\nbind = \"127.0.0.1:9090\nenabled = true\n", base());
    let issue = one_issue(&text);
    assert_eq!(issue.line, line_of(&text, "bind = \"127.0.0.1:9090"));
    assert_eq!(issue.path, "metrics.bind");
}

#[test]
fn wrong_value_type_is_reported_at_the_value() {
    let text = format!(
        "{LISTENER}{ROUTING}[pools.main]\nbackends = [{{ host = \"db\", port = 5432 }}]\nmin_connections = \"2\"\n"
    );
    let issue = one_issue(&text);
    assert_eq!((issue.line, issue.column), (line_of(&text, "min_connections"), 19));
    assert!(issue.message.contains("expected i64"), "{}", issue.message);
}

#[test]
fn missing_required_key_is_reported_at_its_table() {
    let text = format!("{}[[listeners]]\nbind = \"127.0.0.1:6033\"\n", base());
    let issue = one_issue(&text);
    assert_eq!(issue.line, line_of(&text, "127.0.0.1:6033") - 1);
    assert_eq!(issue.path, "listeners[1]");
    assert_eq!(issue.message, "missing field `protocol`");
}

#[test]
fn display_prints_one_line_per_issue() {
    let text = format!("{LISTENER}{ROUTING}[pools.main]\nbackends = [{{ host = \"db\", port = 5432, weight = 0 }}]\nmax_connections = 0\n");
    let errors = parse(&text).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "querypilot.toml:9:50: pools.main.backends[0].weight: weight must be at least 1\n\
         querypilot.toml:10:19: pools.main.max_connections: max_connections must be at least 1"
    );
    let as_error: &dyn std::error::Error = &errors;
    assert!(as_error.source().is_none());
    assert_eq!(errors.code(), "config.invalid");
}

#[test]
fn every_issue_is_reported_at_once_in_file_order() {
    let text = "[general]\nshutdown_drain = \"soon\"\n\n\
                [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\nmax_message_size = \"2GiB\"\n\n\
                [pools.main]\nbackends = [{ host = \"db\", port = 0 }]\n\n\
                [routing]\ndefault_pool = \"nope\"\n";
    let found: Vec<_> = issues(text).into_iter().map(|i| (i.line, i.path)).collect();
    assert_eq!(
        found,
        [
            (2, "general.shutdown_drain".to_string()),
            (7, "listeners[0].max_message_size".to_string()),
            (10, "pools.main.backends[0].port".to_string()),
            (13, "routing.default_pool".to_string()),
        ]
    );
}

#[test]
fn redacted_toml_hides_every_secret() {
    let text = EXAMPLE.replace("# admin_token = \"change-me\"", "admin_token = \"t0psecret\"").replace(
        "# mock_salt_key = \"a long random string kept with the configuration\"",
        "mock_salt_key = \"m0ck-key\"",
    );
    let config = parse_ok(&text);
    assert_eq!(config.metrics.admin_token.as_deref(), Some("t0psecret"));
    assert_eq!(config.auth.mock_salt_key.as_deref(), Some("m0ck-key"));
    let rendered = config.redacted_toml();
    assert!(!rendered.contains("change-me"), "{rendered}");
    assert!(!rendered.contains("t0psecret") && !rendered.contains("m0ck-key"), "{rendered}");
    // Four pool passwords, the two console passwords, the admin token and the mock salt key.
    assert_eq!(rendered.matches("\"***\"").count(), 8, "{rendered}");
}

#[test]
fn redacted_toml_parses_back_to_the_same_config() {
    let text = format!(
        "{EXAMPLE}\n[[routing.pattern_rules]]\nname = \"t\"\ntype = \"template\"\npattern = \"SELECT 1\"\nreject = \"no\"\npriority = -3\n\
         [[routing.pattern_rules]]\nname = \"r\"\ntype = \"regex\"\npattern = \"^UPDATE\"\npool = \"pg_primary\"\nretry = {{ maximum_attempts = 3, deadline = \"2s\" }}\n\
         [[translation.rules]]\noriginal_sql = \"SELECT NOW()\"\ntranslated_sql = \"SELECT CURRENT_TIMESTAMP\"\ntarget_pool = \"pg_primary\"\n"
    );
    let config = parse_ok(&text);
    assert_eq!((config.translations.len(), config.routing.pattern_rules.len()), (1, 2));
    assert!(config.routing.pattern_rules[1].retry.is_some());
    let mut reparsed = parse_ok(&config.redacted_toml());
    for pool in &mut reparsed.pools {
        assert_eq!(pool.password.as_deref(), Some("***"));
        pool.password = Some("change-me".into());
    }
    for (user, password) in &mut reparsed.console.passwords {
        assert_eq!(password, "***");
        *password = config.console.passwords[user].clone();
    }
    assert_eq!(reparsed, config);
}

#[test]
fn primary_pool_prefers_mysql_default_then_split_then_default() {
    let mut routing = parse_ok(&base()).routing;
    assert_eq!(routing.primary_pool(Protocol::MySql), Some("main"));
    routing.read_write_split = true;
    routing.write_pool = Some("w".into());
    assert_eq!(routing.primary_pool(Protocol::Postgres), Some("w"));
    routing.mysql = Some(MysqlRouting { default_pool: Some("m".into()), ..MysqlRouting::default() });
    assert_eq!(routing.primary_pool(Protocol::MySql), Some("m"));
    assert_eq!(routing.primary_pool(Protocol::Postgres), Some("w"));
    assert_eq!(routing.read_pool_of(Protocol::MySql), None);
    let own_split = MysqlRouting {
        read_write_split: true,
        read_pool: Some("mr".into()),
        write_pool: Some("mw".into()),
        default_pool: None,
    };
    routing.mysql = Some(own_split);
    assert_eq!(routing.primary_pool(Protocol::MySql), Some("mw"));
    assert_eq!(routing.read_pool_of(Protocol::MySql), Some("mr"));
}

#[test]
fn admin_api_listens_on_the_next_port() {
    let mut metrics = parse_ok(&base()).metrics;
    assert_eq!(metrics.admin_bind().to_string(), "127.0.0.1:9091");
    metrics.bind = "[::1]:0".parse().unwrap();
    assert_eq!(metrics.admin_bind().to_string(), "[::1]:0");
}

#[test]
fn failover_wait_parses_renders_and_refuses_a_bad_duration() {
    let with = |value: &str| base().replace("[pools.main]\n", &format!("[pools.main]\nfailover_wait = {value}\n"));
    let config = parse_ok(&with("\"1500ms\""));
    let pool = config.pool("main").unwrap();
    assert_eq!(pool.timeouts.failover_wait, std::time::Duration::from_millis(1500));
    assert!(config.redacted_toml().contains("failover_wait = \"1500ms\""), "{}", config.redacted_toml());
    assert_eq!(parse_ok(&config.redacted_toml()), config);
    assert!(parse_ok(&with("\"0s\"")).pool("main").unwrap().timeouts.failover_wait.is_zero());
    let e = parse(&with("\"soon\"")).unwrap_err().to_string();
    assert!(e.contains("pools.main.failover_wait"), "{e}");
}
