use super::*;

fn known() -> usize {
    NAMES.with_borrow(|n| n.set.len())
}

#[test]
fn sessions_of_one_name_share_one_copy() {
    let (a, b) = (shared("app"), shared("app"));
    assert!(Rc::ptr_eq(&a, &b));
    assert_eq!(&*a, "app");
    assert!(!Rc::ptr_eq(&a, &shared("other")));
}

#[test]
fn names_no_session_holds_are_dropped_and_held_ones_kept() {
    let held: Vec<Rc<str>> = (0..10).map(|i| shared(&format!("held{i}"))).collect();
    // Names of sessions that ended at once: the set never grows past twice what is held.
    for i in 0..10_000 {
        drop(shared(&format!("gone{i}")));
        assert!(known() <= (2 * held.len()).max(PRUNE_FLOOR) + 1, "{} names known", known());
    }
    for (i, h) in held.iter().enumerate() {
        assert!(Rc::ptr_eq(h, &shared(&format!("held{i}"))), "a held name stays shared");
    }
}
