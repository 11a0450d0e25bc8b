//! The one way into sqlparser's parser: every parse the router runs is bounded in stack and work.
//!
//! Three bounds, checked in this order:
//! - Chain operators (`a OR b OR ...`, `UNION` chains, `::` casts) are parsed in a loop into a
//!   left-deep tree whose walking and dropping recurse once per operator, so more than
//!   [`MAX_CHAIN_OPERATORS`] per statement is refused before any tree exists.
//! - Bracket, `CASE` and prefix-operator nesting deeper than [`MAX_NESTING`] is refused before
//!   parsing; sqlparser's own recursion limit ([`RECURSION_LIMIT`]) backs it up. Together they
//!   keep the deepest parse, walk and drop inside a 2 MiB stack even in a debug build.
//! - A work budget. sqlparser backtracks: where a construct may be read two ways (a type name
//!   or a column, a named argument or a plain one, ...) it parses the rest one way and, on
//!   failure, again the other way. Each nesting level can double the work, so a short input
//!   costs time exponential in its depth: 78 bytes of unbalanced parentheses took 1.7 s in a
//!   release build (fuzz finding of issue #12), and 60 KB under ten levels 0.3 s: a stalled core
//!   for every session it owns. The nesting limit shrinks this but cannot remove it, since ten
//!   nested function calls are legitimate SQL and already cost 2^10. So the parse is metered
//!   through the dialect's hooks, which sqlparser calls at every expression and operator:
//!   - at most [`BUDGET_BASE`] + [`BUDGET_PER_TOKEN`] × tokens hook calls in all, which stops
//!     backtracking over many small expressions;
//!   - no token position reached more than [`REPARSE_LIMIT`] / tokens times, which stops
//!     backtracking over long flat stretches (lists, type modifiers) that sqlparser scans
//!     without calling a hook: such a scan starts right after a hook, and is repeated only
//!     when that hook's position is reached again.
//!
//!   Once either runs out every later hook call fails, so the parse unwinds at once. Ordinary
//!   SQL uses a small part of both (tested over the analysis corpus and generated bulk SQL).
//!
//! A refused statement is simply not understood: analysis sends it to the primary and
//! fingerprinting falls back to the lexer.

use std::any::TypeId;
use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;

use sqlparser::ast::{BinaryOperator, Expr, Statement};
use sqlparser::dialect::{Dialect as SqlDialect, MySqlDialect, PostgreSqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::Dialect;

/// Most operator tokens one statement may hold (bounds the depth of left-deep trees).
pub const MAX_CHAIN_OPERATORS: usize = 1_000;

/// Deepest bracket / `CASE` / prefix-operator nesting accepted before parsing.
pub const MAX_NESTING: usize = 10;

/// sqlparser's recursion limit, behind [`MAX_NESTING`].
pub const RECURSION_LIMIT: usize = 24;

/// Parse-hook calls allowed per significant token, beyond [`BUDGET_BASE`]. Ordinary SQL needs
/// under 2, so a refused parse has cost a few times an ordinary one of its length (3-4x measured,
/// bench `analysis_hostile`).
pub const BUDGET_PER_TOKEN: usize = 4;

/// Parse-hook calls every statement may spend whatever its length: room for a few levels of
/// the doubling nested function calls cause (about 2^depth calls) in short statements.
pub const BUDGET_BASE: usize = 4_096;

/// Token positions × times reached, the bound on re-parsing: a statement of `n` tokens may
/// reach any one position `REPARSE_LIMIT / n` times (at least [`MIN_VISITS`]).
pub const REPARSE_LIMIT: usize = 1 << 20;

/// Times any position may be reached, however long the statement: the parse itself reaches
/// some positions a few times (prefix, operator and statement hooks).
pub const MIN_VISITS: usize = 16;

/// Why a statement was not parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The tokenizer rejected the text.
    #[error("{0}")]
    Tokenize(String),
    /// More chain operators than [`MAX_CHAIN_OPERATORS`].
    #[error("{0} operators")]
    TooComplex(usize),
    /// Nesting deeper than [`MAX_NESTING`].
    #[error("nesting {0}")]
    TooDeep(usize),
    /// The parse spent its whole work budget.
    #[error("parser work budget exhausted")]
    OverBudget,
    /// sqlparser reported a syntax error (or hit its recursion limit).
    #[error("{0}")]
    Syntax(String),
}

impl Refusal {
    /// The evidence label analysis records for this refusal.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Tokenize(_) | Refusal::Syntax(_) => "parse_error",
            Refusal::TooComplex(_) | Refusal::OverBudget => "too_complex",
            Refusal::TooDeep(_) => "too_deep",
        }
    }
}

/// Tokenizes `sql` the way the parser expects.
pub fn tokenize(sql: &str, dialect: Dialect) -> Result<Vec<TokenWithSpan>, Refusal> {
    // Caught like the parse's panics (see `parse_metered`).
    std::panic::catch_unwind(|| Tokenizer::new(sql_dialect(dialect), sql).tokenize_with_location())
        .map_err(|_| Refusal::Tokenize("sqlparser panicked".to_owned()))?
        .map_err(|e| Refusal::Tokenize(e.to_string()))
}

/// Parses one statement's (or one string's) tokens within all three bounds.
pub fn parse_tokens(tokens: Vec<TokenWithSpan>, dialect: Dialect) -> Result<Vec<Statement>, Refusal> {
    let shape = Shape::of(&tokens);
    if shape.chain_operators > MAX_CHAIN_OPERATORS {
        return Err(Refusal::TooComplex(shape.chain_operators));
    }
    if shape.max_nesting > MAX_NESTING {
        return Err(Refusal::TooDeep(shape.max_nesting));
    }
    parse_metered(tokens, dialect, shape.budget()).0
}

/// Hook calls and the most visits of one token position a parse may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Budget {
    calls: usize,
    visits: usize,
}

/// What a parse spent of its [`Budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spent {
    calls: usize,
    max_visits: usize,
}

/// Parses within `budget`; also returns what was spent.
fn parse_metered(
    tokens: Vec<TokenWithSpan>,
    dialect: Dialect,
    budget: Budget,
) -> (Result<Vec<Statement>, Refusal>, Spent) {
    let metered = Metered::new(sql_dialect(dialect), budget, tokens.len());
    // sqlparser 0.59 still unwraps in a few error paths (`FLUSH RELAY LOGS FOR CHANNEL` with no
    // name panics): a statement that makes it panic is simply not understood.
    let parsed = std::panic::catch_unwind(AssertUnwindSafe(|| {
        Parser::new(&metered)
            .with_recursion_limit(RECURSION_LIMIT)
            .with_tokens_with_locations(tokens)
            .parse_statements()
    }));
    let spent = metered.spent();
    let Ok(parsed) = parsed else {
        return (Err(Refusal::Syntax("sqlparser panicked".to_owned())), spent);
    };
    // Checked before the result: a parse that ran dry may have ended in an alternative reading
    // it would never have chosen with more work left.
    if metered.exhausted.get() {
        return (Err(Refusal::OverBudget), spent);
    }
    (parsed.map_err(|e| Refusal::Syntax(e.to_string())), spent)
}

/// Whether a panic at `location` was raised inside sqlparser, the panics [`tokenize`] and
/// [`parse_tokens`] catch (a process's panic hook may keep those quiet).
pub fn raised_in_sqlparser(location: &std::panic::Location<'_>) -> bool {
    location.file().contains("/sqlparser-")
}

fn sql_dialect(dialect: Dialect) -> &'static dyn SqlDialect {
    match dialect {
        Dialect::Postgres => &PostgreSqlDialect {},
        Dialect::MySql => &MySqlDialect {},
    }
}

/// What the pre-scan learns about a token list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    chain_operators: usize,
    max_nesting: usize,
    significant_tokens: usize,
}

impl Shape {
    fn budget(&self) -> Budget {
        let n = self.significant_tokens.max(1);
        Budget {
            calls: n.saturating_mul(BUDGET_PER_TOKEN).saturating_add(BUDGET_BASE),
            visits: (REPARSE_LIMIT / n).max(MIN_VISITS),
        }
    }

    fn of(tokens: &[TokenWithSpan]) -> Shape {
        let mut shape = Shape { chain_operators: 0, max_nesting: 0, significant_tokens: 0 };
        let mut depth = 0usize;
        // Consecutive prefix operators (NOT NOT x, - - x) nest like brackets do.
        let mut prefix_run = 0usize;
        for t in tokens {
            match &t.token {
                Token::Whitespace(_) | Token::EOF => continue,
                Token::Minus | Token::Plus | Token::Tilde => prefix_run += 1,
                Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::NOT => prefix_run += 1,
                _ => prefix_run = 0,
            }
            shape.significant_tokens += 1;
            shape.max_nesting = shape.max_nesting.max(depth + prefix_run);
            match &t.token {
                Token::LParen | Token::LBracket => {
                    depth += 1;
                    shape.max_nesting = shape.max_nesting.max(depth);
                }
                Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
                // CASE ... END nests without brackets and costs as much stack per level.
                Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::CASE => {
                    depth += 1;
                    shape.max_nesting = shape.max_nesting.max(depth);
                }
                Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::END => {
                    depth = depth.saturating_sub(1);
                }
                other if is_chain_operator(other) => shape.chain_operators += 1,
                _ => {}
            }
        }
        shape
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

/// A dialect that behaves exactly like `inner` and charges each parse-hook call to a [`Budget`].
///
/// sqlparser offers no other way to watch its work. Only methods that `PostgreSqlDialect` or
/// `MySqlDialect` override need forwarding (for the rest the trait default is what `inner` has
/// anyway); `parse_tokens_agree_with_the_plain_dialects` checks the forwarding over the analysis
/// corpus, and the list must be revisited when sqlparser is upgraded.
#[derive(Debug)]
struct Metered {
    inner: &'static dyn SqlDialect,
    budget: Budget,
    calls: Cell<usize>,
    /// Times each token position was reached by a hook call (the parser's index).
    visits: RefCell<Vec<u32>>,
    max_visits: Cell<usize>,
    exhausted: Cell<bool>,
}

impl Metered {
    fn new(inner: &'static dyn SqlDialect, budget: Budget, tokens: usize) -> Metered {
        Metered {
            inner,
            budget,
            calls: Cell::new(0),
            visits: RefCell::new(vec![0; tokens + 1]),
            max_visits: Cell::new(0),
            exhausted: Cell::new(false),
        }
    }

    fn spent(&self) -> Spent {
        Spent { calls: self.calls.get(), max_visits: self.max_visits.get() }
    }

    /// Charges one hook call at the parser's position; `Err` once the budget is gone. The
    /// recursion-limit error is the one sqlparser never swallows while backtracking, so the
    /// whole parse stops.
    fn spend(&self, parser: &Parser) -> Result<(), ParserError> {
        if self.exhausted.get() {
            return Err(ParserError::RecursionLimitExceeded);
        }
        let calls = self.calls.get() + 1;
        self.calls.set(calls);
        let mut visits = self.visits.borrow_mut();
        let at = parser.index().min(visits.len().saturating_sub(1));
        let seen = match visits.get_mut(at) {
            Some(v) => {
                *v = v.saturating_add(1);
                *v as usize
            }
            None => 0,
        };
        self.max_visits.set(self.max_visits.get().max(seen));
        if calls > self.budget.calls || seen > self.budget.visits {
            self.exhausted.set(true);
            return Err(ParserError::RecursionLimitExceeded);
        }
        Ok(())
    }
}

impl SqlDialect for Metered {
    fn dialect(&self) -> std::any::TypeId {
        // `dialect_of!(parser is PostgreSqlDialect)` checks compare this id.
        self.inner.dialect()
    }
    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        if let Err(e) = self.spend(parser) {
            return Some(Err(e));
        }
        self.inner.parse_prefix(parser)
    }
    fn parse_infix(&self, parser: &mut Parser, expr: &Expr, precedence: u8) -> Option<Result<Expr, ParserError>> {
        if let Err(e) = self.spend(parser) {
            return Some(Err(e));
        }
        // MySqlDialect::parse_infix (its only override: `DIV`) unwraps the right operand, so
        // `a DIV /` panics (sql_analyze fuzz finding). The same parse, with the error returned.
        if self.inner.dialect() == TypeId::of::<MySqlDialect>() {
            if !parser.parse_keyword(Keyword::DIV) {
                return None;
            }
            return Some(parser.parse_expr().map(|right| Expr::BinaryOp {
                left: Box::new(expr.clone()),
                op: BinaryOperator::MyIntegerDivide,
                right: Box::new(right),
            }));
        }
        self.inner.parse_infix(parser, expr, precedence)
    }
    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        if let Err(e) = self.spend(parser) {
            return Some(Err(e));
        }
        self.inner.get_next_precedence(parser)
    }
    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        if let Err(e) = self.spend(parser) {
            return Some(Err(e));
        }
        self.inner.parse_statement(parser)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        self.inner.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        self.inner.is_identifier_part(ch)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.inner.is_delimited_identifier_start(ch)
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.inner.identifier_quote_style(identifier)
    }
    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.inner.is_custom_operator_part(ch)
    }
    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        self.inner.is_table_factor_alias(explicit, kw, parser)
    }
    fn prec_value(&self, prec: Precedence) -> u8 {
        self.inner.prec_value(prec)
    }
    fn allow_extract_custom(&self) -> bool {
        self.inner.allow_extract_custom()
    }
    fn allow_extract_single_quotes(&self) -> bool {
        self.inner.allow_extract_single_quotes()
    }
    fn ignores_wildcard_escapes(&self) -> bool {
        self.inner.ignores_wildcard_escapes()
    }
    fn require_interval_qualifier(&self) -> bool {
        self.inner.require_interval_qualifier()
    }
    fn requires_single_line_comment_whitespace(&self) -> bool {
        self.inner.requires_single_line_comment_whitespace()
    }
    fn supports_alter_column_type_using(&self) -> bool {
        self.inner.supports_alter_column_type_using()
    }
    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.inner.supports_array_typedef_with_brackets()
    }
    fn supports_comma_separated_set_assignments(&self) -> bool {
        self.inner.supports_comma_separated_set_assignments()
    }
    fn supports_comment_on(&self) -> bool {
        self.inner.supports_comment_on()
    }
    fn supports_create_index_with_clause(&self) -> bool {
        self.inner.supports_create_index_with_clause()
    }
    fn supports_create_table_select(&self) -> bool {
        self.inner.supports_create_table_select()
    }
    fn supports_cross_join_constraint(&self) -> bool {
        self.inner.supports_cross_join_constraint()
    }
    fn supports_data_type_signed_suffix(&self) -> bool {
        self.inner.supports_data_type_signed_suffix()
    }
    fn supports_empty_projections(&self) -> bool {
        self.inner.supports_empty_projections()
    }
    fn supports_explain_with_utility_options(&self) -> bool {
        self.inner.supports_explain_with_utility_options()
    }
    fn supports_factorial_operator(&self) -> bool {
        self.inner.supports_factorial_operator()
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        self.inner.supports_filter_during_aggregation()
    }
    fn supports_geometric_types(&self) -> bool {
        self.inner.supports_geometric_types()
    }
    fn supports_group_by_expr(&self) -> bool {
        self.inner.supports_group_by_expr()
    }
    fn supports_insert_set(&self) -> bool {
        self.inner.supports_insert_set()
    }
    fn supports_interval_options(&self) -> bool {
        self.inner.supports_interval_options()
    }
    fn supports_limit_comma(&self) -> bool {
        self.inner.supports_limit_comma()
    }
    fn supports_listen_notify(&self) -> bool {
        self.inner.supports_listen_notify()
    }
    fn supports_load_extension(&self) -> bool {
        self.inner.supports_load_extension()
    }
    fn supports_match_against(&self) -> bool {
        self.inner.supports_match_against()
    }
    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_colon_operator()
    }
    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        self.inner.supports_named_fn_args_with_expr_name()
    }
    fn supports_nested_comments(&self) -> bool {
        self.inner.supports_nested_comments()
    }
    fn supports_notnull_operator(&self) -> bool {
        self.inner.supports_notnull_operator()
    }
    fn supports_numeric_literal_underscores(&self) -> bool {
        self.inner.supports_numeric_literal_underscores()
    }
    fn supports_numeric_prefix(&self) -> bool {
        self.inner.supports_numeric_prefix()
    }
    fn supports_set_names(&self) -> bool {
        self.inner.supports_set_names()
    }
    fn supports_string_escape_constant(&self) -> bool {
        self.inner.supports_string_escape_constant()
    }
    fn supports_string_literal_backslash_escape(&self) -> bool {
        self.inner.supports_string_literal_backslash_escape()
    }
    fn supports_string_literal_concatenation(&self) -> bool {
        self.inner.supports_string_literal_concatenation()
    }
    fn supports_table_hints(&self) -> bool {
        self.inner.supports_table_hints()
    }
    fn supports_unicode_string_literal(&self) -> bool {
        self.inner.supports_unicode_string_literal()
    }
    fn supports_user_host_grantee(&self) -> bool {
        self.inner.supports_user_host_grantee()
    }
}

#[cfg(test)]
mod tests;
