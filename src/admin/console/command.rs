//! The console's commands, parsed from the text of a simple query: PgBouncer's `SHOW`, `PAUSE`,
//! `RESUME`, `RELOAD`, `SHUTDOWN` and friends, case-insensitive, an optional trailing `;`.

/// What `SHOW` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// One row per pool: clients and server connections by state.
    Pools,
    /// One row per pool: statement, transaction and wait totals.
    Stats,
    /// `STATS_TOTALS`: the totals of `STATS` alone.
    StatsTotals,
    /// `STATS_AVERAGES`: the averages of `STATS` alone.
    StatsAverages,
    /// One row per pool: where it connects and its limits.
    Databases,
    /// One row per configuration key.
    Config,
    /// Counts of pools, users, clients and servers.
    Lists,
    /// The router's version.
    Version,
    /// Memory the router's own structures use.
    Mem,
    /// One row per backend: its server connections by state and its health.
    Servers,
    /// One row per listener: its clients by state.
    Clients,
    /// One row per console and pool user.
    Users,
    /// One row per limited statement shape and pool (#41): its limit, load and refusals.
    Limits,
}

/// One console command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `SHOW ...`.
    Show(Show),
    /// `PAUSE [db]`: hold new transactions of the pool (every pool without one).
    Pause(Option<String>),
    /// `RESUME [db]`.
    Resume(Option<String>),
    /// `RECONNECT [db]`: close the pool's server connections once each is idle.
    Reconnect(Option<String>),
    /// `KILL db`: end every client session on the pool now and pause it until RESUME.
    Kill(String),
    /// `SWITCHOVER db host:port` (#40): pause the pool, wait until the backend has replayed the
    /// primary's writes and is its only writable one, resume onto it.
    Switchover {
        /// The pool.
        pool: String,
        /// The backend, as the pool lists it.
        backend: String,
    },
    /// `RELOAD`: re-read the configuration file.
    Reload,
    /// `SHUTDOWN`: drain and stop the router.
    Shutdown,
    /// `SET name = value`: drivers send these at connect; accepted and ignored, as PgBouncer does.
    Set,
}

impl Command {
    /// Parses one command; the error is the message the client gets.
    pub fn parse(sql: &str) -> Result<Command, String> {
        let text = sql.trim().trim_end_matches(';').trim();
        let mut words = text.split_whitespace();
        let verb = words.next().unwrap_or("").to_ascii_uppercase();
        let arg = words.next().map(unquote);
        let extra = words.next();
        if verb == "SWITCHOVER" {
            return match (arg, extra.map(unquote), words.next()) {
                (Some(pool), Some(backend), None) => Ok(Command::Switchover { pool, backend }),
                _ => Err("SWITCHOVER needs a pool and one of its backends: SWITCHOVER pool host:port".into()),
            };
        }
        let command = match (verb.as_str(), arg) {
            ("SET", Some(_)) => return Ok(Command::Set),
            ("SHOW", Some(what)) => Command::Show(show(&what)?),
            ("PAUSE", db) => Command::Pause(db),
            ("RESUME", db) => Command::Resume(db),
            ("RECONNECT", db) => Command::Reconnect(db),
            ("KILL", Some(db)) => Command::Kill(db),
            ("RELOAD", None) => Command::Reload,
            ("SHUTDOWN", None) => Command::Shutdown,
            ("", _) => return Err("empty command".into()),
            _ => return Err(format!("invalid command \"{text}\"; try SHOW HELP")),
        };
        match extra {
            Some(_) => Err(format!("invalid command \"{text}\": too many words")),
            None => Ok(command),
        }
    }

    /// Whether only admin users may run it (stats users may only look).
    pub fn needs_admin(&self) -> bool {
        !matches!(self, Command::Show(_) | Command::Set)
    }
}

fn unquote(word: &str) -> String {
    word.trim_matches('"').to_owned()
}

fn show(what: &str) -> Result<Show, String> {
    Ok(match what.to_ascii_uppercase().as_str() {
        "POOLS" => Show::Pools,
        "STATS" => Show::Stats,
        "STATS_TOTALS" => Show::StatsTotals,
        "STATS_AVERAGES" => Show::StatsAverages,
        "DATABASES" => Show::Databases,
        "CONFIG" => Show::Config,
        "LISTS" => Show::Lists,
        "VERSION" => Show::Version,
        "MEM" => Show::Mem,
        "SERVERS" => Show::Servers,
        "CLIENTS" => Show::Clients,
        "USERS" => Show::Users,
        "LIMITS" => Show::Limits,
        other => {
            return Err(format!(
                "unknown SHOW \"{other}\"; the console knows POOLS, STATS, STATS_TOTALS, STATS_AVERAGES, DATABASES, \
                 CONFIG, LISTS, VERSION, MEM, SERVERS, CLIENTS, USERS, LIMITS"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command_in_any_case_with_or_without_semicolon() {
        assert_eq!(Command::parse("SHOW POOLS;"), Ok(Command::Show(Show::Pools)));
        assert_eq!(Command::parse("  show stats_totals "), Ok(Command::Show(Show::StatsTotals)));
        assert_eq!(Command::parse("Show Lists"), Ok(Command::Show(Show::Lists)));
        assert_eq!(Command::parse("PAUSE"), Ok(Command::Pause(None)));
        assert_eq!(Command::parse("pause \"main\";"), Ok(Command::Pause(Some("main".into()))));
        assert_eq!(Command::parse("RESUME main"), Ok(Command::Resume(Some("main".into()))));
        assert_eq!(Command::parse("reconnect main"), Ok(Command::Reconnect(Some("main".into()))));
        assert_eq!(Command::parse("KILL main"), Ok(Command::Kill("main".into())));
        assert!(Command::parse("KILL").is_err(), "KILL names its pool");
        assert_eq!(Command::parse("reload"), Ok(Command::Reload));
        assert_eq!(Command::parse("SHUTDOWN;"), Ok(Command::Shutdown));
        assert_eq!(Command::parse("SET DateStyle = 'ISO'"), Ok(Command::Set));
    }

    #[test]
    fn refuses_what_it_does_not_know_with_a_message() {
        assert!(Command::parse("SHOW FOO").unwrap_err().contains("unknown SHOW \"FOO\""));
        assert!(Command::parse("SELECT 1").unwrap_err().contains("invalid command"));
        assert!(Command::parse("RELOAD now").unwrap_err().contains("invalid command"));
        assert!(Command::parse("PAUSE a b").unwrap_err().contains("too many words"));
        let switch = Command::Switchover { pool: "main".into(), backend: "10.0.0.2:5432".into() };
        assert_eq!(Command::parse("switchover \"main\" 10.0.0.2:5432;"), Ok(switch));
        assert!(Command::parse("SWITCHOVER main").unwrap_err().contains("needs a pool and one of its backends"));
        assert!(Command::parse("SWITCHOVER main a b").is_err());
        assert!(Command::parse("SWITCHOVER main a").is_ok_and(|c| c.needs_admin()));
        assert!(Command::parse(" ; ").unwrap_err().contains("empty"));
        assert!(Command::parse("SHOW").is_err());
    }

    #[test]
    fn only_show_and_set_are_for_stats_users() {
        assert!(!Command::Show(Show::Pools).needs_admin());
        assert!(!Command::Set.needs_admin());
        for c in [
            Command::Pause(None),
            Command::Resume(None),
            Command::Reconnect(None),
            Command::Kill("x".into()),
            Command::Reload,
            Command::Shutdown,
        ] {
            assert!(c.needs_admin(), "{c:?}");
        }
    }
}
