//! Commit positions for causal reads (#22): where a session's last write ends on the primary
//! and how far a replica has applied, for both engines. Shared by `routing` (a session's
//! high-water mark) and `pool` (which replicas have caught up), so it lives here, pure.
//!
//! - PostgreSQL: a WAL byte offset (`pg_lsn - '0/0'`).
//! - MariaDB: a GTID position, one `domain-server-sequence` per replication domain, as
//!   `@@last_gtid` and `@@gtid_slave_pos` print it. Sequence numbers grow within a domain
//!   whichever server wrote, so a replica has applied a transaction when, in its domain, its
//!   sequence number is at or past the transaction's. (MySQL's `uuid:interval` GTID sets are
//!   a different form and not read here.)

use std::fmt;

/// Longest causal token accepted, in bytes (#33): far more than a position of
/// [`MAX_GTID_DOMAINS`] domains needs, and little enough that comparing one costs nothing.
pub const MAX_TOKEN_LEN: usize = 2048;

/// Most replication domains a position holds (#33): every replica read compares the session's
/// position domain by domain, so its size is bounded. A token naming more, or adding more to the
/// session's position, is refused.
pub const MAX_GTID_DOMAINS: usize = 64;

/// One MariaDB GTID: `domain-server-sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gtid {
    /// Replication domain (`gtid_domain_id`).
    pub domain: u32,
    /// `server_id` of the server that committed it.
    pub server: u32,
    /// Sequence number within the domain.
    pub sequence: u64,
}

/// A MariaDB GTID position: at most one GTID per domain, sorted by domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidPosition(Vec<Gtid>);

impl GtidPosition {
    /// Parses MariaDB's text form (`0-1-100,1-2-7`; empty is the empty position). `None` when
    /// malformed. A domain named twice keeps its highest sequence number.
    pub fn parse(text: &str) -> Option<GtidPosition> {
        let mut position = GtidPosition::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut fields = part.split('-');
            let (domain, server, sequence) = (fields.next()?, fields.next()?, fields.next()?);
            if fields.next().is_some() {
                return None;
            }
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !(digits(domain) && digits(server) && digits(sequence)) {
                return None;
            }
            let gtid =
                Gtid { domain: domain.parse().ok()?, server: server.parse().ok()?, sequence: sequence.parse().ok()? };
            position.raise(gtid);
        }
        Some(position)
    }

    /// How many domains `self` and `other` name together.
    fn merged_domains(&self, other: &GtidPosition) -> usize {
        let new = other.0.iter().filter(|g| self.0.binary_search_by_key(&g.domain, |o| o.domain).is_err()).count();
        self.0.len() + new
    }

    /// The GTIDs, one per domain, by domain.
    pub fn gtids(&self) -> &[Gtid] {
        &self.0
    }

    /// Raises the position to include `gtid` (its domain's sequence never goes back).
    fn raise(&mut self, gtid: Gtid) {
        match self.0.binary_search_by_key(&gtid.domain, |g| g.domain) {
            Ok(i) => {
                if let Some(old) = self.0.get_mut(i).filter(|old| old.sequence < gtid.sequence) {
                    *old = gtid;
                }
            }
            Err(i) => self.0.insert(i, gtid),
        }
    }

    /// Raises every domain of this position to `other`'s where that is later.
    pub fn include(&mut self, other: &GtidPosition) {
        other.0.iter().for_each(|g| self.raise(*g));
    }

    /// Whether a server whose applied position is `applied` has applied everything here.
    pub fn applied_by(&self, applied: &GtidPosition) -> bool {
        self.0
            .iter()
            .all(|need| applied.0.iter().find(|g| g.domain == need.domain).is_some_and(|g| g.sequence >= need.sequence))
    }
}

impl fmt::Display for GtidPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.0.iter().enumerate() {
            let comma = if i == 0 { "" } else { "," };
            write!(f, "{comma}{}-{}-{}", g.domain, g.server, g.sequence)?;
        }
        Ok(())
    }
}

/// A commit position a replica must have applied before it serves a session's reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// PostgreSQL: a WAL byte offset.
    Wal(u64),
    /// MariaDB: a GTID position.
    Gtid(GtidPosition),
}

impl Position {
    /// The later of `self` and `other`, per engine (WAL: the larger offset; GTID: per domain
    /// the larger sequence). Positions of different engines cannot be compared: `other`
    /// replaces `self` (a session's writes go to one engine's primary).
    pub fn raise(&mut self, other: &Position) {
        match (self, other) {
            (Position::Wal(a), Position::Wal(b)) => *a = (*a).max(*b),
            (Position::Gtid(a), Position::Gtid(b)) => a.include(b),
            (this, other) => *this = other.clone(),
        }
    }

    /// Whether raising `self` to `other` keeps it within [`MAX_GTID_DOMAINS`].
    pub fn can_raise(&self, other: &Position) -> bool {
        match (self, other) {
            (Position::Gtid(a), Position::Gtid(b)) => a.merged_domains(b) <= MAX_GTID_DOMAINS,
            _ => true,
        }
    }
}

/// The token form clients see (`SHOW querypilot.causal_token`) and hand over: `pg:` and the WAL
/// position in PostgreSQL's `pg_lsn` text form (`pg:16/B374D848`, comparable with
/// `pg_last_wal_replay_lsn()`), or `gtid:` and the GTID position (`gtid:0-1-100,1-2-7`).
impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Wal(p) => write!(f, "pg:{:X}/{:X}", p >> 32, p & 0xFFFF_FFFF),
            Position::Gtid(g) => write!(f, "gtid:{g}"),
        }
    }
}

/// The token of a session whose position is unknown: its holder reads on the primary.
pub const PRIMARY_TOKEN: &str = "primary";

/// What a token hands over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// `''`: the issuing session needs no position (it wrote nothing, or not in `causal`
    /// mode); setting it changes nothing.
    Empty,
    /// [`PRIMARY_TOKEN`]: the issuing session committed a write whose position it could not
    /// learn, so only the primary is sure to have it.
    Primary,
    /// A commit position to wait for.
    At(Position),
}

/// The token text: `''`, `primary`, or the position's form (see [`Position`]'s `Display`).
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Empty => Ok(()),
            Token::Primary => f.write_str(PRIMARY_TOKEN),
            Token::At(p) => p.fmt(f),
        }
    }
}

impl Token {
    /// Parses the text form (see the `Display` impl); `None` when malformed or over the size
    /// limits ([`Position::parse_token`]).
    pub fn parse(token: &str) -> Option<Token> {
        match token {
            "" => Some(Token::Empty),
            PRIMARY_TOKEN => Some(Token::Primary),
            _ => Position::parse_token(token).map(Token::At),
        }
    }
}

impl Position {
    /// Parses the token form (see the `Display` impl); `None` when malformed, an empty GTID
    /// position (which would name nothing), longer than [`MAX_TOKEN_LEN`] or naming more than
    /// [`MAX_GTID_DOMAINS`] domains (see [`Position::token_too_large`]).
    pub fn parse_token(token: &str) -> Option<Position> {
        if Self::token_too_large(token) {
            return None;
        }
        if let Some(gtids) = token.strip_prefix("gtid:") {
            let fits = |g: &GtidPosition| !g.gtids().is_empty() && g.gtids().len() <= MAX_GTID_DOMAINS;
            return GtidPosition::parse(gtids).filter(fits).map(Position::Gtid);
        }
        let (high, low) = token.strip_prefix("pg:")?.split_once('/')?;
        let hex = |s: &str| {
            (!s.is_empty() && s.len() <= 8 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(s, 16).ok())
                .flatten()
        };
        Some(Position::Wal((u64::from(hex(high)?) << 32) | u64::from(hex(low)?)))
    }

    /// Whether `token` is over the size limits: longer than [`MAX_TOKEN_LEN`], or more
    /// domains than [`MAX_GTID_DOMAINS`] (counted before parsing: one per comma-separated part).
    pub fn token_too_large(token: &str) -> bool {
        token.len() > MAX_TOKEN_LEN || token.bytes().filter(|b| *b == b',').count() >= MAX_GTID_DOMAINS
    }

    /// Whether a server whose applied position is `applied` has applied this one (positions
    /// of different engines never have).
    pub fn applied_by(&self, applied: &Position) -> bool {
        match (self, applied) {
            (Position::Wal(need), Position::Wal(done)) => done >= need,
            (Position::Gtid(need), Position::Gtid(done)) => need.applied_by(done),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtids(text: &str) -> GtidPosition {
        GtidPosition::parse(text).expect("valid GTID position")
    }

    #[test]
    fn gtid_positions_parse_and_print_in_mariadb_form() {
        assert_eq!(gtids("0-1-100").to_string(), "0-1-100");
        assert_eq!(gtids("1-2-7, 0-1-100").to_string(), "0-1-100,1-2-7", "sorted by domain");
        assert_eq!(gtids("0-1-5,0-2-9,0-1-6").to_string(), "0-2-9", "a domain keeps its highest");
        assert_eq!(gtids("").gtids(), &[]);
        for bad in ["0-1", "0-1-2-3", "a-1-2", "0--2", "0-1-x", "-1-2", "0-1-99999999999999999999"] {
            assert_eq!(GtidPosition::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn applied_compares_sequences_per_domain_whatever_the_server() {
        let need = gtids("0-1-100,1-1-7");
        assert!(need.applied_by(&gtids("0-1-100,1-1-7")));
        assert!(need.applied_by(&gtids("0-3-150,1-2-8,2-1-1")), "another server, later sequences");
        assert!(!need.applied_by(&gtids("0-1-99,1-1-7")), "one domain behind");
        assert!(!need.applied_by(&gtids("0-1-100")), "a domain never applied");
        assert!(GtidPosition::default().applied_by(&gtids("")), "nothing needed");
    }

    #[test]
    fn tokens_past_the_limits_are_refused() {
        let domains = |n: u32| (0..n).map(|d| format!("{d}-1-5")).collect::<Vec<_>>().join(",");
        let at_limit = format!("gtid:{}", domains(MAX_GTID_DOMAINS as u32));
        assert!(at_limit.len() <= MAX_TOKEN_LEN);
        assert!(Position::parse_token(&at_limit).is_some(), "{MAX_GTID_DOMAINS} domains fit");
        let over = format!("gtid:{}", domains(MAX_GTID_DOMAINS as u32 + 1));
        assert!(Position::token_too_large(&over));
        assert_eq!(Position::parse_token(&over), None);
        let long = format!("gtid:0-1-{}", "1".repeat(MAX_TOKEN_LEN));
        assert!(Position::token_too_large(&long));
        assert_eq!(Position::parse_token(&long), None);
        assert!(!Position::token_too_large("pg:16/B374D848"));
    }

    #[test]
    fn a_position_never_grows_past_the_domain_limit() {
        let domains = |from: u32, n: u32| {
            let text = (from..from + n).map(|d| format!("{d}-1-5")).collect::<Vec<_>>().join(",");
            Position::Gtid(gtids(&text))
        };
        let full = domains(0, MAX_GTID_DOMAINS as u32);
        assert!(full.can_raise(&domains(0, 3)), "domains it has already");
        assert!(!full.can_raise(&domains(MAX_GTID_DOMAINS as u32, 1)), "one domain more");
        assert!(domains(0, 10).can_raise(&domains(10, 54)));
        assert!(full.can_raise(&Position::Wal(1)), "another engine replaces it");
    }

    #[test]
    fn positions_only_move_forward() {
        let mut wal = Position::Wal(5000);
        wal.raise(&Position::Wal(4000));
        assert_eq!(wal, Position::Wal(5000));
        let mut gtid = Position::Gtid(gtids("0-1-10,1-1-3"));
        gtid.raise(&Position::Gtid(gtids("0-2-9,1-2-4,2-1-1")));
        assert_eq!(gtid, Position::Gtid(gtids("0-1-10,1-2-4,2-1-1")));
        assert!(gtid.applied_by(&Position::Gtid(gtids("0-1-10,1-1-4,2-2-1"))));
        assert!(!gtid.applied_by(&Position::Gtid(gtids("0-1-10,1-1-4"))));
        assert!(!gtid.applied_by(&Position::Wal(u64::MAX)), "engines never compare");
        gtid.raise(&Position::Wal(1));
        assert_eq!(gtid, Position::Wal(1), "another engine's position replaces it");
    }
}
