//! A ring of buffers the kernel picks from when a receive completes (IORING_REGISTER_PBUF_RING,
//! Linux 5.19): a receive waiting for an idle peer then holds no memory of its own, so thousands
//! of idle connections cost no receive buffers; the bytes are copied out and the buffer goes
//! straight back to the ring.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffer group receives name to select from this ring.
pub(super) const GROUP: u16 = 0;
/// Bytes per buffer: a receive into one takes at most this much; a bigger message arrives over
/// several receives.
pub(super) const BUF_SIZE: usize = 4096;
/// Buffers in the ring (a power of two). All in use (a burst of completions not yet copied out):
/// a receive fails with ENOBUFS and is retried with a buffer of its own. Unit tests use a small
/// ring so that they can run it dry.
const COUNT: u16 = if cfg!(test) { 8 } else { 256 };
/// The ring's entries must start on a page.
const PAGE: usize = 4096;

/// The registered ring and the memory its buffers live in.
pub(super) struct Provided {
    entries: *mut BufRingEntry,
    layout: Layout,
    /// The buffers, `COUNT * BUF_SIZE` bytes; only the pages the kernel writes become resident.
    mem: Box<[u8]>,
    /// Our copy of the ring's tail: entries before it are the kernel's to use.
    tail: u16,
}

impl Provided {
    /// Registers the ring with `ring`; an error on kernels without buffer rings.
    pub(super) fn register(ring: &IoUring) -> io::Result<Self> {
        let layout = Layout::from_size_align(usize::from(COUNT) * size_of::<BufRingEntry>(), PAGE)
            .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut me =
            Self { entries, layout, mem: vec![0u8; usize::from(COUNT) * BUF_SIZE].into_boxed_slice(), tail: 0 };
        // SAFETY: `entries` is page-aligned, holds COUNT entries and lives (with `mem`) until
        // `self` is dropped, which the ring owning `self` does only after closing the io_uring.
        unsafe { ring.submitter().register_buf_ring_with_flags(entries as u64, COUNT, GROUP, 0) }?;
        for bid in 0..COUNT {
            me.give_back(bid);
        }
        Ok(me)
    }

    /// Copies the first `n` bytes of buffer `bid` onto the end of `out`, then hands the buffer
    /// back to the kernel.
    pub(super) fn copy_out(&mut self, bid: u16, n: usize, out: &mut Vec<u8>) {
        let start = usize::from(bid) * BUF_SIZE;
        if let Some(bytes) = self.mem.get(start..start + n.min(BUF_SIZE)) {
            out.extend_from_slice(bytes);
        }
        self.give_back(bid);
    }

    /// Makes buffer `bid` available to the kernel again.
    pub(super) fn give_back(&mut self, bid: u16) {
        if bid >= COUNT {
            return;
        }
        let addr = self.mem.as_mut_ptr().wrapping_add(usize::from(bid) * BUF_SIZE) as u64;
        let slot = usize::from(self.tail & (COUNT - 1));
        // SAFETY: `slot` < COUNT, inside the allocation. The kernel reads entries only up to the
        // published tail and this one is past it until the store below; written field by field
        // through raw pointers (`struct io_uring_buf`: addr u64, len u32, bid u16) so that no
        // reference covers entry 0's last field, the tail the kernel reads meanwhile.
        unsafe {
            let entry = self.entries.add(slot).cast::<u8>();
            entry.cast::<u64>().write(addr);
            entry.add(8).cast::<u32>().write(BUF_SIZE as u32);
            entry.add(12).cast::<u16>().write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail lives in the first entry's reserved field, inside the allocation and
        // suitably aligned for a u16; the kernel reads it with acquire ordering.
        let tail = unsafe { &*BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for Provided {
    fn drop(&mut self) {
        // SAFETY: allocated in `register` with this layout; the io_uring is closed by now.
        unsafe { dealloc(self.entries.cast(), self.layout) };
    }
}
