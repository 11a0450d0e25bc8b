//! Client startup for PostgreSQL: TLS when the listener terminates it (SSLRequest, or PostgreSQL
//! 17's direct TLS) and GSS refusal, cancel requests, pool resolution, password authentication
//! (SCRAM-SHA-256, with SCRAM-SHA-256-PLUS offered over TLS, or MD5) against the pool's
//! credentials, and the greeting with the real server's parameters and a router-issued
//! BackendKeyData.

use crate::protocol::pg::tag::frontend as client;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use base64::Engine as _;

use super::settings::{run_reporting, SettingsError};
use super::{Arrival, Identity, Session};
use crate::auth::mock::scram_salt;
use crate::auth::{Denial, Refusal, Verifier, VerifierError};
use crate::config::{ClientAuth, Config, Console, ConsoleRole, Pool as PoolConfig, PoolMode, Protocol, TlsServer};
use crate::id::{CancelKey, KillRequest, KillTarget};
use crate::metrics::AuthFailure;
use crate::pool::{BackendSecret, Conn, ConnInfo, CorePool, PassThrough, PoolError};
use crate::protocol::pg::{
    auth, backend,
    challenge::{Challenge, Progress, Proof},
    decode_expected_frame, decode_startup_frame, sqlstate,
    startup::{is_protocol_option, ALPN, DIRECT_TLS_FIRST_BYTE, ENCRYPTION_ACCEPTED, ENCRYPTION_REFUSED},
    Authentication, Derivation, Negotiation, ScramKeys, ScramSecret, StartupPacket,
};
use crate::rt::{self, Stream};
use crate::session::admission::{server_tls, tls_refusal, TlsRefusal};
use crate::session::client_error::PgClientError;
use crate::session::derive::Derivations;
use crate::session::names;
use crate::session::secret::{entry, failure, login_failed, stored_secret, Stored};
use crate::session::state::startup::{
    causal_token, encode_greeting, greeting, startup_sqlstate, with_options, ClientParams, Greeting,
};
use crate::session::state::SessionState;
use crate::session::CoreContext;

/// A slow or silent client gets this long to finish logging in.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(15);
/// Startup packets are small; anything bigger is abuse.
const STARTUP_MAX: usize = 10_000;
/// SCRAM iteration count the router uses for clients (PostgreSQL's default).
const SCRAM_ITERATIONS: u32 = 4096;

/// Why a login ended without a session.
pub(super) enum LoginEnd {
    /// The client sent a CancelRequest, or went away: close quietly.
    Quiet,
    /// Tell the client, then close.
    Refused(PgClientError),
    /// An admin-console user authenticated: hand the connection to the console thread.
    Console {
        /// The console user.
        user: String,
        /// What it may do.
        role: ConsoleRole,
    },
}

impl From<PgClientError> for LoginEnd {
    fn from(e: PgClientError) -> Self {
        LoginEnd::Refused(e)
    }
}

struct Client {
    stream: Stream,
    buf: Vec<u8>,
    /// The listener the client connected to (its index in the configuration).
    listener: usize,
    /// What the TLS handshake settled, once the connection is encrypted (#38).
    tls: Option<rt::Accepted>,
    /// A TLS handshake is under way: a login that times out now closes without a plaintext
    /// error in the middle of it.
    handshaking: bool,
    /// The channel binding data of the certificate the client's handshake got, which its
    /// SCRAM-SHA-256-PLUS proof must be bound to.
    binding: Option<std::sync::Arc<[u8]>>,
    /// The core's key derivations, which a password-checked login waits in (#41).
    derivations: Rc<Derivations>,
}

impl Client {
    fn new(ctx: &CoreContext, stream: Stream, listener: usize) -> Self {
        let derivations = ctx.derivations().clone();
        Client {
            stream,
            buf: Vec::with_capacity(1024),
            listener,
            tls: None,
            handshaking: false,
            binding: None,
            derivations,
        }
    }

    /// Runs the TLS server handshake with `server`, `received` first (#38). A client that
    /// fails it (garbage, an untrusted certificate, a close) is closed quietly: whatever it
    /// speaks, it is not this protocol's error messages.
    async fn encrypt(&mut self, server: TlsServer, received: &[u8]) -> Result<(), LoginEnd> {
        self.handshaking = true;
        let accepted = rt::accept_tls(&mut self.stream, server.config, received).await.map_err(|e| {
            tracing::debug!(error = %e, "client TLS handshake failed");
            LoginEnd::Quiet
        })?;
        self.handshaking = false;
        self.tls = Some(accepted);
        self.binding = server.end_point;
        Ok(())
    }

    /// Reads until one whole startup-phase frame is buffered; returns its tag (0 for untagged
    /// startup frames), body and length.
    async fn next(&mut self, startup: bool) -> Result<(u8, Vec<u8>), LoginEnd> {
        loop {
            let decoded = if startup {
                decode_startup_frame(&self.buf, STARTUP_MAX).map(|f| f.map(|f| (0u8, f.body.to_vec(), f.total_len)))
            } else {
                // Only password messages are read after the startup packet.
                decode_expected_frame(&self.buf, client::PASSWORD, STARTUP_MAX)
                    .map(|f| f.map(|f| (f.tag, f.body.to_vec(), f.total_len)))
            };
            match decoded {
                Ok(Some((tag, body, len))) => {
                    self.buf.drain(..len);
                    return Ok((tag, body));
                }
                Ok(None) => {}
                Err(e) => return Err(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()).into()),
            }
            match rt::read_some(&mut self.stream, &mut self.buf, 4096).await {
                Ok(0) | Err(_) => return Err(LoginEnd::Quiet),
                Ok(_) => {}
            }
        }
    }

    async fn send(&mut self, out: &[u8]) -> Result<(), LoginEnd> {
        rt::write_all(&mut self.stream, out).await.map_err(|_| LoginEnd::Quiet)
    }
}

/// Runs the whole login; on success the session is ready for its first query.
pub(in crate::session) async fn login(ctx: &Rc<CoreContext>, stream: Stream, listener: usize) -> Option<Session> {
    let mut client = Client::new(ctx, stream, listener);
    let attempt = rt::with_deadline(rt::now() + LOGIN_TIMEOUT, run(ctx, &mut client, listener)).await;
    let end = match attempt {
        // The greeting waits for the pool, not for the client: `acquire_timeout` bounds it.
        Ok(Ok(a)) => match greet(ctx, &mut client, a).await {
            Ok(g) => {
                let max = ctx.config().listeners.get(listener).map_or(1 << 26, |l| l.max_message_size);
                let mut s = Session::new(
                    ctx.clone(),
                    client.stream,
                    client.buf,
                    g.pool,
                    g.state,
                    g.key,
                    listener,
                    max,
                    g.arrival,
                );
                *s.seat.conn = g.backend;
                return Some(s);
            }
            Err(end) => {
                // #36: a template pool the server refused the database of is gone before the
                // client hears of it.
                ctx.drop_unused_pools();
                end
            }
        },
        Ok(Err(LoginEnd::Console { user, role })) => {
            match rt::detach(client.stream) {
                Ok(stream) => ctx.hand_off_console(stream, client.buf, user, role),
                Err(e) => tracing::warn!(error = %e, "cannot hand a console client to the console thread"),
            }
            return None;
        }
        Ok(Err(end)) => end,
        Err(_) if client.handshaking => LoginEnd::Quiet,
        Err(_) => LoginEnd::Refused(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "login timed out")),
    };
    if let LoginEnd::Refused(e) = end {
        let mut out = Vec::new();
        e.encode_fatal(&mut out);
        let _ = client.send(&out).await;
    }
    None
}

/// Turns away a client over its listener's `max_client_connections`: reads its startup packet
/// (answering SSL/GSS requests and honouring a CancelRequest, which takes no slot), then answers
/// FATAL `53300` and closes, as PostgreSQL does when it is full. Answering only after the
/// startup packet means the client is not writing while the router closes, so the error is not
/// lost to a connection reset.
pub(super) async fn turn_away(ctx: &Rc<CoreContext>, stream: Stream, listener: usize) {
    let mut client = Client::new(ctx, stream, listener);
    let attempt = rt::with_deadline(rt::now() + LOGIN_TIMEOUT, startup(ctx, &mut client)).await;
    let error = match attempt {
        Ok(Ok(_)) => PgClientError::new(sqlstate::TOO_MANY_CONNECTIONS, "sorry, too many clients already"),
        Ok(Err(LoginEnd::Refused(e))) => e,
        Ok(Err(LoginEnd::Quiet | LoginEnd::Console { .. })) => return,
        Err(_) if client.handshaking => return,
        Err(_) => PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "login timed out"),
    };
    let mut out = Vec::new();
    error.encode_fatal(&mut out);
    let _ = client.send(&out).await;
}

/// The client's user, database, other startup parameters and `options`.
type Startup = (String, String, Vec<(String, String)>, Option<String>);

/// Reads the startup phase up to the StartupMessage, encrypting the connection when the client
/// asks and the listener terminates TLS (refusing it otherwise, and GSS encryption always), and
/// delivering a CancelRequest (which ends the connection quietly).
async fn startup(ctx: &Rc<CoreContext>, client: &mut Client) -> Result<Startup, LoginEnd> {
    direct_tls(ctx, client).await?;
    loop {
        let (_, body) = client.next(true).await?;
        let packet = StartupPacket::decode(&body)
            .map_err(|e| PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()))?;
        match packet {
            StartupPacket::SslRequest => ssl_request(ctx, client).await?,
            StartupPacket::GssEncRequest => client.send(ENCRYPTION_REFUSED).await?,
            StartupPacket::Cancel { pid, key } => {
                // The client learns its cancel was sent when this connection closes (libpq,
                // asyncpg wait for that), so it closes only once the backend has it (#18).
                let target = KillTarget::Session(CancelKey { pid, secret: key });
                ctx.kill(KillRequest { target, connection: false }).await;
                return Err(LoginEnd::Quiet);
            }
            StartupPacket::Startup { protocol, params } => {
                if let Some(negotiation) = Negotiation::of(protocol, &params) {
                    let mut out = Vec::new();
                    let _ = negotiation.encode(&mut out);
                    client.send(&out).await?;
                }
                let user = params.get("user").unwrap_or("").to_owned();
                let database = params.get("database").filter(|d| !d.is_empty()).unwrap_or(&user).to_owned();
                let rest: Vec<(String, String)> = params
                    .iter()
                    .filter(|(k, _)| !matches!(*k, "user" | "database" | "options" | "replication"))
                    .filter(|(k, _)| !is_protocol_option(k))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                let options = params.get("options").map(str::to_owned);
                return Ok((user, database, rest, options));
            }
        }
    }
}

/// PostgreSQL 17's direct TLS (55.2.10, `sslnegotiation=direct`): a client whose first byte
/// opens a TLS record gets the handshake at once, and must have negotiated ALPN `postgresql`.
/// On a listener without TLS its bytes go to the startup decoder, which refuses them as before.
async fn direct_tls(ctx: &Rc<CoreContext>, client: &mut Client) -> Result<(), LoginEnd> {
    if client.buf.is_empty() {
        match rt::read_some(&mut client.stream, &mut client.buf, 4096).await {
            Ok(0) | Err(_) => return Err(LoginEnd::Quiet),
            Ok(_) => {}
        }
    }
    if client.buf.first() != Some(&DIRECT_TLS_FIRST_BYTE) {
        return Ok(());
    }
    let Some(server) = server_tls(ctx, client.listener) else { return Ok(()) };
    let received = std::mem::take(&mut client.buf);
    client.encrypt(server, &received).await?;
    if client.tls.as_ref().and_then(|t| t.alpn.as_deref()) != Some(ALPN) {
        let message = "direct TLS connections must negotiate the ALPN protocol \"postgresql\"";
        return Err(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, message).into());
    }
    Ok(())
}

/// SSLRequest (55.2.10): `S` and the handshake when the listener terminates TLS and the
/// connection is not encrypted yet, `N` otherwise. Bytes the client sent behind the request
/// were sent before it knew the answer, in plaintext: they are refused, never read as if they
/// had come encrypted (CVE-2021-23214).
async fn ssl_request(ctx: &Rc<CoreContext>, client: &mut Client) -> Result<(), LoginEnd> {
    let server = if client.tls.is_none() { server_tls(ctx, client.listener) } else { None };
    let Some(server) = server else { return client.send(ENCRYPTION_REFUSED).await };
    if !client.buf.is_empty() {
        let message = "the client sent unencrypted bytes after its SSLRequest";
        return Err(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, message).into());
    }
    client.send(ENCRYPTION_ACCEPTED).await?;
    client.encrypt(server, &[]).await
}

/// What the listener's TLS settings demand of a client that named `user` and `database`
/// (#38): with `tls = "require"` an encrypted connection, refused as the server refuses one no
/// `hostssl` rule admits; with `tls_client_cert_user` a client certificate whose CN or a DNS
/// SAN is `user`; and the admin console, which runs on a plain thread, unencrypted.
fn tls_admission(config: &Config, client: &Client, user: &str, database: &str) -> Result<(), PgClientError> {
    if let Some(refusal) = tls_refusal(config, client.listener, client.tls.as_ref(), user) {
        let message = match refusal {
            TlsRefusal::Unencrypted => {
                let host = client.stream.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                format!(
                    "no pg_hba.conf entry for host \"{host}\", user \"{user}\", database \"{database}\", no encryption"
                )
            }
            TlsRefusal::NoCertificate => format!("certificate authentication failed for user \"{user}\""),
        };
        return Err(PgClientError::new(sqlstate::INVALID_AUTHORIZATION_SPECIFICATION, message));
    }
    if client.tls.is_some() && config.console.is_console_database(database) {
        let message = "the admin console does not accept TLS connections; connect to it with sslmode=disable";
        return Err(PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, message));
    }
    Ok(())
}

/// A client that proved who it is, to be greeted.
struct Authenticated {
    /// The pool it connects to.
    pool: String,
    params: ClientParams,
    user: String,
    database: String,
    /// On a pass-through pool, who its backend connections log in as (#23).
    pass: Option<Rc<crate::pool::PassThrough>>,
    /// The startup parameter `querypilot.causal_token` (#22).
    causal: Option<crate::id::Token>,
}

/// The client's part of the login: startup packet and authentication.
async fn run(ctx: &Rc<CoreContext>, client: &mut Client, listener: usize) -> Result<Authenticated, LoginEnd> {
    let (user, database, params, options) = startup(ctx, client).await?;
    if user.is_empty() {
        return Err(PgClientError::new(sqlstate::INVALID_AUTHORIZATION_SPECIFICATION, "no user name given").into());
    }
    let config = ctx.config();
    tls_admission(&config, client, &user, &database)?;
    let mut params = with_options(params, options.as_deref())?;
    let causal = causal_token(&mut params.values)?;
    let auth = config.listeners.get(listener).map_or(ClientAuth::ScramSha256, |l| l.auth_method);
    if config.console.is_console_database(&database) {
        return Err(console_login(client, &config.console, user, auth, &config.auth.mock_seed).await);
    }
    // The password is checked before the database, as the server does (#33): a client naming
    // an unknown database is authenticated as its default pool would check it, then told.
    let resolved = resolve_pool(&config, &database);
    let pool_cfg = match &resolved {
        Ok(p) => *p,
        Err(e) => {
            config.routing.primary_pool(Protocol::Postgres).and_then(|p| config.pool(p)).ok_or_else(|| e.clone())?
        }
    };
    let anonymous = config.listeners.get(listener).is_some_and(|l| l.allow_anonymous);
    // auth.max_failed_logins: an address past its failures is refused like a wrong password.
    let addr = client.stream.peer_addr().ok().map(|a| a.ip());
    if ctx.login_blocked(addr) {
        tracing::info!(user, "login refused unchecked: too many failed logins from this address");
        ctx.counters.auth_failed(listener, AuthFailure::RateLimited);
        return Err(refuse(&user));
    }
    let reason = Cell::new(AuthFailure::WrongPassword);
    let login = Login { client, pool: pool_cfg, config: &config, user: &user, method: auth, anonymous, addr };
    let pass = authenticate(ctx, login, &reason).await.inspect_err(|end| {
        if matches!(end, LoginEnd::Refused(e) if e.code == sqlstate::INVALID_PASSWORD) {
            ctx.login_failed(addr);
            ctx.counters.auth_failed(listener, reason.get());
        }
    })?;
    resolved?;
    let pool = match config.login_pool(&database, Protocol::Postgres) {
        Some(p) => p.name.clone(),
        None => super::database::on_demand_pool(ctx, &database)?, // #36
    };
    Ok(Authenticated { pool, params, user, database, pass, causal })
}

/// The pool serving `database`, or `[pool_template]`'s pool when none does (#36). Without a
/// template the client is told the router has no pool for it: 3D000, the code PostgreSQL
/// gives a database it does not have, so drivers raise their "unknown database" error, but
/// not the server's words, since the server may well have that database.
fn resolve_pool<'c>(config: &'c Config, database: &str) -> Result<&'c PoolConfig, PgClientError> {
    let pool = config.login_pool(database, Protocol::Postgres).or_else(|| config.template_pool(Protocol::Postgres));
    pool.ok_or_else(|| {
        PgClientError::new(
            sqlstate::INVALID_CATALOG_NAME,
            format!("the router has no pool for database \"{database}\" (see [pool_template] in its configuration)"),
        )
    })
}

fn refuse(user: &str) -> LoginEnd {
    password_failed(user).into()
}

fn password_failed(user: &str) -> PgClientError {
    PgClientError::new(sqlstate::INVALID_PASSWORD, format!("password authentication failed for user \"{user}\""))
}

/// The client's error for a failed checkout at login. A pass-through client whose backend
/// refuses the credentials its login proved (the auth file's verifier is not the server's any
/// more, say) gets what a wrong password gets, so a right password is not told apart from a
/// wrong one; the operator's log has the backend's reason (#33).
fn pool_refusal(e: &PoolError, who: Option<&PassThrough>) -> PgClientError {
    match (e, who) {
        (PoolError::Auth { .. }, Some(who)) => {
            tracing::info!(user = %who.user, error = %e, "pass-through login refused by the backend");
            password_failed(&who.user)
        }
        _ => PgClientError::from(e),
    }
}

/// One client's login: whom it is checked for and how.
struct Login<'a> {
    client: &'a mut Client,
    pool: &'a PoolConfig,
    config: &'a Config,
    user: &'a str,
    method: ClientAuth,
    anonymous: bool,
    /// The client's address, which MySQL account hosts are matched against.
    addr: Option<std::net::IpAddr>,
}

/// Checks the client against the pool's credentials, or on a pass-through pool (no
/// `username`, #23) against its stored secret (auth file or auth query); returns who a
/// pass-through pool's backend connections log in as. A refusal's reason goes to `reason`.
async fn authenticate(
    ctx: &CoreContext,
    login: Login<'_>,
    reason: &Cell<AuthFailure>,
) -> Result<Option<Rc<PassThrough>>, LoginEnd> {
    let Login { client, pool, config, user, method, anonymous, addr } = login;
    if pool.username.is_none() {
        let stored = stored_secret(ctx, config, (&pool.name, Protocol::Postgres), user, addr).await;
        let how = How { method, anonymous, seed: &config.auth.mock_seed };
        let outcome = pass_through(client, stored.as_ref(), user, how).await;
        if let (Err((LoginEnd::Refused(e), _)), Ok(stored)) = (&outcome, &stored) {
            if e.code == sqlstate::INVALID_PASSWORD {
                login_failed(ctx, &pool.name, user, stored);
            }
        }
        return outcome.map(Some).map_err(|(end, why)| {
            reason.set(why);
            end
        });
    }
    let (Some(pool_user), Some(password)) = (pool.username.as_deref(), pool.password.as_deref()) else {
        if anonymous {
            return Ok(None);
        }
        return Err(PgClientError::new(
            sqlstate::INVALID_AUTHORIZATION_SPECIFICATION,
            format!("pool \"{}\" has no password and the listener does not allow anonymous clients", pool.name),
        )
        .into());
    };
    verify(client, (pool_user, password), user, method, &config.auth.mock_seed).await.map(|()| None)
}

/// How a pass-through login is checked: the listener's exchange, whether it lets users
/// without a secret in, and the mock salt key.
struct How<'a> {
    method: ClientAuth,
    anonymous: bool,
    seed: &'a [u8; 32],
}

/// The pass-through login (#23): the client is checked against its stored secret (auth file or
/// auth query), and what the exchange proves (the SCRAM ClientKey, the MD5 secret, or the
/// plaintext) is kept to log the client's backend connections in as the client. A user
/// without a secret is let through unchecked only on an `allow_anonymous` listener, for
/// backends that trust the router. A role that may not log in is refused after a right proof
/// with the server's 28000, after a wrong one like any other (#33).
async fn pass_through(
    client: &mut Client,
    stored: Result<&Stored, &String>,
    user: &str,
    how: How<'_>,
) -> Result<Rc<PassThrough>, (LoginEnd, AuthFailure)> {
    let verifier = match entry(stored) {
        Err(why) if how.anonymous && why.lets_anonymous_in() => {
            return Ok(Rc::new(PassThrough { user: Rc::from(user), secret: BackendSecret::Nothing }));
        }
        found => found.map(Verifier::parse),
    };
    // Every path runs the same exchange to its end, so which part was wrong is not revealed.
    let (expected, refusal) = match &verifier {
        Ok(v) => expected_for(&client.derivations, v.as_ref(), how.method, user, how.seed).await,
        Err(why) => (Expected::unknowable(how.method, user, how.seed), Some(why.clone())),
    };
    let proof = exchange(client, &expected).await.map_err(|end| (end, AuthFailure::WrongPassword))?;
    let secret = match (&proof, refusal, &verifier, &expected) {
        (Some(_), None, Ok(Ok(Verifier::Plain(password))), _) => BackendSecret::Password(password.clone()),
        (Some(_), None, _, Expected::Md5(secret)) => BackendSecret::Md5(secret.clone()),
        (Some(p), None, _, Expected::Scram(secret)) => match p.client_key {
            Some(client_key) => BackendSecret::Scram(ScramKeys {
                iterations: secret.iterations,
                salt: secret.salt.clone(),
                client_key,
                server_key: secret.server_key,
            }),
            None => return Err((refuse(user), AuthFailure::WrongPassword)),
        },
        (_, refusal, _, _) => {
            let why = refusal.unwrap_or(Refusal::WrongPassword);
            tracing::info!(user, reason = %why, "pass-through login refused");
            return Err((refuse(user), failure(&why)));
        }
    };
    if let Some(p) = proof {
        finish(client, p).await.map_err(|end| (end, AuthFailure::WrongPassword))?;
    }
    if stored.is_ok_and(|s| s.no_login) {
        return Err((no_login(client, user).await, AuthFailure::NotAdmitted));
    }
    Ok(Rc::new(PassThrough { user: Rc::from(user), secret }))
}

/// Refuses a role that proved its password but may not log in, as the server does: the
/// password exchange has succeeded (AuthenticationOk), then FATAL 28000.
async fn no_login(client: &mut Client, user: &str) -> LoginEnd {
    tracing::info!(user, "pass-through login refused: the role may not log in (rolcanlogin)");
    let mut out = Vec::new();
    let _ = backend::encode_authentication(&Authentication::Ok, &mut out);
    if let Err(end) = client.send(&out).await {
        return end;
    }
    let message = format!("role \"{user}\" is not permitted to log in");
    PgClientError::new(sqlstate::INVALID_AUTHORIZATION_SPECIFICATION, message).into()
}

/// What a stored verifier checks a `method` client with, and why it refuses any proof when it
/// cannot check this exchange (the exchange still runs, against a mock verifier).
async fn expected_for(
    derivations: &Rc<Derivations>,
    verifier: Result<&Verifier, &VerifierError>,
    method: ClientAuth,
    user: &str,
    seed: &[u8; 32],
) -> (Expected, Option<Refusal>) {
    match (verifier, method) {
        (Ok(Verifier::Scram(secret)), ClientAuth::ScramSha256) => (Expected::Scram(secret.clone()), None),
        (Ok(Verifier::Md5(secret)), ClientAuth::Md5) => (Expected::Md5(secret.clone()), None),
        (Ok(Verifier::Plain(password)), _) => {
            (Expected::from_password(derivations, method, user, password, seed).await, None)
        }
        (Ok(other), _) => (Expected::unknowable(method, user, seed), Some(Refusal::UnusableSecret(other.kind()))),
        (Err(_), _) => (Expected::unknowable(method, user, seed), Some(Refusal::UnusableSecret("malformed secret"))),
    }
}

/// Authenticates an admin-console user against its `console.passwords` entry: a password, an
/// MD5 secret or a SCRAM verifier, as in the auth file (#33). An unknown user runs the same
/// exchange against a mock verifier and gets the same refusal.
async fn console_login(
    client: &mut Client,
    console: &Console,
    user: String,
    method: ClientAuth,
    seed: &[u8; 32],
) -> LoginEnd {
    let role = console.role_of(&user);
    let verifier = console.passwords.get(&user).filter(|_| role.is_some()).map(|t| Verifier::parse(t));
    let (expected, refusal) = match &verifier {
        Some(v) => expected_for(&client.derivations, v.as_ref(), method, &user, seed).await,
        None => (Expected::unknowable(method, &user, seed), Some(Refusal::Denied(Denial::Unknown))),
    };
    let proof = match exchange(client, &expected).await {
        Ok(proof) => proof,
        Err(end) => return end,
    };
    match (proof, refusal, role) {
        (Some(p), None, Some(role)) => match finish(client, p).await {
            Ok(()) => LoginEnd::Console { user, role },
            Err(end) => end,
        },
        (_, why, _) => {
            tracing::info!(user, reason = %why.unwrap_or(Refusal::WrongPassword), "console login refused");
            refuse(&user)
        }
    }
}

/// Runs the password exchange against the pool's `(user, password)` and accepts the client
/// only if it is that user too.
async fn verify(
    client: &mut Client,
    (expected_user, password): (&str, &str),
    user: &str,
    method: ClientAuth,
    seed: &[u8; 32],
) -> Result<(), LoginEnd> {
    // The exchange runs to the end against the pool's secret before the user name is even
    // looked at, so an unknown user costs the same messages and hashing as a wrong password,
    // and both get the same answer: which part was wrong is not revealed, not even by timing.
    // Nothing is sent between the proof check and the verdict (not even SCRAM's server
    // signature), so a right password with a wrong user looks like any other failure.
    let expected = Expected::from_password(&client.derivations, method, user, password, seed).await;
    let proof = exchange(client, &expected).await?;
    let user_ok = auth::ct_eq(expected_user.as_bytes(), user.as_bytes());
    match proof {
        Some(p) if user_ok => finish(client, p).await,
        _ => Err(refuse(user)),
    }
}

/// What a client's proof is checked against, in the exchange its listener demands.
enum Expected {
    /// SCRAM-SHA-256 against a verifier.
    Scram(ScramSecret),
    /// MD5 against a secret `md5<hex>`.
    Md5(String),
}

impl Expected {
    /// The password's verifier. Its SCRAM salt is the user's mock salt: the same on every try,
    /// as a stored verifier's is, so it does not set the user apart from an unknown one. The
    /// key derivation waits its turn in the core's `derivations`, which run one slice per loop
    /// turn in the background (#41).
    async fn from_password(
        derivations: &Rc<Derivations>,
        method: ClientAuth,
        user: &str,
        password: &str,
        seed: &[u8; 32],
    ) -> Self {
        let salt = scram_salt(seed, user);
        let derivation = match method {
            ClientAuth::Md5 => return Expected::Md5(auth::md5_secret(user, password)),
            ClientAuth::ScramSha256 => Derivation::new(password, &salt, SCRAM_ITERATIONS),
        };
        // HMAC takes any key, so there is always a derivation; without one, no proof matches.
        let Some(derivation) = derivation else { return Self::unknowable(method, user, seed) };
        Expected::Scram(derivations.run(derivation).await)
    }

    /// A secret no password matches, checked with the same work as a stored one (no key
    /// derivation: stored verifiers need none either), with the user's mock salt (#33).
    fn unknowable(method: ClientAuth, user: &str, seed: &[u8; 32]) -> Self {
        match method {
            ClientAuth::Md5 => Expected::Md5(auth::md5_secret(user, &format!("{:032x}", rand::random::<u128>()))),
            ClientAuth::ScramSha256 => Expected::Scram(ScramSecret {
                iterations: SCRAM_ITERATIONS,
                salt: scram_salt(seed, user).to_vec(),
                stored_key: rand::random(),
                server_key: rand::random(),
            }),
        }
    }
}

/// Runs the exchange up to the client's proof (the pure [`Challenge`] over the socket); `None`
/// when the proof is wrong. Ending it is left to the caller ([`finish`]), after anything else
/// is checked too.
async fn exchange(client: &mut Client, expected: &Expected) -> Result<Option<Proof>, LoginEnd> {
    let mut out = Vec::new();
    let mut challenge = match expected {
        Expected::Md5(secret) => Challenge::md5(secret, rand::random(), &mut out),
        Expected::Scram(secret) => {
            let nonce = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 18]>());
            // Over TLS, SCRAM-SHA-256-PLUS too, bound to the certificate the client got (#38).
            let binding = client.binding.as_deref().map(<[u8]>::to_vec);
            Challenge::scram_bound(secret.clone(), &nonce, binding, &mut out)
        }
    };
    loop {
        client.send(&out).await?;
        out.clear();
        let (tag, body) = client.next(false).await?;
        match challenge.on_message(tag, &body, &mut out) {
            Ok(Progress::Continue) => {}
            Ok(Progress::Done(proof)) => return Ok(proof),
            Err(e) => return Err(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()).into()),
        }
    }
}

/// Sends SCRAM's server-final message, if the exchange has one.
async fn finish(client: &mut Client, proof: Proof) -> Result<(), LoginEnd> {
    if let Some(server_final) = proof.server_final {
        let mut out = Vec::new();
        backend::encode_authentication(&Authentication::SaslFinal(server_final.as_bytes()), &mut out)
            .map_err(|e| PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()))?;
        client.send(&out).await?;
    }
    Ok(())
}

/// What a successful login hands to the session.
struct Greeted {
    pool: Rc<CorePool>,
    state: SessionState,
    key: CancelKey,
    arrival: Arrival,
    /// A session-mode client's server connection, borrowed at login.
    backend: Option<Conn>,
}

async fn greet(ctx: &Rc<CoreContext>, client: &mut Client, a: Authenticated) -> Result<Greeted, LoginEnd> {
    let Authenticated { pool: pool_name, params: client_params, user, database, pass, causal } = a;
    let pools = ctx.pools();
    let pool = pools
        .get(&pool_name)
        .cloned()
        .ok_or_else(|| PgClientError::new(sqlstate::INVALID_CATALOG_NAME, "pool disappeared during login"))?;
    let server_params = super::server_params(&pool, pass.as_deref()).await.map_err(|e| {
        super::database::refused_database(&pool, &e).unwrap_or_else(|| pool_refusal(&e, pass.as_deref()))
    })?;
    let lex = crate::sql::mode::SessionModes::pg_startup(
        client_params.values.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        server_params.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let Greeting { mut state, mut shown, check } = greeting(client_params, &server_params);
    // A MySQL pool (the bridge) has no PostgreSQL settings to apply.
    let postgres = pool.config.backend_protocol(Protocol::Postgres) == Protocol::Postgres;
    let mut backend = None;
    if postgres && pool.config.mode == PoolMode::Session {
        // A session-mode client has its server connection from login on, as directly: the
        // greeting can name that server's process.
        backend = Some(attach(&pool, pass.as_deref(), &state, &mut shown, check).await?);
    } else if postgres && check {
        // The connection goes back carrying the client's settings: its first statement likely
        // finds it and needs no replay.
        let conn = attach(&pool, pass.as_deref(), &state, &mut shown, true).await?;
        pool.checkin(conn, true);
    }
    let shown = pool.share_params(shown);
    state.greeted(shown.clone());
    let key = match backend.as_ref().map(|c| c.info()) {
        // Cancels still come to the router, which knows what the client runs.
        Some(ConnInfo::Pg(info)) => ctx.new_cancel_key().with_server_pid(info.pid),
        _ => ctx.new_cancel_key(),
    };
    let mut out = Vec::with_capacity(512);
    encode_greeting(&shown, key, &mut out);
    if let Err(e) = client.send(&out).await {
        if let Some(conn) = backend {
            pool.checkin(conn, true);
        }
        return Err(e);
    }
    // The home pool's name is the pool's own, shared, not a copy per session (#39).
    let (user, database) = (names::shared(&user), names::shared(&database));
    let identity = Identity { user, database, lex, home: pool.name().clone() };
    Ok(Greeted { pool, state, key, arrival: Arrival { identity, pass, causal }, backend })
}

/// Borrows a backend connection carrying the client's startup settings, applied when it does
/// not carry them yet or when `check` asks for the server's view of them: the values the server
/// reports update `shown`, in its own spelling (`UTF8`, `SQL, DMY`), and a value the server
/// refuses ends the login with the server's error, as a direct connection would.
async fn attach(
    pool: &Rc<CorePool>,
    who: Option<&PassThrough>,
    state: &SessionState,
    shown: &mut [(String, String)],
    check: bool,
) -> Result<Conn, LoginEnd> {
    let deadline = rt::now() + pool.config.timeouts.acquire;
    let mut conn = pool.checkout(Protocol::Postgres, who, deadline).await.map_err(|e| pool_refusal(&e, who))?;
    if conn.settings == state.signature() && !check {
        return Ok(conn);
    }
    match run_reporting(&mut conn, &state.replay_sql()).await {
        Ok(reports) => {
            conn.settings = state.signature();
            for (name, value) in reports {
                if let Some(entry) = shown.iter_mut().find(|(k, _)| k.eq_ignore_ascii_case(&name)) {
                    entry.1 = value;
                }
            }
            Ok(conn)
        }
        Err(SettingsError::Refused { code, message }) => {
            // One implicit transaction: nothing of it stayed on the connection.
            pool.checkin(conn, true);
            Err(PgClientError::new(startup_sqlstate(&code), message).into())
        }
        Err(SettingsError::Lost(cause)) => {
            tracing::debug!(error = %cause, "backend connection lost while applying startup parameters");
            conn.broken = true;
            pool.checkin(conn, false);
            Err(PgClientError::new(
                sqlstate::CONNECTION_FAILURE,
                "backend connection lost while applying startup parameters",
            )
            .into())
        }
    }
}
