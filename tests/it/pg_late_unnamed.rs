//! Issue #35/#36: a statement held for a translation's JSON-array slot (`session/pg/late.rs`)
//! reaches the server as a Parse the client never sent, at its Bind and at a Describe before
//! any Bind. The client's own unnamed statement, prepared earlier on the same server connection,
//! must still be the one its next Bind of `""` runs. The translation targets the client's own
//! pool, so both share one connection; raw frames keep it all in one batch (and across Syncs),
//! in transaction and session mode. What ran is read from the rows: the client's statement
//! answers `mine` and `pg_is_in_recovery()` (false: the primary), the translation ids.

use crate::pg_raw::{bind, code, columns, execute, msg, parse, sync, tags, Msg, Raw};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// The client's unnamed statement.
const MINE: &str = "SELECT 'mine'::text AS who, pg_is_in_recovery()";
/// A statement with `$1` in the rule's JSON-array slot: held by the router until its Bind.
const LATE: &str = "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, $1)";

fn router(mode: &str, table: &str) -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, mode, 1);
    let toml = pg_config(&[0], &pools, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n");
    Router::start(&format!(
        "{toml}\n[[translation.rules]]\n\
         original_sql = \"SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]')\"\n\
         translated_sql = \"SELECT id FROM {table} WHERE labels && ARRAY[1,2]::int[] ORDER BY id\"\n\
         target_pool = \"main\"\n"
    ))
}

/// Describe statement `name`.
fn describe_statement(name: &str) -> Vec<u8> {
    let mut b = b"S".to_vec();
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    msg(b'D', &b)
}

/// The DataRows of `msgs`, each column as text; an ErrorResponse fails the test with its text.
fn rows(msgs: &[Msg]) -> Vec<Vec<String>> {
    if let Some((_, e)) = msgs.iter().find(|(t, _)| *t == b'E') {
        panic!("error {} in {}", String::from_utf8_lossy(e), tags(msgs));
    }
    msgs.iter()
        .filter(|(t, _)| *t == b'D')
        .map(|(_, b)| {
            columns(b).into_iter().map(|c| String::from_utf8_lossy(&c.unwrap_or_default()).into_owned()).collect()
        })
        .collect()
}

fn send(c: &mut Raw, parts: &[Vec<u8>]) -> Vec<Vec<String>> {
    c.send(&parts.concat());
    rows(&c.until_ready())
}

fn check(mode: &str) {
    let table = unique_name("late_unnamed");
    let mut pg = dbs().pg.primary_client();
    pg.batch_execute(&format!(
        "CREATE TABLE {table} (id int, labels int[]); INSERT INTO {table} VALUES (1, '{{1,2}}'), (3, '{{7,8}}')"
    ))
    .expect("table");
    let r = router(mode, &table);
    let mut c = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
    let mine = vec!["mine".to_owned(), "f".to_owned()];
    let id = |i: &str| vec![i.to_owned()];

    // One batch: the client's unnamed statement, a late Bind, then the unnamed statement again.
    let got = send(
        &mut c,
        &[
            parse("", MINE),
            bind("", &[], 0),
            execute(),
            parse("late", LATE),
            bind("late", &["[7]"], 0),
            execute(),
            bind("", &[], 0),
            execute(),
            sync(),
        ],
    );
    assert_eq!(got, vec![mine.clone(), id("3"), mine.clone()], "{mode}: late Bind in the batch");

    // A late Describe before any Bind, then the unnamed statement.
    let got = send(
        &mut c,
        &[parse("", MINE), parse("late2", LATE), describe_statement("late2"), bind("", &[], 0), execute(), sync()],
    );
    assert_eq!(got, vec![mine.clone()], "{mode}: late Describe in the batch");

    // Across Syncs: the unnamed statement lives on the server until replaced.
    assert_eq!(send(&mut c, &[parse("", MINE), sync()]), Vec::<Vec<String>>::new());
    assert_eq!(send(&mut c, &[bind("late", &["[1]"], 0), execute(), sync()]), vec![id("1")], "{mode}");
    assert_eq!(send(&mut c, &[describe_statement("late"), sync()]), Vec::<Vec<String>>::new(), "{mode}");
    assert_eq!(send(&mut c, &[bind("", &[], 0), execute(), sync()]), vec![mine.clone()], "{mode}: across Syncs");

    // A Bind the router refuses (a NUL in the value) after part of the batch reached the server
    // (a Flush): the server gets a stand-in unnamed Parse that fails there, so that what the
    // batch ran is rolled back. Directly, the client's unnamed statement outlives the error.
    let flush = msg(b'H', b"");
    c.send(&[bind("", &[], 0), execute(), flush, bind("late", &["[\"\0\"]"], 0), execute(), sync()].concat());
    let refused = c.until_ready();
    assert_eq!(tags(&refused), "2DCEZ", "{mode}: the refusal");
    assert_eq!(code(&refused[3].1), "22021", "{mode}: the refusal");
    assert_eq!(send(&mut c, &[bind("", &[], 0), execute(), sync()]), vec![mine], "{mode}: after a refusal");
    drop(c);
    drop(r);
    pg.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
}

#[test]
fn the_clients_unnamed_statement_survives_a_late_statement_in_transaction_mode() {
    check("transaction");
}

#[test]
fn the_clients_unnamed_statement_survives_a_late_statement_in_session_mode() {
    check("session");
}
