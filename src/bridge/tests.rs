//! Tests of the response writer (PostgreSQL messages in, MySQL packets out, decoded back with the
//! MySQL codec) and of the emulated-command classifier.

use super::emulated::{all_variables, classify, like, variable, Emulation, VarContext, VarValue};
use super::response::{session_flags, status_flags, ResultWriter, RowFormat, Step};
use super::types::oid;
use crate::protocol::mysql::capability::{CLIENT_DEPRECATE_EOF, CLIENT_PROTOCOL_41, CLIENT_TRANSACTIONS};
use crate::protocol::mysql::column::{ColumnDefinition41, ColumnType};
use crate::protocol::mysql::response::{
    ErrPacket, OkPacket, SERVER_MORE_RESULTS_EXISTS, SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS,
};
use crate::protocol::mysql::{decode_binary_row, decode_payload, decode_text_row, BinaryValue};
use crate::protocol::pg::backend::{encode_data_row, encode_ready_for_query, encode_row_description, FieldDescription};
use crate::protocol::pg::{decode_frame, encode_error, BackendMessage, Severity, TransactionStatus};

const CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS;

fn field(name: &str, type_oid: u32, type_modifier: i32) -> FieldDescription<'_> {
    FieldDescription { name, table_oid: 0, column_attr: 0, type_oid, type_size: -1, type_modifier, format: 0 }
}

fn command_complete(tag: &str, out: &mut Vec<u8>) {
    BackendMessage::CommandComplete(tag).encode(out).unwrap();
}

/// Feeds every PostgreSQL message in `pg` and returns the MySQL payloads written and the last step.
fn run(writer: &mut ResultWriter, pg: &[u8]) -> (Vec<Vec<u8>>, Step) {
    let mut out = Vec::new();
    let mut rest = pg;
    let mut step = Step::More;
    while let Some(frame) = decode_frame(rest, 1 << 20).unwrap() {
        let n = frame.total_len;
        step = writer.on_message(&BackendMessage::decode(&frame).unwrap(), &mut out);
        rest = &rest[n..];
    }
    let mut payloads = Vec::new();
    let mut seq = 1u8;
    let mut buf = &out[..];
    while let Some(f) = decode_payload(buf, 1 << 30).unwrap() {
        assert_eq!(f.first_seq, seq, "sequence ids are consecutive");
        seq = f.last_seq.wrapping_add(1);
        payloads.push(f.payload.to_vec());
        buf = &buf[f.consumed..];
    }
    (payloads, step)
}

#[test]
fn text_result_set_with_eof_packets() {
    let mut pg = Vec::new();
    encode_row_description(
        &[field("n", oid::INT4, -1), field("b", oid::BOOL, -1), field("x", oid::BYTEA, -1)],
        &mut pg,
    )
    .unwrap();
    encode_data_row(&[Some(b"-7"), Some(b"t"), Some(b"\\x00ff")], &mut pg).unwrap();
    encode_data_row(&[None, Some(b"f"), None], &mut pg).unwrap();
    command_complete("SELECT 2", &mut pg);
    encode_ready_for_query(TransactionStatus::Idle, &mut pg);
    let mut w = ResultWriter::new(CAPS, RowFormat::Text, session_flags(true, true), TransactionStatus::Idle, 1);
    let (p, step) = run(&mut w, &pg);
    assert_eq!(step, Step::Done(TransactionStatus::Idle));
    assert_eq!(p.len(), 1 + 3 + 1 + 2 + 1);
    assert_eq!(p[0], [3]);
    let def = ColumnDefinition41::decode(&p[1]).unwrap();
    assert_eq!((def.name, def.column_type), (&b"n"[..], ColumnType::LONG));
    assert_eq!(p[4][0], 0xFE);
    assert_eq!(&decode_text_row(&p[5], 3).unwrap()[..], &[Some(&b"-7"[..]), Some(b"1"), Some(&[0u8, 0xFF][..])]);
    assert_eq!(&decode_text_row(&p[6], 3).unwrap()[..], &[None, Some(&b"0"[..]), None]);
    let eof = crate::protocol::mysql::EofPacket::decode(&p[7]).unwrap();
    assert_eq!(eof.status & (SERVER_STATUS_AUTOCOMMIT | SERVER_STATUS_IN_TRANS), SERVER_STATUS_AUTOCOMMIT);
}

#[test]
fn binary_rows_and_deprecate_eof() {
    let mut pg = Vec::new();
    encode_row_description(&[field("i", oid::INT8, -1), field("t", oid::TIMESTAMP, 3)], &mut pg).unwrap();
    encode_data_row(&[Some(b"9223372036854775807"), Some(b"2024-05-06 07:08:09.5")], &mut pg).unwrap();
    command_complete("SELECT 1", &mut pg);
    encode_ready_for_query(TransactionStatus::InBlock, &mut pg);
    let caps = CAPS | CLIENT_DEPRECATE_EOF;
    let mut w = ResultWriter::new(caps, RowFormat::Binary, session_flags(false, true), TransactionStatus::InBlock, 1);
    let (p, _) = run(&mut w, &pg);
    assert_eq!(p.len(), 1 + 2 + 1 + 1, "no EOF after the column definitions");
    let types = [
        ColumnDefinition41::decode(&p[1]).unwrap().value_type(),
        ColumnDefinition41::decode(&p[2]).unwrap().value_type(),
    ];
    let row = decode_binary_row(&p[3], &types).unwrap();
    assert_eq!(row[0], BinaryValue::I64(i64::MAX));
    assert!(matches!(row[1], BinaryValue::DateTime(dt) if dt.micros == 500_000 && dt.second == 9));
    let end = OkPacket::decode(&p[4], caps).unwrap();
    assert_eq!(p[4][0], 0xFE);
    assert_eq!(end.status & (SERVER_STATUS_AUTOCOMMIT | SERVER_STATUS_IN_TRANS), SERVER_STATUS_IN_TRANS);
}

#[test]
fn multi_statement_ok_packets_and_errors() {
    let mut pg = Vec::new();
    command_complete("INSERT 0 3", &mut pg);
    BackendMessage::NoticeResponse(notice_fields()).encode(&mut pg).unwrap();
    command_complete("UPDATE 2", &mut pg);
    encode_error(Severity::Error, "23505", "duplicate key value violates unique constraint \"t_pkey\"", &mut pg);
    encode_ready_for_query(TransactionStatus::Idle, &mut pg);
    let mut w = ResultWriter::new(CAPS, RowFormat::Text, session_flags(true, true), TransactionStatus::Idle, 1);
    let (p, step) = run(&mut w, &pg);
    assert_eq!(step, Step::Done(TransactionStatus::Idle));
    assert!(w.errored());
    assert_eq!(p.len(), 3);
    let first = OkPacket::decode(&p[0], CAPS).unwrap();
    assert_eq!((first.affected_rows, first.status & SERVER_MORE_RESULTS_EXISTS != 0), (3, true));
    let second = OkPacket::decode(&p[1], CAPS).unwrap();
    assert_eq!((second.affected_rows, second.warnings), (2, 1));
    let err = ErrPacket::decode(&p[2]).unwrap();
    assert_eq!((err.code, err.sql_state), (1062, Some(*b"23000")));
    assert_eq!(w.warnings.len(), 1);
}

fn notice_fields() -> crate::protocol::pg::FieldList<'static> {
    let mut raw = Vec::new();
    crate::protocol::pg::ErrorFields::new(Severity::Warning, "01000", "careful").encode_notice(&mut raw).unwrap();
    let raw: &'static [u8] = Box::leak(raw.into_boxed_slice());
    match BackendMessage::decode(&decode_frame(raw, 1024).unwrap().unwrap()).unwrap() {
        BackendMessage::NoticeResponse(f) => f,
        _ => unreachable!(),
    }
}

#[test]
fn empty_response_is_an_ok_and_empty_query_an_error() {
    let mut pg = Vec::new();
    encode_ready_for_query(TransactionStatus::Idle, &mut pg);
    let (p, _) =
        run(&mut ResultWriter::new(CAPS, RowFormat::Text, session_flags(true, true), TransactionStatus::Idle, 1), &pg);
    assert_eq!(OkPacket::decode(&p[0], CAPS).unwrap().affected_rows, 0);
    let mut pg = Vec::new();
    BackendMessage::EmptyQueryResponse.encode(&mut pg).unwrap();
    encode_ready_for_query(TransactionStatus::Idle, &mut pg);
    let (p, _) =
        run(&mut ResultWriter::new(CAPS, RowFormat::Text, session_flags(true, true), TransactionStatus::Idle, 1), &pg);
    assert_eq!(ErrPacket::decode(&p[0]).unwrap().code, 1065);
}

#[test]
fn status_follows_ready_for_query() {
    let on = session_flags(true, false);
    assert_eq!(status_flags(on, TransactionStatus::Idle), SERVER_STATUS_AUTOCOMMIT);
    assert_eq!(status_flags(session_flags(false, false), TransactionStatus::Failed), SERVER_STATUS_IN_TRANS);
    // The backslash flag is the session's, whatever the transaction does (#33).
    assert_eq!(status_flags(session_flags(false, true), TransactionStatus::InBlock) & 0x200, 0x200);
    assert_eq!(status_flags(on, TransactionStatus::InBlock) & 0x200, 0);
}

#[test]
fn connector_set_statements() {
    assert_eq!(classify("SET NAMES utf8mb4"), Some(Emulation::Set(None)));
    assert_eq!(classify("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci';"), Some(Emulation::Set(None)));
    assert_eq!(classify("SET character_set_results = NULL"), Some(Emulation::Set(None)));
    assert_eq!(classify("SET SESSION sql_mode='STRICT_TRANS_TABLES'"), Some(Emulation::Set(None)));
    assert_eq!(classify("set autocommit=0"), Some(Emulation::Set(Some(false))));
    assert_eq!(classify("SET @@session.autocommit = ON, sql_mode = ''"), Some(Emulation::Set(Some(true))));
    assert_eq!(classify("SET autocommit = 2"), None);
    assert_eq!(classify("SET search_path TO public"), None);
    assert_eq!(classify("SET @x = 1"), None);
    assert_eq!(classify("SET NAMES utf8; SELECT 1"), None);
}

#[test]
fn variable_selects() {
    assert_eq!(
        classify("select @@version_comment limit 1"),
        Some(Emulation::SelectVariables(vec![("@@version_comment".into(), "version_comment".into())]))
    );
    let jdbc = "/* mysql-connector-j-8.4.0 */SELECT  @@session.auto_increment_increment AS auto_increment_increment, \
                @@character_set_client AS character_set_client, @@max_allowed_packet AS max_allowed_packet";
    let Some(Emulation::SelectVariables(items)) = classify(jdbc) else { panic!("jdbc probe not emulated") };
    assert_eq!(items[0], ("auto_increment_increment".into(), "auto_increment_increment".into()));
    assert_eq!(items[2].1, "max_allowed_packet");
    assert_eq!(classify("SELECT @@version, 1"), None);
    assert_eq!(classify("SELECT DATABASE()"), Some(Emulation::Database));
    assert_eq!(classify("select connection_id();"), Some(Emulation::ConnectionId));
    assert_eq!(classify("SELECT database() FROM t"), None);
}

#[test]
fn show_and_use() {
    assert_eq!(
        classify("SHOW VARIABLES LIKE 'max_allowed%'"),
        Some(Emulation::ShowVariables(vec!["max_allowed%".into()]))
    );
    assert_eq!(classify("SHOW SESSION VARIABLES"), Some(Emulation::ShowVariables(vec![])));
    assert_eq!(
        classify("SHOW VARIABLES WHERE Variable_name = 'a' OR Variable_name = 'b'"),
        Some(Emulation::ShowVariables(vec!["a".into(), "b".into()]))
    );
    assert_eq!(classify("SHOW WARNINGS"), Some(Emulation::ShowWarnings));
    assert_eq!(classify("SHOW TABLES"), Some(Emulation::ShowTables));
    assert!(matches!(classify("SHOW DATABASES"), Some(Emulation::Translate(_))));
    assert_eq!(classify("USE `my db`"), Some(Emulation::Use("my db".into())));
    assert_eq!(classify("SELECT 1"), None);
    assert_eq!(classify("INSERT INTO t VALUES ('SET NAMES x')"), None);
}

#[test]
fn variables_and_like() {
    let ctx = VarContext { autocommit: false, version: "8.0.36-x", max_allowed_packet: 1 << 26 };
    assert_eq!(variable("autocommit", &ctx), Some(VarValue::Int(0)));
    assert_eq!(variable("max_allowed_packet", &ctx), Some(VarValue::Int(1 << 26)));
    assert_eq!(variable("version", &ctx), Some(VarValue::Str("8.0.36-x".into())));
    assert_eq!(variable("auto_increment_increment", &ctx), Some(VarValue::Int(1)));
    assert_eq!(variable("no_such_thing", &ctx), None);
    assert!(all_variables(&ctx).windows(2).all(|w| w[0].0 < w[1].0));
    assert!(like("max_allowed%", "max_allowed_packet"));
    assert!(like("SQL\\_MODE", "sql_mode"));
    assert!(!like("sql\\_mode", "sqlxmode"));
    assert!(like("_ersion", "version"));
    assert!(!like("version", "version_comment"));
}

/// The payloads of `out`, checking their sequence ids count up from 1.
fn payloads(out: &[u8]) -> Vec<Vec<u8>> {
    let (mut all, mut rest, mut seq) = (Vec::new(), out, 1u8);
    while let Some(f) = decode_payload(rest, 1 << 30).unwrap() {
        assert_eq!(f.first_seq, seq, "sequence ids are consecutive");
        seq = f.last_seq.wrapping_add(1);
        all.push(f.payload.into_owned());
        rest = &rest[f.consumed..];
    }
    all
}

#[test]
fn prepare_ok_describes_parameters_then_columns() {
    let columns = [("n".to_owned(), oid::INT4, -1), ("t".to_owned(), oid::TEXT, -1)];
    let mut out = Vec::new();
    super::response::encode_prepare_ok(CAPS, 7, &[oid::INT8], &columns, SERVER_STATUS_AUTOCOMMIT, &mut out);
    let p = payloads(&out);
    assert_eq!(p.len(), 1 + 2 + 3, "OK, one parameter and an EOF, two columns and an EOF");
    assert_eq!(p[0][..9], [0, 7, 0, 0, 0, 2, 0, 1, 0], "status, id, columns, parameters");
    assert_eq!(ColumnDefinition41::decode(&p[1]).unwrap().name, b"?");
    assert_eq!(p[2][0], 0xfe, "EOF after the parameters");
    assert_eq!(ColumnDefinition41::decode(&p[4]).unwrap().name, b"t");

    let mut out = Vec::new();
    super::response::encode_prepare_ok(CAPS | CLIENT_DEPRECATE_EOF, 8, &[], &columns, 0, &mut out);
    assert_eq!(payloads(&out).len(), 3, "no EOFs, no parameter section");
    out.clear();
    super::response::encode_prepare_ok(CAPS, 9, &[], &[], 0, &mut out);
    assert_eq!(payloads(&out).len(), 1, "nothing to describe");
}

#[test]
fn emulated_variables_answer_as_typed_result_sets() {
    use super::emulated::{select_variables, show_variables, show_warnings};
    use crate::bridge::{ValueKind, Warning};
    let ctx = VarContext { autocommit: true, version: "8.0.36-x", max_allowed_packet: 1 << 26 };
    let items = [("@@autocommit".to_owned(), "autocommit".to_owned()), ("v".to_owned(), "version".to_owned())];
    let (columns, rows) = select_variables(&items, &ctx).unwrap();
    assert_eq!(columns.iter().map(|c| c.0).collect::<Vec<_>>(), ["@@autocommit", "v"]);
    assert_eq!(columns[0].1.kind, ValueKind::Int8, "a number");
    assert_eq!(columns[1].1.kind, ValueKind::Text);
    assert_eq!(rows, vec![vec![Some("1".to_owned()), Some("8.0.36-x".to_owned())]]);
    let unknown = [("x".to_owned(), "autocommit".to_owned()), ("y".to_owned(), "no_such".to_owned())];
    assert_eq!(select_variables(&unknown, &ctx).unwrap_err(), "no_such");

    let (columns, rows) = show_variables(&["version%".to_owned()], &ctx);
    assert_eq!(columns.iter().map(|c| c.0).collect::<Vec<_>>(), ["Variable_name", "Value"]);
    assert_eq!(rows.first(), Some(&vec![Some("version".to_owned()), Some("8.0.36-x".to_owned())]));
    assert!(rows.iter().all(|r| r[0].as_deref().is_some_and(|n| n.starts_with("version"))));
    assert!(show_variables(&[], &ctx).1.len() > rows.len());

    let warnings = [Warning { level: "Note", code: 1051, message: "gone".to_owned() }];
    let (columns, rows) = show_warnings(&warnings);
    assert_eq!(columns.len(), 3);
    assert_eq!(rows, vec![vec![Some("Note".to_owned()), Some("1051".to_owned()), Some("gone".to_owned())]]);
}
