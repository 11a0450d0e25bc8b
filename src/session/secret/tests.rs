use super::*;

/// The query user `qa` with `entry` (if any) as its auth file line.
fn identity(entry: Option<&str>) -> Result<PassThrough, String> {
    let toml = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\n\
                backends = [{ host = \"h\", port = 1 }]\n\n[routing]\ndefault_pool = \"main\"\n\n\
                [auth]\npg_query_user = \"qa\"\n";
    let mut config = Config::parse(toml, "t.toml").expect("valid config");
    let users = entry.map(|e| ("qa".to_owned(), e.to_owned())).into_iter().collect();
    config.auth.users = std::sync::Arc::new(users);
    let spec = config.auth.query.as_ref().and_then(|q| q.pg.clone()).expect("a PostgreSQL query");
    query_identity(&config, &spec)
}

#[test]
fn the_query_user_logs_in_with_what_its_entry_allows() {
    let md5 = "md5".to_owned() + &"a".repeat(32);
    assert!(matches!(identity(Some(&md5)).map(|w| w.secret), Ok(BackendSecret::Md5(s)) if s == md5));
    let stage1 = format!("sha1:{}", "0f".repeat(20));
    assert!(matches!(identity(Some(&stage1)).map(|w| w.secret), Ok(BackendSecret::NativeStage1(h)) if h == [15; 20]));
    assert!(matches!(identity(Some("hunter2")).map(|w| w.secret), Ok(BackendSecret::Password(p)) if p == "hunter2"));
    assert!(matches!(identity(None), Ok(w) if &*w.user == "qa" && matches!(w.secret, BackendSecret::Nothing)));
    let scram = "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=";
    let refused = identity(Some(scram)).expect_err("a verifier cannot log in");
    assert!(refused.contains("SCRAM-SHA-256 verifier") && !refused.contains("W22Z"), "{refused}");
    let hash = format!("*{}", "A".repeat(40));
    assert!(identity(Some(&hash)).is_err(), "a *HEX hash cannot log in either");
}
