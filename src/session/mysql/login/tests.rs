use std::cell::Cell;

use super::*;
use crate::protocol::mysql::auth::native_password_token;

fn pool() -> PoolConfig {
    let toml = "[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"app\"\n\
                password = \"s3cret\"\ndatabase = \"app\"\nbackends = [{ host = \"127.0.0.1\", port = 3306 }]\n\n\
                [routing]\ndefault_pool = \"main\"\n";
    let config = Config::parse(toml, "t.toml").expect("valid config");
    config.pool("main").expect("pool").clone()
}

#[test]
fn every_failed_login_runs_the_same_verification_and_gets_the_same_error() {
    let pool = pool();
    let scramble = [7u8; 20];
    let right = native_password_token(b"s3cret", &scramble);
    let wrong = native_password_token(b"guess", &scramble);
    let cases: [(&str, &[u8], bool); 5] = [
        ("app", &right, true),
        ("app", &wrong, false),
        ("nobody", &right, false),
        ("nobody", &wrong, false),
        ("app", b"", false),
    ];
    for (user, token, ok) in cases {
        let calls = Cell::new(0);
        let verified_against = Cell::new(String::new());
        let res = check_with(&pool, (user, None), token.is_empty(), false, |password| {
            calls.set(calls.get() + 1);
            verified_against.set(password.to_owned());
            native_password_verify(password.as_bytes(), &scramble, token)
        });
        assert_eq!(calls.get(), 1, "{user}: the token is verified exactly once, whoever asks");
        assert_eq!(verified_against.take(), "s3cret", "{user}: always against the pool's secret");
        match (res, ok) {
            (Ok(()), true) => {}
            (Err(e), false) => {
                assert_eq!(e.number, ER_ACCESS_DENIED_ERROR, "{user}");
                let using = if token.is_empty() { "NO" } else { "YES" };
                assert_eq!(e.message, format!("Access denied for user '{user}'@'localhost' (using password: {using})"));
            }
            (res, _) => panic!("{user} with {token:?}: unexpected {res:?}"),
        }
    }
    // The public entry point agrees with the seam.
    let reason = Cell::new(AuthFailure::WrongPassword);
    assert!(check_password(&pool, None, ("app", None), (&scramble, &right), false, &reason).is_ok());
    let refused = check_password(&pool, None, ("nobody", "10.1.2.3".parse().ok()), (&scramble, &right), false, &reason);
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.message),
        Err("Access denied for user 'nobody'@'10.1.2.3' (using password: YES)".to_owned()),
        "the server's text, naming the client's address"
    );
}
