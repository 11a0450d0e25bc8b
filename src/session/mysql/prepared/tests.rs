use super::*;

#[test]
fn statements_move_to_a_new_binary_under_their_ids_unless_long_data_waits() {
    let mut s = Statements::default();
    let mk = |sql: &str, order: Option<Rc<[u16]>>| Stmt {
        key: 9,
        sql: sql.as_bytes().to_vec(),
        origin: "SELECT ?, ?".into(),
        route_key: None,
        params: 2,
        order,
        types: vec![8, 0, 253, 0],
        long_data: Vec::new(),
        long_refused: None,
        long_charge: None,
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
    assert_eq!((stmt.sql.as_slice(), stmt.types.as_slice()), (&b"SELECT ? + ?"[..], &[8, 0, 253, 0][..]));
    assert_eq!(stmt.order.as_deref(), Some(&[1u16, 0][..]));
    assert_ne!(moved.insert(mk("SELECT 1", None)), b, "new ids never reuse a moved one");
    s.get_mut(b).expect("kept").long_data.push((0, b"x".to_vec()));
    assert!(s.freeze().is_none(), "long data belongs to the next execute, here");
}

#[test]
fn ids_are_issued_and_last_resolves() {
    let mut s = Statements::default();
    let mk = || Stmt {
        key: 1,
        sql: b"SELECT ?".to_vec(),
        origin: "SELECT ?".into(),
        route_key: None,
        params: 1,
        order: None,
        types: Vec::new(),
        long_data: Vec::new(),
        long_refused: None,
        long_charge: None,
    };
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
