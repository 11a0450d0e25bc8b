//! Enforces the module layering of `../shared/DESIGN.md`: walks `src/`, reads every
//! `crate::…` path (including `use crate::{a, b}` groups) and every use of a restricted
//! external crate, and fails with file, line and the rule broken.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Crate-internal modules each module may use (besides itself). `app`, `main` and `lib` wire
/// everything together and are exempt.
fn allowed(module: &str) -> Option<&'static [&'static str]> {
    Some(match module {
        "protocol" | "sql" | "config" | "metrics" | "id" | "error" | "rt" => &[],
        "routing" => &["sql", "config", "id", "error"],
        "pool" => &["protocol", "config", "metrics", "rt", "error", "id"],
        // The session drives the bridge's sans-IO translation; the bridge never calls back.
        "session" => &["protocol", "sql", "routing", "pool", "metrics", "config", "rt", "error", "id", "bridge"],
        "bridge" => &["protocol", "sql", "routing", "pool", "metrics", "config", "rt", "error", "id"],
        "core" => &["session", "pool", "routing", "metrics", "config", "rt", "control", "id", "error"],
        "control" => &["routing", "config", "metrics", "error", "id"],
        "admin" => &["control", "metrics", "config", "error", "id"],
        _ => return None,
    })
}

/// External crates only some modules may name.
fn crate_allowed(module: &str, krate: &str) -> bool {
    match krate {
        "glommio" => module == "rt",
        "crossbeam_channel" => matches!(module, "core" | "control" | "app" | "admin"),
        _ => true,
    }
}

const RESTRICTED_CRATES: &[&str] = &["glommio", "crossbeam_channel"];

/// Constructs banned in the pure layers.
const PURE: &[&str] = &["protocol", "sql", "config", "metrics", "routing", "id"];
const PURE_BANNED: &[&str] =
    &["std::net::TcpStream", "std::net::TcpListener", "std::thread", "Instant::now", "SystemTime::now"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let p = entry.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("component").as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// Names of the top-level crate modules referenced on one line of code.
fn crate_refs(line: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a::b, c}`: every top-level name in the group (to the matching brace).
            let mut depth = 1;
            let mut end = group.len();
            for (j, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let inner = &group[..end];
            let mut depth = 0;
            let mut start = true;
            for (j, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && depth == 0 && (c.is_alphabetic() || c == '_') => {
                        let name: String =
                            inner[j..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        refs.push(name);
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            refs.push(name);
        }
        rest = after;
    }
    refs
}

fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("//")
}

#[test]
fn modules_only_use_what_design_md_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = BTreeSet::new();
    for file in &files {
        let module = module_of(&src, file);
        let text = std::fs::read_to_string(file).expect("read");
        let shown = file.strip_prefix(&src).unwrap_or(file).display().to_string();
        for (n, line) in text.lines().enumerate() {
            if is_comment(line) {
                continue;
            }
            if let Some(ok) = allowed(&module) {
                for r in crate_refs(line) {
                    if r != module && !ok.contains(&r.as_str()) {
                        violations
                            .insert(format!("src/{shown}:{}: module `{module}` must not use `crate::{r}`", n + 1));
                    }
                }
            }
            for k in RESTRICTED_CRATES {
                let named = line.contains(&format!("{k}::")) || line.contains(&format!("use {k}"));
                if named && !crate_allowed(&module, k) {
                    violations.insert(format!("src/{shown}:{}: module `{module}` must not use the `{k}` crate", n + 1));
                }
            }
            if PURE.contains(&module.as_str()) && !shown.contains("tests") && !line.contains("#[cfg(test)]") {
                for b in PURE_BANNED {
                    if line.contains(b) {
                        violations.insert(format!("src/{shown}:{}: pure module `{module}` must not use `{b}`", n + 1));
                    }
                }
            }
        }
    }
    assert!(violations.is_empty(), "layering violations:\n{}", violations.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn the_reference_scanner_reads_groups_and_paths() {
    assert_eq!(crate_refs("use crate::pool::{Conn, PoolError};"), vec!["pool"]);
    assert_eq!(crate_refs("use crate::{config::Config, rt::{self, Stream}};"), vec!["config", "rt"]);
    assert_eq!(crate_refs("let x = crate::rt::now() + crate::id::CoreId(0);"), vec!["rt", "id"]);
    assert!(crate_refs("let y = 1;").is_empty());
}
