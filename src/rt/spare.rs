//! Byte buffers reused across the streams and sessions of one core: a connection holds buffers
//! only while it has something in them, an idle one none, and the busy ones reuse what the
//! others gave back instead of allocating.

use super::executor::with_core;

/// Largest buffer kept for reuse: enough for any common message; a bigger one (a large result
/// streamed through) is freed.
const KEEP_CAPACITY: usize = 16 * 1024;
/// Most buffers a core keeps: more than its busy connections need at once.
const KEEP_COUNT: usize = 256;

/// The core's spare buffers, all empty.
#[derive(Default)]
pub(super) struct Spares(Vec<Vec<u8>>);

impl Spares {
    fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_default()
    }

    fn give(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() > 0 && buf.capacity() <= KEEP_CAPACITY && self.0.len() < KEEP_COUNT {
            buf.clear();
            self.0.push(buf);
        }
    }
}

/// An empty buffer, with the allocation of a spare one when the core has one.
pub fn spare_buffer() -> Vec<u8> {
    with_core(|core| core.spares.borrow_mut().take()).unwrap_or_default()
}

/// Moves `buf`'s allocation (its contents dropped) to the core's spares, leaving `buf` empty
/// and without capacity. Inlined: a few loads and a push, called ~5 times a transaction, and
/// out of line each call paid a frame around them (#39).
#[inline]
pub fn recycle(buf: &mut Vec<u8>) {
    let buf = std::mem::take(buf);
    let _ = with_core(|core| core.spares.borrow_mut().give(buf));
}

/// Gives `buf` a spare allocation if it has none, so filling it does not allocate.
pub fn refill(buf: &mut Vec<u8>) {
    if buf.capacity() == 0 {
        *buf = spare_buffer();
    }
}
