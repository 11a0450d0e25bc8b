//! Issue #3: psql works through the router in session, transaction and statement mode:
//! queries, one-string multi-statements (`-c`), COPY FROM STDIN / TO STDOUT, notices, errors
//! with their SQLSTATE, and statement mode's refusal of BEGIN.

use crate::pg_util::{psql, router, MODES};
use crate::support::unique_name;

#[test]
fn psql_works_in_every_mode() {
    for mode in MODES {
        let r = router(mode, 2, "");
        let t = unique_name(&format!("psql_{mode}"));
        let script = format!(
            "\\set VERBOSITY verbose\n\
             SELECT 1 + 1;\n\
             CREATE TABLE {t} (id int, name text);\n\
             INSERT INTO {t} VALUES (1, 'a');\n\
             COPY {t} FROM STDIN;\n2\tb\n3\tc\n\\.\n\
             COPY {t} TO STDOUT;\n\
             DO $$ BEGIN RAISE NOTICE 'psql notice %', 42; END $$;\n\
             SELECT 1/0;\n\
             SELECT 'after error';\n\
             BEGIN;\n\
             SELECT 'in block';\n\
             COMMIT;\n\
             DROP TABLE {t};\n"
        );
        let out = psql(r.port(), "main", "app", &["-q", "-At", "-v", "ON_ERROR_STOP=0"], &script);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // In statement mode BEGIN is refused and the SELECT after it runs on its own.
        assert_eq!(stdout, "2\n1\ta\n2\tb\n3\tc\nafter error\nin block\n", "{mode} stdout; stderr:\n{stderr}");
        assert!(stderr.contains("NOTICE:  00000: psql notice 42"), "{mode}: {stderr}");
        assert!(stderr.contains("ERROR:  22012: division by zero"), "{mode}: {stderr}");
        if mode == "statement" {
            assert!(stderr.contains("ERROR:  0A000: transaction blocks are not allowed"), "{mode}: {stderr}");
        } else {
            assert!(!stderr.contains("0A000"), "{mode}: {stderr}");
        }
        // One Query message with several statements; psql 15 prints every result.
        let out = psql(r.port(), "main", "app", &["-At", "-c", "SELECT 1; SELECT 2; SELECT 'three'"], "");
        assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n2\nthree\n", "{mode}");
        // A wrong password is refused with psql's usual message.
        let out = psql(r.port(), "main", "nope", &["-c", "SELECT 1"], "");
        assert!(!out.status.success(), "{mode}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("password authentication failed"), "{mode}");
    }
}
