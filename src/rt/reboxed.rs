//! Futures boxed in blocks a thread reuses (#39). A session boxes the future that handles each
//! unit of its client's work, so that an idle session's task holds only what waiting needs; a
//! block of that size is above the allocator's per-thread cache, and allocating and freeing it
//! took ~400 instructions a unit. A block given back is kept for the next unit of any session of
//! the thread, so an idle session still holds none.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Most blocks of one layout a thread keeps: more than its sessions handle units at once.
const KEEP_COUNT: usize = 256;

/// The thread's spare blocks, by layout (a wire's handler future has one; there are few).
#[derive(Default)]
struct Blocks(Vec<(Layout, Vec<NonNull<u8>>)>);

impl Blocks {
    fn take(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        self.0.iter_mut().find(|(l, _)| *l == layout)?.1.pop()
    }

    /// Keeps `block` unless enough of its layout are kept; `false` when it was not.
    fn keep(&mut self, layout: Layout, block: NonNull<u8>) -> bool {
        let at = match self.0.iter().position(|(l, _)| *l == layout) {
            Some(at) => at,
            None => {
                self.0.push((layout, Vec::new()));
                self.0.len() - 1
            }
        };
        let kept = &mut self.0[at].1;
        if kept.len() >= KEEP_COUNT {
            return false;
        }
        kept.push(block);
        true
    }
}

impl Drop for Blocks {
    fn drop(&mut self) {
        for (layout, blocks) in self.0.drain(..) {
            for block in blocks {
                // SAFETY: every kept block was allocated with its layout and holds no value.
                unsafe { dealloc(block.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static BLOCKS: RefCell<Blocks> = RefCell::new(Blocks::default());
}

/// A block for `layout` (not zero-sized): a spare one, else a new one.
fn take(layout: Layout) -> NonNull<u8> {
    if let Some(block) = BLOCKS.try_with(|b| b.borrow_mut().take(layout)).ok().flatten() {
        return block;
    }
    // SAFETY: `layout` is not zero-sized (see `rebox`).
    NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
}

/// Gives back a block of `layout` whose value was dropped: kept, or freed.
fn give(layout: Layout, block: NonNull<u8>) {
    // A thread being torn down has no spares any more: the block is freed.
    if BLOCKS.try_with(|b| b.borrow_mut().keep(layout, block)) != Ok(true) {
        // SAFETY: `block` was allocated with `layout` and holds no value.
        unsafe { dealloc(block.as_ptr(), layout) };
    }
}

/// The future `make` makes, in a block of its own (`Box::pin`'s effect, the block reused
/// across units). Made once the block is there, the future may be written into it directly
/// rather than made on the stack and copied (its full size, a few KB, whatever little of it
/// a future that has not started yet holds).
#[inline(always)]
pub fn rebox<F: Future>(make: impl FnOnce() -> F) -> Reboxed<F> {
    let layout = Layout::new::<F>();
    let ptr = if layout.size() == 0 { NonNull::dangling() } else { take(layout).cast::<F>() };
    // SAFETY: the block is valid for a write of `F` and holds nothing.
    unsafe { ptr.as_ptr().write(make()) };
    Reboxed { ptr, _owns: PhantomData }
}

/// A future in its own block ([`rebox`]), which it never leaves until it is dropped there.
pub struct Reboxed<F> {
    ptr: NonNull<F>,
    _owns: PhantomData<F>,
}

// The future is pinned in its block, not in this handle.
impl<F> Unpin for Reboxed<F> {}

impl<F: Future> Future for Reboxed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the value lives in its block from `rebox` until `drop` drops it in place.
        unsafe { Pin::new_unchecked(&mut *self.ptr.as_ptr()) }.poll(cx)
    }
}

impl<F> Drop for Reboxed<F> {
    fn drop(&mut self) {
        // SAFETY: the value is live and dropped once, where it was pinned.
        unsafe { std::ptr::drop_in_place(self.ptr.as_ptr()) };
        let layout = Layout::new::<F>();
        if layout.size() != 0 {
            give(layout, self.ptr.cast());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// A future that owns `drops`: ready with `value` at its first poll, or never (`stays`).
    async fn holding(drops: Rc<()>, value: u64, stays: bool) -> u64 {
        let _held = drops;
        if stays {
            std::future::pending::<()>().await;
        }
        value
    }

    #[test]
    fn a_block_is_reused_and_values_are_dropped_in_it() {
        let drops = Rc::new(());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut first = rebox(|| holding(drops.clone(), 7, false));
        let at = first.ptr.cast::<u8>();
        assert_eq!(Pin::new(&mut first).poll(&mut cx), Poll::Ready(7));
        drop(first);
        assert_eq!(Rc::strong_count(&drops), 1);
        // Dropped before it ended: its value still goes, in its block.
        let mut second = rebox(|| holding(drops.clone(), 8, true));
        assert_eq!(second.ptr.cast::<u8>(), at, "the block given back is taken again");
        assert!(Pin::new(&mut second).poll(&mut cx).is_pending());
        assert_eq!(Rc::strong_count(&drops), 2);
        drop(second);
        assert_eq!(Rc::strong_count(&drops), 1);
    }

    #[test]
    fn zero_sized_futures_take_no_block() {
        let mut never = rebox(std::future::pending::<u8>);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(Pin::new(&mut never).poll(&mut cx).is_pending());
    }
}
