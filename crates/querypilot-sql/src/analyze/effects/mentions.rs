//! The text prefilter of the effect and opener words: whether a statement names one of a short
//! list of words anywhere, in any ASCII case. Every statement passes here (#39), so the scan
//! looks at sixteen bytes at a time where the target has the instructions for it (SSE2, part of
//! every x86-64), and compares a word only where both its first two bytes are. [`mentioned`]
//! reads which of up to sixteen words a text names in one pass, so a caller that asks several
//! prefilters of one text (the router: effects, opener, its own setting's name) reads it once.

use super::{MYSQL_WORDS, OPENER_WORDS, PG_WORDS};

/// Per byte: which of `words` (bit `i` for `words[i]`, at most 16) start with it, in either case.
const fn starts(words: &[&str]) -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < words.len() {
        let first = words[i].as_bytes()[0];
        table[first as usize] |= 1 << i;
        table[first.to_ascii_uppercase() as usize] |= 1 << i;
        i += 1;
    }
    table
}

/// Per byte: which of `words` have it second, in either case; a one-byte word matches whatever
/// follows it (the end of the text reads as byte 0).
const fn seconds(words: &[&str]) -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < words.len() {
        let word = words[i].as_bytes();
        if word.len() == 1 {
            let mut b = 0;
            while b < 256 {
                table[b] |= 1 << i;
                b += 1;
            }
        } else {
            table[word[1] as usize] |= 1 << i;
            table[word[1].to_ascii_uppercase() as usize] |= 1 << i;
        }
        i += 1;
    }
    table
}

/// The first two bytes of a list's words, for [`mentions`] and [`mentioned`]: per byte tables for
/// the exact pair test, and for the sixteen-byte scan the `P` distinct first-two-byte pairs of
/// the words longer than one byte and the byte of a one-byte word if there is one (ASCII letters
/// in lower case: they match either case). Counted by hand in the type, checked when the
/// constant is made.
#[derive(Debug)]
pub struct Initials<const P: usize> {
    first: [u16; 256],
    second: [u16; 256],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pairs: [[u8; 2]; P],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    lone: Option<u8>,
}

/// `set` with the pair `a`, `b` (lower-cased) added in place `len` unless it is there already;
/// the new length.
const fn add<const N: usize>(set: &mut [[u8; 2]; N], len: usize, a: u8, b: u8) -> usize {
    let pair = [a.to_ascii_lowercase(), b.to_ascii_lowercase()];
    let mut i = 0;
    while i < len {
        if set[i][0] == pair[0] && set[i][1] == pair[1] {
            return len;
        }
        i += 1;
    }
    assert!(len < N, "more distinct pairs than the type says");
    set[len] = pair;
    len + 1
}

impl<const P: usize> Initials<P> {
    /// The initials of `words` (at most sixteen, lower case; `P` the distinct pairs of their
    /// first two bytes, one one-byte word at most): evaluated in a constant, where a wrong
    /// count fails the build.
    pub const fn of(words: &[&str]) -> Self {
        let (mut pairs, mut lone) = ([[0u8; 2]; P], None);
        let mut p = 0;
        let mut i = 0;
        while i < words.len() {
            let word = words[i].as_bytes();
            if word.len() == 1 {
                assert!(lone.is_none(), "one one-byte word at most");
                lone = Some(word[0]);
            } else {
                p = add(&mut pairs, p, word[0], word[1]);
            }
            i += 1;
        }
        assert!(p == P, "fewer distinct pairs than the type says");
        Initials { first: starts(words), second: seconds(words), pairs, lone }
    }

    /// Which of the words start at `a` followed by `b` (0 past the end), by their first two bytes.
    fn pair(&self, a: u8, b: u8) -> u16 {
        self.first[usize::from(a)] & self.second[usize::from(b)]
    }
}

pub(super) const OPENER_INITIALS: Initials<2> = Initials::of(&OPENER_WORDS);
pub(super) const PG_INITIALS: Initials<9> = Initials::of(PG_WORDS);
pub(super) const MYSQL_INITIALS: Initials<6> = Initials::of(MYSQL_WORDS);

/// Whether `sql` contains one of `words` (any ASCII case; `initials` theirs) anywhere. Inlined
/// into each caller, where `initials` is a constant: the bytes to look for are then the scan's
/// immediate operands rather than loaded and broadcast on every call.
#[inline(always)]
pub(super) fn mentions<const P: usize>(sql: &str, words: &[&str], initials: &Initials<P>) -> bool {
    let bytes = sql.as_bytes();
    // The last byte has no second: a one-byte word may still be there.
    let last = || bytes.last().is_some_and(|&a| at(bytes, words, bytes.len() - 1, initials.pair(a, 0)) != 0);
    scan(bytes, initials, |i| at(bytes, words, i, pair_at(bytes, initials, i)) != 0) || last()
}

/// Which of `words` (bit `i` for `words[i]`; `initials` theirs) `sql` contains anywhere, in any
/// ASCII case: [`mentions`] for each word at once, in one pass that stops only when every word
/// was found. Inlined as [`mentions`] is.
#[inline(always)]
pub fn mentioned<const P: usize>(sql: &str, words: &[&str], initials: &Initials<P>) -> u16 {
    let bytes = sql.as_bytes();
    let all = u16::MAX >> 16usize.saturating_sub(words.len());
    let mut seen = 0;
    scan(bytes, initials, |i| {
        seen |= at(bytes, words, i, pair_at(bytes, initials, i) & !seen);
        seen == all
    });
    if let Some(&a) = bytes.last() {
        seen |= at(bytes, words, bytes.len() - 1, initials.pair(a, 0) & !seen);
    }
    seen
}

/// The words whose first two bytes are at `i` in `bytes` (the end reads as byte 0).
#[inline(always)]
fn pair_at<const P: usize>(bytes: &[u8], initials: &Initials<P>, i: usize) -> u16 {
    initials.pair(bytes.get(i).copied().unwrap_or(0), bytes.get(i + 1).copied().unwrap_or(0))
}

/// Of the `candidates` among `words`, those that start at `i` in `bytes`, compared whole.
#[inline(always)]
fn at(bytes: &[u8], words: &[&str], i: usize, mut candidates: u16) -> u16 {
    let mut found = 0;
    while candidates != 0 {
        let bit = candidates.trailing_zeros();
        let word = words.get(bit as usize).map_or(&[][..], |w| w.as_bytes());
        if bytes.get(i..i + word.len()).is_some_and(|h| h.eq_ignore_ascii_case(word)) {
            found |= 1 << bit;
        }
        candidates &= candidates - 1;
    }
    found
}

/// Whether `hit` holds at a position of `bytes` (but the last) where the first two bytes of one
/// of the words are (or a one-byte word's byte): sixteen positions a
/// step, each window of seventeen bytes read whole; the last window overlaps the one before it
/// and skips the positions that one looked at. A text shorter than a window is read from a copy
/// padded with zero bytes, which no word's first byte is.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn scan<const P: usize>(bytes: &[u8], initials: &Initials<P>, mut hit: impl FnMut(usize) -> bool) -> bool {
    let mut padded = [0u8; 17];
    // The positions to look at, and the text whose windows hold them.
    let (text, positions) = match bytes.len() {
        n if n < 17 => {
            padded[..n].copy_from_slice(bytes);
            (&padded[..], 16)
        }
        n => (bytes, n - 1),
    };
    let last_start = text.len() - 17;
    let mut next = 0;
    while next < positions {
        let start = next.min(last_start);
        let Some(window) = text.get(start..).and_then(|t| t.first_chunk::<17>()) else {
            return false;
        };
        // SAFETY: SSE2 is part of every x86-64 target, so the feature `sixteen` needs is there.
        let mut candidates = unsafe { sixteen(window, initials) } & (u32::MAX << (next - start));
        while candidates != 0 {
            if hit(start + candidates.trailing_zeros() as usize) {
                return true;
            }
            candidates &= candidates - 1;
        }
        next = start + 16;
    }
    false
}

/// The positions 0..16 of `window` where one of the words' first-two-byte pairs is, or a
/// one-byte word's byte, as bits. Each pair is compared as a pair (its first byte here, its
/// second at the next position), so a text full of the words' first and second bytes in other
/// pairs passes few positions; loose only in case and bit 5 (`` ` `` for `@`): the caller tests
/// the exact pair.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn sixteen<const P: usize>(window: &[u8; 17], initials: &Initials<P>) -> u32 {
    use std::arch::x86_64::{
        _mm_and_si128, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x,
        _mm_setzero_si128,
    };
    let folded = |from: usize| {
        let half = |at: usize| {
            let mut h = [0u8; 8];
            h.copy_from_slice(&window[at..at + 8]);
            i64::from_le_bytes(h)
        };
        // Bit 5 set in every byte: an ASCII letter in either case reads as its lower case.
        _mm_or_si128(_mm_set_epi64x(half(from + 8), half(from)), _mm_set1_epi8(0x20))
    };
    let (here, after) = (folded(0), folded(1));
    let is = |v, b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8((b | 0x20) as i8));
    let pairs = initials
        .pairs
        .iter()
        .fold(_mm_setzero_si128(), |acc, &[a, b]| _mm_or_si128(acc, _mm_and_si128(is(here, a), is(after, b))));
    let lone = match initials.lone {
        Some(b) => is(here, b),
        None => _mm_setzero_si128(),
    };
    _mm_movemask_epi8(_mm_or_si128(pairs, lone)) as u32
}

/// [`scan`] a byte at a time, where the target has no sixteen-byte instructions.
#[cfg(not(target_arch = "x86_64"))]
fn scan<const P: usize>(bytes: &[u8], initials: &Initials<P>, mut hit: impl FnMut(usize) -> bool) -> bool {
    bytes.windows(2).enumerate().any(|(at, w)| initials.pair(w[0], w[1]) != 0 && hit(at))
}
