//! Issue #3: in transaction mode, session settings (`SET search_path`, `SET TimeZone`) follow
//! their client onto whatever backend connection it borrows, and never leak to another client
//! sharing the same connection.

use crate::pg_util::{backend_pid, router};

fn settings(c: &mut postgres::Client, simple: bool) -> (String, String) {
    if simple {
        let msgs = c.simple_query("SELECT current_setting('search_path'), current_setting('TimeZone')").expect("show");
        for m in msgs {
            if let postgres::SimpleQueryMessage::Row(r) = m {
                return (r.get(0).unwrap_or("").to_owned(), r.get(1).unwrap_or("").to_owned());
            }
        }
        panic!("no row");
    }
    let row = c.query_one("SELECT current_setting('search_path'), current_setting('TimeZone')", &[]).expect("show");
    (row.get(0), row.get(1))
}

#[test]
fn two_clients_on_one_connection_never_see_each_others_settings() {
    let r = router("transaction", 1, "");
    let mut a = r.pg("main");
    let mut b = r.pg("main");
    let mut plain = r.pg("main");
    let defaults = settings(&mut plain, true);
    a.batch_execute("SET search_path = alpha, public; SET TimeZone = 'America/New_York'").expect("a sets");
    b.batch_execute("SET search_path TO beta").expect("b sets path");
    b.execute("SET TIME ZONE 'Asia/Tokyo'", &[]).expect("b sets zone over the extended protocol");
    let a_want = ("alpha, public".to_owned(), "America/New_York".to_owned());
    let b_want = ("beta".to_owned(), "Asia/Tokyo".to_owned());
    let pid = backend_pid(&mut plain);
    for i in 0..60 {
        let simple = i % 2 == 0;
        assert_eq!(settings(&mut a, simple), a_want, "round {i}");
        assert_eq!(settings(&mut b, !simple), b_want, "round {i}");
        assert_eq!(settings(&mut plain, simple), defaults, "round {i}");
        if i % 10 == 0 {
            // Transaction-scoped and rolled-back changes do not stick to anyone.
            let mut tx = a.transaction().expect("begin");
            tx.batch_execute("SET LOCAL TimeZone = 'UTC'; SET search_path = gamma").expect("local set");
            tx.rollback().expect("rollback");
            b.batch_execute("BEGIN; SET LOCAL search_path = delta; COMMIT").expect("b local");
        }
    }
    assert_eq!(backend_pid(&mut a), pid, "pool of one: all of it on the same connection");
    // RESET goes back to the server default and stays there.
    a.batch_execute("RESET search_path").expect("reset");
    assert_eq!(settings(&mut a, false), (defaults.0.clone(), a_want.1.clone()));
    assert_eq!(settings(&mut b, false), b_want);
}
