use super::*;
use crate::session::engine::text::Text;
use crate::session::mysql::causal::first_word_lexed_atomic;

#[test]
fn statements_move_to_a_new_binary_under_their_ids_unless_long_data_waits() {
    let mut s = Statements::default();
    let mk = |sql: &str, order: Option<Rc<[u16]>>| {
        let mut stmt = Stmt::new(9, sql.as_bytes().into(), "SELECT ?, ?".into(), 2, order);
        stmt.types = vec![8, 0, 253, 0];
        stmt
    };
    let a = s.insert(mk("SELECT ?, ?", None));
    let b = s.insert(mk("SELECT ? + ?", Some(Rc::from(vec![1u16, 0]))));
    s.remove(a);
    let budget = Arc::new(ClientBudget::new());
    let mut routed = Vec::new();
    let mut moved = Statements::thaw(
        s.freeze().expect("no long data"),
        |text| {
            routed.push(text.to_owned());
            None
        },
        &budget,
        0,
    );
    assert_eq!(routed, ["SELECT ?, ?"], "each statement is routed by the client's text");
    assert_eq!((moved.len(), moved.resolve(u32::MAX), moved.bytes()), (1, b, s.bytes()));
    let stmt = moved.get_mut(b).expect("kept under its id");
    assert_eq!((&stmt.sql[..], stmt.types.as_slice()), (&b"SELECT ? + ?"[..], &[8, 0, 253, 0][..]));
    assert_eq!(stmt.order.as_deref(), Some(&[1u16, 0][..]));
    assert_ne!(moved.insert(mk("SELECT 1", None)), b, "new ids never reuse a moved one");
    s.get_mut(b).expect("kept").long_data.push((0, b"x".to_vec()));
    assert!(s.freeze().is_none(), "long data belongs to the next execute, here");
}

#[test]
fn ids_are_issued_and_last_resolves() {
    let mut s = Statements::default();
    let mk = || Stmt::new(1, b"SELECT ?"[..].into(), "SELECT ?".into(), 1, None);
    let a = s.insert(mk());
    let b = s.insert(mk());
    assert_eq!((a, b), (1, 2));
    assert_eq!(s.resolve(u32::MAX), 2);
    assert!(s.get_mut(u32::MAX).is_some());
    s.remove(1);
    assert!(s.get_mut(1).is_none());
    assert_eq!(s.len(), 1);
}

#[test]
fn keys_depend_on_text_and_database() {
    assert_eq!(statement_key(b"SELECT 1", None), statement_key(b"SELECT 1", None));
    assert_ne!(statement_key(b"SELECT 1", None), statement_key(b"SELECT 1", Some("x")));
    assert_ne!(statement_key(b"SELECT 1", None), statement_key(b"SELECT 2", None));
}

#[test]
fn reordered_execute_moves_values_and_remembers_types() {
    // Client: (a = 7 LONGLONG, b = NULL VAR_STRING, c = long data BLOB); cursor flag 1.
    let first = [
        &[0x17, 5, 0, 0, 0, 1, 1, 0, 0, 0][..],
        &[0b010, 0x01, 0x08, 0x00, 0xFD, 0x00, 0xFC, 0x00],
        &[7, 0, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    let (mut types, mut out) = (Vec::new(), Vec::new());
    // Translated `? ? ? ?` takes c, a, b, a.
    assert!(reorder_execute(&first, 9, 3, &[2, 0, 1, 0], &[false, false, true], &mut types, &mut out));
    let want = [
        &[0x17, 9, 0, 0, 0, 1, 1, 0, 0, 0][..],
        &[0b0100, 0x01, 0xFC, 0x00, 0x08, 0x00, 0xFD, 0x00, 0x08, 0x00],
        &[7, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    assert_eq!(out, want);
    assert_eq!(types, [0x08, 0x00, 0xFD, 0x00, 0xFC, 0x00]);
    // Types not sent again: the remembered ones are bound; an unsigned flag survives.
    types = vec![0x08, 0x80, 0xFD, 0x00, 0xFC, 0x00];
    let again = [&[0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0][..], &[0b000, 0x00], &[0xFF; 8], b"\x02hi", b"\x01c"].concat();
    let mut out2 = Vec::new();
    assert!(reorder_execute(&again, 3, 3, &[2, 0, 1, 0], &[false; 3], &mut types, &mut out2));
    let want2 = [
        &[0x17, 3, 0, 0, 0, 0, 1, 0, 0, 0][..],
        &[0b0000, 0x01, 0xFC, 0x00, 0x08, 0x80, 0xFD, 0x00, 0x08, 0x80],
        b"\x01c",
        &[0xFF; 8],
        b"\x02hi",
        &[0xFF; 8],
    ]
    .concat();
    assert_eq!(out2, want2);
    // Invalid: truncated, no types ever bound, trailing bytes.
    assert!(!reorder_execute(&first[..12], 9, 3, &[0, 1, 2], &[], &mut Vec::new(), &mut Vec::new()));
    assert!(!reorder_execute(&again, 9, 3, &[0, 1, 2], &[], &mut Vec::new(), &mut Vec::new()));
    assert!(!reorder_execute(
        &[&first[..], &[0]].concat(),
        9,
        3,
        &[0, 1, 2],
        &[false, false, true],
        &mut Vec::new(),
        &mut Vec::new()
    ));
}

#[test]
fn long_data_goes_to_every_position_of_its_parameter() {
    assert_eq!(backend_params(None, 4), vec![4]);
    assert_eq!(backend_params(Some(&[1, 0, 1, 2]), 1), vec![0, 2]);
    assert_eq!(backend_params(Some(&[1, 0, 1, 2]), 2), vec![3]);
    assert_eq!(backend_params(Some(&[1, 0]), 5), Vec::<u16>::new());
}

#[test]
fn execute_rewrite_binds_remembered_types() {
    // Two params, types LONGLONG and VAR_STRING, values 7 and NULL.
    let first =
        [&[0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0][..], &[0x02, 0x01, 0x08, 0x00, 0xFD, 0x00], &[7, 0, 0, 0, 0, 0, 0, 0]]
            .concat();
    let mut types = Vec::new();
    let mut out = Vec::new();
    assert!(rewrite_execute(&first, 9, 2, &mut types, &mut out));
    assert_eq!(&out[1..5], &[9, 0, 0, 0]);
    assert_eq!(&out[5..], &first[5..]);
    assert_eq!(types, [0x08, 0x00, 0xFD, 0x00]);
    let again = [&[0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0][..], &[0x02, 0x00], &[8, 0, 0, 0, 0, 0, 0, 0]].concat();
    let mut out2 = Vec::new();
    assert!(rewrite_execute(&again, 3, 2, &mut types, &mut out2));
    let want =
        [&[0x17, 3, 0, 0, 0, 0, 1, 0, 0, 0][..], &[0x02, 0x01, 0x08, 0x00, 0xFD, 0x00], &[8, 0, 0, 0, 0, 0, 0, 0]]
            .concat();
    assert_eq!(out2, want);
    assert!(!rewrite_execute(&[0x17, 1], 3, 2, &mut types, &mut Vec::new()));
    assert!(!rewrite_execute(&[0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0], 3, 2, &mut types, &mut Vec::new()));
}

#[test]
fn prepared_settings_are_tracked_or_pin() {
    let set = |name: &str, stmt: &str| Effect::Set { name: name.into(), stmt: stmt.into() };
    assert_eq!(executed_effects(b"SET autocommit = 0", 0), [(0, set("autocommit", "SET SESSION autocommit = 0"))]);
    assert_eq!(executed_effects(b"SET autocommit = ?", 1), [(0, Effect::Pin(PinReason::UntrackedSetting))]);
    assert_eq!(executed_effects(b"SELECT ?", 1), []);
}

/// A statement's reading, kept from its first execute (#39), is what reading its texts afresh
/// at every execute gives, as the router did before: the effects of what backends prepare with
/// the client's final parameter count, and the client's own text's `LOCAL INFILE`; kept alike
/// across the executes, ids and a move to a new binary.
#[test]
fn kept_reading_is_a_fresh_reading() {
    // (what backends prepare, the client's text): every kind of session effect, a translation
    // whose rewrite alone has one, and a local file load.
    let texts = [
        ("SET autocommit = 0", "SET autocommit = 0"),
        ("SET NAMES utf8mb4", "SET NAMES utf8mb4"),
        ("SET SESSION TRANSACTION READ ONLY", "SET SESSION TRANSACTION READ ONLY"),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
        ("SET @x = 1", "SET @x = 1"),
        ("SET sql_mode = DEFAULT", "SET sql_mode = DEFAULT"),
        ("USE other", "USE other"),
        ("CREATE TEMPORARY TABLE t (a INT)", "CREATE TEMPORARY TABLE t (a INT)"),
        ("LOCK TABLES t READ", "LOCK TABLES t READ"),
        ("SELECT GET_LOCK('a', 1)", "SELECT GET_LOCK('a', 1)"),
        ("SET autocommit = 1", "SELECT 'translated'"),
        ("LOAD DATA LOCAL INFILE 'x' INTO TABLE t", "LOAD DATA LOCAL INFILE 'x' INTO TABLE t"),
        ("SELECT c FROM t WHERE id = 1", "SELECT c FROM t WHERE id = 1"),
    ];
    let fresh = |sql: &str, origin: &str, params| Reading {
        effects: executed_effects(sql.as_bytes(), params),
        loads_local_file: super::super::loads_local_file(origin),
        transaction: Text::mysql(origin).transaction().is_some(),
        atomic_word: first_word_lexed_atomic(origin),
    };
    let budget = Arc::new(ClientBudget::new());
    for params in [0, 1] {
        let mut s = Statements::default();
        let ids: Vec<u32> = texts
            .iter()
            .map(|(sql, origin)| {
                // As a reordering translation does, the client's count is set after the server's.
                let mut stmt = Stmt::new(1, sql.as_bytes().into(), (*origin).into(), 1 - params, None);
                stmt.params = params;
                s.insert(stmt)
            })
            .collect();
        let moved = Statements::thaw(s.freeze().expect("no long data"), |_| None, &budget, 0);
        for (id, (sql, origin)) in ids.into_iter().zip(texts) {
            let want = fresh(sql, origin, params);
            let kept = s.get_mut(id).expect("kept").reading();
            assert_eq!(*kept, want, "{sql} with {params} parameters");
            assert_eq!(*s.get_mut(id).expect("kept").reading(), want, "{sql}, executed again");
            assert_eq!(*moved.by_id[&id].reading(), want, "{sql}, moved to a new binary");
        }
    }
    // Each kind above has its effect (or loads a file): the comparisons are not of empty readings.
    let read: Vec<Reading> = texts.iter().map(|(sql, origin)| fresh(sql, origin, 0)).collect();
    assert!(read[..texts.len() - 1].iter().all(|r| !r.effects.is_empty() || r.loads_local_file), "{read:?}");
    assert!(read[texts.len() - 2].loads_local_file);
}

/// The first-word answers a statement's reading keeps (#39) are those its client's text gives
/// read afresh by the lexer, as each execute asked before: whether it is a transaction
/// statement (held back when read-only), and whether it begins with the word of a statement
/// that commits nothing before it fails.
#[test]
fn kept_first_words_are_fresh_readings() {
    let texts = [
        "SELECT c FROM sbtest1 WHERE id=?",
        "select c from t where id = ?",
        "/* app */ SELECT ?",
        "# note\nINSERT INTO t VALUES (?)",
        "REPLACE INTO t VALUES (?)",
        "UPDATE t SET a = ? WHERE id = ?",
        "DELETE FROM t WHERE id = ?",
        "WITH x AS (SELECT ?) SELECT * FROM x",
        "VALUES (?)",
        "TABLE t",
        "SELECT(?)",
        "/*!SELECT ?*/",
        "SELECT_x FROM t",
        "SELECT1",
        "CALL p(?)",
        "CREATE TABLE t (a INT)",
        "DO ?",
        "START TRANSACTION READ ONLY",
        "/* app */ START TRANSACTION",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "SET TRANSACTION READ ONLY",
        "SET @x = ?",
        "--x\nSELECT 1",
    ];
    let mut s = Statements::default();
    let mut seen = [[false; 2]; 2];
    for origin in texts {
        let id = s.insert(Stmt::new(1, origin.as_bytes().into(), origin.into(), 0, None));
        for _ in 0..2 {
            let kept = s.get_mut(id).expect("kept").reading();
            assert_eq!(kept.transaction, Text::mysql(origin).transaction().is_some(), "{origin:?}");
            assert_eq!(kept.atomic_word, first_word_lexed_atomic(origin), "{origin:?}");
            seen[0][usize::from(kept.transaction)] = true;
            seen[1][usize::from(kept.atomic_word)] = true;
        }
    }
    assert_eq!(seen, [[true; 2]; 2], "each answer is both true and false for some text");
}
