//! SET statements: which variable, which scope, and what the session layer must track.
//!
//! PostgreSQL `SET` / `SET SESSION` and MySQL `SET [SESSION] x` are session state
//! ([`Affinity::SessionSet`]); `SET LOCAL` lasts until the end of the transaction
//! ([`Affinity::TransactionScoped`]); MySQL `SET GLOBAL` / `SET PERSIST` changes the server and is
//! an admin action; MySQL `SET @x` assigns a user variable ([`Affinity::UserVariable`]).

use sqlparser::ast::{ContextModifier, Expr, ObjectName, Set};

use super::facts::{Affinity, Operation, SessionEffect, SetScope, TxControl};
use super::walker::{object_name, Walker};

/// Classifies a SET and records its effects.
pub(super) fn set(set: &Set, w: &mut Walker<'_>) -> Operation {
    match set {
        Set::SingleAssignment { scope, variable, values, .. } => {
            w.walk_part(values);
            let value = render(values);
            assign(*scope, variable, Some(value), w)
        }
        Set::MultipleAssignments { assignments } => {
            let mut op = Operation::Read;
            for a in assignments {
                w.walk_part(&a.value);
                let next = assign(a.scope, &a.name, Some(a.value.to_string()), w);
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
                op = assign(None, v, None, w);
            }
            op
        }
        Set::SetRole { context_modifier, role_name } => {
            let value = role_name.as_ref().map_or_else(|| "NONE".to_owned(), |r| r.to_string());
            named("role", scope_of(*context_modifier), Some(value), w)
        }
        Set::SetTimeZone { local, value } => {
            let scope = if *local { SetScope::Local } else { SetScope::Session };
            named("timezone", scope, Some(value.to_string()), w)
        }
        Set::SetNames { charset_name, collation_name } => {
            let text = match collation_name {
                Some(c) => format!("{} COLLATE {c}", charset_name.value),
                None => charset_name.value.clone(),
            };
            set_names(Some(text), w)
        }
        Set::SetNamesDefault {} => set_names(None, w),
        Set::SetTransaction { session: false, .. } => Operation::TransactionControl(TxControl::SetTransaction),
        Set::SetTransaction { session: true, modes, .. } => {
            let value = modes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            named("transaction", SetScope::Session, Some(value), w)
        }
        Set::SetSessionParam(p) => {
            w.affinity(Affinity::SessionSet, p.to_string());
            Operation::Session
        }
    }
}

/// MySQL `SET NAMES charset [COLLATE c]`, or `SET NAMES DEFAULT` as `None`.
fn set_names(text: Option<String>, w: &mut Walker<'_>) -> Operation {
    let shown = text.clone().unwrap_or_else(|| "DEFAULT".into());
    w.affinity(Affinity::SessionSet, format!("SET NAMES {shown}"));
    w.facts.effects.push(SessionEffect::SetNames(text));
    Operation::Session
}

fn render(values: &[Expr]) -> String {
    values.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn scope_of(m: Option<ContextModifier>) -> SetScope {
    match m {
        Some(ContextModifier::Local) => SetScope::Local,
        Some(ContextModifier::Global) => SetScope::Global,
        Some(ContextModifier::Session) | None => SetScope::Session,
    }
}

/// One `name = value` assignment, MySQL variable prefixes included.
fn assign(
    scope: Option<ContextModifier>,
    variable: &ObjectName,
    value: Option<String>,
    w: &mut Walker<'_>,
) -> Operation {
    let name = object_name(variable);
    if name.starts_with('@') && !name.starts_with("@@") {
        w.affinity(Affinity::UserVariable, name.clone());
        w.facts.effects.push(SessionEffect::UserVariableSet(name));
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
    if scope == SetScope::Local && w.dialect() == crate::sql::Dialect::MySql {
        scope = SetScope::Session;
    }
    named(bare, scope, value, w)
}

fn named(name: &str, scope: SetScope, value: Option<String>, w: &mut Walker<'_>) -> Operation {
    let op = match scope {
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
    };
    w.facts.effects.push(SessionEffect::Set { name: name.to_owned(), scope, value });
    op
}
