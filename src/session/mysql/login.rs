//! Client login for MySQL: the v10 greeting with a router-issued connection id (which encodes
//! the owning core, so `KILL <id>` finds the session from any core, and has a bit set that
//! server thread ids do not, so it is never mistaken for one), TLS when the listener terminates
//! it (the SSL capability and the SSLRequest upgrade, #38), pool resolution and `mysql_native_password` against the pool's credentials (with an auth switch
//! when the client proposes another plugin).

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use super::state::{names_for_collation, MyState};
use super::Session;
use crate::auth::pass::{check_native, NativeSecret};
use crate::auth::{Denial, Refusal};
use crate::config::{Config, Pool as PoolConfig, Protocol};
use crate::id::CancelKey;
use crate::id::Token;
use crate::metrics::AuthFailure;
use crate::pool::{BackendSecret, CorePool, PassThrough, PoolError};
use crate::protocol::mysql::auth::{constant_time_eq, native_password_verify, MYSQL_NATIVE_PASSWORD};
use crate::protocol::mysql::capability::*;
use crate::protocol::mysql::errcode::{
    ErrorNumber, ER_ACCESS_DENIED_ERROR, ER_BAD_DB_ERROR, ER_NET_PACKETS_OUT_OF_ORDER,
};
use crate::protocol::mysql::response::{OkPacket, SERVER_STATUS_AUTOCOMMIT};
use crate::protocol::mysql::{
    decode_payload, encode_packets, AuthSwitchRequest, ConnectAttrs, HandshakeResponse41, HandshakeV10, SslRequest,
};
use crate::routing::causal::{parse_token, TOKEN_NAME};
use crate::rt::{self, Stream};
use crate::session::admission::{server_tls, tls_refusal, TlsRefusal};
use crate::session::client_error::MyClientError;
use crate::session::driver::ClientIo;
use crate::session::secret::{entry, failure, login_failed, stored_secret, Stored};
use crate::session::CoreContext;

/// A slow or silent client gets this long to finish logging in.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(15);
/// Handshake packets are small; anything bigger is abuse.
const LOGIN_MAX: usize = 64 * 1024;

/// Capabilities the router offers clients: what it relays faithfully (see `pool::mysql`), plus
/// connection attributes, which it reads and drops. Not `CLIENT_SESSION_TRACK`: what backends
/// track is the router's own (#34), and it is stripped from every OK a client gets.
pub(super) const SERVER_CAPABILITIES: u64 =
    (crate::pool::MYSQL_BACKEND_CAPABILITIES & !CLIENT_SESSION_TRACK) | CLIENT_CONNECT_ATTRS;

/// What the greeting offers: [`SERVER_CAPABILITIES`], plus `CLIENT_LOCAL_FILES` when some pool
/// relays LOCAL INFILE (#4). The greeting goes out before the client names its pool, so the
/// session checks its pool's `local_infile` again when a file is asked for. `CLIENT_SSL` when
/// the listener terminates TLS (#38).
fn offered_capabilities(config: &Config, tls: bool) -> u64 {
    let infile = config.pools.iter().any(|p| p.local_infile);
    SERVER_CAPABILITIES | if infile { CLIENT_LOCAL_FILES } else { 0 } | if tls { CLIENT_SSL } else { 0 }
}

/// `ER_SECURE_TRANSPORT_REQUIRED`: a plaintext login on a `tls = "require"` listener (#38).
const ER_SECURE_TRANSPORT_REQUIRED: ErrorNumber = ErrorNumber { code: 3159, sql_state: *b"HY000" };

/// `ER_NOT_SUPPORTED_AUTH_MODE`.
const ER_NOT_SUPPORTED_AUTH_MODE: ErrorNumber = ErrorNumber { code: 1251, sql_state: *b"08004" };
/// `ER_HANDSHAKE_ERROR`.
const ER_HANDSHAKE_ERROR: ErrorNumber = ErrorNumber { code: 1043, sql_state: *b"08S01" };

struct Client {
    stream: Stream,
    buf: Vec<u8>,
    /// Sequence id of the next packet the router sends.
    seq: u8,
    /// The listener the client connected to (its index in the configuration).
    listener: usize,
    /// What the TLS handshake settled, once the connection is encrypted (#38).
    tls: Option<rt::Accepted>,
    /// A TLS handshake is under way: a login that times out now closes without a plaintext
    /// error in the middle of it.
    handshaking: bool,
}

impl Client {
    async fn next(&mut self) -> Result<Vec<u8>, Option<MyClientError>> {
        loop {
            match decode_payload(&self.buf, LOGIN_MAX) {
                Ok(Some(f)) => {
                    if f.first_seq != self.seq {
                        return Err(Some(MyClientError::new(ER_NET_PACKETS_OUT_OF_ORDER, "Got packets out of order")));
                    }
                    self.seq = f.last_seq.wrapping_add(1);
                    let payload = f.payload.to_vec();
                    let n = f.consumed;
                    self.buf.drain(..n);
                    return Ok(payload);
                }
                Ok(None) => {}
                Err(e) => return Err(Some(MyClientError::new(ER_HANDSHAKE_ERROR, format!("Bad handshake: {e}")))),
            }
            match rt::read_some(&mut self.stream, &mut self.buf, 4096).await {
                Ok(0) | Err(_) => return Err(None),
                Ok(_) => {}
            }
        }
    }

    /// The client's IP address, which account hosts are matched against (#33).
    fn peer_ip(&self) -> Option<IpAddr> {
        self.stream.peer_addr().ok().map(|a| a.ip())
    }

    async fn send(&mut self, payload: &[u8]) -> Result<(), Option<MyClientError>> {
        let mut out = Vec::with_capacity(payload.len() + 4);
        self.seq = encode_packets(payload, self.seq, &mut out);
        rt::write_all(&mut self.stream, &out).await.map_err(|_| None)
    }
}

/// What a successful login hands to the session.
pub(super) struct Greeted {
    pub pool: Rc<CorePool>,
    pub state: MyState,
    pub key: CancelKey,
    pub caps: u64,
    pub names: Option<String>,
    pub scramble: [u8; 20],
    /// The server version the client was greeted with.
    pub version: String,
    /// The status flags of the greeting (a bridged session keeps its NO_BACKSLASH_ESCAPES, #33).
    pub status: u16,
    /// The client's user name (for routing rules matching users).
    pub user: String,
    /// The pool the client's handshake database named, if it named one.
    pub named_pool: Option<String>,
    /// On a pass-through pool, who the session's backend connections log in as (#23).
    pub pass: Option<Rc<PassThrough>>,
    /// The causal token of the client's connection attributes (#34): its reads wait for it.
    pub causal: Option<Token>,
}

/// Runs the whole login; on success the session is ready for its first command.
pub(in crate::session) async fn login(ctx: &Rc<CoreContext>, stream: Stream, listener: usize) -> Option<Session> {
    let mut client = Client { stream, buf: Vec::with_capacity(1024), seq: 0, listener, tls: None, handshaking: false };
    let attempt = rt::with_deadline(rt::now() + LOGIN_TIMEOUT, run(ctx, &mut client, listener)).await;
    let err = match attempt {
        Ok(Ok(g)) => {
            let max = ctx.config().listeners.get(listener).map_or(1 << 26, |l| l.max_message_size);
            let held = ctx.client_budget().charge(crate::metrics::BufferKind::Messages);
            let io = ClientIo::new(client.stream, client.buf, listener, max, held);
            return Some(Session::new(ctx.clone(), io, g));
        }
        Ok(Err(e)) => e,
        Err(_) if client.handshaking => None,
        Err(_) => Some(MyClientError::new(ER_HANDSHAKE_ERROR, "Bad handshake: login timed out")),
    };
    if let Some(e) = err {
        let mut out = Vec::new();
        e.encode(client.seq, &mut out);
        let _ = rt::write_all(&mut client.stream, &out).await;
    }
    None
}

fn scramble() -> [u8; 20] {
    // Printable, never NUL: some clients treat the scramble as a C string.
    let mut s = [0u8; 20];
    for b in &mut s {
        *b = rand::random::<u8>() % 94 + 33;
    }
    s
}

/// A login's failure: the error for the client, `None` when the client is gone.
type LoginError = Option<MyClientError>;

/// What the router told the client in its greeting.
struct Greeting {
    /// The pool whose server parameters it showed.
    default: Rc<CorePool>,
    key: CancelKey,
    scramble: [u8; 20],
    version: String,
    /// The status flags shown (and sent again in the final OK).
    status: u16,
    /// The capabilities offered.
    offered: u64,
    /// The backend's character set, shown as the server's.
    charset: u8,
}

async fn run(ctx: &Rc<CoreContext>, client: &mut Client, listener: usize) -> Result<Greeted, LoginError> {
    let config = ctx.config();
    let greeting = greet(ctx, &config, client).await?;
    let reply = handshake_response(ctx, client, greeting.offered).await?;
    let resp = HandshakeResponse41::decode(&reply)
        .map_err(|e| Some(MyClientError::new(ER_HANDSHAKE_ERROR, format!("Bad handshake: {e}"))))?;
    let user = String::from_utf8_lossy(resp.username).into_owned();
    tls_admission(&config, client, &user, resp.auth_response.is_empty()).map_err(Some)?;
    let database = resp.database.filter(|d| !d.is_empty()).map(|d| String::from_utf8_lossy(d).into_owned());
    // The password is checked before the database, as the server does (#33): a client naming
    // an unknown database is authenticated as the default pool would check it, then told.
    let resolved = resolve_pool(&config, database.as_deref());
    let checked_by = match &resolved {
        Ok((p, _)) => *p,
        Err(e) => resolve_pool(&config, None).map_err(|_| Some(e.clone()))?.0,
    };
    let named_pool = named_pool(&config, database.as_deref());
    let token = auth_token(client, &resp, &greeting.scramble).await?;
    let anonymous = config.listeners.get(listener).is_some_and(|l| l.allow_anonymous);
    let addr = client.peer_ip();
    let who = Who { listener, user: &user, addr, token: &token, scramble: &greeting.scramble, anonymous };
    let pass = authenticate(ctx, &config, checked_by, &who).await?;
    let causal = causal_attribute(resp.connect_attrs.as_ref()).map_err(Some)?;
    let (pool_cfg, db) = resolved.map_err(Some)?;
    let pool = admit(ctx, pool_cfg, &greeting.default, (pass.as_deref(), &who)).await?;
    if let Some(db) = db.as_deref().filter(|_| config.login_pool(db_name(&database), Protocol::MySql).is_none()) {
        super::template::check_schema(&pool, db, pass.as_deref()).await.map_err(Some)?;
        // #36
    }
    // The session has nothing more to do with SSL: it is the stream's from here on.
    let caps = resp.capabilities & greeting.offered & !CLIENT_SSL;
    let mut ok = Vec::new();
    OkPacket { status: greeting.status, ..OkPacket::default() }.encode(caps, &mut ok);
    client.send(&ok).await?;
    let names = if resp.charset == greeting.charset { None } else { names_for_collation(resp.charset) };
    let key = greeting.key;
    Ok(Greeted {
        pool,
        state: MyState::new(db, names.clone()),
        key: CancelKey::from_mysql_connection_id(key.mysql_connection_id()).unwrap_or(key),
        caps,
        names,
        scramble: greeting.scramble,
        version: greeting.version,
        status: greeting.status,
        user,
        named_pool,
        pass,
        causal,
    })
}

/// The causal token (#34) a client passes as connection attribute `querypilot.causal_token`:
/// the MySQL handshake has no startup settings, and attributes are what a connector lets an
/// application add (PyMySQL's `_connect_attrs`, Connector/J's `connectionAttributes`). Never
/// sent to a server (backend connections carry none of the client's attributes). An invalid
/// token refuses the login with 1231, the error a `SET` of it gets. COM_CHANGE_USER, a login
/// on an open connection, carries attributes too and is read the same way.
pub(super) fn causal_attribute(attrs: Option<&ConnectAttrs<'_>>) -> Result<Option<Token>, MyClientError> {
    let Some(attrs) = attrs else { return Ok(None) };
    let Some((_, value)) = attrs.iter().find(|(k, _)| k.eq_ignore_ascii_case(TOKEN_NAME.as_bytes())) else {
        return Ok(None);
    };
    parse_token(&String::from_utf8_lossy(value))
        .map(Some)
        .map_err(|e| MyClientError::new(super::causal::ER_WRONG_VALUE_FOR_VAR, e.to_string()))
}

/// The client's HandshakeResponse (protocol "Connection Phase"): the packet after the greeting,
/// or, when that is an SSLRequest (the response's first 32 bytes with `CLIENT_SSL`) to a
/// greeting that offered SSL, the packet after the TLS handshake that follows it, read over
/// TLS with its sequence id continuing. The client may send its ClientHello right behind the
/// request: what was read of it already goes to the handshake. A client that fails the
/// handshake is closed quietly.
async fn handshake_response(ctx: &Rc<CoreContext>, client: &mut Client, offered: u64) -> Result<Vec<u8>, LoginError> {
    let reply = client.next().await?;
    if SslRequest::detect(&reply).is_none() {
        return Ok(reply);
    }
    let server = if offered & CLIENT_SSL != 0 { server_tls(ctx, client.listener).map(|s| s.config) } else { None };
    let Some(server) = server else {
        let message = "SSL is not supported on this listener (its tls is \"disable\"); connect without TLS (e.g. --skip-ssl / ssl-mode=DISABLED)";
        return Err(Some(MyClientError::new(ER_HANDSHAKE_ERROR, message)));
    };
    let received = std::mem::take(&mut client.buf);
    client.handshaking = true;
    let accepted = rt::accept_tls(&mut client.stream, server, &received).await.map_err(|e| {
        tracing::debug!(error = %e, "client TLS handshake failed");
        None
    })?;
    client.handshaking = false;
    client.tls = Some(accepted);
    client.next().await
}

/// What the listener's TLS settings demand of a client logging in as `user` (#38): with
/// `tls = "require"` an encrypted connection (refused as the server refuses one under
/// `require_secure_transport`), with `tls_client_cert_user` a client certificate whose CN or a
/// DNS SAN is `user` (refused as a wrong password is).
fn tls_admission(config: &Config, client: &Client, user: &str, token_empty: bool) -> Result<(), MyClientError> {
    match tls_refusal(config, client.listener, client.tls.as_ref(), user) {
        Some(TlsRefusal::Unencrypted) => Err(MyClientError::new(
            ER_SECURE_TRANSPORT_REQUIRED,
            "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
        )),
        Some(TlsRefusal::NoCertificate) => Err(access_denied((user, client.peer_ip()), token_empty)),
        None => Ok(()),
    }
}

/// Sends the client the server's greeting, in the name of the default pool's backends.
async fn greet(ctx: &Rc<CoreContext>, config: &Config, client: &mut Client) -> Result<Greeting, LoginError> {
    let default = default_pool(ctx, config).map_err(|e| Some(MyClientError::from(&e)))?;
    let params = super::server_params(&default).await.map_err(|e| Some(MyClientError::from(&e)))?;
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
    let charset: u8 = param("charset").parse().unwrap_or(45);
    let key = ctx.new_cancel_key();
    let scramble = scramble();
    // A PostgreSQL pool greets with a MySQL-style version (connectors parse it).
    let bridged = default.config.backend_protocol(Protocol::MySql) == Protocol::Postgres;
    let version =
        if bridged { super::bridged::greeting_version(&param("server_version")) } else { param("server_version") };
    let status = SERVER_STATUS_AUTOCOMMIT | super::bridged::greeting_escapes(config);
    let offered = offered_capabilities(config, server_tls(ctx, client.listener).is_some());
    let greeting = HandshakeV10 {
        server_version: version.as_bytes(),
        connection_id: key.mysql_connection_id(),
        scramble,
        capabilities: offered,
        charset,
        status,
        auth_plugin: MYSQL_NATIVE_PASSWORD,
    };
    let mut payload = Vec::with_capacity(128);
    greeting.encode(&mut payload);
    client.send(&payload).await?;
    Ok(Greeting { default, key, scramble, version, status, offered, charset })
}

/// The client's mysql_native_password token: from its handshake response, or after switching
/// a client that answered with another plugin.
async fn auth_token(
    client: &mut Client,
    resp: &HandshakeResponse41<'_>,
    scramble: &[u8; 20],
) -> Result<Vec<u8>, LoginError> {
    match resp.auth_plugin {
        Some(p) if p != MYSQL_NATIVE_PASSWORD && !p.is_empty() => {
            let mut data = scramble.to_vec();
            data.push(0);
            let mut sw = Vec::new();
            AuthSwitchRequest { plugin: MYSQL_NATIVE_PASSWORD, data: &data }.encode(&mut sw);
            client.send(&sw).await?;
            client.next().await
        }
        _ => Ok(resp.auth_response.to_vec()),
    }
}

/// Who is logging in, and with what.
struct Who<'a> {
    listener: usize,
    user: &'a str,
    /// The client's address, which account hosts are matched against (#33).
    addr: Option<IpAddr>,
    token: &'a [u8],
    scramble: &'a [u8; 20],
    /// The listener lets clients in without a password.
    anonymous: bool,
}

/// Checks the client's password for `pool_cfg` (counting and remembering failures); on a
/// pass-through pool returns who backend connections log in as.
async fn authenticate(
    ctx: &Rc<CoreContext>,
    config: &Config,
    pool_cfg: &PoolConfig,
    who: &Who<'_>,
) -> Result<Option<Rc<PassThrough>>, LoginError> {
    let user = who.user;
    // auth.max_failed_logins: an address past its failures is refused like a wrong password.
    let addr = who.addr;
    if ctx.login_blocked(addr) {
        tracing::info!(user, "login refused unchecked: too many failed logins from this address");
        ctx.counters.auth_failed(who.listener, AuthFailure::RateLimited);
        return Err(Some(access_denied((user, addr), who.token.is_empty())));
    }
    let stored = match pool_cfg.username {
        None => Some(stored_secret(ctx, config, (&pool_cfg.name, Protocol::MySql), user, addr).await),
        Some(_) => None,
    };
    let reason = Cell::new(AuthFailure::WrongPassword);
    check_password(pool_cfg, stored.as_ref(), (user, addr), (who.scramble, who.token), who.anonymous, &reason)
        .inspect_err(|e| {
            if e.number == ER_ACCESS_DENIED_ERROR {
                ctx.login_failed(addr);
                ctx.counters.auth_failed(who.listener, reason.get());
                if let Some(Ok(stored)) = &stored {
                    login_failed(ctx, &pool_cfg.name, user, stored);
                }
            }
        })
        .map_err(Some)
}

/// The pool the client logged in to, once its backends proved they can serve the session.
async fn admit(
    ctx: &Rc<CoreContext>,
    pool_cfg: &PoolConfig,
    default: &Rc<CorePool>,
    (pass, client): (Option<&PassThrough>, &Who<'_>),
) -> Result<Rc<CorePool>, LoginError> {
    let pools = ctx.pools();
    let pool = pools
        .get(&pool_cfg.name)
        .cloned()
        .ok_or_else(|| Some(MyClientError::new(ER_BAD_DB_ERROR, "pool disappeared during login")))?;
    if !Rc::ptr_eq(&pool, default) {
        // The chosen pool's backend must speak what the session will send it (#25): a pool
        // without `protocol` whose backends are PostgreSQL servers fails here, by name, rather
        // than on the first statement as a malformed packet. Cached after its first login.
        super::server_params(&pool).await.map_err(|e| Some(MyClientError::from(&e)))?;
    }
    if let Some(who) = pass.filter(|_| pool.passes_through()) {
        // The backend must take the client's credentials: a refusal ends the login here, as
        // connecting directly would, rather than on the first statement.
        let deadline = rt::now() + pool.config.timeouts.acquire;
        let conn =
            pool.checkout(pool.config.backend_protocol(Protocol::MySql), Some(who), deadline).await.map_err(|e| {
                // A refusal of the credentials the login proved looks like a wrong password to
                // the client (no oracle, #33); the operator's log has the backend's reason.
                Some(match e {
                    PoolError::Auth { .. } => {
                        tracing::info!(user = %who.user, error = %e, "pass-through login refused by the backend");
                        access_denied((&who.user, client.addr), client.token.is_empty())
                    }
                    _ => MyClientError::from(&e),
                })
            })?;
        pool.checkin(conn, true);
    }
    Ok(pool)
}

/// The pool whose greeting parameters the router shows before it knows the client's choice.
fn default_pool(ctx: &Rc<CoreContext>, config: &Config) -> Result<Rc<CorePool>, PoolError> {
    let name = config.routing.primary_pool(Protocol::MySql).unwrap_or_default();
    ctx.pools().get(name).cloned().ok_or_else(|| PoolError::NoBackend(name.to_owned()))
}

/// The client's database names a pool, or it is a database on the default MySQL pool.
/// Returns the pool and the database to select when it differs from the pool's own.
pub(super) fn resolve_pool<'c>(
    config: &'c Config,
    database: Option<&str>,
) -> Result<(&'c PoolConfig, Option<String>), MyClientError> {
    let Some(database) = database else {
        let pool = config
            .routing
            .primary_pool(Protocol::MySql)
            .and_then(|p| config.pool(p))
            .ok_or_else(|| MyClientError::new(ER_BAD_DB_ERROR, "no pool serves MySQL clients"))?;
        return Ok((pool, None));
    };
    // #36: a database no pool serves is selected on `[pool_template]`'s pool, if any.
    let pool = config.login_pool(database, Protocol::MySql).or_else(|| config.template_pool(Protocol::MySql));
    let pool = pool.ok_or_else(|| {
        MyClientError::new(
            ER_BAD_DB_ERROR,
            format!("the router has no pool for database '{database}' (see [pool_template] in its configuration)"),
        )
    })?;
    // A pool's own name selects its database; a schema name is selected on the pool's server.
    let db = (database != pool.name && database != pool.database).then(|| database.to_owned());
    Ok((pool, db))
}

/// The name a client asked for (empty: none).
fn db_name(database: &Option<String>) -> &str {
    database.as_deref().unwrap_or_default()
}

/// `database` when it is the name of a pool: that pool stays the session's routing target when
/// no rule or split decides (as for PostgreSQL clients).
pub(super) fn named_pool(config: &Config, database: Option<&str>) -> Option<String> {
    database.filter(|d| config.pool(d).is_some()).map(str::to_owned)
}

/// Verifies a `mysql_native_password` response against the pool's credentials, or on a
/// pass-through pool (no `username`, #23) against the user's own stored secret (`stored`:
/// from the auth file or the auth query); returns who a pass-through pool's backend
/// connections log in as. The whole check runs even for a wrong user name, so failures take
/// the same time whichever part was wrong. A pass-through refusal's reason goes to `reason`.
pub(super) fn check_password(
    pool: &PoolConfig,
    stored: Option<&Result<Stored, String>>,
    (user, addr): (&str, Option<IpAddr>),
    (scramble, token): (&[u8], &[u8]),
    anonymous: bool,
    reason: &Cell<AuthFailure>,
) -> Result<Option<Rc<PassThrough>>, MyClientError> {
    if pool.username.is_none() {
        let found = stored.map_or(Err(Refusal::Denied(Denial::Unknown)), |s| entry(s.as_ref()));
        return pass_through(found, (user, addr), (scramble, token), anonymous, reason).map(Some);
    }
    check_with(pool, (user, addr), token.is_empty(), anonymous, |password| {
        native_password_verify(password.as_bytes(), scramble, token)
    })
    .map(|()| None)
}

/// The server's 1045 for `user` connecting from `addr`: `'user'@'address'` as the server
/// names a client it does not resolve (#33).
pub(super) fn access_denied((user, addr): (&str, Option<IpAddr>), token_empty: bool) -> MyClientError {
    let using = if token_empty { "NO" } else { "YES" };
    let host = addr.map_or_else(|| "localhost".to_owned(), |a| a.to_canonical().to_string());
    MyClientError::new(
        ER_ACCESS_DENIED_ERROR,
        format!("Access denied for user '{user}'@'{host}' (using password: {using})"),
    )
}

/// The pass-through check (#23, [`check_native`]); a refusal is logged, counted under `reason`
/// and answered as the server answers a wrong password.
fn pass_through(
    found: Result<&str, Refusal>,
    (user, addr): (&str, Option<IpAddr>),
    (scramble, token): (&[u8], &[u8]),
    anonymous: bool,
    reason: &Cell<AuthFailure>,
) -> Result<Rc<PassThrough>, MyClientError> {
    let secret = match check_native(found, (scramble, token), anonymous, &rand::random()) {
        Ok(NativeSecret::Nothing) => BackendSecret::Nothing,
        Ok(NativeSecret::Password(password)) => BackendSecret::Password(password),
        Ok(NativeSecret::Stage1(stage1)) => BackendSecret::NativeStage1(stage1),
        Err(why) => {
            tracing::info!(user, reason = %why, "pass-through login refused");
            reason.set(failure(&why));
            return Err(access_denied((user, addr), token.is_empty()));
        }
    };
    Ok(Rc::new(PassThrough { user: Rc::from(user), secret }))
}

/// [`check_password`] with the token verification passed in (a seam for the tests, which count
/// that it runs). `verify` is called exactly once, against the pool's password, before the user
/// name is compared, so an unknown user costs the same hashing as a wrong password; both get
/// the same error.
fn check_with(
    pool: &PoolConfig,
    (user, addr): (&str, Option<IpAddr>),
    token_empty: bool,
    anonymous: bool,
    verify: impl FnOnce(&str) -> bool,
) -> Result<(), MyClientError> {
    let (Some(pool_user), Some(password)) = (pool.username.as_deref(), pool.password.as_deref()) else {
        if anonymous {
            return Ok(());
        }
        return Err(MyClientError::new(
            ER_NOT_SUPPORTED_AUTH_MODE,
            format!("pool \"{}\" has no credentials and the listener does not allow anonymous clients", pool.name),
        ));
    };
    let password_ok = verify(password);
    let user_ok = constant_time_eq(pool_user.as_bytes(), user.as_bytes());
    if password_ok & user_ok {
        return Ok(());
    }
    Err(access_denied((user, addr), token_empty))
}

#[cfg(test)]
mod tests;
