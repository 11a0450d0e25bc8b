use super::*;
use crate::protocol::pg::tag;

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

#[test]
fn the_startup_causal_token_is_adopted_and_never_sent_to_a_server() {
    let mut values = pairs(&[("application_name", "app"), ("QueryPilot.Causal_Token", "pg:0/10")]);
    assert_eq!(causal_token(&mut values).expect("valid"), Some(Token::At(crate::id::Position::Wal(16))));
    assert_eq!(values, pairs(&[("application_name", "app")]), "taken out of the settings");
    assert_eq!(causal_token(&mut values).expect("absent"), None);
    // Every token SHOW answers is accepted at startup too (#34).
    for (text, token) in [("primary", Token::Primary), ("", Token::Empty)] {
        let mut values = pairs(&[("querypilot.causal_token", text)]);
        assert_eq!(causal_token(&mut values).expect("issued by the router"), Some(token), "{text:?}");
        assert!(values.is_empty(), "{text:?}: taken out of the settings");
    }
    let mut bad = pairs(&[("querypilot.causal_token", "nonsense")]);
    assert_eq!(causal_token(&mut bad).expect_err("invalid").code, "22023");
}

#[test]
fn the_packet_wins_over_options_as_on_the_server() {
    let params = with_options(pairs(&[("Work_Mem", "2MB")]), Some("-c work_mem=1MB -c geqo=off")).expect("valid");
    assert_eq!(params.values, pairs(&[("geqo", "off"), ("Work_Mem", "2MB")]));
    assert!(params.options, "options set something, which the server checks");
    assert!(!with_options(pairs(&[("a", "1")]), None).expect("none").options);
    let refused = with_options(Vec::new(), Some("-x")).err().expect("not a setting");
    assert_eq!(refused.code, sqlstate::SYNTAX_ERROR);
}

#[test]
fn the_greeting_shows_the_clients_values_and_keeps_only_those_that_differ() {
    let server = pairs(&[("client_encoding", "UTF8"), ("DateStyle", "ISO, MDY"), ("application_name", "router")]);
    let client =
        ClientParams { values: pairs(&[("client_encoding", "utf-8"), ("datestyle", "ISO, MDY")]), options: false };
    let g = greeting(client, &server);
    let shown = pairs(&[("client_encoding", "UTF8"), ("DateStyle", "ISO, MDY"), ("application_name", "")]);
    assert_eq!(g.shown, shown, "the client's own values, the router's application name not among them");
    assert_eq!(
        g.state.settings().collect::<Vec<_>>(),
        vec![("application_name", "SET \"application_name\" TO ''")],
        "only what differs from the server's is replayed"
    );
    assert!(!g.check, "every value shown is spelled as the server spells it");
    let client = ClientParams { values: pairs(&[("DateStyle", "sql,dmy")]), options: false };
    assert!(greeting(client, &server).check, "only the server knows how it spells a DateStyle");
    let client = ClientParams { values: pairs(&[("application_name", "app")]), options: true };
    assert!(greeting(client, &server).check, "options are the server's to refuse");
}

#[test]
fn a_refused_startup_setting_keeps_the_servers_code_among_those_for_settings() {
    assert_eq!(startup_sqlstate("42501"), "42501");
    assert_eq!(startup_sqlstate("XX000"), INVALID_PARAMETER_VALUE);
}

#[test]
fn the_greeting_ends_ready_for_a_query() {
    let mut out = Vec::new();
    encode_greeting(&pairs(&[("TimeZone", "UTC")]), CancelKey { pid: 7, secret: 9 }, &mut out);
    assert!(out.windows(12).any(|w| w == b"TimeZone\0UTC"), "the parameters shown");
    let ready = [tag::backend::READY_FOR_QUERY, 0, 0, 0, 5, tag::tx_status::IDLE];
    assert!(out.ends_with(&ready), "then idle");
}
