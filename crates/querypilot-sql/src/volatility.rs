//! Function catalog: how volatile each function is and which side effects it has.
//!
//! Owns the built-in lists for PostgreSQL and MySQL/MariaDB, plus the entries loaded from the
//! backend at start and on reload ([`PG_UDF_QUERY`], [`MYSQL_UDF_QUERY`]). Depends on nothing of
//! the crate except the sibling `analyze` fact types.
//!
//! Safety rule: a function the catalog does not know is treated as volatile by the analysis, so
//! the lists only need the functions worth sending to a replica plus those with side effects.
//! Where two sources disagree (built-in list vs. backend row, or several schemas defining the same
//! unqualified name) the most volatile answer wins, because the analysis cannot know which one
//! `search_path` resolves to.
//!
//! Decisions on session-dependent built-ins: `current_setting`, `current_user`, MySQL `@@vars`
//! and `database()` are stable: the session layer re-applies the client's SETs / USE on whatever
//! backend it borrows, so a replica answers as the primary would. `pg_backend_pid()` and
//! `connection_id()` are volatile: they name the physical connection, which the client may then
//! try to cancel or kill.

use std::collections::HashMap;

use crate::analyze::{Affinity, AffinitySet};
use crate::Dialect;

/// How a function's result may change (PostgreSQL `provolatile`). Ordered so `max` combines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Volatility {
    /// Same inputs, same result, forever.
    Immutable,
    /// Same result within one statement (now(), current_setting(), table reads).
    Stable,
    /// May change on every call or have side effects; also the answer for unknown functions.
    Volatile,
}

/// What the catalog knows about one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Most volatile known overload.
    pub volatility: Volatility,
    /// True when calling it changes data that must reach the primary (nextval, pg_notify, lo_*).
    pub writes: bool,
    /// Connection affinity created or needed by calling it.
    pub affinity: AffinitySet,
}

/// One user-function row read from the backend, ready for [`FunctionCatalog::insert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdfRow {
    /// Schema (PostgreSQL namespace or MySQL database).
    pub schema: String,
    /// Function name.
    pub name: String,
    /// Volatility derived from the row.
    pub volatility: Volatility,
}

/// Built-in entries plus backend-loaded ones for one dialect.
#[derive(Debug, Clone)]
pub struct FunctionCatalog {
    dialect: Dialect,
    builtin: HashMap<&'static str, FunctionInfo>,
    /// Backend-loaded entries, keyed by `schema.name` and by `name` (most volatile across schemas).
    loaded: HashMap<String, Volatility>,
}

/// Query the runtime runs on a PostgreSQL primary to load every function's volatility, built-ins
/// included (so the server's own `provolatile` refines our short built-in list). Columns: schema,
/// name, provolatile (`i`/`s`/`v`); feed each row to [`parse_pg_udf_row`].
///
/// System schemas are left out: the built-in list is the authority for built-ins, and it
/// deliberately differs from `pg_proc` for a few (e.g. `pg_is_in_recovery()` is VOLATILE there
/// because a promotion changes it, yet asking a replica is exactly what it is for). Built-ins
/// missing from the list stay unknown, which the analysis treats as volatile.
pub const PG_UDF_QUERY: &str = "SELECT n.nspname::text, p.proname::text, p.provolatile::text \
     FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'";

/// Query the runtime runs on a MySQL/MariaDB primary to load stored functions. Columns: schema,
/// name, IS_DETERMINISTIC (`YES`/`NO`), SQL_DATA_ACCESS; feed each row to [`parse_mysql_udf_row`].
pub const MYSQL_UDF_QUERY: &str = "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, IS_DETERMINISTIC, SQL_DATA_ACCESS \
     FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION'";

/// Turns one [`PG_UDF_QUERY`] row into an entry; `None` for an unrecognized `provolatile`
/// (the function then stays unknown, hence volatile).
pub fn parse_pg_udf_row(schema: &str, name: &str, provolatile: &str) -> Option<UdfRow> {
    let volatility = match provolatile.trim() {
        "i" => Volatility::Immutable,
        "s" => Volatility::Stable,
        "v" => Volatility::Volatile,
        _ => return None,
    };
    Some(UdfRow { schema: schema.to_owned(), name: name.to_owned(), volatility })
}

/// Turns one [`MYSQL_UDF_QUERY`] row into an entry with the volatility the function *declares*.
/// A function reading tables depends on their contents, so the best a stored function gets is
/// stable: DETERMINISTIC with NO SQL / CONTAINS SQL / READS SQL DATA is stable; NOT DETERMINISTIC
/// or MODIFIES SQL DATA is volatile. `None` for values MySQL does not define.
///
/// MySQL never checks these declarations (a `READS SQL DATA` function may write or set
/// variables), so the loader keeps a declared stable only for functions the operator lists in
/// `routing.replica_safe_functions`; every other stored function is volatile (#19).
pub fn parse_mysql_udf_row(schema: &str, name: &str, is_deterministic: &str, sql_data_access: &str) -> Option<UdfRow> {
    let deterministic = match is_deterministic.trim().to_ascii_uppercase().as_str() {
        "YES" => true,
        "NO" => false,
        _ => return None,
    };
    let modifies = match sql_data_access.trim().to_ascii_uppercase().as_str() {
        "NO SQL" | "CONTAINS SQL" | "READS SQL DATA" => false,
        "MODIFIES SQL DATA" => true,
        _ => return None,
    };
    let volatility = if deterministic && !modifies { Volatility::Stable } else { Volatility::Volatile };
    Some(UdfRow { schema: schema.to_owned(), name: name.to_owned(), volatility })
}

impl FunctionCatalog {
    /// The built-in catalog of `dialect`, with no backend entries yet.
    pub fn builtin(dialect: Dialect) -> Self {
        let mut builtin = HashMap::new();
        let (lists, special) = match dialect {
            Dialect::Postgres => (PG_PLAIN, PG_SPECIAL),
            Dialect::MySql => (MYSQL_PLAIN, MYSQL_SPECIAL),
        };
        let plain = FunctionInfo { volatility: Volatility::Immutable, writes: false, affinity: AffinitySet::EMPTY };
        for (volatility, names) in lists {
            for name in names.iter() {
                builtin.insert(*name, FunctionInfo { volatility: *volatility, ..plain });
            }
        }
        for (name, volatility, writes, affinities) in special {
            let mut affinity = AffinitySet::EMPTY;
            for a in affinities.iter() {
                affinity.insert(*a);
            }
            builtin.insert(*name, FunctionInfo { volatility: *volatility, writes: *writes, affinity });
        }
        FunctionCatalog { dialect, builtin, loaded: HashMap::new() }
    }

    /// The dialect this catalog describes.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Adds a backend-loaded function. Its qualified name takes exactly `v`; its unqualified name
    /// takes the most volatile value seen across schemas.
    pub fn insert(&mut self, schema: Option<&str>, name: &str, v: Volatility) {
        let name = self.key(name);
        if let Some(schema) = schema {
            let qualified = format!("{}.{name}", self.key(schema));
            self.loaded.insert(qualified, v);
        }
        self.loaded.entry(name.into_owned()).and_modify(|old| *old = (*old).max(v)).or_insert(v);
    }

    /// Adds a row produced by [`parse_pg_udf_row`] or [`parse_mysql_udf_row`].
    pub fn insert_row(&mut self, row: &UdfRow) {
        self.insert(Some(&row.schema), &row.name, row.volatility);
    }

    /// Volatility of `name` (`fn` or `schema.fn`), `None` when unknown.
    pub fn volatility(&self, name: &str) -> Option<Volatility> {
        self.lookup(name).map(|i| i.volatility)
    }

    /// What the backends said about `name`, ignoring the built-in lists: for a call whose quoted
    /// name cannot be the built-in of the same letters (#19: `"Now"()` is not `now()`).
    pub fn lookup_loaded(&self, name: &str) -> Option<FunctionInfo> {
        merge(None, self.loaded.get(self.key(name).as_ref()).copied())
    }

    /// Everything known about `name` (`fn` or `schema.fn`), `None` when unknown. A PostgreSQL
    /// name is matched as the server would after folding, so callers pass unquoted parts in
    /// lower case and quoted parts as written; MySQL function names match in any case.
    ///
    /// A qualified name matches its loaded entry; it falls back to the built-in list only for
    /// the system schema (`pg_catalog`), since `myschema.lower` may be anything.
    pub fn lookup(&self, name: &str) -> Option<FunctionInfo> {
        let name = self.key(name);
        match name.rsplit_once('.') {
            Some((schema, base)) => {
                let loaded = self.loaded.get(name.as_ref()).copied();
                let builtin = if self.dialect == Dialect::Postgres && schema == "pg_catalog" {
                    self.builtin.get(base).copied()
                } else {
                    None
                };
                merge(builtin, loaded)
            }
            None => merge(self.builtin.get(name.as_ref()).copied(), self.loaded.get(name.as_ref()).copied()),
        }
    }

    /// The map key of a name: PostgreSQL names are case-sensitive once folded (a user function
    /// `"Now"` must not make `now()` volatile), MySQL function names are not.
    fn key<'a>(&self, name: &'a str) -> std::borrow::Cow<'a, str> {
        match self.dialect {
            Dialect::Postgres => std::borrow::Cow::Borrowed(name),
            Dialect::MySql => std::borrow::Cow::Owned(name.to_ascii_lowercase()),
        }
    }
}

/// Combines a built-in entry and a loaded volatility: side effects from the built-in, the most
/// volatile of both.
fn merge(builtin: Option<FunctionInfo>, loaded: Option<Volatility>) -> Option<FunctionInfo> {
    match (builtin, loaded) {
        (Some(b), Some(v)) => Some(FunctionInfo { volatility: b.volatility.max(v), ..b }),
        (Some(b), None) => Some(b),
        (None, Some(v)) => Some(FunctionInfo { volatility: v, writes: false, affinity: AffinitySet::EMPTY }),
        (None, None) => None,
    }
}

use Affinity::{AdvisoryLock, FoundRows, GetLock, LastInsertId, Sequence, SessionSet, TransactionScoped};
use Volatility::{Immutable, Stable, Volatile};

/// A function with side effects: (name, volatility, writes, affinities).
type Special = (&'static str, Volatility, bool, &'static [Affinity]);

/// Aggregates and window functions: immutable for routing (they only combine row values).
#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const AGGREGATES: &[&str] = &[
    "count", "sum", "avg", "min", "max", "string_agg", "array_agg", "json_agg", "jsonb_agg",
    "json_object_agg", "jsonb_object_agg", "group_concat", "json_arrayagg", "json_objectagg",
    "bool_and", "bool_or", "every", "bit_and", "bit_or", "bit_xor", "std", "stddev", "stddev_pop",
    "stddev_samp", "variance", "var_pop", "var_samp", "corr", "covar_pop", "covar_samp",
    "regr_slope", "regr_intercept", "regr_count", "regr_r2", "percentile_cont", "percentile_disc",
    "mode", "any_value", "grouping", "row_number", "rank", "dense_rank", "percent_rank",
    "cume_dist", "ntile", "lag", "lead", "first_value", "last_value", "nth_value",
];

#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const PG_IMMUTABLE: &[&str] = &[
    "abs", "cbrt", "ceil", "ceiling", "degrees", "div", "exp", "floor", "ln", "log", "log10", "mod",
    "pi", "power", "radians", "round", "sign", "sqrt", "trunc", "width_bucket", "gcd", "lcm",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "greatest", "least", "coalesce",
    "nullif", "ascii", "btrim", "bit_length", "char_length", "character_length", "chr", "initcap",
    "left", "length", "lower", "lpad", "ltrim", "md5", "octet_length", "overlay", "position",
    "quote_ident", "quote_literal", "quote_nullable", "regexp_match", "regexp_matches",
    "regexp_replace", "regexp_split_to_array", "regexp_split_to_table", "regexp_like",
    "regexp_count", "regexp_substr", "repeat", "replace", "reverse", "right", "rpad", "rtrim",
    "split_part", "starts_with", "strpos", "substr", "substring", "translate", "upper", "encode",
    "decode", "sha224", "sha256", "sha384", "sha512", "to_hex", "string_to_array",
    "array_to_string", "array_length", "array_lower", "array_upper", "array_dims", "array_ndims",
    "array_append", "array_prepend", "array_cat", "array_position", "array_positions",
    "array_remove", "array_replace", "cardinality", "unnest", "generate_subscripts",
    "jsonb_build_object", "json_build_object", "jsonb_build_array", "json_build_array",
    "jsonb_extract_path", "jsonb_extract_path_text", "json_extract_path", "json_extract_path_text",
    "jsonb_array_length", "json_array_length", "jsonb_array_elements", "json_array_elements",
    "jsonb_array_elements_text", "json_array_elements_text", "jsonb_each", "json_each",
    "jsonb_each_text", "json_each_text", "jsonb_object_keys", "json_object_keys", "jsonb_typeof",
    "json_typeof", "jsonb_set", "jsonb_insert", "jsonb_strip_nulls", "json_strip_nulls",
    "jsonb_pretty", "jsonb_path_query", "jsonb_path_query_array", "jsonb_path_query_first",
    "jsonb_path_exists", "jsonb_path_match", "jsonb_object", "json_object", "make_date",
    "make_time", "make_interval", "isfinite", "justify_days", "justify_hours", "justify_interval",
    "num_nonnulls", "num_nulls", "int4range", "int8range", "numrange", "daterange", "lower_inc",
    "upper_inc", "lower_inf", "upper_inf", "isempty", "range_merge", "host", "network",
    "masklen", "family", "abbrev", "ts_rank", "ts_rank_cd", "setweight", "strip", "numnode",
    "pg_size_pretty", "pg_size_bytes", "hashtext", "int4", "int8", "float8", "numeric", "text",
    "bool", "concat", "concat_ws", "format", "array_fill", "tsvector_to_array", "similarity",
    "trim_array", "extract", "date_bin", "timezone", "bpchar",
    "to_ascii", "unistr", "normalize", "convert_from", "convert_to", "get_byte", "set_byte",
    "crc32", "crc32c", "array", "uuid_extract_timestamp", "uuid_extract_version",
];

#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const PG_STABLE: &[&str] = &[
    "now", "current_timestamp", "current_date", "current_time", "localtime", "localtimestamp",
    "transaction_timestamp", "statement_timestamp", "to_char", "to_date", "to_timestamp",
    "to_number", "age", "date_part", "date_trunc", "generate_series", "to_json", "to_jsonb",
    "row_to_json", "array_to_json", "to_tsvector", "to_tsquery",
    "plainto_tsquery", "phraseto_tsquery", "websearch_to_tsquery", "ts_headline",
    "current_setting", "current_user", "session_user", "user", "current_role", "current_schema",
    "current_schemas", "current_database", "current_catalog", "version", "pg_is_in_recovery",
    "pg_get_expr", "pg_get_indexdef", "pg_get_constraintdef", "pg_get_viewdef",
    "pg_get_triggerdef", "pg_get_functiondef", "pg_get_function_arguments",
    "pg_get_function_result", "pg_get_function_identity_arguments", "pg_get_ruledef",
    "pg_get_userbyid", "pg_get_serial_sequence", "pg_get_partkeydef", "pg_get_statisticsobjdef",
    "pg_get_keywords", "format_type", "pg_table_is_visible", "pg_type_is_visible",
    "pg_function_is_visible", "pg_collation_is_visible", "pg_opclass_is_visible",
    "pg_conversion_is_visible", "has_table_privilege", "has_schema_privilege",
    "has_database_privilege", "has_column_privilege", "has_function_privilege",
    "has_sequence_privilege", "has_any_column_privilege", "pg_has_role", "obj_description",
    "col_description", "shobj_description", "pg_encoding_to_char", "pg_char_to_encoding",
    "pg_postmaster_start_time", "pg_conf_load_time", "pg_typeof", "to_regclass", "to_regtype",
    "to_regproc", "to_regnamespace", "pg_tablespace_location", "pg_jit_available",
    "inet_client_addr", "inet_client_port", "inet_server_addr", "inet_server_port",
    "array_to_tsvector", "pg_column_size", "pg_relation_filenode",
    "pg_relation_filepath", "pg_my_temp_schema", "pg_is_other_temp_schema", "pg_options_to_table",
    "pg_trigger_depth", "pg_listening_channels", "row_security_active",
    "pg_index_column_has_property", "pg_indexam_has_property", "pg_index_has_property",
    "jsonb_path_query_tz",
    "jsonb_path_exists_tz", "jsonb_to_record", "jsonb_to_recordset", "json_to_record",
    "json_to_recordset", "jsonb_populate_record", "json_populate_record", "jsonb_path_match_tz",
];

#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const PG_VOLATILE: &[&str] = &[
    "random", "random_normal", "setseed", "clock_timestamp", "timeofday", "gen_random_uuid",
    "uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v4", "uuidv4", "uuidv7",
    "pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_backend_pid", "pg_relation_size",
    "pg_total_relation_size", "pg_table_size", "pg_indexes_size", "pg_database_size",
    "pg_current_wal_lsn", "pg_last_wal_receive_lsn", "pg_last_wal_replay_lsn",
    "pg_last_xact_replay_timestamp", "pg_read_file", "pg_read_binary_file", "pg_ls_dir",
    "pg_stat_file", "pg_cancel_backend", "pg_terminate_backend", "pg_reload_conf",
    "pg_rotate_logfile", "pg_stat_reset", "query_to_xml", "dblink", "dblink_connect",
    "dblink_disconnect", "pg_stat_get_activity", "pg_blocking_pids",
];

const PG_PLAIN: &[(Volatility, &[&str])] =
    &[(Immutable, AGGREGATES), (Immutable, PG_IMMUTABLE), (Stable, PG_STABLE), (Volatile, PG_VOLATILE)];

const PG_SPECIAL: &[Special] = &[
    ("nextval", Volatile, true, &[Sequence]),
    ("setval", Volatile, true, &[Sequence]),
    ("currval", Volatile, false, &[Sequence]),
    ("lastval", Volatile, false, &[Sequence]),
    ("pg_advisory_lock", Volatile, false, &[AdvisoryLock]),
    ("pg_advisory_lock_shared", Volatile, false, &[AdvisoryLock]),
    ("pg_try_advisory_lock", Volatile, false, &[AdvisoryLock]),
    ("pg_try_advisory_lock_shared", Volatile, false, &[AdvisoryLock]),
    ("pg_advisory_unlock", Volatile, false, &[AdvisoryLock]),
    ("pg_advisory_unlock_shared", Volatile, false, &[AdvisoryLock]),
    ("pg_advisory_unlock_all", Volatile, false, &[AdvisoryLock]),
    ("pg_advisory_xact_lock", Volatile, false, &[AdvisoryLock, TransactionScoped]),
    ("pg_advisory_xact_lock_shared", Volatile, false, &[AdvisoryLock, TransactionScoped]),
    ("pg_try_advisory_xact_lock", Volatile, false, &[AdvisoryLock, TransactionScoped]),
    ("pg_try_advisory_xact_lock_shared", Volatile, false, &[AdvisoryLock, TransactionScoped]),
    ("set_config", Volatile, false, &[SessionSet]),
    ("txid_current", Volatile, true, &[TransactionScoped]),
    ("pg_current_xact_id", Volatile, true, &[TransactionScoped]),
    ("txid_current_if_assigned", Volatile, false, &[TransactionScoped]),
    ("pg_current_xact_id_if_assigned", Volatile, false, &[TransactionScoped]),
    ("txid_current_snapshot", Volatile, false, &[TransactionScoped]),
    ("pg_current_snapshot", Volatile, false, &[TransactionScoped]),
    ("pg_export_snapshot", Volatile, false, &[TransactionScoped]),
    ("pg_notify", Volatile, true, &[]),
    ("dblink_exec", Volatile, true, &[]),
    ("lo_create", Volatile, true, &[]),
    ("lo_creat", Volatile, true, &[]),
    ("lo_unlink", Volatile, true, &[]),
    ("lo_import", Volatile, true, &[]),
    ("lo_export", Volatile, true, &[]),
    ("lo_from_bytea", Volatile, true, &[]),
    ("lo_put", Volatile, true, &[]),
    ("lo_open", Volatile, true, &[]),
    ("lo_get", Volatile, false, &[]),
    ("pg_switch_wal", Volatile, true, &[]),
    ("pg_create_restore_point", Volatile, true, &[]),
    ("pg_create_physical_replication_slot", Volatile, true, &[]),
    ("pg_create_logical_replication_slot", Volatile, true, &[]),
    ("pg_drop_replication_slot", Volatile, true, &[]),
];

#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const MYSQL_IMMUTABLE: &[&str] = &[
    "abs", "acos", "asin", "atan", "atan2", "ceil", "ceiling", "conv", "cos", "cot", "crc32",
    "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow", "power",
    "radians", "round", "sign", "sin", "sqrt", "tan", "truncate", "ascii", "bin", "bit_length",
    "bit_count", "char", "character_length", "concat", "concat_ws", "elt",
    "export_set", "field", "find_in_set", "format", "from_base64", "hex", "insert", "instr",
    "lcase", "left", "length", "locate", "lower", "lpad", "ltrim", "make_set", "mid", "oct",
    "octet_length", "ord", "position", "quote", "regexp_instr", "regexp_like", "regexp_replace",
    "regexp_substr", "repeat", "replace", "reverse", "right", "rpad", "rtrim", "soundex", "space",
    "strcmp", "substr", "substring", "substring_index", "to_base64", "trim", "ucase", "unhex",
    "upper", "weight_string", "md5", "sha", "sha1", "sha2", "compress", "uncompress",
    "uncompressed_length", "coalesce", "greatest", "least", "if", "ifnull", "nullif", "isnull",
    "interval", "json_array", "json_object", "json_extract", "json_unquote", "json_contains",
    "json_contains_path", "json_keys", "json_length", "json_type", "json_valid", "json_set",
    "json_insert", "json_replace", "json_remove", "json_merge_patch", "json_merge_preserve",
    "json_merge", "json_quote", "json_search", "json_depth", "json_pretty", "json_value",
    "json_overlaps", "json_array_append", "json_array_insert", "member_of", "date_format",
    "date_add", "date_sub", "adddate", "subdate", "datediff", "timediff", "timestampdiff",
    "timestampadd", "addtime", "subtime", "dayname", "dayofmonth", "dayofweek", "dayofyear",
    "day", "month", "monthname", "year", "yearweek", "week", "weekday", "weekofyear", "quarter",
    "hour", "minute", "second", "microsecond", "last_day", "makedate", "maketime", "str_to_date",
    "from_days", "to_days", "to_seconds", "time_to_sec", "sec_to_time", "period_add",
    "period_diff", "date", "time", "timestamp", "extract", "convert", "cast", "binary",
    "inet_aton", "inet_ntoa", "inet6_aton", "inet6_ntoa", "is_ipv4", "is_ipv6", "uuid_to_bin",
    "bin_to_uuid", "is_uuid", "st_astext", "st_geomfromtext", "st_distance", "st_x", "st_y",
    "point", "char_length", "nvl", "nvl2", "natural_sort_key", "get_format",
];

#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const MYSQL_STABLE: &[&str] = &[
    "now", "current_timestamp", "localtime", "localtimestamp", "curdate", "current_date",
    "curtime", "current_time", "utc_date", "utc_time", "utc_timestamp", "unix_timestamp",
    "from_unixtime", "convert_tz", "database", "schema", "user", "current_user", "session_user",
    "system_user", "version", "charset", "collation", "coercibility", "current_role",
    "icu_version", "roles_graphml", "format_bytes", "format_pico_time",
];

#[rustfmt::skip] // Dense name tables: one name per line would triple the file.
const MYSQL_VOLATILE: &[&str] = &[
    "rand", "uuid", "uuid_short", "sleep", "sysdate", "benchmark", "master_pos_wait",
    "source_pos_wait", "master_gtid_wait", "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids", "random_bytes", "load_file", "connection_id",
    "is_free_lock", "is_used_lock",
];

const MYSQL_PLAIN: &[(Volatility, &[&str])] =
    &[(Immutable, AGGREGATES), (Immutable, MYSQL_IMMUTABLE), (Stable, MYSQL_STABLE), (Volatile, MYSQL_VOLATILE)];

const MYSQL_SPECIAL: &[Special] = &[
    ("get_lock", Volatile, false, &[GetLock]),
    ("release_lock", Volatile, false, &[GetLock]),
    ("release_all_locks", Volatile, false, &[GetLock]),
    ("last_insert_id", Volatile, false, &[LastInsertId]),
    ("found_rows", Volatile, false, &[FoundRows]),
    ("row_count", Volatile, false, &[FoundRows]),
    ("nextval", Volatile, true, &[Sequence]),
    ("setval", Volatile, true, &[Sequence]),
    ("lastval", Volatile, false, &[Sequence]),
];
