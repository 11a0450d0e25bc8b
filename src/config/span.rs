//! Positions in the configuration text: byte offsets (from toml spans) to 1-based line and
//! column, and a light line scanner that recovers the dotted key path around an offset.
//!
//! The scanner exists because toml 0.8 errors carry a span but no key path, and because
//! `toml::Spanned` cannot wrap tables that are only implied by dotted keys (`[pools.x.retry]`
//! without `[pools.x]`), so pool-level problems are located by finding the pool's table here.
//! It understands headers, dotted/quoted keys and multi-line strings; it is only consulted to
//! describe an error, never to decide what the configuration means.

use std::collections::HashMap;

/// Maps byte offsets of one text to lines and columns.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the start of every line of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, line_starts }
    }

    /// 1-based (line, column) of a byte offset; the column counts characters. Offsets past the
    /// end clamp to the end of the text.
    pub(crate) fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset).max(1);
        let start = self.line_starts.get(line - 1).copied().unwrap_or(0);
        let column = self.text.get(start..offset).map_or(offset - start, |s| s.chars().count()) + 1;
        (line, column)
    }
}

/// What one line of the file declares, as far as paths are concerned.
enum LineKind {
    /// `[a.b]` or `[[a.b]]`: the table's key parts and its rendered path (with array indices).
    Header { parts: Vec<String>, path: String },
    /// `a.b = …` under the current header: full key parts and rendered path.
    Key { parts: Vec<String>, path: String },
    /// Blank, comment, a continuation of a multi-line value, or something unparseable.
    Other,
}

struct ScannedLine {
    /// Offset of the first non-blank character (or of the line start for blank lines).
    start: usize,
    /// Offset just past the line's last character, before the newline.
    end: usize,
    kind: LineKind,
}

/// The dotted path of the key or table at `offset`, e.g. `listeners[1].bind`. Inside a
/// multi-line value it is the path of the key that value belongs to.
pub(crate) fn path_at(text: &str, offset: usize) -> String {
    let mut last = String::new();
    for line in scan(text) {
        match line.kind {
            LineKind::Header { path, .. } | LineKind::Key { path, .. } => last = path,
            LineKind::Other => {}
        }
        if line.end >= offset {
            break;
        }
    }
    last
}

/// Offset of the first header or key that defines something inside the table `parts`
/// (e.g. `["pools", "main"]`), found by key parts, not by text, so `[pools]\nmain.x = 1`
/// and `pools.main.x = 1` are found as well as `[pools.main]`.
pub(crate) fn find_table(text: &str, parts: &[&str]) -> Option<usize> {
    scan(text).into_iter().find_map(|line| match &line.kind {
        LineKind::Header { parts: p, .. } | LineKind::Key { parts: p, .. }
            if p.len() >= parts.len() && p.iter().zip(parts).all(|(a, b)| a == b) =>
        {
            Some(line.start)
        }
        _ => None,
    })
}

fn scan(text: &str) -> Vec<ScannedLine> {
    let mut out = Vec::new();
    let mut table: Vec<String> = Vec::new();
    let mut table_path = String::new();
    let mut array_counts: HashMap<String, usize> = HashMap::new();
    let mut open_multiline: Option<&str> = None;
    let mut line_start = 0;
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches(['\n', '\r']);
        let indent = line.len() - line.trim_start().len();
        let (start, end) = (line_start + indent, line_start + line.len());
        line_start += raw.len();
        if let Some(delim) = open_multiline {
            if line.matches(delim).count() % 2 == 1 {
                open_multiline = None;
            }
            out.push(ScannedLine { start, end, kind: LineKind::Other });
            continue;
        }
        let body = line.trim_start();
        let kind = if let Some(header) = body.strip_prefix('[') {
            scan_header(header, &mut array_counts).map_or(LineKind::Other, |(parts, path)| {
                table.clone_from(&parts);
                table_path.clone_from(&path);
                LineKind::Header { parts, path }
            })
        } else {
            scan_key(body, &table, &table_path)
        };
        open_multiline = ["\"\"\"", "'''"].into_iter().find(|d| line.matches(d).count() % 2 == 1);
        out.push(ScannedLine { start, end, kind });
    }
    out
}

/// Parses the rest of a header line after its first `[`.
fn scan_header(header: &str, array_counts: &mut HashMap<String, usize>) -> Option<(Vec<String>, String)> {
    let (is_array, inner) = match header.strip_prefix('[') {
        Some(rest) => (true, rest),
        None => (false, header),
    };
    let (parts, rest) = parse_key(inner)?;
    if !rest.trim_start().starts_with(']') {
        return None;
    }
    let joined = parts.join(".");
    let path = if is_array {
        let count = array_counts.entry(joined.clone()).or_insert(0);
        *count += 1;
        format!("{joined}[{}]", *count - 1)
    } else {
        joined
    };
    Some((parts, path))
}

/// Parses `key = …` under the current table.
fn scan_key(body: &str, table: &[String], table_path: &str) -> LineKind {
    match parse_key(body) {
        Some((key, rest)) if rest.trim_start().starts_with('=') => {
            let mut parts = table.to_vec();
            parts.extend(key.iter().cloned());
            let path = if table_path.is_empty() { key.join(".") } else { format!("{table_path}.{}", key.join(".")) };
            LineKind::Key { parts, path }
        }
        _ => LineKind::Other,
    }
}

/// Parses a dotted key (bare or quoted parts) at the start of `s`; returns the parts and the
/// text after the key.
fn parse_key(s: &str) -> Option<(Vec<String>, &str)> {
    let mut parts = Vec::new();
    let mut rest = s.trim_start();
    loop {
        let (part, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let close = quoted.find('"')?;
            (quoted.get(..close)?.to_string(), quoted.get(close + 1..)?)
        } else if let Some(quoted) = rest.strip_prefix('\'') {
            let close = quoted.find('\'')?;
            (quoted.get(..close)?.to_string(), quoted.get(close + 1..)?)
        } else {
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(rest.len());
            if end == 0 {
                return None;
            }
            (rest.get(..end)?.to_string(), rest.get(end..)?)
        };
        parts.push(part);
        let after = after.trim_start();
        match after.strip_prefix('.') {
            Some(next) => rest = next.trim_start(),
            None => return Some((parts, after)),
        }
    }
}
