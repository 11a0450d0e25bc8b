//! Value grammars (durations, sizes, keywords) and the position helpers.

use std::time::Duration;

use super::super::span::{find_table, path_at, LineIndex};
use super::super::value::{format_duration, format_size};
use super::*;

#[test]
fn durations_parse_in_every_unit() {
    let cases = [
        ("250ms", Duration::from_millis(250)),
        ("10s", Duration::from_secs(10)),
        ("5m", Duration::from_secs(300)),
        ("1h", Duration::from_secs(3600)),
        ("0s", Duration::ZERO),
        (" 2s ", Duration::from_secs(2)),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_duration(text), Ok(expected), "{text}");
    }
}

#[test]
fn malformed_durations_are_refused_with_a_reason() {
    for text in ["", "30", "s", "-1s", "1.5s", "10 sec", "1d", "10S"] {
        let err = parse_duration(text).unwrap_err();
        assert!(err.starts_with("invalid duration"), "{text}: {err}");
    }
    assert!(parse_duration("30").unwrap_err().contains("missing unit"));
    assert!(parse_duration("99999999999999999999h").unwrap_err().contains("too large"));
    assert!(parse_duration("18446744073709551615h").unwrap_err().contains("too large"));
}

#[test]
fn sizes_parse_bytes_and_binary_units() {
    let cases = [("512", 512), ("1B", 1), ("64KiB", 64 << 10), ("16MiB", 16 << 20), ("1GiB", 1 << 30), ("0", 0)];
    for (text, expected) in cases {
        assert_eq!(parse_size(text), Ok(expected), "{text}");
    }
}

#[test]
fn malformed_sizes_are_refused() {
    for text in ["", "MiB", "64MB", "64kib", "1.5GiB", "-1", "1TiB"] {
        assert!(parse_size(text).unwrap_err().starts_with("invalid size"), "{text}");
    }
    assert!(parse_size("17179869184GiB").unwrap_err().contains("too large"));
}

#[test]
fn formatting_picks_the_largest_exact_unit_and_round_trips() {
    let durations = [
        (Duration::from_millis(1500), "1500ms"),
        (Duration::from_secs(90), "90s"),
        (Duration::from_secs(600), "10m"),
        (Duration::from_secs(7200), "2h"),
        (Duration::ZERO, "0ms"),
    ];
    for (d, text) in durations {
        assert_eq!(format_duration(d), text);
        assert_eq!(parse_duration(text), Ok(d));
    }
    for (bytes, text) in
        [(64 << 20, "64MiB"), (3072, "3KiB"), (1536, "1536"), (1000, "1000"), (1 << 30, "1GiB"), (0, "0")]
    {
        assert_eq!(format_size(bytes), text);
        assert_eq!(parse_size(text), Ok(bytes));
    }
}

#[test]
fn keywords_parse_and_list_the_choices_on_error() {
    assert_eq!("postgres".parse(), Ok(Protocol::Postgres));
    assert_eq!("mysql".parse(), Ok(Protocol::MySql));
    assert_eq!("statement".parse(), Ok(PoolMode::Statement));
    assert_eq!("scram-sha-256".parse(), Ok(ClientAuth::ScramSha256));
    assert_eq!("auto".parse(), Ok(NormalizationStrategy::Auto));
    assert_eq!("hash".parse(), Ok(PatternKind::Hash));
    assert_eq!("error".parse(), Ok(ReplicaFallback::Error));
    assert_eq!(
        "Postgres".parse::<Protocol>(),
        Err("invalid protocol \"Postgres\": expected one of \"postgres\", \"mysql\"".to_string())
    );
    assert_eq!(PoolMode::Transaction.to_string(), "transaction");
}

#[test]
fn read_your_writes_accepts_keywords_and_windows() {
    assert_eq!("session".parse(), Ok(ReadYourWrites::Session));
    assert_eq!("none".parse(), Ok(ReadYourWrites::None));
    assert_eq!("2s".parse(), Ok(ReadYourWrites::Window(Duration::from_secs(2))));
    assert!("0s".parse::<ReadYourWrites>().unwrap_err().contains("write \"none\""));
    assert!("always".parse::<ReadYourWrites>().unwrap_err().starts_with("invalid read_your_writes"));
    assert_eq!(ReadYourWrites::Window(Duration::from_millis(500)).to_string(), "500ms");
}

#[test]
fn offsets_map_to_lines_and_character_columns() {
    let text = "a = 1\nnamé = \"x\"\n\nlast";
    let index = LineIndex::new(text);
    assert_eq!(index.position(0), (1, 1));
    assert_eq!(index.position(5), (1, 6));
    assert_eq!(index.position(6), (2, 1));
    // 'é' is two bytes but one column.
    assert_eq!(index.position(text.find('=').unwrap_or(0)), (1, 3));
    assert_eq!(index.position(text.find(" = \"x").unwrap_or(0) + 1), (2, 6));
    assert_eq!(index.position(text.find("last").unwrap_or(0)), (4, 1));
    assert_eq!(index.position(usize::MAX), (4, 5));
}

#[test]
fn path_at_follows_headers_array_indices_and_dotted_keys() {
    let text = "top = 1\n[[listeners]]\nbind = \"a\"\n[[listeners]]\nbind = \"b\"\n[pools.\"main\"]\nretry.deadline = \"1s\"\nsql = \"\"\"\n[fake]\nx = 1\n\"\"\"\nafter = 2\n";
    let at = |needle: &str| path_at(text, text.find(needle).unwrap_or(0));
    assert_eq!(at("top"), "top");
    assert_eq!(at("\"a\""), "listeners[0].bind");
    assert_eq!(at("\"b\""), "listeners[1].bind");
    assert_eq!(at("[pools"), "pools.main");
    assert_eq!(at("\"1s\""), "pools.main.retry.deadline");
    assert_eq!(at("x = 1"), "pools.main.sql");
    assert_eq!(at("after"), "pools.main.after");
}

#[test]
fn find_table_locates_headers_and_dotted_definitions() {
    let text = "[general]\n\n[pools]\nmain.backends = []\n[pools.other]\n";
    assert_eq!(find_table(text, &["pools", "main"]), text.find("main.backends"));
    assert_eq!(find_table(text, &["pools", "other"]), text.find("[pools.other]"));
    assert_eq!(find_table(text, &["pools", "missing"]), None);
    let dotted = "pools.x.backends = []\n";
    assert_eq!(find_table(dotted, &["pools", "x"]), Some(0));
}

mod never_panics {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Arbitrary text is either a config or a report whose positions lie inside the text.
        #[test]
        fn arbitrary_text(text in "\\PC{0,200}") {
            check(&text);
        }

        /// The example cut anywhere and spliced with junk exercises every error path.
        #[test]
        fn damaged_example(cut in 0usize..EXAMPLE.len(), junk in "[\\[\\]=\"'.a-z0-9 \\n]{0,12}") {
            let cut = (0..=cut).rev().find(|&i| EXAMPLE.is_char_boundary(i)).unwrap_or(0);
            let text = format!("{}{junk}{}", &EXAMPLE[..cut], &EXAMPLE[cut..]);
            check(&text);
        }
    }

    fn check(text: &str) {
        if let Err(errors) = Config::parse(text, FILE) {
            let lines = text.split('\n').count();
            assert!(!errors.issues.is_empty());
            for issue in &errors.issues {
                assert!(issue.line >= 1 && issue.line <= lines, "{issue:?}");
                assert!(issue.column >= 1, "{issue:?}");
            }
        }
    }
}
