//! Route hints: a leading comment `/* querypilot: route=primary */` (or `route=replica`) lets an
//! application force where one statement runs.
//!
//! Only comments before the first token count, so a hint-looking string or a comment later in the
//! statement is never obeyed. Matching is ASCII case-insensitive and tolerant of whitespace. A
//! comment that addresses `querypilot` but says something else is reported as
//! [`RouteHint::Invalid`] so the router can tell the user instead of silently ignoring it.
//! Pure text scanning; depends on nothing else.

/// What a leading hint comment asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteHint {
    /// `route=primary`: run on the primary.
    Primary,
    /// `route=replica`: a replica may run it.
    Replica,
    /// A `querypilot:` comment the router does not understand (unknown key or value).
    Invalid,
}

/// The route hint in the comments leading `sql`, if any; the first `querypilot:` comment wins.
///
/// Recognizes `/* .. */` (first `*/` closes it), `-- ..` and `# ..` line comments before the first
/// token. A MySQL `/*! .. */` executable comment is code and ends the search.
pub fn route_hint(sql: &str) -> Option<RouteHint> {
    // Most statements start with their first word, before which no comment can be: settled by
    // one byte rather than the trimming below (~45 instructions a statement, #39).
    if sql.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let mut rest = sql;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
        if let Some(body) = rest.strip_prefix("/*") {
            if body.starts_with('!') {
                return None;
            }
            let end = body.find("*/")?;
            if let Some(hint) = body.get(..end).and_then(parse_body) {
                return Some(hint);
            }
            rest = body.get(end + 2..)?;
        } else if rest.starts_with("--") || rest.starts_with('#') {
            rest = rest.find('\n').and_then(|n| rest.get(n + 1..))?;
        } else {
            return None;
        }
    }
}

/// `querypilot: route = value` inside a comment; `None` when the comment is not addressed to us.
fn parse_body(body: &str) -> Option<RouteHint> {
    let body = body.trim_matches(|c: char| c.is_ascii_whitespace());
    let prefix = body.get(..10)?;
    if !prefix.eq_ignore_ascii_case("querypilot") {
        return None;
    }
    let after = body.get(10..)?.trim_start();
    // `querypilotx` is some other word, not our prefix.
    let Some(directive) = after.strip_prefix(':') else {
        return (after.is_empty() || !after.starts_with(|c: char| c.is_ascii_alphanumeric()))
            .then_some(RouteHint::Invalid);
    };
    let Some((key, value)) = directive.split_once('=') else { return Some(RouteHint::Invalid) };
    if !key.trim().eq_ignore_ascii_case("route") {
        return Some(RouteHint::Invalid);
    }
    let value = value.trim();
    Some(if value.eq_ignore_ascii_case("primary") {
        RouteHint::Primary
    } else if value.eq_ignore_ascii_case("replica") {
        RouteHint::Replica
    } else {
        RouteHint::Invalid
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn recognizes_leading_hints() {
        let cases = [
            ("/* querypilot: route=primary */ SELECT 1", Some(RouteHint::Primary)),
            ("/*querypilot:route=replica*/SELECT 1", Some(RouteHint::Replica)),
            ("  \n/*  QueryPilot :  ROUTE = Replica  */ SELECT 1", Some(RouteHint::Replica)),
            ("-- note\n/* querypilot: route=primary */ SELECT 1", Some(RouteHint::Primary)),
            ("# note\n/* querypilot: route=replica */ SELECT 1", Some(RouteHint::Replica)),
            ("/* app=web */ /* querypilot: route=replica */ SELECT 1", Some(RouteHint::Replica)),
            ("/* querypilot: route=foo */ SELECT 1", Some(RouteHint::Invalid)),
            ("/* querypilot: mode=replica */ SELECT 1", Some(RouteHint::Invalid)),
            ("/* querypilot: route */ SELECT 1", Some(RouteHint::Invalid)),
            ("/* querypilot */ SELECT 1", Some(RouteHint::Invalid)),
            ("/* querypilot: route=primary replica */ SELECT 1", Some(RouteHint::Invalid)),
        ];
        for (sql, want) in cases {
            assert_eq!(route_hint(sql), want, "{sql}");
        }
    }

    #[test]
    fn ignores_everything_that_is_not_a_leading_hint() {
        for sql in [
            "SELECT 1 /* querypilot: route=replica */",
            "SELECT '/* querypilot: route=replica */'",
            "/* querypilotx: route=replica */ SELECT 1",
            "/* other comment */ SELECT 1",
            "/*!40101 SET x=1 */ /* querypilot: route=replica */",
            "/* querypilot: route=replica",
            "-- querypilot: route=replica",
            "",
        ] {
            assert_eq!(route_hint(sql), None, "{sql}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}|[/*#\\-\n :=a-zA-Z]{0,40}") {
            let _ = route_hint(&s);
            let _ = route_hint(&format!("/* querypilot:{s}"));
        }
    }
}
