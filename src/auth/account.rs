//! What a stored account says about a login (#33): the rows the auth query answered (or the
//! auth file's entry) read into [`Account`]s, and the [`verdict`] for one client — the secret
//! to check it against, or why it is refused whatever it proves. The checks are the server's
//! own, so the router never admits a login the server would refuse: PostgreSQL's
//! `rolvaliduntil` (expired: the same failure as a wrong password) and `rolcanlogin` (a right
//! password is still refused, as `role "…" is not permitted to log in`), MySQL's host matching
//! ([`crate::auth::host`]) and auth plugin, and empty secrets, which never authenticate through
//! the router unless `[auth] allow_empty_password` says so (MySQL only: PostgreSQL itself
//! refuses empty passwords). Pure: the caller passes the answer's age.

use std::net::IpAddr;
use std::time::Duration;

use super::host::{decide, AccountHost};

/// One account row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its user name (`""`: a MySQL anonymous account).
    pub user: String,
    /// Its MySQL `Host`; `None` for PostgreSQL roles and auth file entries (any host).
    pub host: Option<String>,
    /// Its MySQL auth plugin (`None` or `""`: `mysql_native_password`).
    pub plugin: Option<String>,
    /// The stored secret (`None`: NULL, no password).
    pub secret: Option<String>,
    /// PostgreSQL's `rolcanlogin` (true when the answer does not say).
    pub can_login: bool,
    /// How long after the answer the password stays valid (`rolvaliduntil`); `None`: for ever.
    pub valid_for: Option<Duration>,
}

impl Account {
    /// An auth file entry: `user`'s secret, valid from any host, for ever.
    pub fn listed(user: &str, secret: &str) -> Self {
        Account {
            user: user.to_owned(),
            host: None,
            plugin: None,
            secret: Some(secret.to_owned()),
            can_login: true,
            valid_for: None,
        }
    }
}

impl AccountHost for Account {
    fn user(&self) -> &str {
        &self.user
    }
    fn host(&self) -> &str {
        self.host.as_deref().unwrap_or("%")
    }
}

/// Column names the answer is read by (case-insensitive); without a secret column the last
/// column is the secret, as PgBouncer reads `SELECT usename, passwd …`.
const USER: [&str; 3] = ["user", "rolname", "usename"];
const SECRET: [&str; 4] = ["authentication_string", "rolpassword", "passwd", "password"];

/// Reads an auth query's answer (`columns` and text `rows`) for the user `asked`. A row without
/// a user column is `asked`'s own.
pub fn from_rows(columns: &[String], rows: &[Vec<Option<String>>], asked: &str) -> Vec<Account> {
    // By the names' order, not the columns': `SELECT *` on MariaDB's `mysql.user` has both
    // `Password` and `authentication_string`, and the latter is the one that counts.
    let col = |names: &[&str]| names.iter().find_map(|n| columns.iter().position(|c| c.eq_ignore_ascii_case(n)));
    let secret = col(&SECRET).or_else(|| columns.len().checked_sub(1));
    let (user, host, plugin) = (col(&USER), col(&["host"]), col(&["plugin"]));
    let (can_login, valid_for) = (col(&["rolcanlogin"]), col(&["valid_for"]));
    rows.iter()
        .map(|row| {
            let cell = |i: Option<usize>| i.and_then(|i| row.get(i)).and_then(Option::as_deref);
            Account {
                user: cell(user).unwrap_or(asked).to_owned(),
                host: host.map(|_| cell(host).unwrap_or("").to_owned()),
                plugin: cell(plugin).map(str::to_owned),
                secret: cell(secret).map(str::to_owned),
                can_login: cell(can_login).is_none_or(truthy),
                valid_for: cell(valid_for).and_then(remaining),
            }
        })
        .collect()
}

/// Whether the answer names each row's host (MySQL answers must, see [`verdict`]).
pub fn has_host_column(columns: &[String]) -> bool {
    columns.iter().any(|c| c.eq_ignore_ascii_case("host"))
}

fn truthy(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "t" | "true" | "y" | "yes" | "on" | "1")
}

/// Seconds left as the server computed them: `None` for `Infinity`; not a number or not
/// positive is expired now.
fn remaining(v: &str) -> Option<Duration> {
    match v.trim().parse::<f64>() {
        Ok(s) if s == f64::INFINITY => None,
        Ok(s) => Some(Duration::try_from_secs_f64(s).unwrap_or_default()),
        Err(_) => Some(Duration::ZERO),
    }
}

/// What the server would do with a login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Check the client's proof against this secret.
    Check(&'a str),
    /// Check it, and refuse even a right proof: the role may not log in (PostgreSQL 28000).
    NoLogin(&'a str),
    /// Refuse whatever the client proves, after the same exchange as any other login.
    Deny(Denial),
}

/// Why a login is refused whatever it proves; for the operator's log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// No account of that name (or no row admits it).
    Unknown,
    /// The account has no password (NULL).
    NoPassword,
    /// The password expired (`rolvaliduntil`).
    Expired,
    /// The account's hosts do not admit the client's address.
    Host,
    /// A MySQL anonymous account is the one the server would log the client in as.
    Anonymous,
    /// An empty password, and `allow_empty_password` is off.
    Empty,
    /// A MySQL auth plugin the router cannot check.
    Plugin(String),
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denial::Unknown => f.write_str("no entry in the auth file or the auth query's answer"),
            Denial::NoPassword => f.write_str("the account has no password"),
            Denial::Expired => f.write_str("the password has expired (rolvaliduntil)"),
            Denial::Host => f.write_str("no Host of the account admits the client's address"),
            Denial::Anonymous => f.write_str("an anonymous account is the most specific match for the client"),
            Denial::Empty => f.write_str("the password is empty and [auth] allow_empty_password is off"),
            Denial::Plugin(p) => write!(f, "the account uses auth plugin {p}, which the router cannot check"),
        }
    }
}

/// How the server's rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// MySQL: host matching, anonymous accounts and auth plugins count.
    pub mysql: bool,
    /// `[auth] allow_empty_password` (MySQL only).
    pub allow_empty: bool,
}

/// The verdict on a login of `user` from `client` against `accounts`, answered `age` ago.
pub fn verdict<'a>(
    accounts: &'a [Account],
    user: &str,
    client: Option<IpAddr>,
    rules: Rules,
    age: Duration,
) -> Verdict<'a> {
    let account = if rules.mysql {
        match decide(accounts, user, client) {
            Some(a) if a.user.is_empty() => return Verdict::Deny(Denial::Anonymous),
            Some(a) => a,
            None if accounts.iter().any(|a| a.user == user) => return Verdict::Deny(Denial::Host),
            None => return Verdict::Deny(Denial::Unknown),
        }
    } else {
        match accounts.iter().find(|a| a.user == user) {
            Some(a) => a,
            None => return Verdict::Deny(Denial::Unknown),
        }
    };
    if let Some(plugin) = account.plugin.as_deref().filter(|p| rules.mysql && !p.is_empty()) {
        if plugin != "mysql_native_password" {
            return Verdict::Deny(Denial::Plugin(plugin.to_owned()));
        }
    }
    let Some(secret) = account.secret.as_deref() else { return Verdict::Deny(Denial::NoPassword) };
    if account.valid_for.is_some_and(|left| age >= left) {
        return Verdict::Deny(Denial::Expired);
    }
    if secret.is_empty() && !(rules.mysql && rules.allow_empty) {
        return Verdict::Deny(Denial::Empty);
    }
    if account.can_login {
        Verdict::Check(secret)
    } else {
        Verdict::NoLogin(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn row(values: &[Option<&str>]) -> Vec<Option<String>> {
        values.iter().map(|v| v.map(str::to_owned)).collect()
    }

    const PG: Rules = Rules { mysql: false, allow_empty: false };
    const MY: Rules = Rules { mysql: true, allow_empty: false };

    #[test]
    fn postgres_roles_expire_and_may_be_barred_from_logging_in() {
        let columns = cols(&["rolname", "rolcanlogin", "valid_for", "rolpassword"]);
        let rows = [
            row(&[Some("live"), Some("t"), None, Some("md5x")]),
            row(&[Some("soon"), Some("t"), Some("30.5"), Some("md5y")]),
            row(&[Some("gone"), Some("t"), Some("-3"), Some("md5z")]),
            row(&[Some("inf"), Some("t"), Some("Infinity"), Some("md5i")]),
            row(&[Some("nologin"), Some("f"), None, Some("md5n")]),
            row(&[Some("nopw"), Some("t"), None, None]),
        ];
        let accounts = from_rows(&columns, &rows, "x");
        let v = |user: &str, age: u64| verdict(&accounts, user, None, PG, Duration::from_secs(age));
        assert_eq!(v("live", 9999), Verdict::Check("md5x"));
        assert_eq!(v("soon", 30), Verdict::Check("md5y"));
        assert_eq!(v("soon", 31), Verdict::Deny(Denial::Expired), "expires while cached");
        assert_eq!(v("gone", 0), Verdict::Deny(Denial::Expired));
        assert_eq!(v("inf", 1 << 40), Verdict::Check("md5i"));
        assert_eq!(v("nologin", 0), Verdict::NoLogin("md5n"));
        assert_eq!(v("nopw", 0), Verdict::Deny(Denial::NoPassword));
        assert_eq!(v("other", 0), Verdict::Deny(Denial::Unknown));
        let pgbouncer_style = from_rows(&cols(&["r_name", "r_secret"]), &[row(&[Some("a"), Some("s")])], "a");
        assert_eq!(verdict(&pgbouncer_style, "a", None, PG, Duration::ZERO), Verdict::Check("s"), "last column");
    }

    #[test]
    fn mysql_accounts_are_matched_by_host_and_empty_passwords_need_the_opt_in() {
        let columns = cols(&["User", "Host", "plugin", "authentication_string"]);
        let rows = [
            row(&[Some("root"), Some("localhost"), Some("mysql_native_password"), Some("")]),
            row(&[Some("app"), Some("%"), Some("mysql_native_password"), Some("*AA")]),
            row(&[Some("app"), Some("10.%"), Some("ed25519"), Some("edhash")]),
            row(&[Some("open"), Some("%"), Some(""), Some("")]),
            row(&[Some(""), Some("192.168.0.1"), Some(""), Some("*BB")]),
        ];
        let accounts = from_rows(&columns, &rows, "x");
        let at = |user: &str, ip: &str, rules: Rules| verdict(&accounts, user, ip.parse().ok(), rules, Duration::ZERO);
        assert_eq!(at("root", "127.0.0.1", MY), Verdict::Deny(Denial::Host));
        assert_eq!(at("app", "127.0.0.1", MY), Verdict::Check("*AA"));
        assert_eq!(at("app", "10.1.2.3", MY), Verdict::Deny(Denial::Plugin("ed25519".into())), "no fallback to %");
        assert_eq!(at("open", "127.0.0.1", MY), Verdict::Deny(Denial::Empty));
        assert_eq!(at("open", "127.0.0.1", Rules { allow_empty: true, ..MY }), Verdict::Check(""));
        assert_eq!(at("app", "192.168.0.1", MY), Verdict::Deny(Denial::Anonymous));
        assert_eq!(at("nobody", "127.0.0.1", MY), Verdict::Deny(Denial::Unknown));
        assert!(has_host_column(&columns) && !has_host_column(&cols(&["authentication_string"])));
        let star = cols(&["Host", "User", "Password", "plugin", "authentication_string"]);
        let rows = [row(&[Some("%"), Some("s"), Some("*OLD"), Some("mysql_native_password"), Some("*NEW")])];
        let star = from_rows(&star, &rows, "s");
        assert_eq!(verdict(&star, "s", None, MY, Duration::ZERO), Verdict::Check("*NEW"), "authentication_string wins");
        let file = [Account::listed("f", "")];
        assert_eq!(
            verdict(&file, "f", None, Rules { allow_empty: true, ..PG }, Duration::ZERO),
            Verdict::Deny(Denial::Empty)
        );
    }
}
