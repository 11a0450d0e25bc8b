//! The binary upgrade's frames (#40): `handover::wire::decode` over any bytes, as a new or an
//! old process reads them from the hand-over socket.
//!
//! Properties: no panic; a frame decoded re-encodes to exactly the bytes it came from; a frame
//! never claims more descriptors than one `sendmsg` can carry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::handover::wire::{decode, encode, MAX_FDS};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((frame, used))) = decode(rest) {
        assert!(frame.fds() <= MAX_FDS);
        let mut again = Vec::new();
        encode(&frame, &mut again).expect("a decoded frame encodes");
        assert_eq!(again, rest[..used], "{frame:?}");
        rest = &rest[used..];
    }
});
