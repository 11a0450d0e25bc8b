use super::*;

#[derive(Default, Debug)]
struct Part(Vec<u8>);

lendable!(Part, |p: &Part| p.0.is_empty());

fn spares() -> usize {
    Part::shelf().with(Shelf::spares)
}

#[test]
fn reading_a_parked_part_lends_nothing_and_reads_empty() {
    let lent = Lent::<Part>::default();
    assert!(lent.0.is_empty());
    assert!(lent.held.is_none());
}

#[test]
fn a_box_goes_back_only_empty_and_is_lent_again_without_allocating() {
    let mut lent = Lent::<Part>::default();
    lent.0.push(1);
    let first: *const Part = &*lent;
    lent.park();
    assert_eq!(lent.0, [1], "a part that holds something stays");
    lent.0.clear();
    lent.park();
    assert!(lent.held.is_none());
    assert_eq!(spares(), 1);
    lent.0.push(2);
    assert_eq!(&*lent as *const Part, first, "the spare is lent again");
    assert_eq!(spares(), 0);
}

#[test]
fn held_mut_does_not_lend() {
    let mut lent = Lent::<Part>::default();
    assert!(lent.held_mut().is_none());
    lent.0.push(3);
    assert_eq!(lent.held_mut().map(|p| p.0.len()), Some(1));
}
