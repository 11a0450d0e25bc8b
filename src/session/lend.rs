//! Parts of a session that only a busy one needs (the statement in flight, the backend
//! connection, a bridge's state), held in a box lent by the core while the session works and
//! given back when it waits idle, so an idle session's task holds a pointer to a shared empty
//! part instead of the part itself (#39: thousands of idle clients, each a few KB).
//!
//! The boxes come from a per-core shelf of spares and go back to it, so a session going from
//! idle to busy and back allocates nothing once the core served as many at a time before.
//! A part goes back only when it holds nothing (`Lend::is_fresh`): what it held stays with
//! the session, which simply keeps its box.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::thread::LocalKey;

/// Spares kept per part and core: a burst of more busy sessions than this frees the rest.
const SPARES_MAX: usize = 1024;

/// A part a session may hand back while idle.
pub(super) trait Lend: Default + 'static {
    /// Whether the part holds nothing a later unit could read: parked, it reads as empty.
    fn is_fresh(&self) -> bool;
    /// This core's shelf of the part.
    fn shelf() -> &'static LocalKey<Shelf<Self>>;
}

/// One core's spares of a part, and the empty part parked sessions read.
pub(super) struct Shelf<T: 'static> {
    /// Made once per core and thread and never changed: a parked part reads as this.
    empty: &'static T,
    spares: RefCell<Vec<Box<T>>>,
}

impl<T: Default> Shelf<T> {
    pub fn new() -> Self {
        // One part per core for the life of its thread, shared by all its parked sessions.
        Self { empty: Box::leak(Box::default()), spares: RefCell::new(Vec::new()) }
    }

    fn lend(&self) -> Box<T> {
        self.spares.borrow_mut().pop().unwrap_or_default()
    }

    fn give(&self, part: Box<T>) {
        let mut spares = self.spares.borrow_mut();
        if spares.len() < SPARES_MAX {
            spares.push(part);
        }
    }

    #[cfg(test)]
    fn spares(&self) -> usize {
        self.spares.borrow().len()
    }
}

/// A session's part: in its lent box while the session uses it, else the core's empty one.
/// Reading never lends; writing lends a box first.
pub(super) struct Lent<T: 'static> {
    held: Option<Box<T>>,
    empty: &'static T,
}

impl<T: Lend> Lent<T> {
    /// Gives the box back when the part holds nothing; the session reads the empty part again.
    pub fn park(&mut self) {
        if self.held.as_deref().is_some_and(T::is_fresh) {
            if let Some(part) = self.held.take() {
                T::shelf().with(|s| s.give(part));
            }
        }
    }

    /// The part, when the session holds its own: what must not lend a box just to look.
    pub fn held_mut(&mut self) -> Option<&mut T> {
        self.held.as_deref_mut()
    }
}

impl<T: Lend> Default for Lent<T> {
    fn default() -> Self {
        Self { held: None, empty: T::shelf().with(|s| s.empty) }
    }
}

// Inline: the wires reach their parts through these on every message.
impl<T: Lend> Deref for Lent<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.held.as_deref().unwrap_or(self.empty)
    }
}

impl<T: Lend> DerefMut for Lent<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.held.get_or_insert_with(lend)
    }
}

/// A box from this core's shelf: once per unit of a session that went idle in between.
#[cold]
fn lend<T: Lend>() -> Box<T> {
    T::shelf().with(Shelf::lend)
}

impl<T: Lend + std::fmt::Debug> std::fmt::Debug for Lent<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Makes `$part` lendable, fresh when `$fresh(&part)` says so, with a shelf of its own per core.
macro_rules! lendable {
    ($part:ty, $fresh:expr) => {
        impl $crate::session::lend::Lend for $part {
            fn is_fresh(&self) -> bool {
                $fresh(self)
            }

            fn shelf() -> &'static std::thread::LocalKey<$crate::session::lend::Shelf<Self>> {
                thread_local!(static SHELF: $crate::session::lend::Shelf<$part> = $crate::session::lend::Shelf::new());
                &SHELF
            }
        }
    };
}
pub(super) use lendable;

lendable!(Option<crate::pool::Conn>, Option::is_none);

#[cfg(test)]
mod tests;
