//! A ring of buffers the kernel picks from when a receive completes (IORING_REGISTER_PBUF_RING,
//! Linux 5.19): a receive waiting for an idle peer then holds no memory of its own, so thousands
//! of idle connections cost no receive buffers; the bytes are copied out and the buffer goes
//! straight back to the ring.
//!
//! Invariant: no Rust reference covers memory the kernel may write. The ring's entries and the
//! buffers live in one anonymous mapping reached only through raw pointers; a buffer is read
//! through a slice only between the completion that hands it to us and [`Provided::give_back`],
//! when the kernel does not touch it, and the slice covers that one buffer. The mapping has no
//! `Drop`: it is unmapped only by [`Provided::free`], which takes the ring's proof that no
//! operation is left in the kernel ([`Quiet`]); any other end leaks it.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

use super::ring::Quiet;

/// The buffer group receives name to select from this ring.
pub(super) const GROUP: u16 = 0;
/// Bytes per buffer: a receive into one takes at most this much; a bigger message arrives over
/// several receives.
pub(super) const BUF_SIZE: usize = 4096;
/// Buffers in the ring (a power of two). All in use (a burst of completions not yet copied out):
/// a receive fails with ENOBUFS and is retried with a buffer of its own. Unit tests use a small
/// ring so that they can run it dry.
const COUNT: u16 = if cfg!(test) { 8 } else { 256 };
/// The ring's entries must start on a page; the buffers follow them on the next page boundary.
const PAGE: usize = 4096;
/// Where the buffers start in the mapping: after the entries, rounded up to a page.
const BUFFERS_AT: usize = (COUNT as usize * size_of::<BufRingEntry>()).next_multiple_of(PAGE);
/// The whole mapping; only the pages the kernel writes become resident.
const MAP_LEN: usize = BUFFERS_AT + COUNT as usize * BUF_SIZE;

/// The registered ring and the memory its buffers live in (see the module's invariant).
pub(super) struct Provided {
    /// Start of the mapping: `COUNT` entries, then `COUNT` buffers of `BUF_SIZE` bytes.
    base: NonNull<u8>,
    /// Our copy of the ring's tail: entries before it are the kernel's to use.
    tail: u16,
}

impl Provided {
    /// Registers the ring with `ring`; an error on kernels without buffer rings.
    pub(super) fn register(ring: &IoUring) -> io::Result<Self> {
        // SAFETY: a fresh private anonymous mapping; the result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let base = match NonNull::new(raw.cast::<u8>()) {
            Some(base) if raw != libc::MAP_FAILED => base,
            _ => return Err(io::Error::last_os_error()),
        };
        // SAFETY: the mapping is page-aligned, zeroed, holds COUNT entries and stays mapped until
        // `free`, which runs only once the kernel holds no operation (or never).
        if let Err(e) = unsafe { ring.submitter().register_buf_ring_with_flags(base.as_ptr() as u64, COUNT, GROUP, 0) }
        {
            // Never registered: the kernel has no pointer into it.
            unmap(base);
            return Err(e);
        }
        let mut me = Self { base, tail: 0 };
        for bid in 0..COUNT {
            me.give_back(bid);
        }
        Ok(me)
    }

    /// Start of buffer `bid` (< COUNT).
    fn buffer(&self, bid: u16) -> *mut u8 {
        self.base.as_ptr().wrapping_add(BUFFERS_AT + usize::from(bid) * BUF_SIZE)
    }

    /// Copies the first `n` bytes of buffer `bid` onto the end of `out`, then hands the buffer
    /// back to the kernel. Called only for a buffer a completion handed to us.
    pub(super) fn copy_out(&mut self, bid: u16, n: usize, out: &mut Vec<u8>) {
        if bid >= COUNT {
            return;
        }
        // SAFETY: buffer `bid` is inside the mapping and ours until `give_back` below (the
        // kernel writes a buffer only after it is published again); the slice covers it alone,
        // never a buffer the kernel may be filling meanwhile.
        let bytes = unsafe { std::slice::from_raw_parts(self.buffer(bid), n.min(BUF_SIZE)) };
        out.extend_from_slice(bytes);
        self.give_back(bid);
    }

    /// Makes buffer `bid` available to the kernel again.
    pub(super) fn give_back(&mut self, bid: u16) {
        if bid >= COUNT {
            return;
        }
        let addr = self.buffer(bid) as u64;
        let slot = usize::from(self.tail & (COUNT - 1));
        let entries = self.base.as_ptr().cast::<BufRingEntry>();
        // SAFETY: `slot` < COUNT, inside the mapping. The kernel reads entries only up to the
        // published tail and this one is past it until the store below; written field by field
        // through raw pointers (`struct io_uring_buf`: addr u64, len u32, bid u16) so that no
        // reference covers entry 0's last field, the tail the kernel reads meanwhile.
        unsafe {
            let entry = entries.add(slot).cast::<u8>();
            entry.cast::<u64>().write(addr);
            entry.add(8).cast::<u32>().write(BUF_SIZE as u32);
            entry.add(12).cast::<u16>().write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail lives in the first entry's reserved field, inside the mapping and
        // suitably aligned for a u16; the kernel only reads it (with acquire ordering), so a
        // shared reference to it as an atomic aliases no kernel write.
        let tail = unsafe { AtomicU16::from_ptr(BufRingEntry::tail(entries).cast_mut()) };
        tail.store(self.tail, Ordering::Release);
    }

    /// Unregisters the ring and unmaps its memory. `Quiet` proves that no operation is left in
    /// the kernel, so nothing can select or be filling a buffer.
    pub(super) fn free(self, ring: &IoUring, _quiet: &Quiet) {
        // An error leaves the kernel's registration (and its page references) to the ring's
        // close; the kernel still writes nothing without an operation.
        let _ = ring.submitter().unregister_buf_ring(GROUP);
        unmap(self.base);
    }

    /// The mapping's start and length, to check from a test whether it is still mapped.
    #[cfg(test)]
    pub(super) fn mapping(&self) -> (*const u8, usize) {
        (self.base.as_ptr(), MAP_LEN)
    }
}

fn unmap(base: NonNull<u8>) {
    // SAFETY: `base` is a mapping of MAP_LEN bytes made by `register` that nothing points into
    // any more (the callers' contract).
    unsafe { libc::munmap(base.as_ptr().cast(), MAP_LEN) };
    #[cfg(test)]
    UNMAPPED.with(|u| u.borrow_mut().push(base.as_ptr() as usize));
}

// Which mappings this thread unmapped. A test cannot ask the kernel instead: another test's ring
// may map the same addresses again at once (the freed hole is where the next mapping goes).
#[cfg(test)]
thread_local! {
    static UNMAPPED: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether this thread unmapped the provided-buffer mapping starting at `addr`.
#[cfg(test)]
pub(super) fn unmapped_here(addr: *const u8) -> bool {
    UNMAPPED.with(|u| u.borrow().contains(&(addr as usize)))
}
