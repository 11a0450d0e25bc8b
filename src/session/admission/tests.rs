use super::*;

fn table(caps: &[Option<u32>]) -> Arc<ClientSlots> {
    let listeners = caps.iter().map(|max| Slots { max: *max, used: AtomicU32::new(0) }).collect();
    Arc::new(ClientSlots { listeners })
}

#[test]
fn a_capped_listener_admits_up_to_its_cap_and_again_after_a_close() {
    let t = table(&[Some(2), None]);
    let a = t.try_admit(0).expect("first");
    let _b = t.try_admit(0).expect("second");
    assert!(t.try_admit(0).is_none(), "third is over the cap");
    assert_eq!(t.used(0), 2, "a refusal takes no slot");
    drop(a);
    assert_eq!(t.used(0), 1);
    let _c = t.try_admit(0).expect("a closed connection frees its slot");
    // The uncapped listener next to it counts but never refuses.
    let many: Vec<_> = (0..100).map(|_| t.try_admit(1).expect("uncapped")).collect();
    assert_eq!(t.used(1), 100);
    drop(many);
    assert_eq!(t.used(1), 0);
    assert!(t.try_admit(7).is_none(), "an unknown listener admits no one");
}

#[test]
fn the_cap_holds_across_threads() {
    let t = table(&[Some(10)]);
    let admitted: Vec<Vec<ClientSlot>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(|| (0..10).filter_map(|_| t.try_admit(0)).collect())).collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(admitted.iter().map(Vec::len).sum::<usize>(), 10);
    assert_eq!(t.used(0), 10);
}
