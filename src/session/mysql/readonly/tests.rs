use super::*;

fn shape(sql: &str) -> Shape {
    super::shape(&Text::mysql(sql))
}

#[test]
fn read_only_starts_and_their_ends_are_recognised_and_nothing_else() {
    let ro = |snapshot| Shape::Begin { read_only: Some(true), snapshot };
    assert_eq!(shape("START TRANSACTION READ ONLY"), ro(false));
    assert_eq!(shape("start transaction with consistent snapshot, read only;"), ro(true));
    assert_eq!(shape("/* app */ START TRANSACTION READ ONLY"), ro(false));
    assert_eq!(shape("START TRANSACTION READ WRITE"), Shape::Begin { read_only: Some(false), snapshot: false });
    assert_eq!(shape("BEGIN"), Shape::Begin { read_only: None, snapshot: false });
    assert_eq!(shape("SET TRANSACTION READ ONLY"), Shape::NextReadOnly);
    assert_eq!(shape("commit work"), Shape::End);
    for other in [
        "START TRANSACTION READ ONLY; SELECT 1",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        "SET SESSION TRANSACTION READ ONLY",
        "COMMIT AND CHAIN",
        "ROLLBACK TO SAVEPOINT a",
        "START TRANSACTION READ",
        "BEGIN NOT ATOMIC SELECT 1; END",
        "",
    ] {
        assert_eq!(shape(other), Shape::Other, "{other}");
    }
}
