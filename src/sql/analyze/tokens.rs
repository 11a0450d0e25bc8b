//! Token-level work done before parsing: statement splitting, complexity guards and the
//! lock-clause spellings sqlparser 0.59 does not parse.
//!
//! Why guards here: sqlparser bounds its own recursion, but long operator chains (`a OR b OR ...`,
//! `UNION` chains, `::` casts) are parsed in a loop into a left-deep tree whose walking and dropping
//! recurse once per operator. Counting those operators on the flat token list bounds the tree depth
//! before any tree exists, so analysis is safe on a small thread stack.

use sqlparser::dialect::Dialect as SqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Word};

use super::facts::LockStrength;

/// Most operator tokens one statement may hold (bounds the depth of left-deep trees).
pub(super) const MAX_CHAIN_OPERATORS: usize = 1_000;

/// Deepest bracket nesting accepted before parsing; the parser's own limit backs it up.
pub(super) const MAX_NESTING: usize = 10;

/// One statement's tokens plus what the pre-scan learned about it.
pub(super) struct Segment {
    /// Tokens to hand to the parser (lock clauses already normalized).
    pub tokens: Vec<TokenWithSpan>,
    /// Infix-capable operator tokens counted.
    pub chain_operators: usize,
    /// Deepest `(` / `[` nesting.
    pub max_nesting: usize,
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
pub(super) fn split(sql: &str, dialect: &dyn SqlDialect) -> Result<Vec<Segment>, String> {
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize_with_location()
        .map_err(|e| e.to_string())?;
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
    if tokens
        .iter()
        .all(|t| matches!(t.token, Token::Whitespace(_) | Token::EOF))
    {
        return;
    }
    let mut chain_operators = 0;
    let mut depth = 0usize;
    let mut max_nesting = 0;
    // Consecutive prefix operators (NOT NOT x, - - x) nest like brackets do.
    let mut prefix_run = 0usize;
    for t in &tokens {
        match &t.token {
            Token::Whitespace(_) => continue,
            Token::Minus | Token::Plus | Token::Tilde => prefix_run += 1,
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::NOT => {
                prefix_run += 1
            }
            _ => prefix_run = 0,
        }
        max_nesting = max_nesting.max(depth + prefix_run);
        match &t.token {
            Token::LParen | Token::LBracket => {
                depth += 1;
                max_nesting = max_nesting.max(depth);
            }
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            // CASE ... END nests without brackets and costs as much stack per level.
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::CASE => {
                depth += 1;
                max_nesting = max_nesting.max(depth);
            }
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::END => {
                depth = depth.saturating_sub(1);
            }
            other if is_chain_operator(other) => chain_operators += 1,
            _ => {}
        }
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
    let has_from = tokens
        .iter()
        .filter_map(unquoted)
        .any(|w| w.keyword == Keyword::FROM);
    let calc_found_rows = tokens
        .iter()
        .filter_map(unquoted)
        .any(|w| w.value.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS"));
    let (tokens, lock_phrases) = normalize_locks(tokens);
    out.push(Segment {
        tokens,
        chain_operators,
        max_nesting,
        lock_phrases,
        leading,
        has_from,
        calc_found_rows,
    });
}

fn unquoted(t: &TokenWithSpan) -> Option<&Word> {
    match &t.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w),
        _ => None,
    }
}

/// True for tokens that can extend an expression or set-operation chain in a loop.
fn is_chain_operator(t: &Token) -> bool {
    match t {
        Token::Word(w) => {
            w.quote_style.is_none()
                && matches!(
                    w.keyword,
                    Keyword::AND
                        | Keyword::OR
                        | Keyword::XOR
                        | Keyword::IS
                        | Keyword::IN
                        | Keyword::LIKE
                        | Keyword::ILIKE
                        | Keyword::BETWEEN
                        | Keyword::UNION
                        | Keyword::EXCEPT
                        | Keyword::INTERSECT
                        | Keyword::MINUS
                        | Keyword::COLLATE
                        | Keyword::AT
                        | Keyword::SIMILAR
                        | Keyword::REGEXP
                        | Keyword::RLIKE
                        | Keyword::DIV
                )
        }
        Token::Whitespace(_)
        | Token::Comma
        | Token::LParen
        | Token::RParen
        | Token::Period
        | Token::SemiColon
        | Token::LBracket
        | Token::RBracket
        | Token::LBrace
        | Token::RBrace
        | Token::Placeholder(_)
        | Token::Number(_, _)
        | Token::Char(_)
        | Token::EOF => false,
        other => {
            // Remaining tokens are string-like literals (start with a quote, `$` or a letter
            // prefix such as E'' / X'') or operators (punctuation).
            let text = other.to_string();
            !text.starts_with(|c: char| c.is_alphanumeric() || matches!(c, '\'' | '"' | '$' | '`'))
        }
    }
}

fn keyword_at(tokens: &[TokenWithSpan], idx: &[usize], i: usize, kw: Keyword) -> bool {
    match idx.get(i).and_then(|&j| tokens.get(j)) {
        Some(TokenWithSpan {
            token: Token::Word(w),
            ..
        }) => w.quote_style.is_none() && w.keyword == kw,
        _ => false,
    }
}

/// Finds row-lock clauses and rewrites the spellings sqlparser 0.59 lacks into ones it parses:
/// `FOR NO KEY UPDATE` → `FOR UPDATE`, `FOR KEY SHARE` → `FOR SHARE`,
/// `LOCK IN SHARE MODE` → `FOR SHARE`. The true strengths are returned so the facts stay exact;
/// the rewrite never changes anything but the lock clause.
fn normalize_locks(tokens: Vec<TokenWithSpan>) -> (Vec<TokenWithSpan>, Vec<LockStrength>) {
    // Indices of non-whitespace tokens, so phrases match across spaces and comments.
    let idx: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
        .map(|(i, _)| i)
        .collect();
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
        if at(i, Keyword::FOR)
            && at(i + 1, Keyword::NO)
            && at(i + 2, Keyword::KEY)
            && at(i + 3, Keyword::UPDATE)
        {
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
                t.token = Token::Word(Word {
                    value: "FOR".into(),
                    quote_style: None,
                    keyword: Keyword::FOR,
                });
            }
            t
        })
        .collect();
    (out, phrases)
}
