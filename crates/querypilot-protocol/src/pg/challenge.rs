//! The server side of a client's password exchange at login (PostgreSQL docs 55.2.1 "Start-up",
//! 55.3 "SASL Authentication"): the request the router sends, the only message it accepts next,
//! and whether the client proved the password. MD5 is one round; SCRAM-SHA-256 is
//! AuthenticationSASL, SASLInitialResponse, AuthenticationSASLContinue, SASLResponse.
//!
//! Sans-IO, so the session drives it over a socket and the fuzz target drives it with arbitrary
//! message sequences: an exchange ends proven only where the proof was checked against the
//! secret, and it never accepts another message after it ended. Nonces and salts come from the
//! caller. Sending SCRAM's server-final message is left to the caller, who may still refuse
//! the client for another reason after a right proof.

use super::auth::{md5_verify, Binding, ScramError, ScramSecret, ScramServer, SCRAM_SHA_256, SCRAM_SHA_256_PLUS};
use super::backend::{encode_auth_sasl_scram, encode_auth_sasl_scram_plus, encode_authentication, Authentication};
use super::frontend::{decode_sasl_initial_response, password_text};
use super::tag::frontend::PASSWORD;

/// Why an exchange failed other than by a wrong password: the client broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    /// A message other than the one password message the exchange waits for.
    #[error("expected {0}")]
    Unexpected(&'static str),
    /// A SASLInitialResponse naming a mechanism that was not offered.
    #[error("the client chose a SASL mechanism that was not offered")]
    Mechanism,
    /// A SASLInitialResponse or client-first-message that does not decode.
    #[error("{0}")]
    Malformed(String),
    /// The client's client-first-message asks for something SCRAM here does not offer.
    #[error(transparent)]
    Scram(#[from] ScramError),
}

/// What a right proof yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    /// SCRAM's server-final message, to send in AuthenticationSASLFinal; `None` for MD5.
    pub server_final: Option<String>,
    /// The SCRAM ClientKey the proof revealed (for pass-through logins); `None` for MD5.
    pub client_key: Option<[u8; 32]>,
}

/// Where an exchange stands after a client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The bytes written to `out` go to the client, then its next message comes here.
    Continue,
    /// The exchange ended: `Some` only for a proof checked against the secret.
    Done(Option<Proof>),
}

enum State {
    Md5 {
        secret: String,
        salt: [u8; 4],
    },
    /// `binding`: the channel binding data when SCRAM-SHA-256-PLUS was offered too.
    ScramInitial {
        secret: ScramSecret,
        nonce: String,
        binding: Option<Vec<u8>>,
    },
    ScramFinal(Box<ScramServer>),
    Ended,
}

/// One client's password exchange; see the module docs.
pub struct Challenge {
    state: State,
}

impl std::fmt::Debug for Challenge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Challenge").finish_non_exhaustive()
    }
}

impl Challenge {
    /// Starts an MD5 exchange against the stored secret `md5<hex>`: appends
    /// AuthenticationMD5Password with `salt` to `out`.
    pub fn md5(secret: &str, salt: [u8; 4], out: &mut Vec<u8>) -> Self {
        // A four-byte salt always encodes.
        let _ = encode_authentication(&Authentication::Md5Password { salt }, out);
        Self { state: State::Md5 { secret: secret.to_owned(), salt } }
    }

    /// Starts a SCRAM-SHA-256 exchange against `secret`: appends AuthenticationSASL to `out`.
    /// `server_nonce` extends the client's nonce (printable ASCII without commas).
    pub fn scram(secret: ScramSecret, server_nonce: &str, out: &mut Vec<u8>) -> Self {
        Self::scram_bound(secret, server_nonce, None, out)
    }

    /// [`Challenge::scram`] on a connection with channel binding data (`tls-server-end-point`,
    /// RFC 5929 4.1: the hash of the server's certificate): offers SCRAM-SHA-256-PLUS too, and
    /// checks the client's binding against the data whichever mechanism it chooses.
    pub fn scram_bound(secret: ScramSecret, server_nonce: &str, binding: Option<Vec<u8>>, out: &mut Vec<u8>) -> Self {
        if binding.is_some() {
            encode_auth_sasl_scram_plus(out);
        } else {
            encode_auth_sasl_scram(out);
        }
        Self { state: State::ScramInitial { secret, nonce: server_nonce.to_owned(), binding } }
    }

    /// Handles the client's next message (type byte and body), appending any answer to `out`.
    /// After an error or [`Progress::Done`] every further message is an error.
    pub fn on_message(&mut self, tag: u8, body: &[u8], out: &mut Vec<u8>) -> Result<Progress, ChallengeError> {
        match std::mem::replace(&mut self.state, State::Ended) {
            State::Ended => Err(ChallengeError::Unexpected("nothing: the exchange is over")),
            _ if tag != PASSWORD => Err(ChallengeError::Unexpected("a password message")),
            State::Md5 { secret, salt } => {
                let right = password_text(body).is_ok_and(|response| md5_verify(&secret, salt, response));
                Ok(Progress::Done(right.then_some(Proof { server_final: None, client_key: None })))
            }
            State::ScramInitial { secret, nonce, binding } => {
                let (mechanism, data) =
                    decode_sasl_initial_response(body).map_err(|e| ChallengeError::Malformed(e.to_string()))?;
                let binding = match (mechanism, binding.as_deref()) {
                    (SCRAM_SHA_256, None) => Binding::Unavailable,
                    (SCRAM_SHA_256, Some(_)) => Binding::Declined,
                    (SCRAM_SHA_256_PLUS, Some(data)) => Binding::Required(data),
                    _ => return Err(ChallengeError::Mechanism),
                };
                let (server, server_first) =
                    ScramServer::start_bound(&secret, data.unwrap_or_default(), &nonce, binding)?;
                encode_authentication(&Authentication::SaslContinue(server_first.as_bytes()), out)
                    .map_err(|e| ChallengeError::Malformed(e.to_string()))?;
                self.state = State::ScramFinal(Box::new(server));
                Ok(Progress::Continue)
            }
            // A malformed client-final message proves nothing, like a wrong proof.
            State::ScramFinal(server) => Ok(Progress::Done(
                server
                    .finish_with_key(body)
                    .ok()
                    .map(|(server_final, key)| Proof { server_final: Some(server_final), client_key: Some(key) }),
            )),
        }
    }
}
