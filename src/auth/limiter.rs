//! Failed-login rate limiting per source address (#23): an address that failed
//! `max_failures` logins within `window` is refused without a password check until the window
//! that began with its first counted failure is over. Pure: the caller passes the time.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Addresses tracked at most; beyond it the oldest windows are dropped first, so a flood of
/// distinct addresses costs bounded memory (and each of them is still limited on its own).
const MAX_TRACKED: usize = 10_000;

/// Counts failed logins per source address.
#[derive(Debug)]
pub struct FailureLimiter {
    max_failures: u32,
    window: Duration,
    seen: HashMap<IpAddr, (Instant, u32)>,
}

impl FailureLimiter {
    /// A limiter allowing `max_failures` failures per `window` and address; 0 turns it off.
    pub fn new(max_failures: u32, window: Duration) -> Self {
        Self { max_failures, window, seen: HashMap::new() }
    }

    /// Whether `addr` is refused at `now` without being checked.
    pub fn blocked(&mut self, addr: IpAddr, now: Instant) -> bool {
        if self.max_failures == 0 {
            return false;
        }
        match self.seen.get(&addr) {
            Some((start, _)) if now.saturating_duration_since(*start) >= self.window => {
                self.seen.remove(&addr);
                false
            }
            Some((_, n)) => *n >= self.max_failures,
            None => false,
        }
    }

    /// Records a failed login from `addr` at `now`.
    pub fn failed(&mut self, addr: IpAddr, now: Instant) {
        if self.max_failures == 0 {
            return;
        }
        if self.seen.len() >= MAX_TRACKED && !self.seen.contains_key(&addr) {
            let window = self.window;
            self.seen.retain(|_, (start, _)| now.saturating_duration_since(*start) < window);
            if self.seen.len() >= MAX_TRACKED {
                if let Some(oldest) = self.seen.iter().min_by_key(|(_, (start, _))| *start).map(|(a, _)| *a) {
                    self.seen.remove(&oldest);
                }
            }
        }
        let entry = self.seen.entry(addr).or_insert((now, 0));
        if now.saturating_duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_blocked_after_max_failures_until_its_window_ends() {
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let mut l = FailureLimiter::new(3, Duration::from_secs(60));
        for i in 0..3 {
            assert!(!l.blocked(a, t0), "failure {i} is still checked");
            l.failed(a, t0 + Duration::from_secs(i));
        }
        assert!(l.blocked(a, t0 + Duration::from_secs(10)));
        assert!(!l.blocked(b, t0 + Duration::from_secs(10)), "per address");
        assert!(!l.blocked(a, t0 + Duration::from_secs(60)), "the window is over");
        l.failed(a, t0 + Duration::from_secs(61));
        assert!(!l.blocked(a, t0 + Duration::from_secs(62)), "a new window starts counting from one");
    }

    #[test]
    fn zero_turns_it_off_and_memory_stays_bounded() {
        let t0 = Instant::now();
        let mut off = FailureLimiter::new(0, Duration::from_secs(60));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..100 {
            off.failed(a, t0);
        }
        assert!(!off.blocked(a, t0));
        let mut l = FailureLimiter::new(1, Duration::from_secs(60));
        for i in 0..(MAX_TRACKED as u32 + 5) {
            l.failed(IpAddr::from(i.to_be_bytes()), t0 + Duration::from_millis(u64::from(i)));
        }
        assert!(l.seen.len() <= MAX_TRACKED);
    }
}
