//! The issue collector used while turning raw values into typed ones: each conversion helper
//! reports a bad value with its position and returns the default, so checking goes on and every
//! problem of the file is reported in one run.

use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use super::error::ConfigIssue;
use super::raw::Sp;
use super::span::{self, LineIndex};
use super::value::parse_duration;

/// Whether a duration key accepts "0s".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Zero {
    /// "0s" is meaningful (e.g. no drain).
    Allowed,
    /// "0s" would disable the mechanism or fail everything; refuse it.
    Refused,
}

/// Collects issues for one file.
pub(crate) struct Checker<'a> {
    text: &'a str,
    index: LineIndex<'a>,
    issues: Vec<ConfigIssue>,
}

impl<'a> Checker<'a> {
    /// A collector for `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        Checker { text, index: LineIndex::new(text), issues: Vec::new() }
    }

    /// Records an issue at a byte offset.
    pub(crate) fn report(&mut self, offset: usize, path: &str, message: impl Into<String>) {
        let (line, column) = self.index.position(offset);
        self.issues.push(ConfigIssue { line, column, path: path.to_string(), message: message.into() });
    }

    /// Records an issue at the start of a spanned value.
    pub(crate) fn report_at<T>(&mut self, value: &Sp<T>, path: &str, message: impl Into<String>) {
        self.report(value.span().start, path, message);
    }

    /// Records an issue about a table that has no spanned value of its own (see `span`):
    /// located at the first line defining something in it, or at the top of the file.
    pub(crate) fn report_table(&mut self, table: &[&str], path: &str, message: impl Into<String>) {
        let offset = span::find_table(self.text, table).unwrap_or(0);
        self.report(offset, path, message);
    }

    /// Whether any issue was recorded so far.
    pub(crate) fn is_clean(&self) -> bool {
        self.issues.is_empty()
    }

    /// The issues in file order.
    pub(crate) fn into_issues(self) -> Vec<ConfigIssue> {
        let mut issues = self.issues;
        issues.sort_by_key(|issue| (issue.line, issue.column));
        issues
    }

    /// A keyword (enum) value, or `default` when absent or invalid.
    pub(crate) fn keyword<T: FromStr<Err = String>>(
        &mut self,
        value: &Option<Sp<String>>,
        path: &str,
        default: T,
    ) -> T {
        self.opt_keyword(value, path).unwrap_or(default)
    }

    /// An optional keyword (enum) value; invalid values are reported and read as absent.
    pub(crate) fn opt_keyword<T: FromStr<Err = String>>(
        &mut self,
        value: &Option<Sp<String>>,
        path: &str,
    ) -> Option<T> {
        self.parse_keyword(value.as_ref()?, path)
    }

    /// A required keyword (enum) value; an invalid one is reported and read as absent.
    pub(crate) fn parse_keyword<T: FromStr<Err = String>>(&mut self, value: &Sp<String>, path: &str) -> Option<T> {
        match value.get_ref().parse() {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                self.report_at(value, path, message);
                None
            }
        }
    }

    /// A duration, or `default` when absent or invalid.
    pub(crate) fn duration(
        &mut self,
        value: &Option<Sp<String>>,
        path: &str,
        default: Duration,
        zero: Zero,
    ) -> Duration {
        self.opt_duration(value, path, zero).unwrap_or(default)
    }

    /// An optional duration; invalid values are reported and read as absent.
    pub(crate) fn opt_duration(&mut self, value: &Option<Sp<String>>, path: &str, zero: Zero) -> Option<Duration> {
        let value = value.as_ref()?;
        match parse_duration(value.get_ref()) {
            Ok(d) if d.is_zero() && zero == Zero::Refused => {
                self.report_at(value, path, format!("{} must be greater than 0s", leaf(path)));
                None
            }
            Ok(d) => Some(d),
            Err(message) => {
                self.report_at(value, path, message);
                None
            }
        }
    }

    /// An integer within `min..=max`; out-of-range values are reported and read as absent.
    pub(crate) fn int_in(&mut self, value: &Option<Sp<i64>>, path: &str, min: i64, max: i64) -> Option<i64> {
        let value = value.as_ref()?;
        let n = *value.get_ref();
        if n < min {
            self.report_at(value, path, format!("{} must be at least {min}", leaf(path)));
            None
        } else if n > max {
            self.report_at(value, path, format!("{} must be at most {max}", leaf(path)));
            None
        } else {
            Some(n)
        }
    }

    /// A `u32` count of at least `min`, or `default`.
    pub(crate) fn count(&mut self, value: &Option<Sp<i64>>, path: &str, min: u32, default: u32) -> u32 {
        self.int_in(value, path, i64::from(min), i64::from(u32::MAX))
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(default)
    }

    /// A count that must be at least 1, or `default`.
    pub(crate) fn nonzero(&mut self, value: &Option<Sp<i64>>, path: &str, default: NonZeroU32) -> NonZeroU32 {
        NonZeroU32::new(self.count(value, path, 1, default.get())).unwrap_or(default)
    }

    /// A required non-empty string; an empty one is reported.
    pub(crate) fn non_empty(&mut self, value: &Sp<String>, path: &str) -> String {
        if value.get_ref().trim().is_empty() {
            self.report_at(value, path, format!("{} must not be empty", leaf(path)));
        }
        value.get_ref().clone()
    }
}

/// The last key of a dotted path, without an array index: `pools.a.backends[0].weight` → `weight`.
pub(crate) fn leaf(path: &str) -> &str {
    let last = path.rsplit('.').next().unwrap_or(path);
    last.split('[').next().unwrap_or(last)
}

/// Whether a pool or listener name is usable as a metrics label and a URL segment.
pub(crate) fn is_identifier(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `NonZeroU32` from a constant known to be non-zero, without a panic path.
pub(crate) const fn nz(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(v) => v,
        None => NonZeroU32::MIN,
    }
}
