//! A deliberately small HTTP/1.1 server side: one request per connection (`Connection: close`),
//! strict size caps checked before anything is buffered beyond them, no chunked bodies. The
//! parser is sans-IO (bytes in, request out) so it is tested without sockets; [`read_request`]
//! and [`Response::write_to`] do the I/O with deadlines.
//!
//! Implements the message syntax of RFC 9112 sections 2-3 and 6 as far as an admin API needs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Size caps of one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Request line plus headers, in bytes.
    pub max_head: usize,
    /// Number of header fields.
    pub max_headers: usize,
    /// Body bytes (`Content-Length`).
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_head: 8 * 1024, max_headers: 64, max_body: 64 * 1024 }
    }
}

/// Why a request was refused; each maps to a status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// Request line and headers exceed [`Limits::max_head`].
    #[error("request head larger than {0} bytes")]
    HeadTooLarge(usize),
    /// More header fields than [`Limits::max_headers`].
    #[error("more than {0} header fields")]
    TooManyHeaders(usize),
    /// The request line is not `METHOD SP /target SP HTTP/1.x`.
    #[error("malformed request line")]
    BadRequestLine,
    /// A header line is malformed (no colon, bad name, obsolete folding, not UTF-8).
    #[error("malformed header field")]
    BadHeader,
    /// Not HTTP/1.0 or HTTP/1.1.
    #[error("unsupported HTTP version")]
    Version,
    /// `Content-Length` is not a number or appears twice with different values.
    #[error("invalid Content-Length")]
    BadLength,
    /// `Transfer-Encoding` (chunked bodies) is not supported; refusing it also rules out
    /// request smuggling through conflicting framing.
    #[error("Transfer-Encoding is not supported; send Content-Length")]
    TransferEncoding,
    /// The declared body exceeds [`Limits::max_body`].
    #[error("request body larger than {0} bytes")]
    BodyTooLarge(usize),
    /// The client did not send a whole request in time, or the connection failed.
    #[error("incomplete request")]
    Incomplete,
}

impl HttpError {
    /// The response status for this error.
    pub fn status(&self) -> u16 {
        match self {
            Self::HeadTooLarge(_) | Self::TooManyHeaders(_) => 431,
            Self::BadRequestLine | Self::BadHeader | Self::BadLength => 400,
            Self::Version => 505,
            Self::TransferEncoding => 501,
            Self::BodyTooLarge(_) => 413,
            Self::Incomplete => 408,
        }
    }
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method, as sent (methods are case-sensitive).
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// The raw query string after `?`, if any.
    pub query: Option<String>,
    /// Header fields with lower-cased names, in order.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The first value of query parameter `name`, decoded as a form value (`+` is a space,
    /// `%XX` a byte; malformed escapes are kept as written, invalid UTF-8 replaced).
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.as_deref()?.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k) == name).then(|| form_decode(v))
        })
    }
}

/// Decodes one `application/x-www-form-urlencoded` component.
fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn parse_request_line(line: &str) -> Result<(String, String, Option<String>), HttpError> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::BadRequestLine);
    };
    if !is_token(method) || !target.starts_with('/') || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(HttpError::BadRequestLine);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(if version.starts_with("HTTP/") { HttpError::Version } else { HttpError::BadRequestLine });
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
        None => (target.to_owned(), None),
    };
    Ok((method.to_owned(), path, query))
}

fn parse_header(line: &str) -> Result<(String, String), HttpError> {
    let (name, value) = line.split_once(':').ok_or(HttpError::BadHeader)?;
    // A name followed by whitespace, or a folded continuation line, is refused (RFC 9112 5.1, 5.2).
    if !is_token(name) {
        return Err(HttpError::BadHeader);
    }
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(HttpError::BadHeader);
    }
    Ok((name.to_ascii_lowercase(), value.to_owned()))
}

fn content_length(headers: &[(String, String)], limits: &Limits) -> Result<usize, HttpError> {
    let mut length: Option<usize> = None;
    for (_, v) in headers.iter().filter(|(n, _)| n == "content-length") {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HttpError::BadLength);
        }
        // Anything longer than the cap is refused without parsing huge numbers.
        let n = if v.len() > 12 { usize::MAX } else { v.parse().map_err(|_| HttpError::BadLength)? };
        if length.is_some_and(|l| l != n) {
            return Err(HttpError::BadLength);
        }
        length = Some(n);
    }
    let n = length.unwrap_or(0);
    if n > limits.max_body {
        return Err(HttpError::BodyTooLarge(limits.max_body));
    }
    Ok(n)
}

/// Parses one request from the start of `buf`: `Ok(None)` while more bytes are needed, else the
/// request and how many bytes it took. Never panics, whatever `buf` holds.
pub fn parse(buf: &[u8], limits: &Limits) -> Result<Option<(Request, usize)>, HttpError> {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > limits.max_head { Err(HttpError::HeadTooLarge(limits.max_head)) } else { Ok(None) };
    };
    if head_end > limits.max_head {
        return Err(HttpError::HeadTooLarge(limits.max_head));
    }
    let head = buf.get(..head_end).ok_or(HttpError::BadRequestLine)?;
    let head = std::str::from_utf8(head).map_err(|_| HttpError::BadHeader)?;
    let mut lines = head.split("\r\n");
    let (method, path, query) = parse_request_line(lines.next().unwrap_or_default())?;
    let mut headers = Vec::new();
    for line in lines {
        if headers.len() == limits.max_headers {
            return Err(HttpError::TooManyHeaders(limits.max_headers));
        }
        headers.push(parse_header(line)?);
    }
    if headers.iter().any(|(n, _)| n == "transfer-encoding") {
        return Err(HttpError::TransferEncoding);
    }
    let length = content_length(&headers, limits)?;
    let body_start = head_end + 4;
    let Some(body) = buf.get(body_start..body_start.saturating_add(length)) else {
        return Ok(None);
    };
    Ok(Some((Request { method, path, query, headers, body: body.to_vec() }, body_start + length)))
}

/// Reads one request from `stream`, giving up at `deadline` (a slow client cannot hold the
/// server longer than that).
pub fn read_request(stream: &mut TcpStream, limits: &Limits, deadline: Instant) -> Result<Request, HttpError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((req, _)) = parse(&buf, limits)? {
            return Ok(req);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).is_err() {
            return Err(HttpError::Incomplete);
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(HttpError::Incomplete),
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
        }
    }
}

/// A response; always sent with `Content-Length` and `Connection: close`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Additional header fields.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// `Content-Type` of JSON bodies.
pub const JSON: &str = "application/json";

impl Response {
    /// A JSON body.
    pub fn json<T: serde::Serialize>(status: u16, value: &T) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response { status, content_type: JSON, headers: Vec::new(), body },
            Err(e) => Response::error(500, &format!("cannot encode the response: {e}")),
        }
    }

    /// `{"error": message}` with `status`.
    pub fn error(status: u16, message: &str) -> Response {
        let body = serde_json::json!({ "error": message }).to_string().into_bytes();
        Response { status, content_type: JSON, headers: Vec::new(), body }
    }

    /// A text body.
    pub fn text(status: u16, content_type: &'static str, body: String) -> Response {
        Response { status, content_type, headers: Vec::new(), body: body.into_bytes() }
    }

    /// Adds a header field.
    pub fn with_header(mut self, name: &'static str, value: String) -> Response {
        self.headers.push((name, value));
        self
    }

    /// Writes the whole response.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (n, v) in &self.headers {
            head.push_str(n);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        w.write_all(head.as_bytes())?;
        w.write_all(&self.body)?;
        w.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
