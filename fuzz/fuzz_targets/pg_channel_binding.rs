//! The `tls-server-end-point` data of a backend's certificate (#38), read from the DER the
//! server presented before SCRAM-SHA-256-PLUS. Properties: no panic; data is produced only for
//! a certificate naming a hash, and is then a SHA-2 digest's length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::binding::tls_server_end_point;

fuzz_target!(|data: &[u8]| {
    if let Some(hash) = tls_server_end_point(data) {
        assert!(matches!(hash.len(), 28 | 32 | 48 | 64), "a SHA-2 digest, not {} bytes", hash.len());
    }
});
