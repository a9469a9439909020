//! Sampled heap profiles: where a program allocates, and what it still holds
//! ([`Profiled`], a global allocator over any other).
//!
//! ```ignore
//! #[global_allocator]
//! static A: tickscope::alloc::Profiled<std::alloc::System> =
//!     tickscope::alloc::Profiled::new(std::alloc::System);
//! ```
//!
//! **Sampling.** Each thread counts down the bytes it allocates; when the count crosses zero
//! the allocation that crossed it is sampled (its stack, by frame pointers, and its size) and
//! a new count is drawn from an exponential distribution of mean `TICKSCOPE_HEAP_RATE` bytes
//! (512 KiB by default, as Go and tcmalloc). An allocation of `s` bytes is so sampled with
//! probability `1 - exp(-s / rate)`, whatever came before it, and the profile divides each
//! sample by that probability (Go's formula): its figures estimate every allocation.
//!
//! **Cost.** The unsampled allocation is a thread-local subtraction and a compare; the
//! unsampled free a byte loaded from a 16 KiB counting filter of the sampled blocks' addresses
//! (a block whose byte is 0 was never sampled). The profiler's own allocations (its tables, the
//! symbols at the end) are not profiled: a thread-local flag is set while it works.
//!
//! **Safety.** Nothing here waits on a lock for long: the table is taken with a bounded
//! number of tries, and a sample or a free that cannot take it is counted, not waited for (a
//! fork child whose parent held it, an allocation from a signal handler that interrupted the
//! profiler on its own thread). Memory is bounded: at most 2^20 sampled blocks live (a hash
//! table of about 50 MiB at the worst), 65,536 distinct stacks of at most 64 frames (32 MiB)
//! and 2^18 figures by stack and size (17 MiB): about 100 MiB in all at the worst; what does
//! not fit is counted as dropped (the limits are `table`'s constants).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

#[allow(unsafe_code)] // `GlobalAlloc` is an unsafe trait: its methods pass their contract on
mod global;
pub(crate) mod table;

pub use global::Profiled;
pub use table::HeapProfile;

/// The mean sampling interval in bytes without `TICKSCOPE_HEAP_RATE` (Go's and tcmalloc's).
pub const DEFAULT_RATE: u64 = 512 * 1024;

/// The sampling interval: 0 until read; [`OFF`] when sampling is off.
static RATE: AtomicU64 = AtomicU64::new(0);
const OFF: u64 = u64::MAX;

thread_local! {
    /// This thread's count: the bytes it allocates before its next sample, and its
    /// allocations and their bytes. One thread-local, so that an allocation reaches it once
    /// (in a shared library, each thread-local is a call to `__tls_get_addr`).
    static COUNT: Cell<Count> = const { Cell::new(Count { left: 0, n: 0, bytes: 0 }) };
    /// This thread is inside the profiler: its allocations and frees are not profiled.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// This thread's random state (0: its first allocation is yet to come).
    static RNG: Cell<u64> = const { Cell::new(0) };
    /// This thread's stack, `[low, high)` (0, 0: not read yet, or unknown).
    static STACK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A thread's count (see `COUNT`).
#[derive(Clone, Copy)]
struct Count {
    /// Bytes to allocate before the next sample; at or below 0, a sample.
    left: i64,
    /// Allocations this thread made, and their bytes, every one counted (the profiler's own
    /// left out): what scopes read at their entry and exit for their exact counts.
    n: u64,
    bytes: u64,
}

/// This thread's allocations and their bytes (what the profiler's own work puts back).
#[inline(always)]
fn counts() -> (u64, u64) {
    let c = COUNT.get();
    (c.n, c.bytes)
}

/// Puts this thread's allocations and bytes back to `(n, bytes)`, its count to the next
/// sample as it is.
#[inline(always)]
fn set_counts((n, bytes): (u64, u64)) {
    let c = COUNT.get();
    COUNT.set(Count { n, bytes, ..c });
}

/// Sets the bytes this thread allocates before its next sample.
#[inline(always)]
fn set_left(left: i64) {
    let c = COUNT.get();
    COUNT.set(Count { left, ..c });
}

/// Set by the first allocation through [`Profiled`]: the wrapper is the global allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether [`Profiled`] is the program's global allocator (it has allocated at least once).
/// Not a stable API: the library reads it to count allocations by scope.
#[doc(hidden)]
pub fn installed() -> bool {
    INSTALLED.load(Relaxed)
}

/// How many allocations the calling thread made through [`Profiled`] so far, and their bytes
/// (a reallocation counts as one allocation of its new size; the profiler's own are left
/// out). Not a stable API: scopes read it at their entry and exit.
#[doc(hidden)]
#[inline(always)]
pub fn thread_counts() -> (u64, u64) {
    counts()
}

/// An allocation of `size` bytes at `at`: counted down, sampled where the count crosses 0.
#[inline(always)]
pub(crate) fn allocated(at: usize, size: usize) {
    let c = COUNT.get();
    let (n, bytes) = (c.n.wrapping_add(1), c.bytes.wrapping_add(size as u64));
    // No overflow: a count starts at most at i64::MAX and is redrawn once it is not
    // positive; only the profiler's own allocations (`BUSY`) take it further below 0, by
    // their sizes, far from i64::MIN. One instruction where a saturating subtraction was
    // three.
    let left = c.left.wrapping_sub(size as i64);
    if left > 0 {
        COUNT.set(Count { left, n, bytes });
    } else {
        COUNT.set(Count { n, bytes, ..c });
        sample(at, size, left);
    }
}

/// A free of the block at `at`: looked for among the sampled blocks only where the filter
/// says it may be one.
#[inline(always)]
pub(crate) fn freed(at: usize) {
    if table::maybe_sampled(at) {
        freed_slow(at);
    }
}

#[cold]
#[inline(never)]
fn freed_slow(at: usize) {
    if BUSY.replace(true) {
        return;
    }
    let counts = counts();
    if let Some(bytes) = table::forget(at) {
        (crate::library::get().heap_in_use)(bytes);
    }
    set_counts(counts);
    BUSY.set(false);
}

/// The allocation that crossed the count (`left`: what remained after it): sampled, and a
/// new count drawn. A thread's first allocation draws its first count instead.
#[cold]
#[inline(never)]
fn sample(at: usize, size: usize, left: i64) {
    if BUSY.replace(true) {
        // The profiler's own allocation: the count is left as it was (and whoever set
        // `BUSY` puts the thread's counts back as they were when it is done).
        return;
    }
    if !INSTALLED.load(Relaxed) {
        INSTALLED.store(true, Relaxed);
    }
    // What the profiler allocates below is not the thread's.
    let counts = counts();
    let rate = rate();
    if rate == OFF {
        set_left(i64::MAX);
        set_counts(counts);
        BUSY.set(false);
        return;
    }
    let mut left = left;
    if RNG.get() == 0 {
        // The thread's first allocation: its first count starts here.
        let seed = (at as u64) ^ (std::ptr::addr_of!(left) as u64).rotate_left(32) ^ now_ns();
        RNG.set(seed | 1);
        left = draw(rate).saturating_sub(size as i64);
    }
    if left <= 0 {
        let stack = match STACK.get() {
            (0, 0) => {
                let s = crate::sys::thread::own_stack().unwrap_or((1, 1));
                STACK.set(s);
                s
            }
            s => s,
        };
        let mut frames = [0u64; table::MAX_FRAMES];
        let (n, _) = crate::unwind::walk_own(stack, &mut frames);
        if let Some(bytes) = table::record(at, size as u64, &frames[..n], rate) {
            // On the timeline of a running capture: a step at each sampled block's
            // allocation and free, the only moments the estimate moves.
            (crate::library::get().heap_in_use)(bytes);
        }
        // Memoryless: the next count starts afresh after this allocation.
        left = draw(rate);
    }
    set_left(left);
    set_counts(counts);
    BUSY.set(false);
}

/// The sampling interval: `TICKSCOPE_HEAP_RATE` bytes (0: off), read once.
fn rate() -> u64 {
    match RATE.load(Relaxed) {
        0 => {
            let r = match crate::sys::env::env_var("TICKSCOPE_HEAP_RATE") {
                None => DEFAULT_RATE,
                Some(v) => match v.trim().parse::<u64>() {
                    Ok(0) => OFF,
                    Ok(n) => n,
                    Err(_) => {
                        crate::sys::stderr::warn(&format!(
                            "TICKSCOPE_HEAP_RATE={v:?} is not a number of bytes; using {DEFAULT_RATE}"
                        ));
                        DEFAULT_RATE
                    }
                },
            };
            RATE.store(r, Relaxed);
            table::at_first_sample();
            r
        }
        r => r,
    }
}

/// A count drawn from the exponential distribution of mean `rate` bytes (at least 1).
fn draw(rate: u64) -> i64 {
    // xorshift64*: the thread's own stream.
    let mut x = RNG.get();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    RNG.set(x);
    let bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
    // Uniform in (0, 1]: never 0, whose logarithm is infinite.
    let u = (bits as f64 + 1.0) / (1u64 << 53) as f64;
    ((-u.ln() * rate as f64) as i64).clamp(1, i64::MAX / 2)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The estimate of the bytes in use now (the heap profile's `inuse_space` total), where the
/// heap profiler samples (`None`: not installed, not started or sampling off). Not a stable
/// API: a capture's heap counter starts from it.
#[doc(hidden)]
pub fn in_use() -> Option<f64> {
    if !installed() || matches!(RATE.load(Relaxed), 0 | OFF) {
        return None;
    }
    unprofiled(table::in_use)
}

/// The preload library's `malloc` family: an allocation of `size` bytes at `at`, sampled
/// as [`Profiled`] samples one. Not a stable API.
#[doc(hidden)]
#[inline(always)]
pub fn note_allocated(at: usize, size: usize) {
    allocated(at, size);
}

/// The preload library's `free`: the block at `at` freed. Not a stable API.
#[doc(hidden)]
#[inline(always)]
pub fn note_freed(at: usize) {
    freed(at);
}

/// The profile is written at exit to `path` rather than to `TICKSCOPE_HEAPPROFILE` (the
/// preload library's file for a program exec'd by the profiled one). Not a stable API.
#[doc(hidden)]
pub fn write_at_exit_to(path: std::path::PathBuf) {
    table::write_to(path);
}

/// The heap profile so far: what the sampled allocations estimate of every allocation since
/// the start, and of the blocks still in use. Empty where nothing was sampled (the wrapper
/// not installed, or sampling off).
pub fn profile() -> HeapProfile {
    unprofiled(table::profile)
}

/// Heap profiles of consecutive windows (a pusher's): each one's `alloc_*` are the
/// allocations since the previous one's (they add up to the whole profile's), its `inuse_*`
/// the heap at its end. Not a stable API.
#[doc(hidden)]
#[derive(Default)]
pub struct HeapWindows {
    seen: std::collections::HashMap<(u32, u64), u64>,
}

impl HeapWindows {
    /// The profile of the window since the last call (the first: since the start).
    pub fn take(&mut self) -> HeapProfile {
        unprofiled(|| table::profile_since(Some(&mut self.seen)))
    }
}

/// Runs `f` with this thread's allocations neither profiled nor counted (the profiler's own
/// work, and the library's: the scopes' allocation marks). Not a stable API.
#[doc(hidden)]
pub fn unprofiled<T>(f: impl FnOnce() -> T) -> T {
    let busy = BUSY.replace(true);
    let counts = counts();
    let r = f();
    set_counts(counts);
    BUSY.set(busy);
    r
}
