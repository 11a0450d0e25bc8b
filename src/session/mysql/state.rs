//! Sans-IO MySQL session state for transaction and statement pooling: the session variables,
//! default database and character set a client chose (replayed on whichever backend connection
//! it borrows next), and what pins it to one connection for good (user variables, `GET_LOCK`,
//! temporary tables, `LOCK TABLES`, SQL-level `PREPARE`, settings that cannot be replayed).
//! What a statement does is read by [`crate::sql::analyze::session_effects`].
//!
//! MySQL `SET` is not transactional: an effect applies once its statement succeeded, which the
//! relay learns from the number of results that came back before any error.

use crate::session::engine::effects::{setting_on, FrozenSettings, Settings};
use crate::sql::analyze::{Effect, PinReason, MYSQL_ACCESS_MODE};

/// A MySQL session's settings on their way to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FrozenMyState {
    #[serde(flatten)]
    settings: FrozenSettings,
    db: Option<String>,
}

/// Settings, default database and pins of one client.
#[derive(Debug, Default, Clone)]
pub struct MyState {
    settings: Settings,
    db: Option<String>,
    signature: u64,
}

impl MyState {
    /// Starts with the client's database (when it differs from the pool's) and a `SET NAMES`
    /// for its character set (when it differs from the backends').
    pub fn new(db: Option<String>, names: Option<String>) -> Self {
        let mut s = Self { db, ..Self::default() };
        if let Some(stmt) = names {
            s.settings.apply(Effect::Set { name: "names".into(), stmt });
        }
        s.resign();
        s
    }

    /// Applies the effects of the statements with index below `succeeded`; pins apply even for
    /// failed statements.
    pub fn apply(&mut self, effects: &[(usize, Effect)], succeeded: usize) {
        let mut changed = false;
        for (i, e) in effects {
            match e {
                Effect::Pin(r) => self.settings.pin_for(*r),
                _ if *i >= succeeded => {}
                Effect::Use(db) => {
                    self.db = Some(db.clone());
                    changed = true;
                }
                _ => changed |= self.settings.apply(e.clone()),
            }
        }
        if changed {
            self.resign();
        }
    }

    /// Forgets everything (`COM_RESET_CONNECTION`, `COM_CHANGE_USER`), starting again from
    /// `db` and `names` as [`MyState::new`] does.
    pub fn reset(&mut self, db: Option<String>, names: Option<String>) {
        *self = Self::new(db, names);
    }

    /// Why the session is pinned, if it is.
    pub fn pin(&self) -> Option<PinReason> {
        self.settings.pin()
    }

    /// A pin not counted in the metrics yet (see [`Settings::take_uncounted_pin`]).
    pub fn take_uncounted_pin(&mut self) -> Option<PinReason> {
        self.settings.take_uncounted_pin()
    }

    /// The database the client selected, if it differs from the pool's.
    pub fn db(&self) -> Option<&str> {
        self.db.as_deref()
    }

    /// Identifies settings plus database; 0 means "connection defaults".
    pub fn signature(&self) -> u64 {
        self.signature
    }

    /// Whether the client made its transactions `READ ONLY` for the session (`SET SESSION
    /// TRANSACTION READ ONLY`, `tx_read_only` / `transaction_read_only` on), so an implicitly
    /// opened transaction cannot write.
    pub fn read_only_transactions(&self) -> bool {
        let Some(stmt) = self.settings.get(MYSQL_ACCESS_MODE).map(str::to_ascii_uppercase) else { return false };
        match stmt.rsplit_once('=') {
            Some((_, value)) => matches!(value.trim().trim_matches('\''), "1" | "ON" | "TRUE"),
            None => stmt.ends_with("READ ONLY"),
        }
    }

    /// The tracked settings: each one's name and the statement that restores it.
    pub fn settings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.settings.iter()
    }

    /// Whether the setting the router replays turns autocommit off.
    pub fn autocommit_off(&self) -> bool {
        self.settings.get("autocommit").is_some_and(|stmt| !setting_on(stmt))
    }

    /// One multi-statement query that applies every tracked setting, or `None`.
    pub fn replay_sql(&self) -> Option<String> {
        if self.settings.is_empty() {
            return None;
        }
        Some(self.settings.iter().map(|(_, stmt)| stmt).collect::<Vec<_>>().join("; "))
    }

    /// The settings and database a session moving to a new binary takes along (#40); `None`
    /// for a pinned session, whose state is on its connection.
    /// `with_connection`: the connection, which holds what pinned the session, moves too.
    pub fn freeze(&self, with_connection: bool) -> Option<FrozenMyState> {
        Some(FrozenMyState { settings: self.settings.freeze(with_connection)?, db: self.db.clone() })
    }

    /// The state [`MyState::freeze`] kept.
    pub fn thaw(frozen: FrozenMyState) -> Self {
        let mut s = Self { settings: Settings::thaw(frozen.settings), db: frozen.db, signature: 0 };
        s.resign();
        s
    }

    fn resign(&mut self) {
        self.signature = self.settings.signature(&self.db, self.db.is_none());
    }
}

/// `SET NAMES` for a handshake collation id the router knows, `None` otherwise.
pub fn names_for_collation(id: u8) -> Option<String> {
    let (cs, coll) = match id {
        8 => ("latin1", "latin1_swedish_ci"),
        33 => ("utf8mb3", "utf8mb3_general_ci"),
        45 => ("utf8mb4", "utf8mb4_general_ci"),
        46 => ("utf8mb4", "utf8mb4_bin"),
        47 => ("latin1", "latin1_bin"),
        48 => ("latin1", "latin1_general_ci"),
        63 => ("binary", "binary"),
        83 => ("utf8mb3", "utf8mb3_bin"),
        192 => ("utf8mb3", "utf8mb3_unicode_ci"),
        224 => ("utf8mb4", "utf8mb4_unicode_ci"),
        // MySQL 8 clients default to utf8mb4_0900_ai_ci, which MariaDB lacks.
        255 => ("utf8mb4", "utf8mb4_general_ci"),
        _ => return None,
    };
    Some(format!("SET NAMES {cs} COLLATE {coll}"))
}

#[cfg(test)]
mod tests;
