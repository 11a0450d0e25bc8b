use super::causal_token;
use crate::id::Position;
use crate::id::Token;

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn the_startup_causal_token_is_adopted_and_never_sent_to_a_server() {
    let mut values = params(&[("application_name", "app"), ("QueryPilot.Causal_Token", "pg:0/10")]);
    assert_eq!(causal_token(&mut values).expect("valid"), Some(Token::At(Position::Wal(16))));
    assert_eq!(values, params(&[("application_name", "app")]), "taken out of the settings");
    assert_eq!(causal_token(&mut values).expect("absent"), None);
    // Every token SHOW answers is accepted at startup too (#34).
    for (text, token) in [("primary", Token::Primary), ("", Token::Empty)] {
        let mut values = params(&[("querypilot.causal_token", text)]);
        assert_eq!(causal_token(&mut values).expect("issued by the router"), Some(token), "{text:?}");
        assert!(values.is_empty(), "{text:?}: taken out of the settings");
    }
    let mut bad = params(&[("querypilot.causal_token", "nonsense")]);
    assert_eq!(causal_token(&mut bad).expect_err("invalid").code, "22023");
}
