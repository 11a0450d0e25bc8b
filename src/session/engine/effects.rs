//! The session effects both dialects keep alike: the settings a client made (replayed on any
//! backend connection it borrows next), what pins it to one connection for good, and the
//! signature that tells a connection already carrying them from one that needs a replay. When
//! an effect applies is each dialect's: PostgreSQL's `SET` commits with its transaction, MySQL's
//! once its statement succeeded; what applying means is decided here once.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use crate::sql::analyze::{Effect, PinReason};

/// Whether the replayable `SET SESSION name = <value>` sets a boolean on; any value the router
/// cannot read (an expression, a variable, `DEFAULT`) counts as off.
pub fn setting_on(stmt: &str) -> bool {
    let value = stmt.rsplit_once('=').map_or("", |(_, v)| v).trim().trim_matches(|c| c == '\'' || c == '"');
    ["1", "ON", "TRUE"].iter().any(|v| value.eq_ignore_ascii_case(v))
}

/// What a connection must carry for a client: the settings it made (name -> the statement that
/// restores it) and the wire's own part `O` (PostgreSQL's startup values, MySQL's default
/// database); what pins it to its connection for good (the first reason wins) and whether
/// `sqp_session_pins_total` counted it; and the signature of what is carried, kept current by
/// every change so a session never reads a stale one.
#[derive(Debug, Default, Clone)]
pub struct Settings<O = ()> {
    made: BTreeMap<String, String>,
    own: O,
    pin: Option<PinReason>,
    counted: bool,
    signature: u64,
}

/// [`Settings`] on their way to a new binary (#40); each dialect's frozen state flattens it in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrozenSettings {
    settings: Vec<(String, String)>,
    /// What pins the session, when its connection moves with it.
    pin: Option<String>,
}

impl<O: Hash + Default + PartialEq> Settings<O> {
    /// No setting made yet, on top of the wire's own part.
    pub fn new(own: O) -> Self {
        let mut s = Self { own, ..Self::default() };
        s.resign();
        s
    }

    /// Applies a setting's effect, or a pin's. A pin holds even
    /// where its statement failed or rolled back: being conservative costs only a dedicated
    /// connection. `USE` is the wire's to keep (MySQL's default database, [`Settings::set_own`]).
    pub fn apply(&mut self, e: Effect) {
        match e {
            Effect::Set { name, stmt } => {
                self.made.insert(name, stmt);
            }
            // Back to the server's default: nothing of the client's is left to carry (#35:
            // `SET sql_select_limit = DEFAULT` must lift what the setting refused).
            Effect::Reset(name) => {
                self.made.remove(&name);
            }
            Effect::ResetAll => self.made.clear(),
            Effect::Pin(r) => return self.pin_for(r),
            Effect::Use(_) => return,
        }
        self.resign();
    }

    /// The wire's own part of what is carried.
    pub fn own(&self) -> &O {
        &self.own
    }

    /// Replaces the wire's own part.
    pub fn set_own(&mut self, own: O) {
        self.own = own;
        self.resign();
    }

    /// Pins the session for `r`, unless something pinned it already.
    pub fn pin_for(&mut self, r: PinReason) {
        self.pin.get_or_insert(r);
    }

    /// Why the session is pinned, if it is.
    pub fn pin(&self) -> Option<PinReason> {
        self.pin
    }

    /// The pin, the first time it is asked after the session was pinned; then `None`. The
    /// session counts each pin once with it (a pin is never lifted, only a whole state reset).
    pub fn take_uncounted_pin(&mut self) -> Option<PinReason> {
        if self.counted {
            return None;
        }
        self.counted = self.pin.is_some();
        self.pin
    }

    /// The statement that restores setting `name`, if the client made it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.made.get(name).map(String::as_str)
    }

    /// Whether the client made no setting.
    pub fn is_empty(&self) -> bool {
        self.made.is_empty()
    }

    /// Each setting's name and the statement that restores it, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.made.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Identifies what is carried; 0 means "connection defaults": equal signatures need no
    /// replay.
    pub fn signature(&self) -> u64 {
        self.signature
    }

    /// What moves to a new binary besides the wire's own part; `None` for a pinned session
    /// whose connection, which holds what pinned it, does not move `with_connection`.
    pub fn freeze(&self, with_connection: bool) -> Option<FrozenSettings> {
        if self.pin.is_some() && !with_connection {
            return None;
        }
        let settings = self.made.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Some(FrozenSettings { settings, pin: self.pin.map(|r| r.as_str().to_owned()) })
    }

    /// The settings [`Settings::freeze`] kept, on top of the wire's own part. A pin was counted
    /// by the process it began in.
    pub fn thaw(frozen: FrozenSettings, own: O) -> Self {
        let pin = frozen.pin.as_deref().and_then(PinReason::parse);
        let made = frozen.settings.into_iter().collect();
        let mut s = Settings { made, own, pin, counted: pin.is_some(), signature: 0 };
        s.resign();
        s
    }

    fn resign(&mut self) {
        self.signature = if self.made.is_empty() && self.own == O::default() {
            0
        } else {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.own.hash(&mut h);
            self.made.hash(&mut h);
            h.finish() | 1
        };
    }
}

#[cfg(test)]
mod tests;
