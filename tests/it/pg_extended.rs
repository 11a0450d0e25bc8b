//! Issue #3: the extended protocol byte by byte — text and binary result formats, pipelines of
//! several Parse/Bind/Execute before one Sync, errors inside a pipeline — in every pool mode,
//! and libpq's Bind/Describe-portal/Execute pattern healing a stale plan.

use crate::pg_raw::{bind, code, columns, describe_portal, execute, md5_router, parse, query, sync, tags, Raw};
use crate::support::{dbs, unique_name};

#[test]
fn text_and_binary_formats_and_pipelines_in_every_mode() {
    for mode in ["session", "transaction", "statement"] {
        let r = md5_router(mode, 2);
        let mut c = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        // Named statement, text results then binary results.
        let mut batch = parse("s1", "SELECT $1::int4 + 1, $2::text");
        batch.extend(bind("s1", &["41", "x"], 0));
        batch.extend(execute());
        batch.extend(bind("s1", &["1", "y"], 1));
        batch.extend(execute());
        batch.extend(sync());
        c.send(&batch);
        let got = c.until_ready();
        assert_eq!(tags(&got), "12DC2DCZ", "{mode}");
        assert_eq!(columns(&got[2].1), vec![Some(b"42".to_vec()), Some(b"x".to_vec())], "{mode}: text");
        assert_eq!(columns(&got[5].1), vec![Some(2i32.to_be_bytes().to_vec()), Some(b"y".to_vec())], "{mode}: binary");
        // A pipeline with an error in the middle: the rest up to Sync is skipped, as the
        // server does, and the next Sync batch works.
        let mut batch = parse("", "SELECT 1");
        batch.extend(bind("", &[], 0));
        batch.extend(execute());
        batch.extend(parse("", "SELECT 1 / (0 * random())::int"));
        batch.extend(bind("", &[], 0));
        batch.extend(execute());
        batch.extend(bind("s1", &["5", "z"], 0));
        batch.extend(execute());
        batch.extend(sync());
        batch.extend(bind("s1", &["6", "w"], 0));
        batch.extend(execute());
        batch.extend(sync());
        c.send(&batch);
        let first = c.until_ready();
        assert_eq!(tags(&first), "12DC12EZ", "{mode}");
        assert_eq!(code(&first[6].1), "22012");
        let second = c.until_ready();
        assert_eq!(tags(&second), "2DCZ", "{mode}");
        assert_eq!(columns(&second[1].1)[0], Some(b"7".to_vec()));
        c.send(&query("SELECT 'simple'"));
        assert_eq!(tags(&c.until_ready()), "TDCZ", "{mode}");
    }
}

#[test]
fn a_stale_plan_is_healed_for_libpq_style_executions() {
    for mode in ["session", "transaction", "statement"] {
        let r = md5_router(mode, 1);
        let table = unique_name("pge_heal");
        let mut c = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        c.send(&query(&format!("CREATE TABLE {table} (id int); INSERT INTO {table} VALUES (1)")));
        c.until_ready();
        // PQprepare, then PQexecPrepared: Bind, Describe portal, Execute, Sync.
        let mut prep = parse("p", &format!("SELECT * FROM {table}"));
        prep.extend(sync());
        c.send(&prep);
        assert_eq!(tags(&c.until_ready()), "1Z");
        let mut exec = bind("p", &[], 0);
        exec.extend(describe_portal());
        exec.extend(execute());
        exec.extend(sync());
        c.send(&exec);
        assert_eq!(tags(&c.until_ready()), "2TDCZ", "{mode}");
        dbs()
            .pg
            .primary_client()
            .batch_execute(&format!("ALTER TABLE {table} ADD COLUMN w int DEFAULT 7"))
            .expect("alter");
        c.send(&exec);
        let got = c.until_ready();
        assert_eq!(tags(&got), "2TDCZ", "{mode}: healed, not an error: {got:?}");
        assert_eq!(columns(&got[2].1), vec![Some(b"1".to_vec()), Some(b"7".to_vec())], "{mode}: the new shape");
        if mode != "statement" {
            // Inside a transaction the error reaches the client unchanged.
            dbs().pg.primary_client().batch_execute(&format!("ALTER TABLE {table} ADD COLUMN x int")).expect("alter");
            c.send(&query("BEGIN"));
            c.until_ready();
            c.send(&exec);
            let got = c.until_ready();
            assert_eq!(tags(&got), "EZ", "{mode}");
            assert_eq!(code(&got[0].1), "0A000");
            c.send(&query("ROLLBACK"));
            c.until_ready();
        }
        c.send(&query(&format!("DROP TABLE {table}")));
        c.until_ready();
    }
}
