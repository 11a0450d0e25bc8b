//! Password authentication math (PostgreSQL docs 55.2.1 "Start-up", 55.3 "SASL Authentication"):
//! the MD5 challenge response and SCRAM-SHA-256 (RFC 5802, RFC 7677) for both roles — the router
//! is a SCRAM client towards backends and a SCRAM server towards its own clients.
//!
//! Pure functions of their inputs: nonces and salts come from the caller (who owns the random
//! source), so every exchange is reproducible in tests. Channel binding (RFC 5802 section 6) is
//! `tls-server-end-point` (RFC 5929 4.1) both ways: over TLS the router offers
//! SCRAM-SHA-256-PLUS to its clients ([`Binding`]), and as a client it binds to the backend's
//! certificate when the backend offers it ([`super::binding`]).
//! Passwords are used as raw UTF-8 bytes without SASLprep normalization, which matches
//! PostgreSQL for every ASCII password.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use md5::{Digest as _, Md5};
use sha2::Sha256;

use super::binding::ChannelBinding;
use super::sqlstate;

/// The SASL mechanism name of SCRAM-SHA-256.
pub const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
/// The SASL mechanism name of SCRAM-SHA-256 with channel binding.
pub const SCRAM_SHA_256_PLUS: &str = "SCRAM-SHA-256-PLUS";
/// The one channel binding type the router's server side takes (RFC 5929 4.1).
const TLS_SERVER_END_POINT: &str = "tls-server-end-point";

/// The channel binding a server exchange takes part in (RFC 5802 section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding<'a> {
    /// None offered (a plaintext connection): the client's flag is `n` or `y`.
    Unavailable,
    /// SCRAM-SHA-256-PLUS was offered and the client chose SCRAM-SHA-256: its flag must be `n`
    /// (`y` says it supports binding but believes the server does not: a downgrade).
    Declined,
    /// SCRAM-SHA-256-PLUS: the flag is `p=tls-server-end-point` and the client-final-message's
    /// `c=` carries the gs2 header followed by this data (the hash of the server's certificate).
    Required(&'a [u8]),
}
/// The iteration count PostgreSQL uses by default, and the router for its own secrets.
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// Highest iteration count a backend may demand (PgBouncer CVE-2026-6669 class). PBKDF2 runs on
/// the connection's core, so every session of that core waits while it runs: the wire allows
/// 2^32 - 1 rounds, hours of one core. 100,000 is 24 times PostgreSQL's default and leaves room
/// for a raised `scram_iterations`, while one derivation stays in the tens of milliseconds of a
/// release build (the pool caches it per password, salt and count, so a backend whose verifier
/// does not change pays it once per core).
pub const MAX_ITERATIONS: u32 = 100_000;

/// Longest SCRAM message accepted from a backend (CVE-2026-6665 class). A server-first message
/// is a nonce, a salt and a count, about 100 bytes from PostgreSQL; the cap bounds the salt a
/// derivation hashes and keeps in the pool's cache, whatever the frame limit allows.
pub const MAX_SERVER_MESSAGE: usize = 1024;

const KEY_LEN: usize = 32;
type Key = [u8; KEY_LEN];

/// Why a SCRAM exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A SCRAM message did not follow the RFC 5802 grammar.
    #[error("malformed SCRAM message: {what}")]
    Malformed {
        /// What was wrong.
        what: &'static str,
    },
    /// The client requires channel binding (`p=`), which the router does not offer here (or
    /// of a type other than `tls-server-end-point`).
    #[error("SCRAM channel binding is not supported")]
    ChannelBindingUnsupported,
    /// The client's binding flag contradicts the mechanisms offered and chosen (RFC 5802
    /// section 6: `y` although binding was offered, `n` or `y` with SCRAM-SHA-256-PLUS).
    #[error("SCRAM channel binding negotiation failed")]
    BindingNegotiation,
    /// The client sent an authorization identity (`a=`), which PostgreSQL does not support.
    #[error("SCRAM authorization identity is not supported")]
    AuthzidUnsupported,
    /// The peer sent a mandatory extension (`m=`) we do not know.
    #[error("unsupported mandatory SCRAM extension")]
    ExtensionUnsupported,
    /// A nonce has characters outside printable ASCII or contains a comma.
    #[error("invalid SCRAM nonce")]
    InvalidNonce,
    /// The nonce echoed by the peer does not extend ours.
    #[error("SCRAM nonce mismatch")]
    NonceMismatch,
    /// The client's proof is wrong: the password does not match.
    #[error("password authentication failed")]
    InvalidProof,
    /// The server's final signature is wrong: it does not know the password.
    #[error("SCRAM server signature mismatch")]
    ServerSignatureMismatch,
    /// The server demands more PBKDF2 rounds than the router runs for it.
    #[error("the backend demands {demanded} SCRAM iterations, more than the {max} the router accepts")]
    TooManyIterations {
        /// The server's iteration count.
        demanded: u64,
        /// [`MAX_ITERATIONS`].
        max: u32,
    },
    /// A server message is longer than any SCRAM server sends.
    #[error("the backend's SCRAM message of {len} bytes exceeds the {max} the router accepts")]
    MessageTooLong {
        /// The message length.
        len: usize,
        /// [`MAX_SERVER_MESSAGE`].
        max: usize,
    },
    /// The server ended the exchange with an error attribute (`e=`).
    #[error("SCRAM server error: {0}")]
    ServerError(String),
    /// A stored secret is not in `SCRAM-SHA-256$iter:salt$StoredKey:ServerKey` form.
    #[error("invalid SCRAM secret")]
    InvalidSecret,
    /// Logging in with a client's recovered keys needs the backend to salt and iterate as the
    /// verifier the client was checked against did; this backend's verifier differs.
    #[error("the backend's SCRAM verifier has another salt or iteration count than the router's")]
    VerifierMismatch,
}

impl ScramError {
    /// The SQLSTATE to report to a client for this failure.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Self::InvalidProof => sqlstate::INVALID_PASSWORD,
            Self::ChannelBindingUnsupported | Self::AuthzidUnsupported | Self::ExtensionUnsupported => {
                sqlstate::FEATURE_NOT_SUPPORTED
            }
            Self::ServerSignatureMismatch
            | Self::ServerError(_)
            | Self::InvalidSecret
            | Self::VerifierMismatch
            | Self::TooManyIterations { .. }
            | Self::MessageTooLong { .. } => sqlstate::INVALID_AUTHORIZATION_SPECIFICATION,
            _ => sqlstate::PROTOCOL_VIOLATION,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        for nibble in [b >> 4, b & 0x0f] {
            s.push(char::from(DIGITS.get(usize::from(nibble)).copied().unwrap_or(b'0')));
        }
    }
    s
}

/// The MD5 secret PostgreSQL stores for a role: `"md5" + hex(md5(password || user))`.
pub fn md5_secret(user: &str, password: &str) -> String {
    let digest = Md5::new().chain_update(password).chain_update(user).finalize();
    format!("md5{}", hex(&digest))
}

/// The response to AuthenticationMD5Password given a stored secret `md5<32 hex>`:
/// `"md5" + hex(md5(hex_part || salt))`. Returns `None` if `secret` is not in that form.
pub fn md5_response_from_secret(secret: &str, salt: [u8; 4]) -> Option<String> {
    let inner = secret.strip_prefix("md5").filter(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let digest = Md5::new().chain_update(inner).chain_update(salt).finalize();
    Some(format!("md5{}", hex(&digest)))
}

/// The response to AuthenticationMD5Password: `"md5" + hex(md5(hex(md5(password || user)) || salt))`.
pub fn md5_response(user: &str, password: &str, salt: [u8; 4]) -> String {
    md5_response_from_secret(&md5_secret(user, password), salt).unwrap_or_default()
}

/// Checks a client's MD5 response against the stored secret in constant time.
pub fn md5_verify(secret: &str, salt: [u8; 4], response: &str) -> bool {
    md5_response_from_secret(secret, salt).is_some_and(|want| ct_eq(want.as_bytes(), response.as_bytes()))
}

/// Writes a type's name with its secret fields elided, so key material never reaches a log.
macro_rules! redacted_debug {
    ($($t:ty),+) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t)).finish_non_exhaustive()
            }
        }
    )+};
}
redacted_debug!(ScramSecret, ScramClient, ScramClientFinal, ScramServer, ScramKeys);

/// Compares without an early exit, so timing does not reveal how many bytes matched (the
/// length is not secret).
#[must_use]
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> Key {
    // HMAC accepts keys of any length, so construction cannot fail; the fallback is unreachable
    // and would only make every comparison fail, never succeed.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return [0; KEY_LEN];
    };
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

fn sha256(data: &[u8]) -> Key {
    sha2::Sha256::digest(data).into()
}

fn salted_password(password: &str, salt: &[u8], iterations: u32) -> Key {
    let mut out = [0; KEY_LEN];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut out);
    out
}

/// SCRAM's `SaltedPassword` (PBKDF2-HMAC-SHA-256 of one 32-byte block, RFC 8018 section 5.2)
/// derived a slice of rounds at a time, so that a caller serving others on the same thread can
/// let them run between slices: 4096 rounds are about half a millisecond of a core.
#[derive(Clone)]
pub struct Derivation {
    /// HMAC keyed with the password; each round clones it (the key is hashed once).
    keyed: Hmac<Sha256>,
    /// The last round's output (`U_i`).
    last: Key,
    /// XOR of every round's output so far.
    sum: Key,
    /// Rounds still to run.
    left: u32,
    salt: Vec<u8>,
    iterations: u32,
}
redacted_debug!(Derivation);

impl Derivation {
    /// Starts the derivation of `password` with `salt` over `iterations` rounds (at least one).
    /// `None` never happens (HMAC takes keys of any length); it stands for the key HMAC refused.
    pub fn new(password: &str, salt: &[u8], iterations: u32) -> Option<Self> {
        let keyed = <Hmac<Sha256> as Mac>::new_from_slice(password.as_bytes()).ok()?;
        let mut first = keyed.clone();
        first.update(salt);
        first.update(&1u32.to_be_bytes());
        let u1: Key = first.finalize().into_bytes().into();
        Some(Self { keyed, last: u1, sum: u1, left: iterations.saturating_sub(1), salt: salt.to_vec(), iterations })
    }

    /// Runs up to `rounds` more rounds; `true` once every round has run.
    pub fn step(&mut self, rounds: u32) -> bool {
        for _ in 0..rounds.min(self.left) {
            let mut mac = self.keyed.clone();
            mac.update(&self.last);
            self.last = mac.finalize().into_bytes().into();
            for (s, u) in self.sum.iter_mut().zip(&self.last) {
                *s ^= u;
            }
        }
        self.left = self.left.saturating_sub(rounds);
        self.left == 0
    }

    /// The verifier, once [`Derivation::step`] has reported the last round run (before that,
    /// a verifier no password matches).
    pub fn secret(&self) -> ScramSecret {
        let client_key = hmac(&self.sum, &[b"Client Key"]);
        ScramSecret {
            iterations: self.iterations,
            salt: self.salt.clone(),
            stored_key: sha256(&client_key),
            server_key: hmac(&self.sum, &[b"Server Key"]),
        }
    }
}

/// `(HMAC(SaltedPassword, "Client Key"), HMAC(SaltedPassword, "Server Key"))` for a password
/// (RFC 5802 section 3); costs `iterations` HMAC rounds.
pub fn scram_keys(password: &str, salt: &[u8], iterations: u32) -> ([u8; 32], [u8; 32]) {
    let salted = salted_password(password, salt, iterations);
    (hmac(&salted, &[b"Client Key"]), hmac(&salted, &[b"Server Key"]))
}

fn xor(a: &Key, b: &Key) -> Key {
    let mut out = [0; KEY_LEN];
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x ^ y;
    }
    out
}

fn b64_key(s: &str, what: &'static str) -> Result<Key, ScramError> {
    let bytes = B64.decode(s).map_err(|_| ScramError::Malformed { what })?;
    Key::try_from(bytes.as_slice()).map_err(|_| ScramError::Malformed { what })
}

fn check_nonce(nonce: &str) -> Result<(), ScramError> {
    let printable = |b: u8| (0x21..=0x7e).contains(&b) && b != b',';
    if !nonce.is_empty() && nonce.bytes().all(printable) {
        Ok(())
    } else {
        Err(ScramError::InvalidNonce)
    }
}

fn check_server_len(msg: &[u8]) -> Result<(), ScramError> {
    if msg.len() > MAX_SERVER_MESSAGE {
        return Err(ScramError::MessageTooLong { len: msg.len(), max: MAX_SERVER_MESSAGE });
    }
    Ok(())
}

/// A server's `i=` attribute: decimal digits, at least 1, at most [`MAX_ITERATIONS`]. The
/// length is already bounded by [`MAX_SERVER_MESSAGE`]; a count too large even for `u64` is
/// reported as the largest.
fn check_iterations(text: &str) -> Result<u32, ScramError> {
    let malformed = ScramError::Malformed { what: "iteration count" };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed);
    }
    let demanded: u64 = text.parse().unwrap_or(u64::MAX);
    match u32::try_from(demanded) {
        Ok(0) => Err(malformed),
        Ok(n) if n <= MAX_ITERATIONS => Ok(n),
        _ => Err(ScramError::TooManyIterations { demanded, max: MAX_ITERATIONS }),
    }
}

/// Splits `key=value` for the expected one-letter attribute.
fn attr<'m>(part: Option<&'m str>, key: char, what: &'static str) -> Result<&'m str, ScramError> {
    let part = part.ok_or(ScramError::Malformed { what })?;
    if part.starts_with("m=") {
        return Err(ScramError::ExtensionUnsupported);
    }
    let mut chars = part.chars();
    match (chars.next(), chars.next()) {
        (Some(k), Some('=')) if k == key => Ok(chars.as_str()),
        _ => Err(ScramError::Malformed { what }),
    }
}

fn utf8<'m>(msg: &'m [u8], what: &'static str) -> Result<&'m str, ScramError> {
    std::str::from_utf8(msg).map_err(|_| ScramError::Malformed { what })
}

/// The keys a server needs to verify a password without knowing it (RFC 5802 section 3).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramSecret {
    /// PBKDF2 iteration count.
    pub iterations: u32,
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: [u8; 32],
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: [u8; 32],
}

impl ScramSecret {
    /// Derives the secret from a plaintext password (costs `iterations` HMAC rounds: do it once
    /// per configured password, not per login).
    pub fn from_password(password: &str, salt: &[u8], iterations: u32) -> Self {
        let salted = salted_password(password, salt, iterations);
        let client_key = hmac(&salted, &[b"Client Key"]);
        Self {
            iterations,
            salt: salt.to_vec(),
            stored_key: sha256(&client_key),
            server_key: hmac(&salted, &[b"Server Key"]),
        }
    }

    /// Parses PostgreSQL's stored form `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`
    /// (base64 fields), as found in `pg_authid.rolpassword`.
    pub fn parse(text: &str) -> Result<Self, ScramError> {
        let bad = |_| ScramError::InvalidSecret;
        let rest = text.strip_prefix("SCRAM-SHA-256$").ok_or(ScramError::InvalidSecret)?;
        let (params, keys) = rest.split_once('$').ok_or(ScramError::InvalidSecret)?;
        let (iterations, salt) = params.split_once(':').ok_or(ScramError::InvalidSecret)?;
        let (stored, server) = keys.split_once(':').ok_or(ScramError::InvalidSecret)?;
        let iterations: u32 = iterations.parse().map_err(|_| ScramError::InvalidSecret)?;
        Ok(Self {
            iterations,
            salt: B64.decode(salt).map_err(bad)?,
            stored_key: b64_key(stored, "stored key").map_err(|_| ScramError::InvalidSecret)?,
            server_key: b64_key(server, "server key").map_err(|_| ScramError::InvalidSecret)?,
        })
    }
}

/// Client side of SCRAM-SHA-256, used to log into backends. Start with [`ScramClient::new`],
/// send [`ScramClient::client_first`] in SASLInitialResponse, then feed the server's messages.
#[derive(Clone)]
pub struct ScramClient {
    credential: ClientCredential,
    client_first_bare: String,
    nonce: String,
    /// What the GS2 header says about channel binding, and what `c=` carries.
    binding: ChannelBinding,
}

/// What a SCRAM client proves itself with.
#[derive(Clone)]
enum ClientCredential {
    /// The password: the keys are derived with whatever salt the server sends.
    Password(String),
    /// Keys recovered from another client's proof: only a server with the same salt and
    /// iteration count accepts them.
    Keys(ScramKeys),
}

/// A role's SCRAM keys as recovered from a client's proof: enough to log in as the role to a
/// server whose verifier has the same salt and iteration count, without the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramKeys {
    /// PBKDF2 iteration count of the verifier.
    pub iterations: u32,
    /// Salt of the verifier.
    pub salt: Vec<u8>,
    /// `HMAC(SaltedPassword, "Client Key")`, recovered as proof XOR ClientSignature.
    pub client_key: [u8; 32],
    /// `HMAC(SaltedPassword, "Server Key")`, from the verifier.
    pub server_key: [u8; 32],
}

impl ScramClient {
    /// Prepares an exchange. PostgreSQL ignores the SCRAM user name (libpq sends an empty one);
    /// `client_nonce` must be printable ASCII without commas (e.g. base64 of 18 random bytes).
    pub fn new(user: &str, password: &str, client_nonce: &str) -> Result<Self, ScramError> {
        check_nonce(client_nonce)?;
        let user = user.replace('=', "=3D").replace(',', "=2C");
        Ok(Self {
            credential: ClientCredential::Password(password.to_owned()),
            client_first_bare: format!("n={user},r={client_nonce}"),
            nonce: client_nonce.to_owned(),
            binding: ChannelBinding::Unsupported,
        })
    }

    /// The exchange with `binding` in its GS2 header and `c=` attribute (RFC 5802 section 6);
    /// [`ChannelBinding::TlsServerEndPoint`] goes with the mechanism `SCRAM-SHA-256-PLUS`.
    #[must_use]
    pub fn bound(mut self, binding: ChannelBinding) -> Self {
        self.binding = binding;
        self
    }

    /// Prepares an exchange proven with recovered `keys` instead of a password (SCRAM
    /// pass-through); the server must offer the keys' salt and iteration count.
    pub fn with_keys(user: &str, keys: ScramKeys, client_nonce: &str) -> Result<Self, ScramError> {
        let mut client = Self::new(user, "", client_nonce)?;
        client.credential = ClientCredential::Keys(keys);
        Ok(client)
    }

    /// The client-first-message: the GS2 header (`n,,` without channel binding) and
    /// `n=<user>,r=<nonce>`.
    pub fn client_first(&self) -> String {
        format!("{}{}", self.binding.gs2_header(), self.client_first_bare)
    }

    /// Handles server-first-message (the AuthenticationSASLContinue data) and returns the
    /// client-final-message to send plus the state that verifies the server's last message.
    pub fn handle_server_first(&self, server_first: &[u8]) -> Result<(String, ScramClientFinal), ScramError> {
        self.handle_server_first_with(server_first, scram_keys)
    }

    /// [`Self::handle_server_first`] with the password's key derivation (PBKDF2, `iterations`
    /// HMAC rounds: the costly part of a login) left to `derive(password, salt, iterations)`,
    /// which must return [`scram_keys`]' result, e.g. from a cache: PostgreSQL salts a role's
    /// verifier once, so every login of that role sees the same salt and iteration count.
    pub fn handle_server_first_with(
        &self,
        server_first: &[u8],
        derive: impl FnOnce(&str, &[u8], u32) -> ([u8; 32], [u8; 32]),
    ) -> Result<(String, ScramClientFinal), ScramError> {
        check_server_len(server_first)?;
        let text = utf8(server_first, "server-first-message")?;
        let mut parts = text.split(',');
        let nonce = attr(parts.next(), 'r', "server nonce")?;
        let salt = attr(parts.next(), 's', "salt")?;
        let iterations = attr(parts.next(), 'i', "iteration count")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() <= self.nonce.len() {
            return Err(ScramError::NonceMismatch);
        }
        check_nonce(nonce)?;
        let salt = B64.decode(salt).map_err(|_| ScramError::Malformed { what: "salt" })?;
        let iterations = check_iterations(iterations)?;
        let (client_key, server_key) = match &self.credential {
            ClientCredential::Password(password) => derive(password, &salt, iterations),
            ClientCredential::Keys(keys) if keys.salt == salt && keys.iterations == iterations => {
                (keys.client_key, keys.server_key)
            }
            ClientCredential::Keys(_) => return Err(ScramError::VerifierMismatch),
        };
        let stored_key = sha256(&client_key);
        let without_proof = format!("c={},r={nonce}", self.binding.c_attribute());
        let auth_message = [self.client_first_bare.as_bytes(), b",", server_first, b",", without_proof.as_bytes()];
        let proof = xor(&client_key, &hmac(&stored_key, &auth_message));
        let server_signature = hmac(&server_key, &auth_message);
        let client_final = format!("{without_proof},p={}", B64.encode(proof));
        Ok((client_final, ScramClientFinal { server_signature }))
    }
}

/// The last step of a client exchange: checks that the server knew the password too.
#[derive(Clone)]
pub struct ScramClientFinal {
    server_signature: Key,
}

impl ScramClientFinal {
    /// Verifies server-final-message (the AuthenticationSASLFinal data).
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), ScramError> {
        check_server_len(server_final)?;
        let text = utf8(server_final, "server-final-message")?;
        let first = text.split(',').next().unwrap_or_default();
        if let Some(err) = first.strip_prefix("e=") {
            return Err(ScramError::ServerError(err.to_owned()));
        }
        let signature = b64_key(attr(Some(first), 'v', "server signature")?, "server signature")?;
        if ct_eq(&signature, &self.server_signature) {
            Ok(())
        } else {
            Err(ScramError::ServerSignatureMismatch)
        }
    }
}

/// Server side of SCRAM-SHA-256, used to authenticate clients against a pool's password.
#[derive(Clone)]
pub struct ScramServer {
    stored_key: Key,
    server_key: Key,
    /// `client-first-message-bare "," server-first-message`, the first part of AuthMessage.
    auth_prefix: String,
    /// What `c=` must decode to: the gs2 header, then the channel binding data if any.
    binding: Vec<u8>,
    nonce: String,
}

impl ScramServer {
    /// Handles client-first-message (SASLInitialResponse data) and returns the exchange state
    /// plus the server-first-message to send in AuthenticationSASLContinue.
    /// `server_nonce` is appended to the client's nonce; it must be printable ASCII without commas.
    pub fn start(secret: &ScramSecret, client_first: &[u8], server_nonce: &str) -> Result<(Self, String), ScramError> {
        Self::start_bound(secret, client_first, server_nonce, Binding::Unavailable)
    }

    /// [`ScramServer::start`] taking part in `binding`.
    pub fn start_bound(
        secret: &ScramSecret,
        client_first: &[u8],
        server_nonce: &str,
        binding: Binding<'_>,
    ) -> Result<(Self, String), ScramError> {
        check_nonce(server_nonce)?;
        let text = utf8(client_first, "client-first-message")?;
        let mut gs2 = text.splitn(3, ',');
        let data = match (gs2.next(), binding) {
            (Some("n"), Binding::Unavailable | Binding::Declined) | (Some("y"), Binding::Unavailable) => &[][..],
            (Some("y"), Binding::Declined) | (Some("n" | "y"), Binding::Required(_)) => {
                return Err(ScramError::BindingNegotiation)
            }
            (Some(flag), Binding::Required(data)) if flag.strip_prefix("p=") == Some(TLS_SERVER_END_POINT) => data,
            (Some(flag), Binding::Unavailable | Binding::Required(_)) if flag.starts_with("p=") => {
                return Err(ScramError::ChannelBindingUnsupported)
            }
            (Some(flag), Binding::Declined) if flag.starts_with("p=") => return Err(ScramError::BindingNegotiation),
            _ => return Err(ScramError::Malformed { what: "channel binding flag" }),
        };
        match gs2.next() {
            Some("") => {}
            Some(a) if a.starts_with("a=") => return Err(ScramError::AuthzidUnsupported),
            _ => return Err(ScramError::Malformed { what: "authorization identity" }),
        }
        let bare = gs2.next().ok_or(ScramError::Malformed { what: "client-first-message-bare" })?;
        let gs2_header = text.get(..text.len().saturating_sub(bare.len())).unwrap_or_default();
        let mut parts = bare.split(',');
        attr(parts.next(), 'n', "user name")?;
        let client_nonce = attr(parts.next(), 'r', "client nonce")?;
        check_nonce(client_nonce)?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!("r={nonce},s={},i={}", B64.encode(&secret.salt), secret.iterations);
        let state = Self {
            stored_key: secret.stored_key,
            server_key: secret.server_key,
            auth_prefix: format!("{bare},{server_first}"),
            binding: [gs2_header.as_bytes(), data].concat(),
            nonce,
        };
        Ok((state, server_first))
    }

    /// Handles client-final-message (SASLResponse data): verifies channel binding data, nonce and
    /// proof, and returns the server-final-message to send in AuthenticationSASLFinal.
    pub fn finish(&self, client_final: &[u8]) -> Result<String, ScramError> {
        self.finish_with_key(client_final).map(|(server_final, _)| server_final)
    }

    /// Like [`ScramServer::finish`], also returning the client's `ClientKey` recovered from its
    /// proof (`proof XOR HMAC(StoredKey, AuthMessage)`), which logs in to a backend holding the
    /// same verifier without the password.
    pub fn finish_with_key(&self, client_final: &[u8]) -> Result<(String, [u8; 32]), ScramError> {
        let text = utf8(client_final, "client-final-message")?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(ScramError::Malformed { what: "proof" })?;
        let mut parts = without_proof.split(',');
        let binding = attr(parts.next(), 'c', "channel binding")?;
        let binding = B64.decode(binding).map_err(|_| ScramError::Malformed { what: "channel binding" })?;
        if binding != self.binding {
            return Err(ScramError::Malformed { what: "channel binding does not match gs2 header" });
        }
        if attr(parts.next(), 'r', "nonce")? != self.nonce {
            return Err(ScramError::NonceMismatch);
        }
        let proof = b64_key(proof, "proof")?;
        let auth_message = [self.auth_prefix.as_bytes(), b",", without_proof.as_bytes()];
        let client_key = xor(&proof, &hmac(&self.stored_key, &auth_message));
        if !ct_eq(&sha256(&client_key), &self.stored_key) {
            return Err(ScramError::InvalidProof);
        }
        Ok((format!("v={}", B64.encode(hmac(&self.server_key, &auth_message))), client_key))
    }
}
