//! Configurations that are valid but likely wrong: `--check` prints them as warnings and still
//! accepts the file.

use super::{Config, Protocol};

impl Config {
    /// What `--check` warns about (and the router logs at start), one message per finding.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.auth.allow_empty_password {
            out.push(
                "[auth] allow_empty_password = true: MySQL accounts with an empty password log in through the \
                 router without one, from every address their Host admits, and the server sees the router's \
                 address, not the client's (#33)"
                    .to_owned(),
            );
        }
        out.extend(self.protocol_warnings());
        out
    }

    /// Pools without `protocol` reached by both listener kinds, in pool order.
    fn protocol_warnings(&self) -> Vec<String> {
        let serves = |p: Protocol| self.listeners.iter().any(|l| l.protocol == p);
        if !(serves(Protocol::Postgres) && serves(Protocol::MySql)) {
            return Vec::new();
        }
        // Any client may name any pool as its database, so with listeners of both protocols a
        // pool without `protocol` is reached with both; its backends speak only one (#25).
        self.pools
            .iter()
            .filter(|p| p.protocol.is_none())
            .map(|p| {
                let roles = self.routing_roles(&p.name);
                let reach = if roles.is_empty() { String::new() } else { format!(" (it is {})", roles.join(", ")) };
                let fix = if p.raw_passthrough || p.local_infile {
                    "raw_passthrough and local_infile exclude `protocol`, so give the other protocol's clients \
                     another pool"
                        .to_owned()
                } else {
                    format!(
                        "set protocol = \"postgres\" or \"mysql\" on [pools.{}] to say what its backends speak (the \
                         other protocol's clients are then bridged)",
                        p.name
                    )
                };
                format!(
                    "pool \"{}\" has no `protocol` but PostgreSQL and MySQL listeners both reach it{reach}: clients \
                     of the protocol its backends do not speak are refused at login; {fix}",
                    p.name
                )
            })
            .collect()
    }

    /// The `[routing]` keys that name `pool`.
    fn routing_roles(&self, pool: &str) -> Vec<&'static str> {
        let r = &self.routing;
        let my = r.mysql.as_ref();
        [
            ("routing.default_pool", r.default_pool.as_deref()),
            ("routing.write_pool", r.write_pool.as_deref()),
            ("routing.read_pool", r.read_pool.as_deref()),
            ("routing.mysql.default_pool", my.and_then(|m| m.default_pool.as_deref())),
            ("routing.mysql.write_pool", my.and_then(|m| m.write_pool.as_deref())),
            ("routing.mysql.read_pool", my.and_then(|m| m.read_pool.as_deref())),
        ]
        .into_iter()
        .filter(|(_, named)| *named == Some(pool))
        .map(|(key, _)| key)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOLS: &str = "[pools.pg]\nbackends = [{ host = \"127.0.0.1\", port = 5432 }]\n\
        [pools.my]\nprotocol = \"mysql\"\nbackends = [{ host = \"127.0.0.1\", port = 3306 }]\n\
        [routing]\ndefault_pool = \"pg\"\nmysql_default_pool = \"my\"\n";
    const PG: &str = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n";
    const MY: &str = "[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:6433\"\n";

    fn warnings(text: &str) -> Vec<String> {
        Config::parse(text, "t.toml").map(|c| c.warnings()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_pool_without_protocol_behind_both_listener_kinds_is_warned_about() {
        let w = warnings(&format!("{PG}{MY}{POOLS}"));
        assert_eq!(w.len(), 1, "only the pool without protocol: {w:?}");
        assert!(w[0].starts_with("pool \"pg\" has no `protocol`"), "{w:?}");
        assert!(w[0].contains("(it is routing.default_pool)"), "{w:?}");
        assert!(w[0].contains("set protocol = \"postgres\" or \"mysql\" on [pools.pg]"), "{w:?}");
    }

    #[test]
    fn one_listener_kind_or_explicit_protocols_need_no_warning_and_no_impossible_fix_is_offered() {
        assert!(warnings(&format!("{PG}{POOLS}")).is_empty());
        let infile = POOLS
            .replace("[pools.pg]\n", "[pools.pg]\nprotocol = \"postgres\"\n")
            .replace("protocol = \"mysql\"\n", "local_infile = true\n");
        let w = warnings(&format!("{PG}{MY}{infile}"));
        assert!(w.len() == 1 && w[0].contains("exclude `protocol`"), "no impossible fix offered: {w:?}");
        let explicit = POOLS.replace("[pools.pg]\n", "[pools.pg]\nprotocol = \"postgres\"\n");
        assert!(warnings(&format!("{PG}{MY}{explicit}")).is_empty());
    }

    #[test]
    fn the_empty_password_opt_in_is_warned_about() {
        let w = warnings(&format!("{MY}{POOLS}[auth]\nallow_empty_password = true\n"));
        assert!(w.len() == 1 && w[0].starts_with("[auth] allow_empty_password = true"), "{w:?}");
        assert!(warnings(&format!("{MY}{POOLS}[auth]\nallow_empty_password = false\n")).is_empty());
    }
}
