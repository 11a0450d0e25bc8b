//! The configuration error report: every problem found in one file, each with its position and
//! dotted key path, so a DBA fixes them all in one edit instead of one per restart.

use std::fmt;

/// One problem in the configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// 1-based line of the offending value, key or table header.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// Dotted key path such as `pools.main.backends[0].weight`; empty when the whole file is meant.
    pub path: String,
    /// What is wrong, in words a DBA can act on.
    pub message: String,
}

/// Every problem found while parsing and validating one configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file name used as the prefix of each reported line.
    pub file: String,
    /// The problems, ordered by position in the file.
    pub issues: Vec<ConfigIssue>,
}

impl ConfigErrors {
    /// A stable code for logs and metrics, in the style of `crate::error::ErrorCode` (config is
    /// L0 and must not depend on it).
    pub fn code(&self) -> &'static str {
        "config.invalid"
    }
}

impl fmt::Display for ConfigErrors {
    /// One line per issue: `file:line:column: path: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}:{}:{}: ", self.file, issue.line, issue.column)?;
            if !issue.path.is_empty() {
                write!(f, "{}: ", issue.path)?;
            }
            f.write_str(&issue.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
