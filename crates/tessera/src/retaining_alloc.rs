//! A global allocator for programs that read large results again and again (the Python
//! extension, the CLI): the system allocator, plus a bounded cache of freed large blocks.
//!
//! Each read hands its caller fresh result columns (tens of MB), which the caller frees after
//! use. The system allocator returns such blocks to the kernel at once (`munmap`), so the next
//! read's columns are fresh pages again: one page fault and one page zeroing per 4 KiB, a third
//! of the CPU of a warm read of many cells (perf of 8 sparse reads of 1.2M cells each). Here a
//! freed block of at least `LARGE` bytes is kept (up to a byte budget, the oldest given back
//! first) and handed to the next large allocation it fits, so its pages stay mapped.
//!
//! The cache's lock is never waited for: an allocation that finds it taken goes to the system
//! allocator. So a child process forked while another thread held it (which would wait
//! forever) only loses the cache, and a contended lock costs one reuse, not a wait.
//!
//! On other systems than Linux the allocator is the system allocator alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Blocks from this size on are kept when freed.
pub(crate) const LARGE: usize = 1 << 20;
/// Bytes kept at most unless [`RetainingAllocator::set_budget`] says otherwise.
pub(crate) const DEFAULT_BUDGET: usize = 256 << 20;
/// Free heap top the C allocator keeps mapped after [`RetainingAllocator::tune_system_allocator`].
pub(crate) const TRIM_THRESHOLD: usize = 32 << 20;
/// Blocks kept at most.
const SLOTS: usize = 32;
/// The alignment `malloc` guarantees (x86-64 and AArch64 Linux).
const MALLOC_ALIGN: usize = 16;

/// Freed large blocks, oldest first: (address, usable size).
#[derive(Debug)]
struct Kept {
    blocks: [(usize, usize); SLOTS],
    len: usize,
    bytes: usize,
}

impl Kept {
    /// Takes block `i` out of the list.
    fn remove(&mut self, i: usize) -> (usize, usize) {
        let block = self.blocks[i];
        self.blocks.copy_within(i + 1..self.len, i);
        self.len -= 1;
        self.bytes -= block.1;
        block
    }
}

/// The system allocator with a cache of freed large blocks (see the module doc). Use it as
/// `#[global_allocator] static A: RetainingAllocator = RetainingAllocator::new();`.
#[derive(Debug)]
pub struct RetainingAllocator {
    kept: Mutex<Kept>,
    budget: AtomicUsize,
}

impl Default for RetainingAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl RetainingAllocator {
    /// An allocator that keeps up to `DEFAULT_BUDGET` bytes of freed large blocks.
    pub const fn new() -> Self {
        Self {
            kept: Mutex::new(Kept { blocks: [(0, 0); SLOTS], len: 0, bytes: 0 }),
            budget: AtomicUsize::new(DEFAULT_BUDGET),
        }
    }

    /// Keeps at most `bytes` of freed blocks from now on (0: none); what is kept beyond it is
    /// given back to the system now (unless another thread holds the cache at that instant:
    /// then as blocks are freed).
    pub fn set_budget(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
        self.trim(bytes);
    }

    /// Tunes the C allocator for the blocks under `LARGE` that a read makes and frees (a
    /// tile's matches, hash partitions): glibc maps each block from 128 KiB on afresh and gives
    /// back the free top of its heaps past 128 KiB, so such blocks came back as fresh pages on
    /// every read (5,500 page faults, a fifth of the time of a warm sparse read of 1M cells).
    /// Blocks under `LARGE` now come from the heap, and up to `TRIM_THRESHOLD` of free heap
    /// top stays mapped. Process-wide; with glibc only, a no-op elsewhere.
    pub fn tune_system_allocator(&self) {
        os::tune(LARGE, TRIM_THRESHOLD);
    }

    /// The budget in force.
    pub fn budget(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }

    /// Bytes of freed blocks kept now (0 while another thread uses the cache).
    pub fn kept_bytes(&self) -> usize {
        self.kept.try_lock().map_or(0, |k| k.bytes)
    }

    /// Gives every kept block back to the system (those kept right now by another thread's
    /// free stay).
    pub fn release(&self) {
        self.trim(0);
    }

    /// Gives back the oldest kept blocks until at most `limit` bytes are kept.
    fn trim(&self, limit: usize) {
        let Ok(mut k) = self.kept.try_lock() else { return };
        while k.bytes > limit && k.len > 0 {
            os::free(k.remove(0).0);
        }
    }

    /// A kept block of at least `size` bytes and less than twice that, the smallest such.
    fn take(&self, size: usize) -> Option<*mut u8> {
        let mut k = self.kept.try_lock().ok()?;
        let len = k.len;
        let best =
            (0..len).filter(|&i| k.blocks[i].1 >= size && k.blocks[i].1 / 2 < size).min_by_key(|&i| k.blocks[i].1)?;
        Some(k.remove(best).0 as *mut u8)
    }

    /// Keeps the freed block `p` (usable size `size`) if the budget allows, giving back older
    /// blocks to make room; otherwise gives it back.
    fn keep(&self, p: usize, size: usize) {
        let budget = self.budget();
        let Ok(mut k) = self.kept.try_lock() else { return os::free(p) };
        if size > budget {
            drop(k);
            return os::free(p);
        }
        while k.len > 0 && (k.len == SLOTS || k.bytes + size > budget) {
            os::free(k.remove(0).0);
        }
        let len = k.len;
        k.blocks[len] = (p, size);
        k.len += 1;
        k.bytes += size;
    }

    /// Whether blocks of `layout` come from `malloc` and may be kept.
    fn by_malloc(layout: Layout) -> bool {
        os::ENABLED && layout.align() <= MALLOC_ALIGN
    }
}

// SAFETY: every block comes from `malloc`/`realloc` (alignment up to 16, which `malloc`
// guarantees) or, for larger alignments, from `System`; a block is freed by the same family.
// A kept block is handed out to one allocation only (it leaves the list under the lock), is at
// least as large as asked, and is given back with `free` whatever size its user believed.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for RetainingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::by_malloc(layout) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc(layout) };
        }
        if layout.size() >= LARGE {
            if let Some(p) = self.take(layout.size()) {
                return p;
            }
        }
        os::malloc(layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::by_malloc(layout) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc_zeroed(layout) };
        }
        if layout.size() >= LARGE {
            if let Some(p) = self.take(layout.size()) {
                // SAFETY: `p` is a block of at least `layout.size()` bytes that nobody else holds.
                unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                return p;
            }
        }
        os::calloc(layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !Self::by_malloc(layout) {
            // SAFETY: `ptr` came from `System` with this layout (see `alloc`).
            return unsafe { System.dealloc(ptr, layout) };
        }
        if layout.size() >= LARGE {
            return self.keep(ptr as usize, os::usable_size(ptr));
        }
        os::free(ptr as usize)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !Self::by_malloc(layout) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // A vector growing past `LARGE` moves into a kept block rather than fresh pages (which
        // `realloc` would map, each page faulted in and zeroed on first touch).
        if new_size >= LARGE && new_size > layout.size() {
            if let Some(p) = self.take(new_size) {
                // SAFETY: `p` holds at least `new_size` > `layout.size()` bytes and nobody else
                // holds it; `ptr` holds `layout.size()` bytes; the blocks are distinct.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, p, layout.size());
                    self.dealloc(ptr, layout);
                }
                return p;
            }
        }
        os::realloc(ptr, new_size)
    }
}

/// The C allocator's calls (Linux); elsewhere `ENABLED` is false and these are never called.
#[allow(unsafe_code)]
mod os {
    #[cfg(target_os = "linux")]
    pub(super) const ENABLED: bool = true;
    #[cfg(not(target_os = "linux"))]
    pub(super) const ENABLED: bool = false;

    /// Sets glibc's mmap and trim thresholds (a no-op with other C libraries).
    pub(super) fn tune(mmap_threshold: usize, trim_threshold: usize) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let clamp = |v: usize| libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX);
            // SAFETY: `mallopt` takes any values; glibc rejects those it does not accept.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, clamp(mmap_threshold));
                libc::mallopt(libc::M_TRIM_THRESHOLD, clamp(trim_threshold));
            }
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        let _ = (mmap_threshold, trim_threshold);
    }

    pub(super) fn malloc(size: usize) -> *mut u8 {
        // SAFETY: plain `malloc`; a null result is the allocation failure `GlobalAlloc` expects.
        unsafe { libc::malloc(size).cast() }
    }

    pub(super) fn calloc(size: usize) -> *mut u8 {
        // SAFETY: as `malloc`.
        unsafe { libc::calloc(1, size).cast() }
    }

    pub(super) fn realloc(p: *mut u8, size: usize) -> *mut u8 {
        // SAFETY: `p` came from `malloc`/`calloc`/`realloc` (the callers' invariant).
        unsafe { libc::realloc(p.cast(), size).cast() }
    }

    pub(super) fn free(p: usize) {
        // SAFETY: `p` came from `malloc`/`calloc`/`realloc` and is freed once.
        unsafe { libc::free(p as *mut libc::c_void) }
    }

    #[cfg(target_os = "linux")]
    pub(super) fn usable_size(p: *mut u8) -> usize {
        // SAFETY: `p` is a live block of `malloc`.
        unsafe { libc::malloc_usable_size(p.cast()) }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn usable_size(_: *mut u8) -> usize {
        0
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).expect("layout")
    }

    #[test]
    fn a_freed_large_block_is_handed_out_again_and_the_budget_holds() {
        let a = RetainingAllocator::new();
        a.set_budget(5 << 20);
        // SAFETY: each block is written inside its size and freed once with its layout.
        unsafe {
            let p = a.alloc(layout(2 << 20));
            p.write_bytes(7, 2 << 20);
            a.dealloc(p, layout(2 << 20));
            assert!(a.kept_bytes() >= 2 << 20);
            let q = a.alloc_zeroed(layout(3 << 19)); // 1.5 MiB fits the 2 MiB block
            assert_eq!(q, p);
            assert!(std::slice::from_raw_parts(q, 3 << 19).iter().all(|&b| b == 0));
            assert_eq!(a.kept_bytes(), 0);
            let r = a.alloc(layout(4 << 20)); // too large for nothing kept: a new block
            a.dealloc(q, layout(3 << 19));
            a.dealloc(r, layout(4 << 20)); // 2 + 4 MiB > 5 MiB: the older block goes
            assert!(a.kept_bytes() >= 4 << 20 && a.kept_bytes() < 5 << 20);
            let small = a.alloc(layout(1 << 10));
            assert_ne!(small, r);
            a.dealloc(small, layout(1 << 10));
            let big = a.alloc(layout(16 << 20)); // over the budget: never kept
            a.dealloc(big, layout(16 << 20));
            assert!(a.kept_bytes() < 5 << 20);
        }
        a.release();
        assert_eq!(a.kept_bytes(), 0);
    }

    #[test]
    fn a_taken_lock_is_never_waited_for() {
        // As in a child forked while another thread held the cache: allocations go around it.
        let a = RetainingAllocator::new();
        // SAFETY: blocks freed once with their layouts.
        unsafe {
            let p = a.alloc(layout(2 << 20));
            a.dealloc(p, layout(2 << 20));
            let kept = a.kept_bytes();
            let held = a.kept.lock().expect("lock");
            let q = a.alloc_zeroed(layout(2 << 20));
            assert!(std::slice::from_raw_parts(q, 2 << 20).iter().all(|&b| b == 0));
            a.dealloc(q, layout(2 << 20));
            a.release();
            assert_eq!(held.bytes, kept);
            drop(held);
        }
        assert!(a.kept_bytes() > 0);
        a.release();
        assert_eq!(a.kept_bytes(), 0);
    }

    #[test]
    fn a_block_is_not_handed_to_a_request_of_less_than_half_its_size() {
        let a = RetainingAllocator::new();
        // SAFETY: blocks freed once with their layouts.
        unsafe {
            let p = a.alloc(layout(8 << 20));
            a.dealloc(p, layout(8 << 20));
            let q = a.alloc(layout(1 << 20));
            assert_ne!(q, p);
            a.dealloc(q, layout(1 << 20));
        }
        a.release();
    }

    #[test]
    fn a_block_growing_past_the_large_size_moves_into_a_kept_block() {
        let a = RetainingAllocator::new();
        // SAFETY: blocks written inside their sizes and freed once with their layouts.
        unsafe {
            let p = a.alloc(layout(4 << 20));
            a.dealloc(p, layout(4 << 20));
            let small = a.alloc(layout(1 << 19));
            small.write_bytes(9, 1 << 19);
            let grown = a.realloc(small, layout(1 << 19), 3 << 20);
            assert_eq!(grown, p);
            assert!(std::slice::from_raw_parts(grown, 1 << 19).iter().all(|&b| b == 9));
            a.dealloc(grown, layout(3 << 20));
        }
        a.release();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Live blocks never overlap, keep what was written into them (through reallocation
        /// too), and the bytes kept never pass the budget.
        #[test]
        fn blocks_stay_distinct_and_keep_their_bytes(
            ops in proptest::collection::vec((0usize..4, 1usize..(6 << 20), any::<u8>()), 1..60),
            budget in 0usize..(24 << 20),
        ) {
            let a = RetainingAllocator::new();
            a.set_budget(budget);
            let mut live: Vec<(*mut u8, usize, u8)> = Vec::new();
            for (op, size, fill) in ops {
                // SAFETY: blocks are used inside their sizes and freed once with their layouts.
                unsafe {
                    match op {
                        0 | 1 => {
                            let p = if op == 0 { a.alloc(layout(size)) } else { a.alloc_zeroed(layout(size)) };
                            prop_assert!(!p.is_null());
                            if op == 1 {
                                prop_assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                            }
                            p.write_bytes(fill, size);
                            live.push((p, size, fill));
                        }
                        2 if !live.is_empty() => {
                            let (p, old, f) = live.swap_remove(size % live.len());
                            let q = a.realloc(p, layout(old), size);
                            prop_assert!(!q.is_null());
                            let kept = old.min(size);
                            prop_assert!(std::slice::from_raw_parts(q, kept).iter().all(|&b| b == f));
                            q.write_bytes(fill, size);
                            live.push((q, size, fill));
                        }
                        _ if !live.is_empty() => {
                            let (p, s, f) = live.swap_remove(size % live.len());
                            prop_assert!(std::slice::from_raw_parts(p, s).iter().all(|&b| b == f));
                            a.dealloc(p, layout(s));
                        }
                        _ => {}
                    }
                }
                prop_assert!(a.kept_bytes() <= budget);
                let mut spans: Vec<(usize, usize)> = live.iter().map(|&(p, s, _)| (p as usize, p as usize + s)).collect();
                spans.sort_unstable();
                prop_assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0));
            }
            for (p, s, f) in live {
                // SAFETY: as above.
                unsafe {
                    prop_assert!(std::slice::from_raw_parts(p, s).iter().all(|&b| b == f));
                    a.dealloc(p, layout(s));
                }
            }
            a.release();
            prop_assert_eq!(a.kept_bytes(), 0);
        }
    }
}
