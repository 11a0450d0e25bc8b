//! What a session reads from a statement's text besides its routing key (#39): its session
//! effects, the transaction block it opens, and whether it is about the causal token. Each has
//! a byte prefilter that settles the common text (no effect word, no `BEGIN`/`START`, no
//! `causal_token`) without the lexer; asked one after another they were three scans of every
//! statement. [`Words`] reads the three prefilters in one pass, over the union of their word
//! lists, and each answer is then the separate function's given its own prefilter's bit
//! (`session_effects_named`, `opens_transaction_named`, `token_use_named`): the same answers,
//! one scan.
//!
//! The memo keeps a repeated parameterized text's whole [`Reading`]; a text with literals in it
//! (every simple-protocol statement) is asked about three times while it is handled, so [`Last`]
//! keeps the words of the last one read.

use super::causal::{token_use_named, TokenUse, TOKEN_WORD};
use super::dialect;
use crate::config::Protocol;
use crate::sql::analyze::{
    mentioned, opens_transaction_named, session_effects_named, Effects, Initials, MYSQL_EFFECT_WORDS, OPENER_WORDS,
    PG_EFFECT_WORDS,
};

/// A dialect's effect words, then the opener words, then the token's: bit `i` of what
/// [`mentioned`] finds is word `i`.
const fn words<const E: usize, const N: usize>(effects: [&'static str; E]) -> [&'static str; N] {
    assert!(E + OPENER_WORDS.len() + 1 == N, "the effect words, the opener words and the token's");
    let mut all = [""; N];
    let mut i = 0;
    while i < E {
        all[i] = effects[i];
        i += 1;
    }
    while i < E + OPENER_WORDS.len() {
        all[i] = OPENER_WORDS[i - E];
        i += 1;
    }
    all[N - 1] = TOKEN_WORD;
    all
}

const PG_WORDS: [&str; 12] = words(PG_EFFECT_WORDS);
const MYSQL_WORDS: [&str; 10] = words(MYSQL_EFFECT_WORDS);
const PG_INITIALS: Initials<12> = Initials::of(&PG_WORDS);
const MYSQL_INITIALS: Initials<9> = Initials::of(&MYSQL_WORDS);

/// Which prefilters a text passes: whether it names an effect word of its dialect, an opener
/// word, the token's word.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Words {
    effects: bool,
    opener: bool,
    token: bool,
}

impl Words {
    /// The words of `sql` in `protocol`'s dialect, in one pass.
    pub(super) fn of(sql: &str, protocol: Protocol) -> Words {
        let (found, effects) = match protocol {
            Protocol::Postgres => (mentioned(sql, &PG_WORDS, &PG_INITIALS), PG_EFFECT_WORDS.len()),
            Protocol::MySql => (mentioned(sql, &MYSQL_WORDS, &MYSQL_INITIALS), MYSQL_EFFECT_WORDS.len()),
        };
        let opener = (1u16 << OPENER_WORDS.len()) - 1;
        Words {
            effects: found & ((1 << effects) - 1) != 0,
            opener: (found >> effects) & opener != 0,
            token: (found >> (effects + OPENER_WORDS.len())) & 1 != 0,
        }
    }

    /// `crate::sql::analyze::session_effects` of `sql`, whose words these are.
    pub(super) fn effects(self, sql: &str, protocol: Protocol) -> Effects {
        session_effects_named(sql, dialect(protocol), self.effects)
    }

    /// `crate::sql::analyze::opens_transaction` of `sql`, whose words these are.
    pub(super) fn opens(self, sql: &str, protocol: Protocol) -> Option<&'static str> {
        opens_transaction_named(sql, dialect(protocol), self.opener)
    }

    /// [`super::causal::token_use`] of `sql`, whose words these are.
    pub(super) fn token(self, sql: &str, protocol: Protocol) -> Option<TokenUse> {
        token_use_named(sql, dialect(protocol), self.token)
    }
}

/// Everything a session reads from a text besides its key: functions of the text and dialect
/// alone, whatever strategy or mode its key was computed in.
#[derive(Debug)]
pub(super) struct Reading {
    pub(super) effects: Effects,
    pub(super) opens: Option<&'static str>,
    pub(super) token: Option<TokenUse>,
}

impl Reading {
    pub(super) fn of(sql: &str, protocol: Protocol) -> Reading {
        let words = Words::of(sql, protocol);
        Reading {
            effects: words.effects(sql, protocol),
            opens: words.opens(sql, protocol),
            token: words.token(sql, protocol),
        }
    }
}

/// The words of the text read last, by its bytes: a session asks about a statement three times
/// while it handles it (token, opener, effects), one text after another.
#[derive(Debug, Default)]
pub(super) struct Last {
    text: String,
    protocol: Option<Protocol>,
    words: Words,
}

impl Last {
    /// The words of `sql`: kept when it is the text read last, read (and kept, up to
    /// `max_text` bytes, so the buffer stays bounded) otherwise.
    pub(super) fn words(&mut self, sql: &str, protocol: Protocol, max_text: usize) -> Words {
        if self.protocol == Some(protocol) && self.text == sql {
            return self.words;
        }
        let words = Words::of(sql, protocol);
        if sql.len() <= max_text {
            self.text.clear();
            self.text.push_str(sql);
            (self.protocol, self.words) = (Some(protocol), words);
        }
        words
    }
}

#[cfg(test)]
mod tests;
