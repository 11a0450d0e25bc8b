//! MySQL's account host matching (#33), as a server running with `skip-name-resolve` applies it:
//! the client is known by its IP address only, an account's `Host` admits it as a literal, a
//! `LIKE`-style pattern (`%` any run, `_` one character, `\` escapes) or an IPv4
//! `address/netmask` pair, and of all accounts that admit the client the most specific wins —
//! a host without wildcards before one with them, a pattern whose first wildcard comes later
//! before one whose comes sooner, `%` and an empty host last; a named user before an anonymous
//! one on equal hosts. The router applies it to the auth query's rows so a pass-through login
//! is never admitted from an address the server itself would turn away.
//!
//! CIDR suffixes (`10.0.0.0/8`) are MySQL 8 only: MariaDB reads them as a literal no address
//! equals, and so does this module (narrower than MySQL 8, never wider than MariaDB).

use std::net::{IpAddr, Ipv4Addr};

/// One account row: its user (`""` for an anonymous account) and `Host` column.
pub trait AccountHost {
    /// The account's user name (`""`: anonymous).
    fn user(&self) -> &str;
    /// The account's `Host` (`""` admits every host, like `%`).
    fn host(&self) -> &str;
}

/// Whether the account host `pattern` admits a client connecting from `client` (`None`: the
/// address is unknown, which only `%` and an empty host admit).
pub fn admits(pattern: &str, client: Option<IpAddr>) -> bool {
    if pattern.is_empty() || pattern == "%" {
        return true;
    }
    let Some(ip) = client.map(|ip| ip.to_canonical()) else { return false };
    if let Some((addr, mask)) = netmask(pattern) {
        return matches!(ip, IpAddr::V4(v4) if u32::from(v4) & mask == addr);
    }
    wild_match(pattern.as_bytes(), ip.to_string().as_bytes())
}

/// The rank of an account by host, then user: higher is more specific. A host without
/// wildcards ranks 128, a pattern the 1-based position of its first `%` or, before it, its last
/// `_` (capped at 127), an empty host 0; a named user adds the low byte.
pub fn rank(host: &str, user: &str) -> u16 {
    (u16::from(host_rank(host)) << 8) | if user.is_empty() { 0 } else { 128 }
}

/// The account of `accounts` that decides a login of `user` from `client`: the most specific
/// one (by [`rank`], ties in the given order) that is `user`'s own or anonymous and whose host
/// admits the client. `None` when no account admits it.
pub fn decide<'a, A: AccountHost>(accounts: &'a [A], user: &str, client: Option<IpAddr>) -> Option<&'a A> {
    let mut candidates: Vec<&A> =
        accounts.iter().filter(|a| (a.user() == user || a.user().is_empty()) && admits(a.host(), client)).collect();
    // Stable: equal ranks keep the query's order.
    candidates.sort_by_key(|a| std::cmp::Reverse(rank(a.host(), a.user())));
    candidates.first().copied()
}

fn host_rank(host: &str) -> u8 {
    if host.is_empty() {
        return 0;
    }
    let bytes = host.as_bytes();
    let (mut i, mut wild_pos) = (0, 0usize);
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' if i + 1 < bytes.len() => i += 1,
            b'%' | b'_' => {
                wild_pos = i + 1;
                if b == b'%' {
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if wild_pos == 0 {
        128
    } else {
        u8::try_from(wild_pos.min(127)).unwrap_or(127)
    }
}

/// `a.b.c.d/m.m.m.m`, both full dotted quads, as (address, mask); the address must have no
/// bits outside the mask, as the server requires.
fn netmask(pattern: &str) -> Option<(u32, u32)> {
    let (addr, mask) = pattern.split_once('/')?;
    let addr = u32::from(addr.parse::<Ipv4Addr>().ok()?);
    let mask = u32::from(mask.parse::<Ipv4Addr>().ok()?);
    (addr & !mask == 0).then_some((addr, mask))
}

/// `LIKE` matching of `text` against `pattern`: `%` any run, `_` one byte, `\x` a literal x.
/// Iterative with one backtrack point, so a hostile pattern costs linear-times-pattern time.
fn wild_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut retry: Option<(usize, usize)> = None;
    loop {
        let step = match pattern.get(p) {
            Some(b'%') => {
                retry = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(b'_') if t < text.len() => Some(1),
            Some(b'\\') if pattern.get(p + 1).is_some() => (pattern.get(p + 1) == text.get(t)).then_some(2),
            Some(c) => (Some(c) == text.get(t)).then_some(1),
            None if t == text.len() => return true,
            None => None,
        };
        match step {
            Some(n) => {
                p += n;
                t += 1;
            }
            None => match retry {
                Some((rp, rt)) if rt < text.len() => {
                    retry = Some((rp, rt + 1));
                    p = rp;
                    t = rt + 1;
                }
                _ => return false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row(&'static str, &'static str);

    impl AccountHost for Row {
        fn user(&self) -> &str {
            self.0
        }
        fn host(&self) -> &str {
            self.1
        }
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("an address"))
    }

    #[test]
    fn literals_patterns_and_netmasks_admit_as_the_server_does() {
        let c = ip("10.9.9.9");
        for yes in ["%", "", "10.9.9.9", "10.%", "10.9.9._", "1_.9.%", "10.0.0.0/255.0.0.0", "10.9.9.9/255.255.255.255"]
        {
            assert!(admits(yes, c), "{yes}");
        }
        for no in [
            "localhost",
            "127.0.0.1",
            "10.9.9.90",
            "10.9.9.",
            "10.9.9.__",
            "11.%",
            "10.0.0.0/8",
            "10.0.0.0/255.255.0.0",
            "10.0.0.1/255.0.0.0",
            "10\\.9.9.9x",
        ] {
            assert!(!admits(no, c), "{no}");
        }
        // With skip-name-resolve a TCP client of 127.0.0.1 is not 'localhost'.
        assert!(!admits("localhost", ip("127.0.0.1")));
        assert!(admits("127.0.0.1", ip("::ffff:127.0.0.1")), "a v4-mapped client is its v4 address");
        assert!(admits("::1", ip("::1")) && admits("fe80::%", ip("fe80::1")));
        assert!(!admits("10.0.0.0/255.0.0.0", ip("::1")), "netmasks are IPv4 only");
        assert!(!admits("10.%", None) && admits("%", None), "an unknown address: only any-host accounts");
        assert!(wild_match(b"a\\_b", b"a_b") && !wild_match(b"a\\_b", b"axb"), "an escaped wildcard is literal");
        assert!(wild_match(b"%%%a", b"bbba") && !wild_match(b"%a%b", b"bbba"));
    }

    #[test]
    fn the_most_specific_host_decides_and_a_named_user_beats_an_anonymous_one() {
        assert!(rank("10.9.9.9", "u") > rank("10.9.9._", "u"));
        assert!(rank("10.9.9._", "u") > rank("10.9.%", "u"));
        assert!(rank("10.9.%", "u") > rank("10.%", "u"));
        assert!(rank("10.%", "u") > rank("%", "u"));
        assert!(rank("%", "u") > rank("", "u"));
        assert!(rank("10.%", "u") > rank("10.%", ""));
        assert!(rank("10.%", "") > rank("%", "u"), "host first: an anonymous 10.% beats a named %");

        let rows = [Row("u", "%"), Row("u", "10.9.9.9"), Row("u", "10.%"), Row("other", "10.9.9.9")];
        let pick = |client: &str| decide(&rows, "u", ip(client)).map(|r| r.1);
        assert_eq!(pick("10.9.9.9"), Some("10.9.9.9"));
        assert_eq!(pick("10.1.1.1"), Some("10.%"));
        assert_eq!(pick("192.168.1.1"), Some("%"));
        let strict = [Row("root", "localhost"), Row("root", "10.9.9.9")];
        assert!(decide(&strict, "root", ip("127.0.0.1")).is_none(), "no row admits the client");
        let anon = [Row("u", "%"), Row("", "127.0.0.1")];
        assert_eq!(decide(&anon, "u", ip("127.0.0.1")).map(|r| r.0), Some(""), "the anonymous account decides");
        assert_eq!(decide(&anon, "u", ip("10.0.0.1")).map(|r| r.0), Some("u"));
    }
}
