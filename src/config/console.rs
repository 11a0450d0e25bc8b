//! `[console]`: who may use the PgBouncer-style admin console (the virtual database `querypilot`,
//! alias `pgbouncer`, on every PostgreSQL listener) and how long `PAUSE` waits.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::check::{Checker, Zero};
use super::model::Pool;
use super::raw::{RawConsole, Sp};

/// The names the console answers to as a database.
pub const CONSOLE_DATABASES: [&str; 2] = ["querypilot", "pgbouncer"];

/// What a console user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleRole {
    /// Every command, including PAUSE, RESUME, RELOAD and SHUTDOWN.
    Admin,
    /// Read-only `SHOW` commands.
    Stats,
}

/// `[console]`. Reload: yes (new console logins).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Console {
    /// Users who may run every command.
    pub admin_users: Vec<String>,
    /// Users who may run `SHOW` commands.
    pub stats_users: Vec<String>,
    /// Each console user's password (never logged; redacted by `Config::redacted_toml`).
    pub passwords: BTreeMap<String, String>,
    /// Longest `PAUSE` waits for in-flight transactions before it gives up.
    pub pause_timeout: Duration,
}

impl Console {
    /// Whether any user may use the console.
    pub fn enabled(&self) -> bool {
        !self.admin_users.is_empty() || !self.stats_users.is_empty()
    }

    /// The role of `user`, if it is a console user.
    pub fn role_of(&self, user: &str) -> Option<ConsoleRole> {
        if self.admin_users.iter().any(|u| u == user) {
            Some(ConsoleRole::Admin)
        } else if self.stats_users.iter().any(|u| u == user) {
            Some(ConsoleRole::Stats)
        } else {
            None
        }
    }

    /// Whether a client asking for `database` means the console.
    pub fn is_console_database(&self, database: &str) -> bool {
        self.enabled() && CONSOLE_DATABASES.contains(&database)
    }
}

const DEFAULT_PAUSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Converts `[console]`; `pools` are checked for names the console would shadow.
pub(crate) fn console(ck: &mut Checker<'_>, raw: &RawConsole, pools: &[Pool]) -> Console {
    let mut seen = BTreeSet::new();
    let mut users = |ck: &mut Checker<'_>, list: &[Sp<String>], path: &str| -> Vec<String> {
        let mut out = Vec::with_capacity(list.len());
        for user in list {
            let name = ck.non_empty(user, path);
            if !seen.insert(name.clone()) {
                ck.report_at(user, path, format!("console user \"{name}\" is listed twice"));
            } else if !raw.passwords.contains_key(&name) {
                ck.report_at(user, path, format!("console user \"{name}\" has no entry in console.passwords"));
            }
            out.push(name);
        }
        out
    };
    let admin_users = users(ck, &raw.admin_users, "console.admin_users");
    let stats_users = users(ck, &raw.stats_users, "console.stats_users");
    let mut passwords = BTreeMap::new();
    for (user, password) in &raw.passwords {
        let path = format!("console.passwords.{user}");
        if !admin_users.contains(user) && !stats_users.contains(user) {
            ck.report_at(password, &path, format!("\"{user}\" is in neither console.admin_users nor stats_users"));
        }
        passwords.insert(user.clone(), ck.non_empty(password, &path));
    }
    let console = Console {
        admin_users,
        stats_users,
        passwords,
        pause_timeout: ck.duration(&raw.pause_timeout, "console.pause_timeout", DEFAULT_PAUSE_TIMEOUT, Zero::Allowed),
    };
    if console.enabled() {
        for pool in pools.iter().filter(|p| CONSOLE_DATABASES.contains(&p.name.as_str())) {
            ck.report_table(
                &["pools", &pool.name],
                &format!("pools.{}", pool.name),
                "this pool name is the admin console's database while [console] lists users; rename the pool",
            );
        }
    }
    console
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConsoleRole};

    const BASE: &str =
        "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
                        password = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 5432 }]\n\n[routing]\n\
                        default_pool = \"main\"\n";

    fn issues(console: &str) -> String {
        match Config::parse(&format!("{BASE}\n[console]\n{console}"), "t.toml") {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn users_get_their_roles_and_the_console_databases() {
        let c = Config::parse(
            &format!("{BASE}\n[console]\nadmin_users = [\"a\"]\nstats_users = [\"s\"]\npasswords = {{ a = \"x\", s = \"y\" }}\n"),
            "t.toml",
        )
        .expect("valid");
        assert_eq!(c.console.role_of("a"), Some(ConsoleRole::Admin));
        assert_eq!(c.console.role_of("s"), Some(ConsoleRole::Stats));
        assert_eq!(c.console.role_of("u"), None);
        assert!(c.console.is_console_database("querypilot") && c.console.is_console_database("pgbouncer"));
        assert!(!c.console.is_console_database("main"));
        let off = Config::parse(BASE, "t.toml").expect("valid");
        assert!(!off.console.is_console_database("pgbouncer"), "no console users: a plain database name");
    }

    #[test]
    fn a_user_without_a_password_is_reported() {
        assert!(issues("admin_users = [\"a\"]\n").contains("console user \"a\" has no entry in console.passwords"));
    }

    #[test]
    fn a_password_without_a_user_is_reported() {
        assert!(issues("passwords = { ghost = \"x\" }\n").contains("\"ghost\" is in neither"));
    }

    #[test]
    fn a_user_listed_twice_is_reported() {
        let text = "admin_users = [\"a\"]\nstats_users = [\"a\"]\npasswords = { a = \"x\" }\n";
        assert!(issues(text).contains("listed twice"));
    }

    #[test]
    fn a_pool_named_like_the_console_is_reported() {
        let text = format!(
            "{}\n[pools.pgbouncer]\nusername = \"u\"\npassword = \"p\"\nbackends = [{{ host = \"h\", port = 1 }}]\n\
             [console]\nadmin_users = [\"a\"]\npasswords = {{ a = \"x\" }}\n",
            BASE.replace("[routing]\ndefault_pool = \"main\"\n", "")
        ) + "[routing]\ndefault_pool = \"main\"\n";
        let err = Config::parse(&text, "t.toml").expect_err("shadowed pool");
        assert!(err.to_string().contains("admin console's database"), "{err}");
    }
}
