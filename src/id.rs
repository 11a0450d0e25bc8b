//! Identifier newtypes that cross module boundaries (L0: depends on nothing).

/// Index of a data core (0-based, dense).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CoreId(pub u16);

/// Monotonic version of the published configuration and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RulesVersion(pub u64);

/// A client's cancel request key as the router issued it (PostgreSQL BackendKeyData, or a MySQL
/// connection id for `KILL`), addressed to the session that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CancelKey {
    /// Router-issued process/connection id; bits 24..31 name the owning core.
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
        CoreId(((self.pid as u32) >> Self::SESSION_BITS) as u16 & 0x7f)
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
            }
        }
    }
}
