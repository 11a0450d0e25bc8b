use super::*;

#[test]
fn knows_where_the_clients_unnamed_statement_is() {
    let mut u = Unnamed::default();
    assert!(u.kept == Kept::None && !u.here, "a fresh session's connection is not known");
    u.parsed(b"P-one", None);
    assert!(u.kept == Kept::Parse && u.here);
    u.elsewhere();
    assert!(u.kept == Kept::Parse && !u.here, "another connection: the Parse goes again");
    u.parsed(b"P-two", None);
    assert_eq!(u.parse, b"P-two", "the latest Parse replaces the first");
    u.dropped();
    assert!(u.kept == Kept::None && u.here, "dropped where the client is: nothing to send");
}

#[test]
fn holds_no_parse_past_its_limit() {
    let mut u = Unnamed::default();
    u.parsed(&vec![7u8; KEEP_MAX + 1], None);
    assert_eq!((u.kept, u.parse.capacity()), (Kept::TooLong, 0));
    u.parsed(&vec![7u8; KEEP_MAX], None);
    assert_eq!((u.kept, u.parse.len()), (Kept::Parse, KEEP_MAX));
}
