//! Enforces the module layering and the sans-IO rules of `../shared/DESIGN.md` by parsing the
//! crate with `syn`, not by reading lines: the module tree is followed from `src/lib.rs` through
//! its `mod` declarations, every path (`use` trees split over lines, `crate::…`, `super::…`,
//! `self::…`, paths inside macro calls) is resolved to the top-level module it names, and items
//! are checked in their own module with `#[cfg(test)]` code told apart. Each rule broken is
//! reported with file, line and the rule.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// Crate-internal modules each top-level module may use (besides itself). `app` and `lib` wire
/// everything together and may use anything. A top-level module missing here is an error.
fn allowed(module: &str) -> Option<&'static [&'static str]> {
    Some(match module {
        "protocol" | "sql" | "config" | "metrics" | "id" | "error" | "rt" => &[],
        // Stored client secrets (#23): parsed with the protocols' math, checked by sessions.
        "auth" => &["protocol"],
        "routing" => &["sql", "config", "id", "error"],
        "pool" => &["protocol", "config", "metrics", "rt", "error", "id"],
        // The session drives the bridge's sans-IO translation; the bridge never calls back.
        "session" => {
            &["protocol", "sql", "routing", "pool", "metrics", "config", "rt", "error", "id", "bridge", "auth"]
        }
        "bridge" => &["protocol", "sql", "routing", "pool", "metrics", "config", "rt", "error", "id"],
        "core" => &["session", "pool", "routing", "metrics", "config", "rt", "control", "id", "error"],
        "control" => &["routing", "config", "metrics", "error", "id", "auth"],
        // The admin console speaks the PostgreSQL wire protocol through the pure codecs.
        "admin" => &["control", "metrics", "config", "error", "id", "protocol"],
        "app" => return Some(ANYTHING),
        _ => return None,
    })
}

const ANYTHING: &[&str] = &["*"];

/// What a module may use: a protocol exchange inside `session` is held to its own, narrower list
/// (sans-IO: no runtime, pool or sockets), and the session engine to one narrower still (also
/// protocol-neutral: no `protocol`); every other module to its top-level module's.
fn allowed_for(module: &[String]) -> Option<&'static [&'static str]> {
    if is_engine(module) {
        return Some(&["session", "sql", "routing", "config", "error", "id"]);
    }
    if is_exchange(module) {
        return Some(&["session", "protocol", "sql", "routing", "config", "error", "id"]);
    }
    allowed(module.first().map(String::as_str).unwrap_or(""))
}

/// `session::engine`: the policy both wires share (#37).
fn is_engine(module: &[String]) -> bool {
    module.first().is_some_and(|m| m == "session") && module.get(1).is_some_and(|m| m == "engine")
}

fn is_exchange(module: &[String]) -> bool {
    module.first().is_some_and(|m| m == "session") && module.get(2).is_some_and(|m| m == "exchange")
}

/// External crates only some top-level modules may name.
fn crate_allowed(module: &str, krate: &str) -> bool {
    match krate {
        // The runtime: only `rt` names the ring and the task storage of the event loop.
        "io_uring" | "async_task" => module == "rt",
        "crossbeam_channel" => matches!(module, "core" | "control" | "app" | "admin"),
        _ => true,
    }
}

const RESTRICTED_CRATES: &[&str] = &["io_uring", "async_task", "crossbeam_channel"];

/// The sans-IO layers: whole top-level modules, plus the protocol exchanges and the engine
/// inside `session`.
fn is_pure(module: &[String]) -> bool {
    let top = module.first().map(String::as_str).unwrap_or("");
    matches!(top, "protocol" | "sql" | "config" | "metrics" | "routing" | "id" | "auth")
        || is_exchange(module)
        || is_engine(module)
}

/// Path prefixes a sans-IO layer must not name: sockets, threads, clocks, the environment,
/// logging, process-wide locks and the runtime crates.
const PURE_BANNED_PATHS: &[&[&str]] = &[
    // Address types are data; sockets and name resolution are I/O.
    &["std", "net", "TcpStream"],
    &["std", "net", "TcpListener"],
    &["std", "net", "UdpSocket"],
    &["std", "net", "ToSocketAddrs"],
    &["std", "thread"],
    &["std", "env"],
    &["std", "process"],
    &["std", "sync", "Mutex"],
    &["std", "sync", "RwLock"],
    &["std", "time", "Instant", "now"],
    &["std", "time", "SystemTime", "now"],
    &["Instant", "now"],
    &["SystemTime", "now"],
    &["tracing"],
    &["log"],
    &["crossbeam_channel"],
    &["io_uring"],
    &["monoio"],
    &["tokio"],
    &["async_task"],
    &["parking_lot"],
];

/// Macros a sans-IO layer must not call (the logging ones also by their `tracing::` path).
const PURE_BANNED_MACROS: &[&str] = &["thread_local", "println", "eprintln", "print", "eprint", "dbg"];

/// One source file of the crate and where it sits in the module tree.
struct Source {
    /// Module path from the crate root, e.g. `["session", "pg", "relay"]`.
    module: Vec<String>,
    /// Path shown in reports, relative to the repository.
    shown: String,
    /// The file only builds for tests (`#[cfg(test)] mod …;` on the way to it).
    test_only: bool,
    ast: syn::File,
}

/// Walks the module tree from `src/lib.rs`; files that cannot be found or parsed are reported.
fn load_tree(src: &Path, out: &mut Vec<Source>, errors: &mut BTreeSet<String>) {
    load_file(src, &src.join("lib.rs"), Vec::new(), false, out, errors);
}

fn load_file(
    src: &Path,
    file: &Path,
    module: Vec<String>,
    test_only: bool,
    out: &mut Vec<Source>,
    errors: &mut BTreeSet<String>,
) {
    let shown = format!("src/{}", file.strip_prefix(src).unwrap_or(file).display());
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            errors.insert(format!("{shown}: cannot read: {e}"));
            return;
        }
    };
    let ast = match syn::parse_file(&text) {
        Ok(ast) => ast,
        Err(e) => {
            errors.insert(format!("{shown}:{}: cannot parse: {e}", e.span().start().line));
            return;
        }
    };
    // Where `mod x;` looks for x.rs: beside lib.rs and mod.rs, else in a folder named after the file.
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let parent = file.parent().unwrap_or(src).to_path_buf();
    let dir = if matches!(stem.as_str(), "lib" | "mod") { parent.clone() } else { parent.join(&stem) };
    let mut children = Vec::new();
    collect_mods(&ast.items, &dir, &parent, &module, test_only, &mut children);
    out.push(Source { module, shown, test_only, ast });
    for (path, child, child_test) in children {
        if path.exists() {
            load_file(src, &path, child, child_test, out, errors);
        } else {
            errors.insert(format!("module `{}` has no file at {}", child.join("::"), path.display()));
        }
    }
}

/// Out-of-line `mod` declarations in `items`, also inside inline modules, with the file each
/// one lives in.
fn collect_mods(
    items: &[syn::Item],
    dir: &Path,
    file_dir: &Path,
    module: &[String],
    test_only: bool,
    out: &mut Vec<(PathBuf, Vec<String>, bool)>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let name = m.ident.to_string();
        let mut child = module.to_vec();
        child.push(name.clone());
        let child_test = test_only || is_cfg_test(&m.attrs);
        match &m.content {
            Some((_, inner)) => collect_mods(inner, &dir.join(&name), file_dir, &child, child_test, out),
            None => {
                let path = match path_attr(&m.attrs) {
                    Some(p) => file_dir.join(p),
                    None if dir.join(format!("{name}.rs")).exists() => dir.join(format!("{name}.rs")),
                    None => dir.join(&name).join("mod.rs"),
                };
                out.push((path, child, child_test));
            }
        }
    }
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// `#[cfg(test)]` (also inside `all(...)`), the attribute that keeps code out of the product.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.clone().into_iter().any(|t| matches!(&t, TokenTree::Ident(i) if i == "test")))
    })
}

/// Checks one file's items as code of `module`.
struct Checker<'a> {
    module: Vec<String>,
    shown: &'a str,
    /// Depth of `#[cfg(test)]` items around the current node (files reached only for tests
    /// start at 1).
    test_depth: usize,
    out: &'a mut BTreeSet<String>,
}

impl Checker<'_> {
    fn report(&mut self, line: usize, rule: String) {
        self.out.insert(format!("{}:{line}: {rule}", self.shown));
    }

    fn top(&self) -> String {
        self.module.first().cloned().unwrap_or_default()
    }

    /// Checks a path given as identifier segments (`["super", "super", "rt", "now"]`).
    fn check_path(&mut self, segments: &[String], line: usize) {
        let Some(first) = segments.first() else { return };
        match first.as_str() {
            "crate" | "super" | "self" => {
                if let Some(target) = resolve(&self.module, segments) {
                    self.check_internal(&target, line);
                }
            }
            // `::io_uring::…` and `io_uring::…` alike.
            _ => self.check_external(segments, line),
        }
    }

    fn check_internal(&mut self, target: &str, line: usize) {
        let top = self.top();
        if target == top || top.is_empty() {
            return;
        }
        if let Some(ok) = allowed_for(&self.module) {
            if ok != ANYTHING && !ok.contains(&target) {
                let who =
                    if is_exchange(&self.module) || is_engine(&self.module) { self.module.join("::") } else { top };
                self.report(line, format!("module `{who}` must not use `crate::{target}`"));
            }
        }
    }

    fn check_external(&mut self, segments: &[String], line: usize) {
        let top = self.top();
        let first = segments[0].as_str();
        if RESTRICTED_CRATES.contains(&first) && !crate_allowed(&top, first) {
            self.report(line, format!("module `{top}` must not use the `{first}` crate"));
        }
        if self.test_depth == 0 && is_pure(&self.module) {
            for banned in PURE_BANNED_PATHS {
                if segments.len() >= banned.len() && segments.iter().zip(banned.iter()).all(|(s, b)| s == b) {
                    let shown = banned.join("::");
                    self.report(line, format!("sans-IO module `{}` must not use `{shown}`", self.module.join("::")));
                }
            }
        }
    }

    /// Paths inside a macro call's tokens (`format!("{}", crate::rt::now())`), which syn does
    /// not parse as expressions.
    fn check_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.check_tokens(g.stream()),
                TokenTree::Ident(id) => {
                    let line = id.span().start().line;
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) =
                        (trees.get(j), trees.get(j + 1), trees.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.check_path(&segments, line);
                        i = j;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn check_use(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.check_use(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.check_use(t, prefix);
                }
            }
            syn::UseTree::Name(n) => self.check_use_leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.check_use_leaf(prefix, &r.ident),
            syn::UseTree::Glob(g) => {
                let line = g.span().start().line;
                let segments = prefix.clone();
                self.check_path(&segments, line);
            }
        }
    }

    fn check_use_leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut segments = prefix.to_vec();
        // `use crate::rt::{self}` names `crate::rt`.
        if ident != "self" {
            segments.push(ident.to_string());
        }
        self.check_path(&segments, ident.span().start().line);
    }
}

/// The top-level module a `crate::`/`super::`/`self::` path names, seen from `module`; `None`
/// when it names the crate root itself or climbs above it.
fn resolve(module: &[String], segments: &[String]) -> Option<String> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = segments;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        _ => {}
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    base.into_iter().next()
}

impl<'ast> Visit<'ast> for Checker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => &[],
        };
        let test = is_cfg_test(attrs);
        self.test_depth += usize::from(test);
        visit::visit_item(self, item);
        self.test_depth -= usize::from(test);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Out-of-line modules are checked from their own file.
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if u.leading_colon.is_some() {
            prefix.clear();
        }
        self.check_use(&u.tree, &mut prefix);
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        if self.test_depth == 0 && is_pure(&self.module) {
            let line = s.static_token.span.start().line;
            self.report(
                line,
                format!("sans-IO module `{}` must not hold a `static` ({})", self.module.join("::"), s.ident),
            );
        }
        visit::visit_item_static(self, s);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        // A lone `self` (a receiver) names nothing; `Instant::now` must be caught even unqualified.
        if segments.len() > 1 || (p.leading_colon.is_some() && !segments.is_empty()) {
            let line = p.span().start().line;
            self.check_path(&segments, line);
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if self.test_depth == 0 && is_pure(&self.module) && PURE_BANNED_MACROS.contains(&name.as_str()) {
            let line = m.path.span().start().line;
            self.report(line, format!("sans-IO module `{}` must not call `{name}!`", self.module.join("::")));
        }
        self.check_tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

/// Checks one parsed file as module `module`.
fn check_file(module: &[String], shown: &str, test_only: bool, ast: &syn::File, out: &mut BTreeSet<String>) {
    let mut c = Checker { module: module.to_vec(), shown, test_depth: usize::from(test_only), out };
    c.visit_file(ast);
}

/// Top-level modules that DESIGN.md (and so [`allowed`]) does not know.
fn unknown_modules(sources: &[Source]) -> Vec<String> {
    let tops: BTreeSet<&str> = sources.iter().filter(|s| s.module.len() == 1).map(|s| s.module[0].as_str()).collect();
    tops.into_iter()
        .filter(|t| allowed(t).is_none())
        .map(|t| format!("src/{t}: top-level module `{t}` has no layering rule (add it to DESIGN.md and here)"))
        .collect()
}

/// `.rs` files under `src/` that no `mod` declaration reaches (dead, or a typo in a `mod` line).
fn orphans(src: &Path, sources: &[Source]) -> Vec<String> {
    let reached: BTreeSet<&str> = sources.iter().map(|s| s.shown.as_str()).collect();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|f| format!("src/{}", f.strip_prefix(src).unwrap_or(&f).display()))
        .filter(|f| f != "src/main.rs" && !reached.contains(f.as_str()))
        .map(|f| format!("{f}: not part of the module tree"))
        .collect()
}

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

/// The crate's `src/` folder, every file of its module tree, and the files that could not be
/// read or parsed.
fn crate_sources() -> (PathBuf, Vec<Source>, BTreeSet<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    let mut errors = BTreeSet::new();
    load_tree(&src, &mut sources, &mut errors);
    (src, sources, errors)
}

#[test]
fn modules_only_use_what_design_md_allows() {
    let (src, sources, mut violations) = crate_sources();
    assert!(sources.len() > 100, "the tree walk found only {} files", sources.len());
    violations.extend(unknown_modules(&sources));
    violations.extend(orphans(&src, &sources));
    for s in &sources {
        check_file(&s.module, &s.shown, s.test_only, &s.ast, &mut violations);
    }
    assert!(violations.is_empty(), "layering violations:\n{}", violations.into_iter().collect::<Vec<_>>().join("\n"));
}

/// Violations `text` would have as the file of module `module` (`"session::pg::relay"`).
fn violations_of(module: &str, text: &str) -> Vec<String> {
    let module: Vec<String> = module.split("::").map(str::to_owned).collect();
    let ast = syn::parse_file(text).expect("snippet parses");
    let mut out = BTreeSet::new();
    check_file(&module, "snippet.rs", false, &ast, &mut out);
    out.into_iter().collect()
}

#[test]
fn a_use_group_split_over_lines_is_read_whole() {
    let v = violations_of("routing::rules", "use crate::{\n    config::Config,\n    rt::{self, Stream},\n};\n");
    assert_eq!(v, vec!["snippet.rs:3: module `routing` must not use `crate::rt`"]);
    assert!(violations_of("routing::rules", "use crate::{\n    config::Config,\n    sql::Dialect,\n};\n").is_empty());
}

#[test]
fn super_paths_are_resolved_to_the_module_they_name() {
    // From sql::lexer, super::super is the crate root.
    let v = violations_of("sql::lexer", "fn f() { let _ = super::super::rt::now(); }");
    assert_eq!(v, vec!["snippet.rs:1: module `sql` must not use `crate::rt`"]);
    // Inside its own module tree super:: is fine.
    assert!(violations_of("sql::analyze::walker", "use super::super::lexer::Lexer;").is_empty());
    let v = violations_of("pool::health::probe", "use super::super::super::session::Session;");
    assert_eq!(v, vec!["snippet.rs:1: module `pool` must not use `crate::session`"]);
    let v = violations_of("routing", "mod inner { use super::super::pool::Conn; }");
    assert_eq!(v, vec!["snippet.rs:1: module `routing` must not use `crate::pool`"]);
}

#[test]
fn paths_inside_macro_calls_are_checked() {
    let v = violations_of("config::build", "fn f() -> String { format!(\"{:?}\", crate::rt::now()) }");
    assert_eq!(v, vec!["snippet.rs:1: module `config` must not use `crate::rt`"]);
}

#[test]
fn a_new_top_level_module_must_be_known() {
    let ast = syn::parse_file("").expect("empty");
    let sources = vec![
        Source { module: vec!["cache".into()], shown: "src/cache.rs".into(), test_only: false, ast: ast.clone() },
        Source { module: vec!["sql".into()], shown: "src/sql/mod.rs".into(), test_only: false, ast },
    ];
    let unknown = unknown_modules(&sources);
    assert_eq!(unknown.len(), 1);
    assert!(unknown[0].contains("`cache`"), "{unknown:?}");
}

#[test]
fn sans_io_layers_hold_no_globals_environment_logging_or_runtime() {
    let cases = [
        ("protocol::pg::framer", "static LOCK: std::sync::Mutex<u8> = std::sync::Mutex::new(0);", "`static`"),
        (
            "protocol::mysql",
            "thread_local! { static N: std::cell::Cell<u8> = std::cell::Cell::new(0); }",
            "thread_local!",
        ),
        ("protocol::pg", "fn f() -> Option<String> { std::env::var(\"X\").ok() }", "std::env"),
        ("sql::analyze", "use std::env;", "std::env"),
        ("sql::lexer", "fn f() { tracing::info!(\"x\"); }", "tracing"),
        ("routing::router", "fn f() { let _ = std::time::Instant::now(); }", "Instant::now"),
        ("config::build", "fn f() { let _ = Instant::now(); }", "Instant::now"),
        ("metrics::render", "fn f() { println!(\"x\"); }", "println!"),
        ("session::pg::exchange", "use crate::rt::Stream;", "crate::rt"),
        ("session::pg::exchange", "fn f() { std::thread::yield_now(); }", "std::thread"),
        ("session::engine::route", "fn f() { let _ = std::time::Instant::now(); }", "Instant::now"),
        ("session::engine::hold", "use crate::pool::CorePool;", "crate::pool"),
        ("session::engine", "use crate::rt::Stream;", "crate::rt"),
        // Protocol-neutral: the wires translate frames, the engine never sees one.
        ("session::engine::hold", "use crate::protocol::pg::TransactionStatus;", "crate::protocol"),
        ("sql::parse", "use async_task::Task;", "async_task"),
        ("pool::pg", "use io_uring::IoUring;", "io_uring"),
    ];
    for (module, text, needle) in cases {
        let v = violations_of(module, text);
        assert!(v.iter().any(|m| m.contains(needle)), "{module}: {text:?} must break a rule naming {needle}: {v:?}");
    }
}

#[test]
fn test_code_and_permitted_layers_are_not_flagged() {
    assert!(violations_of("protocol::pg", "#[cfg(test)]\nmod tests { use std::thread; static X: u8 = 0; }").is_empty());
    assert!(violations_of("rt::ring", "use io_uring::{opcode, IoUring}; use std::net::SocketAddr;").is_empty());
    assert!(
        violations_of("session::pg::relay", "fn f() { let _ = crate::rt::now(); tracing::debug!(\"x\"); }").is_empty()
    );
    assert!(violations_of("app", "use crossbeam_channel::bounded; use crate::session::ClientSlots;").is_empty());
    let engine = "use crate::routing::RouteInput; use crate::sql::mode::SessionModes; use super::hold::Hold;";
    assert!(violations_of("session::engine::route", engine).is_empty());
    let v = violations_of("session::pg", "use crossbeam_channel::bounded;");
    assert_eq!(v, vec!["snippet.rs:1: module `session` must not use the `crossbeam_channel` crate"]);
}

/// Lines of `text` holding a byte literal that is a letter or digit (`b'Z'`), macro arguments
/// included. In `session/` such a byte is a message tag, field code or status that
/// `protocol::pg::tag` names (#20); comments are not tokens, so they may still cite one.
fn raw_tag_bytes(text: &str) -> Vec<usize> {
    fn walk(tokens: TokenStream, out: &mut Vec<usize>) {
        for t in tokens {
            match t {
                TokenTree::Group(g) => walk(g.stream(), out),
                TokenTree::Literal(l) => {
                    let s = l.to_string();
                    let inner = s.strip_prefix("b'").and_then(|r| r.strip_suffix('\''));
                    if inner.is_some_and(|c| c.len() == 1 && c.bytes().all(|b| b.is_ascii_alphanumeric())) {
                        out.push(l.span().start().line);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(text.parse().expect("tokens"), &mut out);
    out
}

#[test]
fn session_code_names_its_message_tags() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/session"), &mut files);
    assert!(files.len() > 20, "the walk found only {} files", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("read");
            raw_tag_bytes(&text).into_iter().map(move |line| format!("{}:{line}", f.display()))
        })
        .collect();
    assert!(found.is_empty(), "raw tag bytes in session/ (name them in protocol::pg::tag):\n{}", found.join("\n"));
}

#[test]
fn raw_tag_bytes_are_found_in_code_and_macros_not_in_comments() {
    let text = "// b'Z' in a comment\nfn f(t: u8) -> bool {\n    t == b'Z'\n}\nfn g() { assert_eq!(x, [b'1', b'\\n', b'-']); }\n";
    assert_eq!(raw_tag_bytes(text), vec![3, 5]);
}

/// Longest a function in `session/` may be (#20): a relay step that does not fit on a screen
/// hides its state changes.
const SESSION_FN_MAX_LINES: usize = 60;
/// Most fields a session struct may hold; the rest belong in named parts.
const SESSION_STRUCT_MAX_FIELDS: usize = 12;

/// Functions of product code longer than [`SESSION_FN_MAX_LINES`] and structs named `Session`
/// with more than [`SESSION_STRUCT_MAX_FIELDS`] fields, in `ast` as file `shown`.
fn shape_violations(shown: &str, ast: &syn::File) -> Vec<String> {
    struct Shape<'a> {
        shown: &'a str,
        test_depth: usize,
        out: Vec<String>,
    }
    impl Shape<'_> {
        fn check_fn(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
            let lines = span.end().line + 1 - span.start().line;
            if self.test_depth == 0 && lines > SESSION_FN_MAX_LINES {
                self.out.push(format!(
                    "{}:{}: fn {name} is {lines} lines (at most {SESSION_FN_MAX_LINES})",
                    self.shown,
                    span.start().line
                ));
            }
        }
    }
    impl<'ast> Visit<'ast> for Shape<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            let test = is_cfg_test(&m.attrs);
            self.test_depth += usize::from(test);
            visit::visit_item_mod(self, m);
            self.test_depth -= usize::from(test);
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.check_fn(&f.sig.ident, f.span());
            visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.check_fn(&f.sig.ident, f.span());
            visit::visit_impl_item_fn(self, f);
        }
        fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
            let n = s.fields.len();
            if self.test_depth == 0 && s.ident == "Session" && n > SESSION_STRUCT_MAX_FIELDS {
                self.out.push(format!(
                    "{}:{}: struct Session holds {n} fields (at most {SESSION_STRUCT_MAX_FIELDS})",
                    self.shown,
                    s.span().start().line
                ));
            }
            visit::visit_item_struct(self, s);
        }
    }
    let mut shape = Shape { shown, test_depth: 0, out: Vec::new() };
    shape.visit_file(ast);
    shape.out
}

#[test]
fn session_functions_and_structs_stay_small() {
    let (_, sources, errors) = crate_sources();
    assert!(errors.is_empty(), "{errors:?}");
    let found: Vec<String> = sources
        .iter()
        .filter(|s| !s.test_only && s.module.first().is_some_and(|m| m == "session"))
        .flat_map(|s| shape_violations(&s.shown, &s.ast))
        .collect();
    assert!(found.is_empty(), "{} too large:\n{}", found.len(), found.join("\n"));
}

#[test]
fn a_long_function_and_a_wide_session_struct_are_reported() {
    let body = "    let _x = 1;\n".repeat(SESSION_FN_MAX_LINES);
    let fields: String = (0..=SESSION_STRUCT_MAX_FIELDS).map(|i| format!("f{i}: u8, ")).collect();
    let text = format!("fn long() {{\n{body}}}\nstruct Session {{ {fields} }}\nfn short() {{}}\n");
    let ast = syn::parse_file(&text).expect("parses");
    let found = shape_violations("x.rs", &ast);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("fn long"), "{found:?}");
    assert!(found[1].contains("struct Session"), "{found:?}");
    let tests = format!("#[cfg(test)]\nmod tests {{\nfn long() {{\n{body}}}\n}}\n");
    assert!(shape_violations("x.rs", &syn::parse_file(&tests).expect("parses")).is_empty());
}
