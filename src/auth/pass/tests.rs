use super::*;
use crate::protocol::mysql::auth::{native_password_hash, native_password_token, native_password_token_from_stage1};

const SCRAMBLE: [u8; 20] = [7; 20];
const DECOY: [u8; 20] = [9; 20];

/// `password`'s `*HEX` entry, as `mysql.user` shows it.
fn hashed(password: &str) -> String {
    let hex: String = native_password_hash(password.as_bytes()).iter().map(|b| format!("{b:02X}")).collect();
    format!("*{hex}")
}

fn check(entry: Result<&str, Refusal>, password: &str, anonymous: bool) -> Result<NativeSecret, Refusal> {
    check_native(entry, (&SCRAMBLE, &native_password_token(password.as_bytes(), &SCRAMBLE)), anonymous, &DECOY)
}

#[test]
fn a_stored_hash_gives_back_what_logs_the_client_in_to_its_backend() {
    let entry = hashed("s3cret");
    let Ok(NativeSecret::Stage1(stage1)) = check(Ok(&entry), "s3cret", false) else { panic!("the right password") };
    let backend_scramble = [3; 20];
    assert_eq!(
        native_password_token_from_stage1(&stage1, &backend_scramble),
        native_password_token(b"s3cret", &backend_scramble),
        "answers a backend's challenge as the password would"
    );
    assert_eq!(check(Ok(&entry), "guess", false), Err(Refusal::WrongPassword));
}

#[test]
fn a_plaintext_entry_is_the_password() {
    assert_eq!(check(Ok("s3cret"), "s3cret", false), Ok(NativeSecret::Password("s3cret".into())));
    assert_eq!(check(Ok("s3cret"), "guess", false), Err(Refusal::WrongPassword));
}

#[test]
fn only_an_anonymous_listener_lets_a_user_without_a_password_through() {
    for denial in [Denial::Unknown, Denial::NoPassword] {
        assert_eq!(check(Err(Refusal::Denied(denial.clone())), "any", true), Ok(NativeSecret::Nothing));
        assert_eq!(check(Err(Refusal::Denied(denial.clone())), "any", false), Err(Refusal::Denied(denial)));
    }
    let failed = Refusal::QueryFailed("timeout".into());
    assert_eq!(check(Err(failed.clone()), "any", true), Err(failed), "the query's failure is no answer");
    assert_eq!(check(Err(Refusal::Denied(Denial::Expired)), "any", true), Err(Refusal::Denied(Denial::Expired)));
}

#[test]
fn a_secret_that_cannot_check_a_native_response_is_refused_as_unusable() {
    let md5 = "md5".to_owned() + &"a".repeat(32);
    assert_eq!(check(Ok(&md5), "s3cret", false), Err(Refusal::UnusableSecret("MD5 secret")));
    assert_eq!(check(Ok("*XYZ"), "s3cret", false), Err(Refusal::UnusableSecret("malformed secret")));
}
