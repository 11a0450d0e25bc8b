use super::*;

fn key(pid: i32, secret: i32) -> CancelKey {
    CancelKey { pid, secret }
}

#[test]
fn a_cancel_sets_the_watched_interrupt_even_with_nothing_running() {
    let registry = CancelRegistry::default();
    let slot = registry.register(key(7, 42));
    let first = slot.watch();
    assert!(matches!(registry.act(key(7, 1), false), Acted::Unknown), "a wrong secret does nothing");
    assert!(!first.is_set());
    assert!(matches!(registry.act(key(7, 42), false), Acted::Done), "nothing runs");
    assert!(first.is_set());
    let second = slot.watch();
    assert!(!second.is_set(), "a new watch starts clear");
    registry.remove(key(7, 42));
    assert!(matches!(registry.act(key(7, 42), false), Acted::Unknown), "a finished session is not found");
    assert!(!second.is_set());
}

fn running_target() -> Option<CancelTarget> {
    let addr = SocketAddr::from(([127, 0, 0, 1], 5432));
    Some(CancelTarget { addr, kind: TargetKind::Pg { pid: 1, secret: 2 } })
}

#[test]
fn a_delivery_for_an_earlier_statement_does_not_swallow_a_cancel_of_the_next() {
    let registry = CancelRegistry::default();
    let sent = Rc::new(Cell::new(0));
    let counter = sent.clone();
    registry.set_deliver(Rc::new(move |_, _| counter.set(counter.get() + 1)));
    let slot = registry.register(key(7, 42));
    slot.set_running(running_target());
    let first = registry.act(key(7, 42), false);
    assert!(matches!(first, Acted::Delivering(_)));
    assert!(matches!(registry.act(key(7, 42), false), Acted::Delivering(_)));
    assert_eq!(sent.get(), 1, "a second cancel of the same statement is not sent again");
    // The statement ends before that delivery is confirmed; the next one is cancelled too.
    slot.set_running(None);
    slot.set_running(running_target());
    slot.set_running(running_target()); // more of the same statement sent
    assert!(matches!(registry.act(key(7, 42), false), Acted::Delivering(_)));
    assert_eq!(sent.get(), 2);
    assert_eq!(slot.delivering.borrow().len(), 2, "settle waits for both deliveries");
}

#[test]
fn kill_connection_sets_the_end_event_and_server_threads_find_their_session() {
    let registry = CancelRegistry::default();
    let slot = registry.register(key(9, 0));
    let other = registry.register(key(10, 0));
    let primary = SocketAddr::from(([127, 0, 0, 1], 3306));
    let replica = SocketAddr::from(([127, 0, 0, 1], 3307));
    slot.set_server(Some((primary, 77)));
    other.set_server(Some((replica, 77)));
    assert_eq!(registry.thread_owner(77, |a| a == primary), Some(key(9, 0)));
    assert_eq!(registry.thread_owner(77, |a| a == replica), Some(key(10, 0)));
    assert_eq!(registry.thread_owner(78, |_| true), None);
    assert!(!slot.end().is_set());
    let Acted::Delivering(closed) = registry.act(key(9, 0), true) else { panic!("waits for the close") };
    assert!(slot.end().is_set());
    assert!(!closed.is_set());
    slot.mark_closed();
    assert!(closed.is_set());
    assert!(!other.end().is_set());
}

#[test]
fn a_server_is_found_until_cleared_or_its_session_ends() {
    let registry = CancelRegistry::default();
    let slot = registry.register(key(9, 0));
    let primary = SocketAddr::from(([127, 0, 0, 1], 3306));
    slot.set_server(Some((primary, 5)));
    assert_eq!(registry.thread_owner(5, |_| true), Some(key(9, 0)));
    slot.set_server(None);
    assert_eq!(registry.thread_owner(5, |_| true), None);
    slot.set_server(Some((primary, 6)));
    registry.remove(key(9, 0));
    assert_eq!(registry.thread_owner(6, |_| true), None, "an ended session's server is not found");
}
