use super::*;

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn parses_every_spelling_of_a_setting() {
    assert_eq!(
        parse_options("-c statement_timeout=1234 -cDateStyle=SQL,DMY --search-path=a,b -c geqo=off"),
        Ok(pairs(&[("statement_timeout", "1234"), ("DateStyle", "SQL,DMY"), ("search_path", "a,b"), ("geqo", "off")]))
    );
    assert_eq!(parse_options("  "), Ok(vec![]));
    assert_eq!(
        parse_options(r"-c application_name=my\ app -c x.y=a\\b"),
        Ok(pairs(&[("application_name", "my app"), ("x.y", r"a\b")]))
    );
    assert_eq!(parse_options("-c search_path="), Ok(pairs(&[("search_path", "")])));
}

#[test]
fn refuses_what_it_cannot_apply() {
    assert_eq!(parse_options("-B 100"), Err(OptionsError::Unsupported("-B".into())));
    assert_eq!(parse_options("-c work_mem"), Err(OptionsError::MissingValue("-c work_mem".into())));
    assert_eq!(parse_options("--work_mem"), Err(OptionsError::MissingValue("--work_mem".into())));
    assert_eq!(parse_options("work_mem=1"), Err(OptionsError::Unsupported("work_mem=1".into())));
}

/// The malformed forms of PgBouncer's CVE-2026-107349 class, with the server's answers
/// (checked against PostgreSQL 15 in tests/it/frontdoor.rs).
#[test]
fn malformed_switches_get_the_servers_error_and_set_nothing() {
    for (options, message, code) in [
        ("-c", "invalid command-line argument for server process: -c", "42601"),
        ("-c search_path=a -c", "invalid command-line argument for server process: -c", "42601"),
        ("-c -c x.y=1", "-c -c requires a value", "42601"),
        ("-c a", "-c a requires a value", "42601"),
        ("--a", "--a requires a value", "42601"),
        ("-c=", "unrecognized configuration parameter \"\"", "42704"),
        ("-c=x", "unrecognized configuration parameter \"\"", "42704"),
        ("--=x", "unrecognized configuration parameter \"\"", "42704"),
        ("-c= -c", "unrecognized configuration parameter \"\"", "42704"),
        ("-- x.y=1", "invalid command-line argument for server process: x.y=1", "42601"),
        ("-", "invalid command-line argument for server process: -", "42601"),
    ] {
        let e = parse_options(options).expect_err(options);
        assert_eq!((e.to_string().as_str(), e.sqlstate()), (message, code), "{options}");
    }
    // A lone `--` ends the switches and sets nothing, as on the server.
    assert_eq!(parse_options("--"), Ok(vec![]));
    assert_eq!(parse_options("-c x.y=1 --"), Ok(pairs(&[("x.y", "1")])));
    // `=` after the first belongs to the value; a value may be empty.
    assert_eq!(parse_options("-c x.y==1= --a-b="), Ok(pairs(&[("x.y", "=1="), ("a_b", "")])));
}

#[test]
fn knows_the_spellings_of_utf8_and_the_unsafe_encodings() {
    for s in ["utf8", "UTF8", "utf-8", "'utf-8'", "Unicode"] {
        assert_eq!(canonical_utf8(s), Some("UTF8"), "{s}");
    }
    assert_eq!(canonical_utf8("latin9"), None);
    assert!(ascii_unsafe_encoding("SJIS") && ascii_unsafe_encoding("gb18030"));
    assert!(!ascii_unsafe_encoding("LATIN9") && !ascii_unsafe_encoding("EUC_JP") && !ascii_unsafe_encoding("UTF8"));
}
