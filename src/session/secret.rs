//! Where a pass-through client's stored secret comes from (#23): its `[auth] file` entry, else,
//! with `[auth] pg_query_user` / `mysql_query_user` set, the auth query on the pool's backend
//! (as that protocol's query user), cached on this core for
//! `cache_ttl`. Runs at login only, on the core's executor without blocking it (the query goes
//! through the pool's async connect and login). What the account says is judged here by the
//! server's own rules (`auth::account`, #33): host, expiry, login right, empty passwords.

use std::net::IpAddr;
use std::time::Instant;

use crate::auth::account::{from_rows, has_host_column, verdict};
use crate::auth::query::{bind_mysql, bind_pg};
use crate::auth::{Account, Cached, Denial, Refusal, Rules, Verdict, Verifier};
use crate::config::{Config, Protocol, QuerySpec};
use crate::metrics::AuthFailure;
use crate::pool::{BackendSecret, PassThrough};
use crate::rt;
use crate::session::CoreContext;

/// Where a secret was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The auth file (or nowhere, without an auth query).
    File,
    /// The auth query, just now.
    Fetched,
    /// The auth query's cache.
    Cached,
}

/// What the stored account says about one login (#33).
pub(crate) struct Stored {
    /// The secret to check the client against; `None`: refuse after a mock exchange.
    pub text: Option<String>,
    /// Why a login is refused whatever it proves (with `text` `None`), for the log.
    pub denial: Option<Denial>,
    /// The role may not log in: a right proof is refused too (PostgreSQL's 28000).
    pub no_login: bool,
    /// Where it was found.
    pub source: Source,
}

impl Stored {
    /// The verdict on `user` from `client` against `accounts` answered at `fetched`.
    fn judged(
        accounts: &[Account],
        fetched: Instant,
        user: &str,
        how: (Rules, Option<IpAddr>),
        source: Source,
    ) -> Self {
        let (rules, client) = how;
        let age = rt::now().saturating_duration_since(fetched);
        let (text, denial, no_login) = match verdict(accounts, user, client, rules, age) {
            Verdict::Check(s) => (Some(s.to_owned()), None, false),
            Verdict::NoLogin(s) => (Some(s.to_owned()), None, true),
            Verdict::Deny(why) => (None, Some(why), false),
        };
        Stored { text, denial, no_login, source }
    }
}

/// The secret to check a client against, or why there is none (the auth query's failure
/// when it could not answer).
pub(crate) fn entry<'a>(stored: Result<&'a Stored, &String>) -> Result<&'a str, Refusal> {
    match stored {
        Ok(Stored { text: Some(text), .. }) => Ok(text),
        Ok(s) => Err(Refusal::Denied(s.denial.clone().unwrap_or(Denial::Unknown))),
        Err(query) => Err(Refusal::QueryFailed(query.clone())),
    }
}

/// What the stored account of `user` says about a `protocol` client of `pool` connecting
/// from `client`: from the auth file, else the auth query (cached on this core for
/// `cache_ttl`). The error says, for the log only, why the auth query could not answer (the
/// client is refused like a wrong password).
pub(crate) async fn stored_secret(
    ctx: &CoreContext,
    config: &Config,
    (pool, protocol): (&str, Protocol),
    user: &str,
    client: Option<IpAddr>,
) -> Result<Stored, String> {
    let backend = ctx.pools().get(pool).map_or(protocol, |p| p.config.backend_protocol(protocol));
    let rules = Rules { mysql: backend == Protocol::MySql, allow_empty: config.auth.allow_empty_password };
    let now = rt::now();
    if let Some(text) = config.auth.users.get(user) {
        return Ok(Stored::judged(&[Account::listed(user, text)], now, user, (rules, client), Source::File));
    }
    let Some(query) = &config.auth.query else {
        return Ok(Stored::judged(&[], now, user, (rules, client), Source::File));
    };
    if let Cached::Hit(accounts, fetched) = ctx.secrets().get(pool, user, now) {
        return Ok(Stored::judged(accounts, fetched, user, (rules, client), Source::Cached));
    }
    let core_pool = ctx.pools().get(pool).cloned().ok_or_else(|| format!("pool \"{pool}\" is gone"))?;
    let spec = match backend {
        Protocol::Postgres => query.pg.as_ref(),
        Protocol::MySql => query.mysql.as_ref(),
    };
    let Some(spec) = spec else { return Ok(Stored::judged(&[], now, user, (rules, client), Source::File)) };
    let sql = match backend {
        Protocol::Postgres => bind_pg(&spec.sql, user),
        Protocol::MySql => bind_mysql(&spec.sql, user),
    };
    let who = query_identity(config, spec)?;
    let deadline = now + core_pool.config.timeouts.acquire;
    let (columns, rows) = core_pool.auth_query(backend, &who, &sql, deadline).await.map_err(|e| e.to_string())?;
    if rules.mysql && !rows.is_empty() && !has_host_column(&columns) {
        // Without Host the router cannot tell which account the server would pick.
        return Err("the MySQL auth query's answer has no Host column".to_owned());
    }
    let accounts = from_rows(&columns, &rows, user);
    let stored = Stored::judged(&accounts, now, user, (rules, client), Source::Fetched);
    ctx.secrets().put(pool, user, accounts, now);
    Ok(stored)
}

/// The `reason` a denial is counted under.
pub(crate) fn failure_of(denial: &Denial) -> AuthFailure {
    match denial {
        Denial::Unknown | Denial::NoPassword => AuthFailure::UnknownUser,
        Denial::Plugin(_) => AuthFailure::UnusableSecret,
        Denial::Expired | Denial::Host | Denial::Anonymous | Denial::Empty => AuthFailure::NotAdmitted,
    }
}

/// The `reason` a pass-through refusal is counted under.
pub(crate) fn failure(why: &Refusal) -> AuthFailure {
    match why {
        Refusal::WrongPassword => AuthFailure::WrongPassword,
        Refusal::UnusableSecret(_) => AuthFailure::UnusableSecret,
        Refusal::QueryFailed(_) => AuthFailure::AuthQueryFailed,
        Refusal::Denied(d) => failure_of(d),
    }
}

/// A login failed against `stored`: a cached secret is fetched again next time (once per TTL).
pub(crate) fn login_failed(ctx: &CoreContext, pool: &str, user: &str, stored: &Stored) {
    if stored.source == Source::Cached {
        ctx.secrets().failed(pool, user);
    }
}

/// Who the auth query runs as: its `*_query_user`, proving itself with its auth file entry — a
/// plaintext password, an MD5 secret (PostgreSQL MD5 logins) or `sha1:` + `SHA1(password)`
/// (MySQL `mysql_native_password`) — or with nothing when it has none (the backend trusts
/// the router). A SCRAM verifier or `*HEX` hash cannot log in, so it is an error.
fn query_identity(config: &Config, query: &QuerySpec) -> Result<PassThrough, String> {
    let secret = match config.auth.users.get(&query.user).map(|t| Verifier::parse(t)) {
        None => BackendSecret::Nothing,
        Some(Ok(Verifier::Plain(password))) => BackendSecret::Password(password),
        Some(Ok(Verifier::Md5(secret))) => BackendSecret::Md5(secret),
        Some(Ok(Verifier::NativeStage1(stage1))) => BackendSecret::NativeStage1(stage1),
        Some(Ok(other)) => {
            return Err(format!(
                "the auth file holds a {} for the query user \"{}\", which cannot log in to a server",
                other.kind(),
                query.user
            ))
        }
        Some(Err(e)) => return Err(format!("the query user \"{}\": {e}", query.user)),
    };
    Ok(PassThrough { user: query.user.as_str().into(), secret })
}

#[cfg(test)]
mod tests;
