//! Statements whose text is not UTF-8: a client that set a non-UTF-8 `client_encoding`
//! (`LATIN9`, `WIN1252`, `SJIS`, ...) sends its queries in that encoding. The server converts
//! them; the router relays the client's bytes untouched and reads them only for what it must
//! know (routing, session effects), through a lossy decoding that keeps every ASCII byte.
//!
//! That reading is sound for the encodings whose non-ASCII bytes are never ASCII, which is all
//! of them except the client-only multi-byte ones (SJIS, BIG5, GBK, UHC, GB18030, JOHAB): a
//! session that switches to one of those is pinned to its backend connection for good (see
//! `SessionState::report`), so nothing it sends is tracked or moved.

use super::prepared::Expect;
use super::{End, Session};
use crate::protocol::pg::tag::frontend as client;
use crate::protocol::pg::{backend, sqlstate};
use crate::session::client_error::PgClientError;
use crate::session::engine::text::Text;

/// The NUL-terminated string at the start of `body`, and what follows it.
fn cstr(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = body.iter().position(|b| *b == 0)?;
    Some((body.get(..nul)?, body.get(nul + 1..)?))
}

impl Session {
    /// A Query or Parse (`tag`, whole message `raw`) whose text is not UTF-8.
    pub(super) async fn on_foreign_text(&mut self, tag: u8, raw: &[u8]) -> Result<(), End> {
        let body = super::body_of(raw).unwrap_or_default();
        let parsed = match tag {
            client::QUERY => cstr(body).map(|(q, _)| (&b""[..], q)),
            _ => cstr(body).and_then(|(name, rest)| cstr(rest).map(|(q, _)| (name, q))),
        };
        let Some((name, query)) = parsed else {
            return self.fatal(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "malformed message")).await;
        };
        let text = String::from_utf8_lossy(query);
        let refusal = if let Some(e) = self.statement_pooling_refusal(&text) {
            Some(e)
        } else if !name.is_empty() {
            // A named statement follows its client across connections under a name derived
            // from its text, which must be exact.
            Some(PgClientError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "a named prepared statement must be valid UTF-8 through the router; use the unnamed statement",
            ))
        } else {
            match self.route_statement(&Text::pg(&text), true, None).await {
                Ok(None) => None,
                Ok(Some(_)) => Some(PgClientError::new(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    "a translation rule matched a statement that is not valid UTF-8, which it cannot rewrite",
                )),
                Err(e) => Some(e),
            }
        };
        if let Some(e) = refusal {
            if tag == client::PARSE {
                return self.fail_batch(e);
            }
            e.encode(&mut self.io.out);
            backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
            return self.io.flush().await;
        }
        self.state.stage_sql(&text);
        if tag == client::QUERY {
            return self.on_simple(raw).await;
        }
        if raw.get(5) == Some(&0) {
            return self.forward_unnamed_parse(raw, None).await; // the unnamed statement (#36)
        }
        self.forward_ext(raw, Expect::Parse { swallow: false, key: None }).await
    }
}

#[cfg(test)]
mod tests {
    use super::cstr;

    #[test]
    fn splits_nul_terminated_strings() {
        assert_eq!(cstr(b"ab\0cd\0"), Some((&b"ab"[..], &b"cd\0"[..])));
        assert_eq!(cstr(b"ab"), None);
    }
}
