//! Sans-IO MySQL session state for transaction and statement pooling: the session variables,
//! default database and character set a client chose (replayed on whichever backend connection
//! it borrows next), and what pins it to one connection for good (user variables, `GET_LOCK`,
//! temporary tables, `LOCK TABLES`, SQL-level `PREPARE`, settings that cannot be replayed).
//! What a statement does is read by [`crate::sql::analyze::session_effects`].
//!
//! MySQL `SET` is not transactional: an effect applies once its statement succeeded, which the
//! relay learns from the number of results that came back before any error.

use crate::session::engine::effects::{setting_on, FrozenSettings, Settings};
use crate::sql::analyze::{Effect, MYSQL_ACCESS_MODE};

/// A MySQL session's settings on their way to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FrozenMyState {
    #[serde(flatten)]
    settings: FrozenSettings,
    db: Option<String>,
}

/// Settings, default database and pins of one client; what both wires keep alike is its
/// [`Settings`], which it derefs to.
#[derive(Debug, Default, Clone)]
pub struct MyState(Settings<Option<String>>);

impl std::ops::Deref for MyState {
    type Target = Settings<Option<String>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for MyState {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl MyState {
    /// Starts with the client's database (when it differs from the pool's) and a `SET NAMES`
    /// for its character set (when it differs from the backends').
    pub fn new(db: Option<String>, names: Option<String>) -> Self {
        let mut s = Settings::new(db);
        if let Some(stmt) = names {
            s.apply(Effect::Set { name: "names".into(), stmt });
        }
        Self(s)
    }

    /// Applies the effects of the statements with index below `succeeded`; pins apply even for
    /// failed statements.
    pub fn apply(&mut self, effects: &[(usize, Effect)], succeeded: usize) {
        for (i, e) in effects {
            match e {
                _ if *i >= succeeded && !matches!(e, Effect::Pin(_)) => {}
                Effect::Use(db) => self.0.set_own(Some(db.clone())),
                _ => self.0.apply(e.clone()),
            }
        }
    }

    /// Forgets everything (`COM_RESET_CONNECTION`, `COM_CHANGE_USER`), starting again from
    /// `db` and `names` as [`MyState::new`] does.
    pub fn reset(&mut self, db: Option<String>, names: Option<String>) {
        *self = Self::new(db, names);
    }

    /// The database the client selected, if it differs from the pool's.
    pub fn db(&self) -> Option<&str> {
        self.own().as_deref()
    }

    /// Whether the client made its transactions `READ ONLY` for the session (`SET SESSION
    /// TRANSACTION READ ONLY`, `tx_read_only` / `transaction_read_only` on), so an implicitly
    /// opened transaction cannot write.
    pub fn read_only_transactions(&self) -> bool {
        let Some(stmt) = self.get(MYSQL_ACCESS_MODE).map(str::to_ascii_uppercase) else { return false };
        match stmt.rsplit_once('=') {
            Some((_, value)) => matches!(value.trim().trim_matches('\''), "1" | "ON" | "TRUE"),
            None => stmt.ends_with("READ ONLY"),
        }
    }

    /// Whether the setting the router replays turns autocommit off.
    pub fn autocommit_off(&self) -> bool {
        self.get("autocommit").is_some_and(|stmt| !setting_on(stmt))
    }

    /// One multi-statement query that applies every tracked setting, or `None`.
    pub fn replay_sql(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        Some(self.iter().map(|(_, stmt)| stmt).collect::<Vec<_>>().join("; "))
    }

    /// The settings and database a session moving to a new binary takes along (#40); `None`
    /// for a pinned session, whose state is on its connection.
    /// `with_connection`: the connection, which holds what pinned the session, moves too.
    pub fn freeze(&self, with_connection: bool) -> Option<FrozenMyState> {
        Some(FrozenMyState { settings: self.0.freeze(with_connection)?, db: self.db().map(str::to_owned) })
    }

    /// The state [`MyState::freeze`] kept.
    pub fn thaw(frozen: FrozenMyState) -> Self {
        Self(Settings::thaw(frozen.settings, frozen.db))
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
