//! Token-level work done before parsing: statement splitting, the leading words the fallback
//! classifier reads, and the lock-clause spellings sqlparser 0.59 does not parse. The complexity
//! guards live with the parser, in [`crate::parse`].

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Word};

use super::facts::LockStrength;
use crate::parse::{self, Refusal};
use crate::Dialect;

/// One statement's tokens plus what the pre-scan learned about it.
pub(super) struct Segment {
    /// Tokens to hand to the parser (lock clauses already normalized).
    pub tokens: Vec<TokenWithSpan>,
    /// Lock clauses as written, strongest meaning kept (FOR NO KEY UPDATE etc.).
    pub lock_phrases: Vec<LockStrength>,
    /// First three words, upper-cased when unquoted, for the fallback classifier.
    pub leading: Vec<String>,
    /// An unquoted FROM keyword appears (tells COPY FROM apart when COPY does not parse).
    pub has_from: bool,
    /// MySQL SQL_CALC_FOUND_ROWS appears (sqlparser parses it as a plain select item).
    pub calc_found_rows: bool,
}

/// Tokenizes `sql` and splits it into statements at top-level semicolons; empty statements
/// (only whitespace/comments) are dropped.
pub(super) fn split(sql: &str, dialect: Dialect) -> Result<Vec<Segment>, Refusal> {
    let tokens = parse::tokenize(sql, dialect)?;
    let mut segments = Vec::new();
    let mut current = Vec::new();
    for t in tokens {
        if t.token == Token::SemiColon {
            push_segment(&mut segments, std::mem::take(&mut current));
        } else {
            current.push(t);
        }
    }
    push_segment(&mut segments, current);
    Ok(segments)
}

fn push_segment(out: &mut Vec<Segment>, tokens: Vec<TokenWithSpan>) {
    if tokens.iter().all(|t| matches!(t.token, Token::Whitespace(_) | Token::EOF)) {
        return;
    }
    let leading = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .take(3)
        .map(|t| match &t.token {
            Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
            other => other.to_string(),
        })
        .collect();
    let has_from = tokens.iter().filter_map(unquoted).any(|w| w.keyword == Keyword::FROM);
    let calc_found_rows =
        tokens.iter().filter_map(unquoted).any(|w| w.value.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS"));
    let (tokens, lock_phrases) = normalize_locks(tokens);
    out.push(Segment { tokens, lock_phrases, leading, has_from, calc_found_rows });
}

fn unquoted(t: &TokenWithSpan) -> Option<&Word> {
    match &t.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w),
        _ => None,
    }
}

fn keyword_at(tokens: &[TokenWithSpan], idx: &[usize], i: usize, kw: Keyword) -> bool {
    match idx.get(i).and_then(|&j| tokens.get(j)) {
        Some(TokenWithSpan { token: Token::Word(w), .. }) => w.quote_style.is_none() && w.keyword == kw,
        _ => false,
    }
}

/// Finds row-lock clauses and rewrites the spellings sqlparser 0.59 lacks into ones it parses:
/// `FOR NO KEY UPDATE` → `FOR UPDATE`, `FOR KEY SHARE` → `FOR SHARE`,
/// `LOCK IN SHARE MODE` → `FOR SHARE`. The true strengths are returned so the facts stay exact;
/// the rewrite never changes anything but the lock clause.
fn normalize_locks(tokens: Vec<TokenWithSpan>) -> (Vec<TokenWithSpan>, Vec<LockStrength>) {
    // Indices of non-whitespace tokens, so phrases match across spaces and comments.
    let idx: Vec<usize> =
        tokens.iter().enumerate().filter(|(_, t)| !matches!(t.token, Token::Whitespace(_))).map(|(i, _)| i).collect();
    let mut drop = vec![false; tokens.len()];
    let mut replace_with_for = Vec::new();
    let mut phrases = Vec::new();
    let at = |i: usize, kw: Keyword| keyword_at(&tokens, &idx, i, kw);
    for i in 0..idx.len() {
        let mark = |k: usize, drop: &mut Vec<bool>| {
            if let Some(slot) = idx.get(k).and_then(|&j| drop.get_mut(j)) {
                *slot = true;
            }
        };
        if at(i, Keyword::FOR) && at(i + 1, Keyword::NO) && at(i + 2, Keyword::KEY) && at(i + 3, Keyword::UPDATE) {
            phrases.push(LockStrength::NoKeyUpdate);
            mark(i + 1, &mut drop);
            mark(i + 2, &mut drop);
        } else if at(i, Keyword::FOR) && at(i + 1, Keyword::KEY) && at(i + 2, Keyword::SHARE) {
            phrases.push(LockStrength::KeyShare);
            mark(i + 1, &mut drop);
        } else if at(i, Keyword::FOR) && at(i + 1, Keyword::UPDATE) {
            phrases.push(LockStrength::Update);
        } else if at(i, Keyword::FOR) && at(i + 1, Keyword::SHARE) {
            phrases.push(LockStrength::Share);
        } else if at(i, Keyword::LOCK)
            && at(i + 1, Keyword::IN)
            && at(i + 2, Keyword::SHARE)
            && at(i + 3, Keyword::MODE)
        {
            phrases.push(LockStrength::Share);
            if let Some(&j) = idx.get(i) {
                replace_with_for.push(j);
            }
            mark(i + 1, &mut drop);
            mark(i + 3, &mut drop);
        }
    }
    if !drop.contains(&true) && replace_with_for.is_empty() {
        return (tokens, phrases);
    }
    let out = tokens
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !drop.get(*i).copied().unwrap_or(false))
        .map(|(i, mut t)| {
            if replace_with_for.contains(&i) {
                t.token = Token::Word(Word { value: "FOR".into(), quote_style: None, keyword: Keyword::FOR });
            }
            t
        })
        .collect();
    (out, phrases)
}
