use super::*;
use crate::protocol::pg::{encode_error, Severity};

fn body(severity: Severity, code: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode_error(severity, code, message, &mut out);
    out.get(5..).unwrap_or_default().to_vec()
}

#[test]
fn classifies_backend_errors() {
    let fatal = body(Severity::Fatal, "57P01", "terminating connection due to administrator command");
    assert!(matches!(classify_error(&fatal), ErrorKind::Fatal(e) if e.to_string().starts_with("57P01: terminating")));
    assert!(matches!(classify_error(&body(Severity::Error, "0A000", STALE_PLAN)), ErrorKind::StalePlan));
    assert!(matches!(classify_error(&body(Severity::Error, "0A000", "other")), ErrorKind::Other));
    assert!(matches!(classify_error(&body(Severity::Error, "57014", "canceling")), ErrorKind::Canceled));
    assert!(matches!(classify_error(b"garbage"), ErrorKind::Other));
    let name = super::super::prepared::server_name(0xab);
    let missing = body(Severity::Error, "26000", &format!("prepared statement \"{name}\" does not exist"));
    assert!(matches!(classify_error(&missing), ErrorKind::Misnamed { key: 0xab, exists: false }));
    let dup = body(Severity::Error, "42P05", &format!("prepared statement \"{name}\" already exists"));
    assert!(matches!(classify_error(&dup), ErrorKind::Misnamed { key: 0xab, exists: true }));
    let client = body(Severity::Error, "26000", "prepared statement \"s1\" does not exist");
    assert!(matches!(classify_error(&client), ErrorKind::Other));
}

#[test]
fn renames_one_statement_in_a_batch() {
    use crate::protocol::pg::{frontend, FrontendMessage, Target};
    let mut batch = Vec::new();
    let _ = frontend::encode_describe(Target::Statement, "qp_old", &mut batch);
    let _ = FrontendMessage::Bind {
        portal: "",
        statement: "qp_old",
        param_formats: Default::default(),
        params: Default::default(),
        result_formats: Default::default(),
    }
    .encode(&mut batch);
    let _ = frontend::encode_describe(Target::Statement, "qp_other", &mut batch);
    frontend::encode_sync(&mut batch);
    let out = renamed(&batch, "qp_old", "qp_new").expect("well-formed");
    let text = String::from_utf8_lossy(&out);
    assert_eq!((text.matches("qp_new").count(), text.contains("qp_old")), (2, false));
    assert!(text.contains("qp_other"));
    assert_eq!(renamed(b"B\0\0", "a", "b"), None);
}

#[test]
fn arms_only_small_marked_batches() {
    let (mut f, mut spare) = (Flight::default(), Spare::default());
    let stmt = Rc::new(Stmt::new("SELECT 1", None, &[], 0));
    let bare: std::collections::VecDeque<Expect> =
        [Expect::Synth(server::PARSE_COMPLETE), Expect::Bind, Expect::Execute, Expect::Sync].into();
    f.arm(b"PPPPBBBBEEEESSSS", &bare, &mut spare);
    assert!(f.replay.is_none(), "no mark, nothing to replay");
    f.mark = Some(HealMark { bout: 4, expect: 1, stmt: stmt.clone(), bind: true });
    f.arm(b"PPPPBBBBEEEESSSS", &bare, &mut spare);
    assert!(f.replay.is_none(), "a Bind without a portal Describe is not healed");
    let expect: std::collections::VecDeque<Expect> =
        [Expect::Synth(server::PARSE_COMPLETE), Expect::Bind, Expect::DescribePortal, Expect::Execute, Expect::Sync]
            .into();
    f.mark = Some(HealMark { bout: 4, expect: 1, stmt: stmt.clone(), bind: true });
    f.arm(b"PPPPBBBBDDDDEEEESSSS", &expect, &mut spare);
    let r = f.replay.as_ref().expect("armed");
    assert_eq!((r.stmt.key, r.bytes.as_slice(), r.expects.len()), (stmt.key, &b"BBBBDDDDEEEESSSS"[..], 4));
    f.mark = Some(HealMark { bout: 0, expect: 0, stmt: stmt.clone(), bind: false });
    f.arm(&vec![0u8; REPLAY_MAX + 1], &expect, &mut spare);
    assert!(f.replay.is_none(), "too big to keep");
}

#[test]
fn arming_reuses_the_last_batchs_allocations() {
    let (mut f, mut spare) = (Flight::default(), Spare::default());
    let stmt = Rc::new(Stmt::new("SELECT 1", None, &[], 0));
    let expect: std::collections::VecDeque<Expect> = [Expect::Bind, Expect::DescribePortal, Expect::Execute].into();
    let mut arm = |f: &mut Flight, batch: &[u8]| {
        f.mark = Some(HealMark { bout: 0, expect: 0, stmt: stmt.clone(), bind: true });
        f.arm(batch, &expect, &mut spare);
        f.replay.as_ref().map(|r| (r.bytes.clone(), r.bytes.capacity(), r.expects.capacity()))
    };
    let (_, wide, _) = arm(&mut f, &[0; 600]).expect("armed");
    let (bytes, kept, expects) = arm(&mut f, b"BBBBDDDDEEEE").expect("armed");
    assert_eq!((bytes.as_slice(), kept), (&b"BBBBDDDDEEEE"[..], wide), "the first batch's buffer, refilled");
    assert!(expects >= 3);
    // A large batch's buffer is not kept for the next one.
    arm(&mut f, &[0; SPARE_MAX + 1]).expect("armed");
    assert!(arm(&mut f, b"BBBB").is_some_and(|(_, capacity, _)| capacity < SPARE_MAX));
}
