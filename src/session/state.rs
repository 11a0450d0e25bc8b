//! Sans-IO session state for transaction and statement pooling: which session settings a client
//! made (so they can be replayed on whatever backend connection it borrows next) and what pins
//! it to one backend connection for good (state that cannot be replayed).
//!
//! SET is transactional in PostgreSQL, so effects are staged while a statement or transaction
//! runs and applied only once it committed.
//!
//! A client's own startup parameters (and `options`) are its reset values: `RESET x` and
//! `RESET ALL` return to them, as on a direct connection. The backend connection was opened by
//! the router, so its reset values are the server's; after a committed RESET the session puts
//! the client's values back ([`SessionState::take_restore`]). Parameters the server reports
//! (ParameterStatus: DateStyle, TimeZone, ...) are replayed as the full value the server
//! reported, so a partial `SET datestyle TO dmy` is never replayed on its own.

pub mod startup;

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::session::engine::effects::{FrozenSettings, Settings};
use crate::sql::analyze::{session_effects, Effect, PinReason};
use crate::sql::Dialect;

/// What every replay starts with: the server's defaults, and the connection's own identity
/// (RESET ALL leaves `role` and `session_authorization` alone). Any user may return to its
/// own identity, so this never fails for lack of privilege.
const REPLAY_PREFIX: &str = "RESET SESSION AUTHORIZATION; RESET ROLE; RESET ALL";

/// A session's settings on their way to a new binary (#40).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrozenState {
    startup: Startup,
    greeting: Vec<(String, String)>,
    reported: Vec<(String, (String, String))>,
    restore: bool,
    #[serde(flatten)]
    settings: FrozenSettings,
}

/// The client's startup values that differ from the server's: (name, SET statement), sorted by
/// name. Fixed at login, so a tight slice rather than a map's nodes: most clients have one or
/// two and every idle session keeps them.
type Startup = Box<[(String, String)]>;

/// Settings a client made, plus its pins; what both wires keep alike is its [`Settings`], which
/// it derefs to.
#[derive(Debug, Default, Clone)]
pub struct SessionState {
    /// The startup values, and the settings the client changed since (name -> SET statement).
    settings: Settings<Startup>,
    staged: Vec<Effect>,
    /// The parameters the client was greeted with (name, value), shared with every client that
    /// saw the same greeting: thousands of sessions keep one copy.
    greeting: Rc<Vec<(String, String)>>,
    /// Server-reported parameters that changed since the greeting: lower-cased name -> (name,
    /// value).
    reported: BTreeMap<String, (String, String)>,
    /// A committed RESET left the backend on the server's value of a startup parameter.
    restore: bool,
}

impl std::ops::Deref for SessionState {
    type Target = Settings<Startup>;
    fn deref(&self) -> &Self::Target {
        &self.settings
    }
}

impl std::ops::DerefMut for SessionState {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.settings
    }
}

impl SessionState {
    /// Starts from the client's startup parameters that differ from the server defaults.
    pub fn from_startup<'a>(params: impl Iterator<Item = (&'a str, &'a str)>) -> Self {
        let mut startup = BTreeMap::new();
        let mut identity = false;
        for (name, value) in params {
            let lower = name.to_ascii_lowercase();
            identity |= lower == "role" || lower == "session_authorization";
            startup.insert(lower, set_stmt(name, value));
        }
        let mut settings = Settings::new(startup.into_iter().collect());
        if identity {
            // A startup identity is the client's alone: never replayed onto shared connections.
            settings.pin_for(PinReason::Role);
        }
        Self { settings, ..Self::default() }
    }

    /// Records the parameter values the client was greeted with (its view of ParameterStatus).
    pub fn greeted(&mut self, shown: Rc<Vec<(String, String)>>) {
        let unsafe_encoding = shown
            .iter()
            .any(|(name, value)| name.eq_ignore_ascii_case("client_encoding") && startup::ascii_unsafe_encoding(value));
        if unsafe_encoding {
            self.settings.pin_for(PinReason::ClientEncoding);
        }
        self.reported.clear();
        self.greeting = shown;
    }

    /// The value of the lower-cased parameter `lower` as the client last saw it reported (its
    /// greeting, then ParameterStatus).
    pub fn reported_value(&self, lower: &str) -> Option<&str> {
        self.reported(lower).map(|(_, v)| v)
    }

    /// The last reported (name, value) of the lower-cased parameter `lower`.
    fn reported(&self, lower: &str) -> Option<(&str, &str)> {
        match self.reported.get(lower) {
            Some((n, v)) => Some((n.as_str(), v.as_str())),
            None => {
                self.greeting.iter().find(|(n, _)| n.eq_ignore_ascii_case(lower)).map(|(n, v)| (n.as_str(), v.as_str()))
            }
        }
    }

    /// Records the effects of PostgreSQL text that was sent; they apply once it commits.
    pub fn stage_sql(&mut self, sql: &str) {
        self.stage(session_effects(sql, Dialect::Postgres).into_effects());
    }

    /// Records effects of a statement that was sent; they apply once it commits.
    pub fn stage(&mut self, effects: impl IntoIterator<Item = Effect>) {
        for e in effects {
            match e {
                // A pin holds even if the transaction rolls back: being conservative costs only
                // a dedicated connection.
                Effect::Pin(r) => self.settings.pin_for(r),
                other => self.staged.push(other),
            }
        }
    }

    /// The server reported `name = value` (ParameterStatus) on this client's connection;
    /// returns whether it differs from what the client saw last. A change of identity seen
    /// here pins even when no statement text announced it (a function that ran `SET ROLE`).
    pub fn report(&mut self, name: &str, value: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        let changed = self.reported(&lower).is_none_or(|(_, v)| v != value);
        if changed && matches!(lower.as_str(), "session_authorization" | "is_superuser") {
            self.settings.pin_for(PinReason::Role);
        }
        if lower == "client_encoding" && startup::ascii_unsafe_encoding(value) {
            self.settings.pin_for(PinReason::ClientEncoding);
        }
        if changed {
            self.reported.insert(lower, (name.to_owned(), value.to_owned()));
        }
        changed
    }

    /// The staged effects committed: apply them.
    pub fn commit(&mut self) {
        if self.staged.is_empty() {
            return;
        }
        for mut e in std::mem::take(&mut self.staged) {
            match &mut e {
                // A reported parameter is replayed as the whole value the server reported
                // (`SET datestyle TO dmy` keeps the output style set before it).
                Effect::Set { name, stmt } => {
                    if let Some((n, v)) = self.reported(name) {
                        *stmt = set_stmt(n, v);
                    }
                }
                Effect::Reset(name) => self.restore |= self.own().iter().any(|(k, _)| k.as_str() == name.as_str()),
                Effect::ResetAll => self.restore |= !self.own().is_empty(),
                // Pins were taken when staged; `USE` is MySQL's.
                Effect::Pin(_) | Effect::Use(_) => continue,
            }
            self.settings.apply(e);
        }
    }

    /// The staged effects were rolled back: forget them.
    pub fn rollback(&mut self) {
        self.staged.clear();
    }

    /// One query that turns any pooled connection's settings into this session's.
    pub fn replay_sql(&self) -> String {
        let mut sql = String::from(REPLAY_PREFIX);
        for (_, stmt) in self.settings() {
            sql.push_str("; ");
            sql.push_str(stmt);
        }
        sql
    }

    /// The settings in force that the client made: its startup values not changed since, then
    /// its committed `SET`s, as (lower-cased name, statement that restores it).
    pub fn settings(&self) -> impl Iterator<Item = (&str, &str)> {
        let startup = self.own().iter().filter(|(k, _)| self.get(k).is_none());
        startup.map(|(k, v)| (k.as_str(), v.as_str())).chain(self.settings.iter())
    }

    /// Whether a committed RESET still waits for the client's startup values to be put back.
    pub fn restore_pending(&self) -> bool {
        self.restore
    }

    /// After a committed RESET: the statements that put the client's own startup values back
    /// on the backend (which reset to the server's), if any are needed.
    pub fn take_restore(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.restore) {
            return None;
        }
        let stmts: Vec<&str> =
            self.own().iter().filter(|(k, _)| self.get(k).is_none()).map(|(_, s)| s.as_str()).collect();
        (!stmts.is_empty()).then(|| stmts.join("; "))
    }

    /// The settings a session moving to a new binary takes along (#40); `None` while effects
    /// are staged (mid-transaction), or when the session is pinned and its connection, which
    /// holds what pinned it, does not move `with_connection`.
    pub fn freeze(&self, with_connection: bool) -> Option<FrozenState> {
        if !self.staged.is_empty() {
            return None;
        }
        Some(FrozenState {
            startup: self.own().clone(),
            greeting: self.greeting.to_vec(),
            reported: self.reported.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            restore: self.restore,
            settings: self.settings.freeze(with_connection)?,
        })
    }

    /// The state [`SessionState::freeze`] kept; `share` gives the greeting's parameters the
    /// copy other clients with the same greeting hold.
    pub fn thaw(
        frozen: FrozenState,
        share: impl FnOnce(Vec<(String, String)>) -> Rc<Vec<(String, String)>>,
    ) -> SessionState {
        SessionState {
            settings: Settings::thaw(frozen.settings, frozen.startup),
            greeting: share(frozen.greeting),
            reported: frozen.reported.into_iter().collect(),
            restore: frozen.restore,
            staged: Vec::new(),
        }
    }
}

/// `SET name TO value`. A value with a NUL, which neither a startup packet nor a ParameterStatus
/// can carry, would be the server's default.
fn set_stmt(name: &str, value: &str) -> String {
    let value = quote_literal(value).unwrap_or_else(|| "DEFAULT".to_owned());
    format!("SET {} TO {value}", quote_ident(name))
}

/// Double-quotes a PostgreSQL identifier.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A PostgreSQL string literal read the same under either `standard_conforming_strings`; `None`
/// for a NUL, which PostgreSQL text cannot hold.
pub(super) fn quote_literal(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 3);
    crate::sql::requote::encode(text, crate::sql::requote::Target::Postgres, &mut out).ok().map(|()| out)
}

#[cfg(test)]
mod tests;
