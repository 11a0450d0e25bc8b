//! The request parser: well-formed requests, every limit, malformed input never panics.

use proptest::prelude::*;

use super::*;

fn lim() -> Limits {
    Limits { max_head: 256, max_headers: 4, max_body: 16 }
}

fn parse_all(s: &str) -> Result<Option<(Request, usize)>, HttpError> {
    parse(s.as_bytes(), &lim())
}

#[test]
fn parses_a_request_with_query_headers_and_body() {
    let raw =
        "POST /api/reload?dry=1 HTTP/1.1\r\nHost: x\r\nAuthorization:  Bearer t \r\nContent-Length: 3\r\n\r\nabcEXTRA";
    let (req, used) = parse_all(raw).expect("valid").expect("complete");
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/api/reload");
    assert_eq!(req.query.as_deref(), Some("dry=1"));
    assert_eq!(req.header("authorization"), Some("Bearer t"));
    assert_eq!(req.body, b"abc");
    assert_eq!(used, raw.len() - "EXTRA".len());
}

#[test]
fn query_parameters_are_form_decoded() {
    let req = Request {
        method: "GET".into(),
        path: "/x".into(),
        query: Some("sql=SELECT+%2A+FROM+t+WHERE+a%3D%27%C3%A9%27&user=&bad=%zz%4&limit=5".into()),
        headers: Vec::new(),
        body: Vec::new(),
    };
    assert_eq!(req.query_param("sql").as_deref(), Some("SELECT * FROM t WHERE a='é'"));
    assert_eq!(req.query_param("user").as_deref(), Some(""));
    assert_eq!(req.query_param("bad").as_deref(), Some("%zz%4"));
    assert_eq!(req.query_param("limit").as_deref(), Some("5"));
    assert_eq!(req.query_param("database"), None);
    let none = Request { query: None, ..req };
    assert_eq!(none.query_param("sql"), None);
}

#[test]
fn needs_more_bytes_until_head_and_body_are_complete() {
    let raw = "GET /health HTTP/1.0\r\nContent-Length: 2\r\n\r\nok";
    for cut in 0..raw.len() {
        assert_eq!(parse_all(&raw[..cut]), Ok(None), "prefix of {cut} bytes");
    }
    assert!(parse_all(raw).expect("valid").is_some());
}

#[test]
fn every_limit_and_malformation_has_its_status() {
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(300));
    let cases: Vec<(String, u16)> = vec![
        (long.clone(), 431),
        (long[..280].to_owned(), 431), // no end of head yet, but already over the cap
        ("GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n\r\n".into(), 431),
        ("GET / HTTP/1.1\r\nContent-Length: 17\r\n\r\n".into(), 413),
        ("GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n".into(), 413),
        ("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".into(), 400),
        ("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n".into(), 400),
        ("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".into(), 501),
        ("GET / HTTP/2.0\r\n\r\n".into(), 505),
        ("GET / FTP/1.0\r\n\r\n".into(), 400),
        ("GET  / HTTP/1.1\r\n\r\n".into(), 400),
        ("GET http://x/ HTTP/1.1\r\n\r\n".into(), 400),
        ("G(T / HTTP/1.1\r\n\r\n".into(), 400),
        ("GET / HTTP/1.1\r\nNo colon\r\n\r\n".into(), 400),
        ("GET / HTTP/1.1\r\nName : v\r\n\r\n".into(), 400),
        ("GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n".into(), 400),
        ("\r\n\r\n".into(), 400),
    ];
    for (raw, status) in cases {
        let err = parse_all(&raw).expect_err(&raw);
        assert_eq!(err.status(), status, "{raw:?}: {err}");
    }
    let bad_utf8 = b"GET / HTTP/1.1\r\nX: \xff\r\n\r\n";
    assert_eq!(parse(bad_utf8, &lim()), Err(HttpError::BadHeader));
}

#[test]
fn responses_are_framed_and_close_the_connection() {
    let mut out = Vec::new();
    Response::error(404, "no \"such\" route").with_header("Allow", "GET".into()).write_to(&mut out).expect("write");
    let text = String::from_utf8(out).expect("utf8");
    let (head, body) = text.split_once("\r\n\r\n").expect("head");
    assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"));
    assert!(head.contains("Connection: close") && head.contains("Allow: GET"));
    assert!(head.contains(&format!("Content-Length: {}", body.len())));
    let v: serde_json::Value = serde_json::from_str(body).expect("json");
    assert_eq!(v["error"], "no \"such\" route");
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse(&bytes, &lim());
    }

    #[test]
    fn mutated_requests_never_panic(pos in 0usize..60, byte in any::<u8>()) {
        let mut raw = b"GET /api/pools?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok".to_vec();
        if let Some(b) = raw.get_mut(pos) {
            *b = byte;
        }
        if let Ok(Some((_, used))) = parse(&raw, &lim()) {
            prop_assert!(used <= raw.len());
        }
    }
}
