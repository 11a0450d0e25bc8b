//! MySQL command phase, client side: `Command::decode` of every command byte (capability flags
//! from the first input byte shape COM_CHANGE_USER), the statement-id peek/rewrite the router
//! applies to statement commands, and COM_STMT_EXECUTE parameter blocks.
//!
//! Properties: no panic; decode → encode → decode is stable; byte-exact for commands whose
//! encoding is canonical; a statement-id rewrite changes exactly bytes 1..5.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::mysql::capability::*;
use querypilot::protocol::mysql::{
    decode_execute_params, encode_execute_params, rewrite_stmt_id, stmt_id, ColumnType, Command, ValueType,
};

fn caps(byte: u8) -> u64 {
    let mut caps = CLIENT_PROTOCOL_41;
    for (bit, flag) in [CLIENT_SECURE_CONNECTION, CLIENT_PLUGIN_AUTH, CLIENT_CONNECT_ATTRS].iter().enumerate() {
        if byte & (1 << bit) != 0 {
            caps |= flag;
        }
    }
    caps
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, payload)) = data.split_first() else { return };
    let caps = caps(sel);

    if let Ok(cmd) = Command::decode(payload, caps) {
        assert_eq!(Some(&cmd.code()), payload.first());
        let mut e1 = Vec::new();
        cmd.encode(caps, &mut e1);
        let again = Command::decode(&e1, caps).expect("own command decodes");
        let mut e2 = Vec::new();
        again.encode(caps, &mut e2);
        assert_eq!(e1, e2, "encoding is stable");
        if !matches!(cmd, Command::ChangeUser(_)) {
            assert_eq!(again, cmd);
        }
        if let Command::StmtExecute { params, .. } = cmd {
            execute_params(sel, params);
        }
    }

    let mut out = Vec::new();
    match (stmt_id(payload), rewrite_stmt_id(payload, 0xA1B2_C3D4, &mut out)) {
        (Some(_), Ok(())) => {
            assert_eq!(out.len(), payload.len());
            assert_eq!(stmt_id(&out), Some(0xA1B2_C3D4));
            assert_eq!(out[0], payload[0]);
            assert_eq!(out[5..], payload[5..]);
        }
        (None, Err(_)) => {}
        (id, res) => panic!("stmt_id {id:?} and rewrite {res:?} disagree"),
    }
});

/// Decodes a parameter block with a parameter count and earlier types derived from the input.
fn execute_params(sel: u8, body: &[u8]) {
    let count = u16::from(sel >> 4);
    let prev: Vec<ValueType> =
        body.iter().take(usize::from(count)).map(|&b| ValueType::new(ColumnType(b), b & 1 != 0)).collect();
    let long_data: Vec<bool> = (0..count).map(|i| sel & (1 << (i % 4)) != 0).collect();
    let Ok(params) = decode_execute_params(body, count, &prev, &long_data) else { return };
    assert_eq!(params.values.len(), usize::from(count));
    let mut e1 = Vec::new();
    encode_execute_params(&params, &mut e1);
    let types: Vec<ValueType> = params.types.to_vec();
    let long: Vec<bool> = params.values.iter().map(Option::is_none).collect();
    let again = decode_execute_params(&e1, count, &types, &long).expect("own parameters decode");
    let mut e2 = Vec::new();
    encode_execute_params(&again, &mut e2);
    assert_eq!(e1, e2, "parameter encoding is stable");
    // A translation's order: every parameter backwards, then the first again.
    let order: Vec<u16> = (0..count).rev().chain((count > 0).then_some(0)).collect();
    let moved = params.reorder(&order).expect("order within the parameters");
    let mut e3 = Vec::new();
    encode_execute_params(&moved, &mut e3);
    let long_moved: Vec<bool> = order.iter().map(|&i| long.get(usize::from(i)).copied().unwrap_or(false)).collect();
    // At most 16 positions (count < 16), so the length fits.
    let back = decode_execute_params(&e3, order.len() as u16, &[], &long_moved).expect("reordered parameters decode");
    let mut e4 = Vec::new();
    encode_execute_params(&back, &mut e4);
    assert_eq!(e3, e4, "reordered parameters re-encode the same");
}
