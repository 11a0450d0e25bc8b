//! Names many sessions of a core share (a client's user and database): one allocation per
//! distinct name on the core, not two per session. Two `String`s were about 100 bytes of every
//! idle PostgreSQL client's RSS (#39).

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

/// Distinct names past which the names no session holds any more are dropped: the set stays
/// within twice the names in use, or this floor.
const PRUNE_FLOOR: usize = 64;

struct Names {
    set: HashSet<Rc<str>>,
    prune_at: usize,
}

thread_local! {
    static NAMES: RefCell<Names> = RefCell::new(Names { set: HashSet::new(), prune_at: PRUNE_FLOOR });
}

/// This core's shared copy of `name`.
pub(super) fn shared(name: &str) -> Rc<str> {
    NAMES.with_borrow_mut(|names| {
        if let Some(known) = names.set.get(name) {
            return known.clone();
        }
        if names.set.len() >= names.prune_at {
            // Only the set holds it: every session that used the name has ended.
            names.set.retain(|n| Rc::strong_count(n) > 1);
            names.prune_at = (names.set.len() * 2).max(PRUNE_FLOOR);
        }
        let new: Rc<str> = Rc::from(name);
        names.set.insert(new.clone());
        new
    })
}

#[cfg(test)]
mod tests;
