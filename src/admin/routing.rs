//! Handlers of the routing endpoints: the dry-run (`/api/routing/test`), runtime pattern rules
//! and translations, and digest statistics. Each forwards to the control plane, which owns the
//! rules and answers with serializable views; rule changes return once every core has them.

use super::dto;
use super::http::{Request, Response};
use super::route::{control_error, Api};
use crate::config::{PatternKind, PatternRule, PoolRole, Protocol, ReadYourWrites, RuleTarget, TranslationRule};
use crate::control::{ControlError, Hold, RouteQuery, SessionQuery};
use crate::id::{Position, Token};
use crate::metrics::CounterSnapshot;

/// Digest rows returned when `limit` is not given.
const DEFAULT_DIGEST_LIMIT: usize = 100;

fn bad_request(message: &str) -> Response {
    Response::error(400, message)
}

/// `GET /api/routing/test?sql=...&user=&database=&protocol=`, and the session state to assume:
/// `standard_conforming_strings=off`, `sql_mode=...`, `default_transaction_isolation=serializable`,
/// `held_pool=<pool>` (a connection held by an open transaction); for MySQL clients also
/// `hold=transaction|cursor|session_pin` (what holds `held_pool`), `autocommit=0` and
/// `transaction_read_only=1` (#19); `causal_token=<token>`, the session's position (#22), or
/// `primary`: its position is unknown, so its reads go to the primary (#34).
pub(super) fn route_test(api: &Api, req: &Request) -> Response {
    let token = req.query_param("causal_token").unwrap_or_default();
    let (position, causal_primary) = match Token::parse(&token) {
        Some(Token::Empty) => (None, false),
        Some(Token::Primary) => (None, true),
        Some(Token::At(p)) => (Some(p), false),
        None => {
            return bad_request(&format!(
                "invalid causal_token \"{token}\" (expected a token such as \"pg:16/B374D848\", \"gtid:0-1-100\" or \"primary\")"
            ))
        }
    };
    let Some(sql) = req.query_param("sql").filter(|s| !s.trim().is_empty()) else {
        return bad_request("missing query parameter `sql`");
    };
    let protocol = match req.query_param("protocol").filter(|p| !p.is_empty()) {
        Some(p) => match p.parse::<Protocol>() {
            Ok(p) => Some(p),
            Err(e) => return bad_request(&e),
        },
        None => None,
    };
    let mut session = SessionQuery::default();
    if let Some(v) = req.query_param("standard_conforming_strings").filter(|v| !v.is_empty()) {
        session.lex_mode.set_standard_conforming_strings(&v);
    }
    if let Some(v) = req.query_param("sql_mode") {
        session.lex_mode.set_sql_mode(&v);
    }
    session.serializable =
        req.query_param("default_transaction_isolation").is_some_and(|v| v.eq_ignore_ascii_case("serializable"));
    session.held_pool = req.query_param("held_pool").filter(|p| !p.is_empty());
    session.causal_primary = causal_primary;
    if let Err(resp) = mysql_session(req, &mut session) {
        return resp;
    }
    let q = RouteQuery {
        sql,
        user: req.query_param("user").unwrap_or_default(),
        database: req.query_param("database").unwrap_or_default(),
        protocol,
        session,
    };
    let view = match api.control().route_test(q) {
        Ok(view) => view,
        Err(e) => return control_error(&e),
    };
    match view.pool.as_deref().map(|pool| causal_view(api, pool, position.as_ref())) {
        Some(Err(e)) => control_error(&e),
        Some(Ok(Some(causal))) => {
            let mut json = serde_json::to_value(&view).unwrap_or_default();
            if let Some(fields) = json.as_object_mut() {
                fields.insert("causal".into(), serde_json::to_value(&causal).unwrap_or_default());
            }
            Response::json(200, &json)
        }
        None | Some(Ok(None)) => Response::json(200, &view),
    }
}

/// The causal view (#22) of a read on `pool`, when it is a replica-role pool: which of its
/// replicas the health probe last saw apply `position` (the session's, `None` when it wrote
/// nothing).
fn causal_view(api: &Api, pool: &str, position: Option<&Position>) -> Result<Option<dto::CausalView>, ControlError> {
    let snapshot = api.control().current()?;
    let routing = &snapshot.config.routing;
    let Some(pool) = snapshot.config.pools.iter().find(|p| p.name == pool && p.role == PoolRole::Replica) else {
        return Ok(None);
    };
    let mut total = CounterSnapshot::default();
    for report in api.control().collect()? {
        total.merge(&report.counters);
    }
    let figures = total.pool(&pool.name);
    // Outside causal mode a session keeps no position (a token is ignored, as sessions do).
    let position = position.filter(|_| routing.read_your_writes == ReadYourWrites::Causal);
    let replicas = pool
        .backends
        .iter()
        .map(|b| {
            let address = format!("{}:{}", b.host, b.port);
            let health =
                figures.and_then(|f| f.backends.iter().find(|x| x.label == address)).and_then(|f| f.health.as_ref());
            let applied = health.and_then(|h| h.applied_position.clone());
            let done = applied.as_deref().and_then(Position::parse_token);
            let why = match (health.is_none_or(|h| h.healthy), position, &done) {
                (false, _, _) => "unhealthy",
                (true, None, _) => "no_write",
                (true, Some(need), Some(done)) if need.applied_by(done) => "caught_up",
                (true, Some(_), Some(_)) => "behind",
                (true, Some(_), None) => "unknown_position",
            };
            dto::CausalReplica { address, applied, qualifies: matches!(why, "no_write" | "caught_up"), why }
        })
        .collect();
    Ok(Some(dto::CausalView {
        read_your_writes: routing.read_your_writes.to_string(),
        position: position.map(ToString::to_string),
        causal_wait_ms: u64::try_from(routing.causal_wait.as_millis()).unwrap_or(u64::MAX),
        fallback: routing.replica_fallback.as_str(),
        replicas,
    }))
}

/// Reads the MySQL session state of a dry-run (#19) into `session`.
fn mysql_session(req: &Request, session: &mut SessionQuery) -> Result<(), Response> {
    let flag = |name: &str| -> Result<Option<bool>, Response> {
        match req.query_param(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "on" | "true" => Ok(Some(true)),
                "0" | "off" | "false" => Ok(Some(false)),
                _ => Err(bad_request(&format!("`{name}` must be 0 or 1"))),
            },
        }
    };
    session.mysql.autocommit_off = flag("autocommit")? == Some(false);
    session.mysql.read_only = flag("transaction_read_only")? == Some(true);
    session.mysql.hold = match req.query_param("hold").filter(|h| !h.is_empty()).as_deref() {
        None => None,
        Some("transaction") => Some(Hold::Transaction),
        Some("cursor") => Some(Hold::Cursor),
        Some("session_pin") => Some(Hold::Pin),
        Some(_) => return Err(bad_request("`hold` must be transaction, cursor or session_pin")),
    };
    if session.mysql.hold.is_some() && session.held_pool.is_none() {
        return Err(bad_request("`hold` needs `held_pool`, the pool whose connection is held"));
    }
    Ok(())
}

fn json_body<T: serde::de::DeserializeOwned>(req: &Request) -> Result<T, Response> {
    serde_json::from_slice(&req.body).map_err(|e| bad_request(&format!("invalid JSON body: {e}")))
}

/// `GET /api/pattern-rules`.
pub(super) fn list_pattern_rules(api: &Api, _: &Request) -> Response {
    match api.control().pattern_rules() {
        Ok(rules) => Response::json(200, &rules),
        Err(e) => control_error(&e),
    }
}

fn pattern_rule(body: dto::NewPatternRule) -> Result<PatternRule, Response> {
    let kind = body.kind.parse::<PatternKind>().map_err(|e| bad_request(&e))?;
    let target = match (body.pool, body.reject) {
        (Some(pool), None) => RuleTarget::Pool(pool),
        (None, Some(message)) => RuleTarget::Reject(message),
        _ => return Err(bad_request("give exactly one of `pool` and `reject`")),
    };
    Ok(PatternRule {
        name: body.name.trim().to_owned(),
        kind,
        pattern: body.pattern,
        target,
        priority: body.priority,
        // Runtime rules have no retry of their own: their statements follow the pool's.
        retry: None,
        allow_writes: body.allow_writes,
    })
}

/// `POST /api/pattern-rules` with a JSON rule.
pub(super) fn add_pattern_rule(api: &Api, req: &Request) -> Response {
    let rule = match json_body(req).and_then(pattern_rule) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let view = (&rule).into();
    match api.control().add_pattern_rule(rule) {
        Ok(v) => Response::json(200, &dto::RuleAdded { version: v.0, rule: view }),
        Err(e) => control_error(&e),
    }
}

/// `DELETE /api/pattern-rules?name=...` (one rule) or without `name` (all of them).
pub(super) fn remove_pattern_rules(api: &Api, req: &Request) -> Response {
    let name = req.query_param("name").filter(|n| !n.is_empty());
    match api.control().remove_pattern_rules(name) {
        Ok((removed, v)) => Response::json(200, &dto::RulesRemoved { version: v.0, removed }),
        Err(e) => control_error(&e),
    }
}

/// `GET /api/translations`.
pub(super) fn list_translations(api: &Api, _: &Request) -> Response {
    match api.control().translations() {
        Ok(list) => Response::json(200, &list),
        Err(e) => control_error(&e),
    }
}

/// `POST /api/translations` with `{original_sql, translated_sql, target_pool}`: answers with
/// the parameterized forms and the literal mapping.
pub(super) fn add_translation(api: &Api, req: &Request) -> Response {
    let body: dto::NewTranslation = match json_body(req) {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let rule = TranslationRule {
        original_sql: body.original_sql,
        translated_sql: body.translated_sql,
        target_pool: body.target_pool,
    };
    match api.control().add_translation(rule) {
        Ok(view) => Response::json(200, &view),
        Err(e) => control_error(&e),
    }
}

/// `DELETE /api/translations?index=N` (one) or without `index` (all of them).
pub(super) fn remove_translations(api: &Api, req: &Request) -> Response {
    let index = match req.query_param("index").filter(|i| !i.is_empty()) {
        Some(i) => match i.parse::<usize>() {
            Ok(i) => Some(i),
            Err(_) => return bad_request("`index` must be a non-negative integer"),
        },
        None => None,
    };
    match api.control().remove_translations(index) {
        Ok((removed, v)) => Response::json(200, &dto::RulesRemoved { version: v.0, removed }),
        Err(e) => control_error(&e),
    }
}

/// `GET /api/stats/digests?limit=N`.
pub(super) fn digests(api: &Api, req: &Request) -> Response {
    let limit = match req.query_param("limit").filter(|l| !l.is_empty()) {
        Some(l) => match l.parse::<usize>() {
            Ok(l) => l,
            Err(_) => return bad_request("`limit` must be a non-negative integer"),
        },
        None => DEFAULT_DIGEST_LIMIT,
    };
    match api.control().digests(limit) {
        Ok(view) => Response::json(200, &view),
        Err(e) => control_error(&e),
    }
}

/// `GET /api/limits`: each pool's shape limiter, its limited shapes and their load (#41).
pub(super) fn limits(api: &Api, _: &Request) -> Response {
    match api.control().limits() {
        Ok(view) => Response::json(200, &view),
        Err(e) => control_error(&e),
    }
}

/// `DELETE /api/stats/digests`: clears the statistics on every core.
pub(super) fn reset_digests(api: &Api, _: &Request) -> Response {
    match api.control().reset_digests() {
        Ok(cores_reset) => Response::json(200, &dto::DigestsReset { cores_reset }),
        Err(e) => control_error(&e),
    }
}
