//! Identifier newtypes that cross module boundaries (L0: depends on nothing).

/// Index of a data core (0-based, dense).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CoreId(pub u16);

/// Monotonic version of the published configuration and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RulesVersion(pub u64);

/// A client's cancel request key as the router issued it (PostgreSQL BackendKeyData, or a MySQL
/// connection id for `KILL`), addressed to the session that owns it.
///
/// A router-issued pid names the owning core in its bits 24..31 and the secret is positive. A
/// PostgreSQL session-mode client is given its server's real pid instead (so `pg_backend_pid()`
/// agrees); its secret is then negative and names the core in its bits 24..30 (see
/// [`CancelKey::with_server_pid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CancelKey {
    /// Process/connection id the client was given.
    pub pid: i32,
    /// Router-issued secret (0 for MySQL `KILL`, which carries no secret).
    pub secret: i32,
}

impl CancelKey {
    /// Number of low bits of `pid` that number sessions within a core.
    pub const SESSION_BITS: u32 = 24;

    /// Builds the pid for session `seq` on `core`; the pid stays positive for up to 127 cores.
    pub fn make_pid(core: CoreId, seq: u32) -> i32 {
        let low = seq & ((1 << Self::SESSION_BITS) - 1);
        (((u32::from(core.0) & 0x7f) << Self::SESSION_BITS) | low) as i32
    }

    /// The core that owns this key.
    pub fn core(&self) -> CoreId {
        let bits = if self.secret < 0 { self.secret } else { self.pid };
        CoreId(((bits as u32) >> Self::SESSION_BITS) as u16 & 0x7f)
    }

    /// This router-issued key with the server's process id `pid` in place of the router's: the
    /// owning core moves into the secret, which keeps 24 random bits.
    pub fn with_server_pid(self, pid: i32) -> Self {
        let core = (self.pid as u32) >> Self::SESSION_BITS & 0x7f;
        let random = (self.secret as u32) & ((1 << Self::SESSION_BITS) - 1);
        Self { pid, secret: (0x8000_0000 | core << Self::SESSION_BITS | random) as i32 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_encodes_core_and_stays_positive() {
        for core in [0u16, 1, 5, 127] {
            for seq in [0u32, 1, 0xff_ffff, 0x1ff_ffff] {
                let pid = CancelKey::make_pid(CoreId(core), seq);
                assert!(pid >= 0);
                assert_eq!(CancelKey { pid, secret: 0 }.core(), CoreId(core));
                let server = CancelKey { pid, secret: 0x0123_4567 }.with_server_pid(4242);
                assert_eq!((server.pid, server.core()), (4242, CoreId(core)));
                assert!(server.secret < 0);
                assert_eq!(server.secret & 0xff_ffff, 0x23_4567, "the random bits stay");
            }
        }
    }
}
