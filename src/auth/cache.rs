//! The auth query's cache (#23): accounts fetched from a backend, per (pool, user), trusted for
//! `cache_ttl`. An unknown user is cached too (no accounts), so probing names does not cost a
//! query per attempt. A login that fails against a cached secret makes the next login of that
//! user fetch it again — once: a secret fetched that way is not refetched on failure before its
//! TTL is over, so wrong passwords cannot turn every login into a query. Pure: the caller
//! passes the time; one cache per core, flushed by a reload (a new cache).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Account;

/// Entries kept at most; beyond it the oldest is dropped first (bounded memory under a flood of
/// distinct user names).
const MAX_ENTRIES: usize = 10_000;

#[derive(Debug)]
struct Entry {
    fetched: Instant,
    accounts: Vec<Account>,
    /// Fetched because a login failed against the previous one.
    after_failure: bool,
    /// A login failed against it: the next lookup fetches again.
    stale: bool,
}

/// Secrets fetched by the auth query, by (pool, user).
#[derive(Debug)]
pub struct SecretCache {
    ttl: Duration,
    entries: HashMap<(String, String), Entry>,
}

/// What the cache knows of a user now.
#[derive(Debug, PartialEq, Eq)]
pub enum Cached<'a> {
    /// A fresh answer (no accounts: a user the backend does not know), and when it was fetched.
    Hit(&'a [Account], Instant),
    /// Nothing fresh: run the query.
    Miss,
}

impl SecretCache {
    /// An empty cache whose answers are trusted for `ttl` (zero: never reused).
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: HashMap::new() }
    }

    /// The fresh answer for `user` of `pool` at `now`, if any.
    pub fn get(&self, pool: &str, user: &str, now: Instant) -> Cached<'_> {
        match self.entries.get(&(pool.to_owned(), user.to_owned())) {
            Some(e) if !e.stale && now.saturating_duration_since(e.fetched) < self.ttl => {
                Cached::Hit(&e.accounts, e.fetched)
            }
            _ => Cached::Miss,
        }
    }

    /// Stores what the query answered for `user` of `pool` at `now`.
    pub fn put(&mut self, pool: &str, user: &str, accounts: Vec<Account>, now: Instant) {
        let key = (pool.to_owned(), user.to_owned());
        let after_failure = self.entries.get(&key).is_some_and(|e| e.stale);
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(&key) {
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.fetched).map(|(k, _)| k.clone()) {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, Entry { fetched: now, accounts, after_failure, stale: false });
    }

    /// A login of `user` failed against the cached secret: fetch it again next time, unless it
    /// was itself fetched after a failure (then it stands until its TTL is over).
    pub fn failed(&mut self, pool: &str, user: &str) {
        if let Some(e) = self.entries.get_mut(&(pool.to_owned(), user.to_owned())) {
            e.stale = !e.after_failure;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(secret: &str) -> Vec<Account> {
        vec![Account::listed("alice", secret)]
    }

    #[test]
    fn answers_live_for_the_ttl_and_unknown_users_are_cached_too() {
        let t0 = Instant::now();
        let mut c = SecretCache::new(Duration::from_secs(10));
        assert_eq!(c.get("p", "alice", t0), Cached::Miss);
        c.put("p", "alice", one("md5x"), t0);
        c.put("p", "nobody", Vec::new(), t0);
        assert_eq!(c.get("p", "alice", t0 + Duration::from_secs(9)), Cached::Hit(&one("md5x"), t0));
        assert_eq!(c.get("p", "nobody", t0 + Duration::from_secs(9)), Cached::Hit(&[], t0));
        assert_eq!(c.get("other", "alice", t0), Cached::Miss, "per pool");
        assert_eq!(c.get("p", "alice", t0 + Duration::from_secs(10)), Cached::Miss, "the TTL is over");
        assert_eq!(SecretCache::new(Duration::ZERO).get("p", "alice", t0), Cached::Miss);
    }

    #[test]
    fn a_failure_refreshes_once_per_ttl() {
        let t0 = Instant::now();
        let mut c = SecretCache::new(Duration::from_secs(60));
        c.put("p", "alice", one("old"), t0);
        c.failed("p", "alice");
        assert_eq!(c.get("p", "alice", t0), Cached::Miss, "refetched after a failure");
        c.put("p", "alice", one("new"), t0);
        c.failed("p", "alice");
        assert_eq!(c.get("p", "alice", t0), Cached::Hit(&one("new"), t0), "not again before the TTL");
        c.put("p", "alice", one("new"), t0 + Duration::from_secs(60));
        c.failed("p", "alice");
        assert_eq!(c.get("p", "alice", t0 + Duration::from_secs(61)), Cached::Miss, "a TTL later, once more");
    }

    #[test]
    fn memory_stays_bounded() {
        let t0 = Instant::now();
        let mut c = SecretCache::new(Duration::from_secs(60));
        for i in 0..(MAX_ENTRIES + 5) {
            c.put("p", &format!("u{i}"), Vec::new(), t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(c.entries.len(), MAX_ENTRIES);
        assert_eq!(c.get("p", "u0", t0), Cached::Miss, "the oldest went first");
    }
}
