//! SET statements: which variable, which scope, and what routing must know of it.
//!
//! PostgreSQL `SET` / `SET SESSION` and MySQL `SET [SESSION] x` are session state
//! ([`Affinity::SessionSet`]); `SET LOCAL` lasts until the end of the transaction
//! ([`Affinity::TransactionScoped`]); MySQL `SET GLOBAL` / `SET PERSIST` changes the server and is
//! an admin action; MySQL `SET @x` assigns a user variable ([`Affinity::UserVariable`]). What a
//! SET does to the session itself is [`super::session_effects`]'s to say.

use sqlparser::ast::{ContextModifier, ObjectName, Set};

use super::facts::{Affinity, Operation, TxControl};
use super::walker::{object_name, Walker};

/// Scope of a SET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetScope {
    /// Lasts for the connection (PostgreSQL `SET`, `SET SESSION`; MySQL `SET x`, `SET SESSION x`).
    Session,
    /// Lasts until the end of the transaction (PostgreSQL `SET LOCAL`).
    Local,
    /// Server-wide (MySQL `SET GLOBAL` / `SET PERSIST`): an admin action, not session state.
    Global,
}

/// Classifies a SET.
pub(super) fn set(set: &Set, w: &mut Walker<'_>) -> Operation {
    match set {
        Set::SingleAssignment { scope, variable, values, .. } => {
            w.walk_part(values);
            assign(*scope, variable, w)
        }
        Set::MultipleAssignments { assignments } => {
            let mut op = Operation::Read;
            for a in assignments {
                w.walk_part(&a.value);
                let next = assign(a.scope, &a.name, w);
                if next.rank() > op.rank() {
                    op = next;
                }
            }
            op
        }
        Set::ParenthesizedAssignments { variables, values } => {
            w.walk_part(values);
            let mut op = Operation::Session;
            for v in variables {
                op = assign(None, v, w);
            }
            op
        }
        Set::SetRole { context_modifier, .. } => named("role", scope_of(*context_modifier), w),
        Set::SetTimeZone { local, .. } => {
            let scope = if *local { SetScope::Local } else { SetScope::Session };
            named("timezone", scope, w)
        }
        Set::SetNames { charset_name, collation_name } => {
            let text = match collation_name {
                Some(c) => format!("{} COLLATE {c}", charset_name.value),
                None => charset_name.value.clone(),
            };
            set_names(&text, w)
        }
        Set::SetNamesDefault {} => set_names("DEFAULT", w),
        Set::SetTransaction { session: false, .. } => Operation::TransactionControl(TxControl::SetTransaction),
        Set::SetTransaction { session: true, .. } => named("transaction", SetScope::Session, w),
        Set::SetSessionParam(p) => {
            w.affinity(Affinity::SessionSet, p.to_string());
            Operation::Session
        }
    }
}

/// MySQL `SET NAMES charset [COLLATE c]` or `SET NAMES DEFAULT`.
fn set_names(shown: &str, w: &mut Walker<'_>) -> Operation {
    w.affinity(Affinity::SessionSet, format!("SET NAMES {shown}"));
    Operation::Session
}

fn scope_of(m: Option<ContextModifier>) -> SetScope {
    match m {
        Some(ContextModifier::Local) => SetScope::Local,
        Some(ContextModifier::Global) => SetScope::Global,
        Some(ContextModifier::Session) | None => SetScope::Session,
    }
}

/// One `name = value` assignment, MySQL variable prefixes included.
fn assign(scope: Option<ContextModifier>, variable: &ObjectName, w: &mut Walker<'_>) -> Operation {
    let name = object_name(variable);
    if name.starts_with('@') && !name.starts_with("@@") {
        w.affinity(Affinity::UserVariable, name);
        return Operation::Session;
    }
    let mut scope = scope_of(scope);
    let mut bare = name.trim_start_matches("@@");
    for (prefix, s) in [
        ("global.", SetScope::Global),
        ("persist.", SetScope::Global),
        ("persist_only.", SetScope::Global),
        ("session.", SetScope::Session),
        ("local.", SetScope::Session),
    ] {
        if let Some(rest) = bare.strip_prefix(prefix) {
            bare = rest;
            scope = s;
        }
    }
    // MySQL's LOCAL is a synonym of SESSION; only PostgreSQL has transaction-local SETs.
    if scope == SetScope::Local && w.dialect() == crate::Dialect::MySql {
        scope = SetScope::Session;
    }
    named(bare, scope, w)
}

fn named(name: &str, scope: SetScope, w: &mut Walker<'_>) -> Operation {
    match scope {
        SetScope::Session => {
            w.affinity(Affinity::SessionSet, name.to_owned());
            Operation::Session
        }
        SetScope::Local => {
            w.affinity(Affinity::TransactionScoped, format!("SET LOCAL {name}"));
            Operation::Session
        }
        SetScope::Global => {
            w.facts.note("set_global", name.to_owned());
            Operation::Admin
        }
    }
}
