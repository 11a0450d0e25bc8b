//! Bounded label values: each enum is one label's whole value set, so a series can never be
//! created from client input. Counters index fixed arrays by these enums (no hashing per event).

/// Declares a label enum with its exported strings, `ALL` in index order and `COUNT`.
macro_rules! label_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in index order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Number of values (array size of per-value counters).
            pub const COUNT: usize = Self::ALL.len();

            /// The exported label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value exported as `text`, if any.
            pub fn from_name(text: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|v| v.as_str() == text)
            }

            /// Position in [`Self::ALL`].
            pub fn index(self) -> usize {
                self as usize
            }
        }
    };
}

label_enum! {
    /// What decided where a statement went (`decision` label).
    Decision {
        /// Inside a transaction or a pinned session: stays on the current backend.
        TransactionPin => "transaction_pin",
        /// A translation rule rewrote the statement.
        Translation => "translation",
        /// A rule added at runtime through the admin API.
        DynamicRule => "dynamic_rule",
        /// The plan cache already knew the statement's shape.
        Cache => "cache",
        /// A configured fingerprint pattern rule.
        PatternRule => "pattern_rule",
        /// A configured regex rule.
        RegexRule => "regex_rule",
        /// Semantic analysis: reads to replicas, the rest to the primary.
        ReadWriteSplit => "read_write_split",
        /// Nothing matched: the default pool.
        Default => "default",
        /// A rule refused the statement.
        Reject => "reject",
        /// A routing hint comment in the statement.
        Hint => "hint",
    }
}

label_enum! {
    /// Plan-cache operations (`op` label).
    CacheOp {
        /// A lookup found the shape.
        Hit => "hit",
        /// A lookup did not.
        Miss => "miss",
        /// A new shape was stored.
        Insert => "insert",
        /// A shape was dropped to stay within the bound.
        Evict => "evict",
        /// The cache was cleared by a rule change.
        Invalidate => "invalidate",
    }
}

label_enum! {
    /// Which way bytes moved (`direction` label).
    Direction {
        /// Read from clients.
        ClientIn => "client_in",
        /// Written to clients.
        ClientOut => "client_out",
        /// Read from backends.
        BackendIn => "backend_in",
        /// Written to backends.
        BackendOut => "backend_out",
    }
}

label_enum! {
    /// Semantic operation of a routed statement (`operation` label), the names
    /// `sql::analyze::Operation::name` uses.
    Operation {
        /// SELECT and other side-effect-free reads.
        Read => "read",
        /// Data changes.
        Write => "write",
        /// Schema changes.
        Ddl => "ddl",
        /// Transaction boundaries and savepoints.
        Transaction => "transaction",
        /// Connection-state statements (SET, LISTEN, ...).
        Session => "session",
        /// Server administration.
        Admin => "admin",
        /// Not analyzable.
        Unknown => "unknown",
    }
}

label_enum! {
    /// State of a client connection (`state` label of `sqp_client_connections`).
    ClientState {
        /// Connected, holding no backend connection.
        Idle => "idle",
        /// Holding a backend connection (in a statement or transaction).
        Active => "active",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_all_and_names_round_trip() {
        for (i, d) in Decision::ALL.iter().enumerate() {
            assert_eq!(d.index(), i);
            assert_eq!(Decision::from_name(d.as_str()), Some(*d));
        }
        assert_eq!(Decision::COUNT, 10);
        assert_eq!(CacheOp::COUNT, 5);
        assert_eq!(Operation::from_name("ddl"), Some(Operation::Ddl));
        assert_eq!(Operation::from_name("DROP TABLE x"), None);
        assert_eq!(Direction::ALL.last().map(|d| d.index()), Some(Direction::COUNT - 1));
    }
}

label_enum! {
    /// What happened to a replica-eligible read whose read pool had no healthy backend
    /// (`outcome` label of `sqp_replica_fallbacks_total`, `routing.replica_fallback`).
    FallbackOutcome {
        /// Sent to the write pool.
        Primary => "primary",
        /// Refused with an error.
        Error => "error",
    }
}

label_enum! {
    /// Where a causal read (`read_your_writes = "causal"`, #22) of a session that wrote ran
    /// (`outcome` label of `sqp_causal_reads_total`, counted on the read pool).
    CausalOutcome {
        /// A replica whose cached replay position was far enough served it at once.
        ServedByReplica => "served_by_replica",
        /// A replica served it after its position was read on demand (and perhaps waited for).
        Waited => "waited",
        /// No replica caught up within `routing.causal_wait`: the primary served it.
        FellBackToPrimary => "fell_back_to_primary",
        /// No replica caught up and `routing.replica_fallback = "error"` refused it.
        Error => "error",
    }
}

label_enum! {
    /// How a retried statement's attempt ended (`outcome` label of `sqp_retries_total`).
    RetryOutcome {
        /// A classified failure was retried.
        Retried => "retried",
        /// A statement that had been retried finally succeeded or failed for good.
        Settled => "settled",
        /// `maximum_attempts` were used up; the last error reached the client.
        Exhausted => "exhausted",
        /// The next wait would end past the retry deadline; the error reached the client.
        Deadline => "deadline",
        /// Shutdown ended the wait; the error reached the client.
        Shutdown => "shutdown",
        /// A client cancel (or the query timeout) ended the wait; the error reached the client.
        Cancelled => "cancelled",
    }
}

label_enum! {
    /// Why a client's login was refused (`reason` label of `sqp_auth_failures_total`, #23).
    AuthFailure {
        /// The proof did not match the secret (or the pool's credentials).
        WrongPassword => "wrong_password",
        /// No secret for the user: no auth file entry and no row from the auth query.
        UnknownUser => "unknown_user",
        /// The stored secret cannot check the client's exchange (a SCRAM verifier for an MD5
        /// client, an MD5 secret for a MySQL one…) or is malformed.
        UnusableSecret => "unusable_secret",
        /// The auth query could not be run or failed on the server.
        AuthQueryFailed => "auth_query_failed",
        /// The source address had too many failed logins (`auth.max_failed_logins`).
        RateLimited => "rate_limited",
        /// The account exists but the server would refuse this login whatever it proves: its
        /// hosts do not admit the client, its password expired or is empty, or it may not log
        /// in (#33).
        NotAdmitted => "not_admitted",
    }
}

label_enum! {
    /// What a client-held buffer is (`kind` label of `sqp_client_buffer_bytes`, #33).
    BufferKind {
        /// Prepared statements' text (PostgreSQL named statements, MySQL statements).
        Statements => "statements",
        /// MySQL `COM_STMT_SEND_LONG_DATA` waiting for its execute.
        LongData => "long_data",
        /// A client's COPY data on its way to the backend.
        Copy => "copy",
        /// Result rows on their way to the client.
        Rows => "rows",
        /// A client message of 256 KiB or more (a Query, Parse or Bind, a MySQL command) while
        /// it is read and handled: the router needs it whole to route it.
        Messages => "messages",
    }
}

/// The `code` label of `sqp_errors_total` for an error the backend server answered a statement
/// with: a dotted name like the router's own `ErrorCode::code()`s. The server's SQLSTATE or error
/// number is not a label value (thousands of them; the server's log has them).
pub const BACKEND_ERROR: &str = "backend.error";
