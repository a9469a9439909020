//! Frame-pointer unwinding from an interrupted context, every read validated.
//!
//! **Signal context.** [`regs`], [`Ranges::with`] and [`walk`] run inside the signal handler:
//! they may not allocate, lock, or call the libc unwinder, and touch only memory the checks
//! below prove readable.
//!
//! A read is allowed only inside a readable-writable mapping that contains the interrupted
//! stack pointer (the thread's own stack, which cannot be unmapped while the thread runs), at
//! an aligned address above the previous frame and at most [`MAX_FRAME_BYTES`] above it. A
//! return address ends the walk unless it lies in an executable mapping, so a frame built
//! without frame pointers (glibc's, say) ends the stack instead of inventing a caller. The
//! mappings come from `/proc/self/maps`, re-read by the drain thread whenever it finds a thread
//! whose stack it does not know yet, and every second, and published through [`Ranges`], a
//! double buffer the handler reads without waiting.
//!
//! Known gap: the snapshot is not re-read when memory is unmapped. If the kernel had merged a
//! thread's stack with an adjacent read-write mapping and that neighbour is unmapped later, a
//! wild frame pointer pointing into the vanished part would fault. Closing it needs the
//! thread's own stack bounds (a later issue: interposing `pthread_create`, or a per-thread
//! registration when a thread is armed).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use crate::symbolize::MapEntry;

/// Frames kept per sample; deeper stacks are cut at the root end and marked truncated.
pub(crate) const MAX_FRAMES: usize = 128;

/// A step between two frames larger than this ends the walk: 8 MiB is the default main-thread
/// stack limit, so a legitimate frame is never larger, and a wild frame pointer is caught.
pub(crate) const MAX_FRAME_BYTES: u64 = 8 << 20;

/// The grows-down main stack (`[stack]`) is extended by this much below its mapped start, so
/// a stack pointer below the start read at the last refresh still finds its range (the walk
/// only reads upward from it, inside memory that the kernel has mapped since).
const STACK_GROWTH: u64 = 8 << 20;

/// The interrupted thread's program counter, frame pointer and stack pointer.
///
/// # Safety
/// `ctx` must be the `ucontext_t` pointer the kernel passed to an `SA_SIGINFO` handler.
#[inline(always)]
pub(crate) unsafe fn regs(ctx: *const libc::c_void) -> (u64, u64, u64) {
    // SAFETY: the caller guarantees `ctx` is the kernel's ucontext_t for this signal; it lives
    // on the signal stack for the handler's duration.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    #[cfg(target_arch = "x86_64")]
    {
        let g = &uc.uc_mcontext.gregs;
        (
            g[libc::REG_RIP as usize] as u64,
            g[libc::REG_RBP as usize] as u64,
            g[libc::REG_RSP as usize] as u64,
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        let m = &uc.uc_mcontext;
        (m.pc, m.regs[29], m.sp)
    }
}

/// The frame pointer and stack pointer of the caller of this function (the heap profiler's
/// walk of its own stack; tests).
#[inline(always)]
pub(crate) fn here() -> (u64, u64) {
    let fp: u64;
    let sp: u64;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads two registers into locals; no memory is touched.
    unsafe {
        std::arch::asm!("mov {}, rbp", "mov {}, rsp", out(reg) fp, out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads two registers into locals; no memory is touched.
    unsafe {
        std::arch::asm!("mov {}, x29", "mov {}, sp", out(reg) fp, out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    (fp, sp)
}

/// Sorted address ranges, as a flat `[start, end, start, end, ...]`.
struct RangeBuf {
    readers: AtomicU32,
    stack_len: AtomicUsize,
    exec_len: AtomicUsize,
    stack: crate::sys::memory::Zeroed<AtomicU64>,
    exec: crate::sys::memory::Zeroed<AtomicU64>,
}

impl RangeBuf {
    fn new(cap: usize) -> RangeBuf {
        let v = crate::sys::memory::zeroed_slice;
        RangeBuf {
            readers: AtomicU32::new(0),
            stack_len: AtomicUsize::new(0),
            exec_len: AtomicUsize::new(0),
            stack: v(2 * cap),
            exec: v(2 * cap),
        }
    }
}

/// The process's mappings as the handler sees them: readable-writable ones (stacks) and
/// executable ones (code). Double-buffered: the drain thread writes the buffer no handler is
/// reading, then flips `current`; a handler never waits.
pub(crate) struct Ranges {
    bufs: [RangeBuf; 2],
    current: AtomicUsize,
    /// Mappings left out of the last refresh because the buffer was full.
    pub dropped: AtomicU64,
}

/// One published buffer, borrowed by the handler.
pub(crate) struct View<'a> {
    stack: &'a [AtomicU64],
    exec: &'a [AtomicU64],
}

/// The range of `ranges` (flat pairs, sorted) containing `addr`.
fn find(ranges: &[AtomicU64], addr: u64) -> Option<(u64, u64)> {
    let (mut lo, mut hi) = (0, ranges.len() / 2);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let (s, e) = (
            ranges[2 * mid].load(Relaxed),
            ranges[2 * mid + 1].load(Relaxed),
        );
        if addr < s {
            hi = mid;
        } else if addr >= e {
            lo = mid + 1;
        } else {
            return Some((s, e));
        }
    }
    None
}

impl View<'_> {
    /// The stack-range `[start, end)` that contains `sp`.
    pub(crate) fn stack_of(&self, sp: u64) -> Option<(u64, u64)> {
        find(self.stack, sp)
    }

    /// The executable mapping `[start, end)` that contains `pc`.
    pub(crate) fn code_range(&self, pc: u64) -> Option<(u64, u64)> {
        find(self.exec, pc)
    }
}

impl Ranges {
    /// Room for `cap` ranges of each kind.
    pub(crate) fn new(cap: usize) -> Ranges {
        Ranges {
            bufs: [RangeBuf::new(cap), RangeBuf::new(cap)],
            current: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Publishes `maps` (drain thread only: one writer).
    pub(crate) fn publish(&self, maps: &[MapEntry]) {
        let next = 1 - self.current.load(SeqCst);
        let buf = &self.bufs[next];
        // Handlers that picked this buffer before the last flip are still reading it; they
        // finish within a few microseconds.
        while buf.readers.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        let mut stack = Vec::new();
        let mut exec = Vec::new();
        for m in maps {
            if m.readable && m.writable {
                let start = if m.path == "[stack]" {
                    m.start.saturating_sub(STACK_GROWTH)
                } else {
                    m.start
                };
                stack.push((start, m.end));
            }
            if m.executable {
                exec.push((m.start, m.end));
            }
        }
        let mut dropped = 0;
        for (list, dst, len) in [
            (&mut stack, &buf.stack, &buf.stack_len),
            (&mut exec, &buf.exec, &buf.exec_len),
        ] {
            list.sort_unstable();
            // Keep ranges disjoint: the stack extension must not overlap the mapping below.
            for i in 1..list.len() {
                if list[i].0 < list[i - 1].1 {
                    list[i].0 = list[i - 1].1.min(list[i].1);
                }
            }
            let n = list.len().min(dst.len() / 2);
            dropped += list.len() - n;
            for (i, &(s, e)) in list[..n].iter().enumerate() {
                dst[2 * i].store(s, Relaxed);
                dst[2 * i + 1].store(e, Relaxed);
            }
            len.store(n, Relaxed);
        }
        self.dropped.store(dropped as u64, Relaxed);
        self.current.store(next, SeqCst);
    }

    /// Whether the readable-writable range that holds `[low, high)` is known (a new thread's
    /// stack, say).
    pub(crate) fn covers(&self, low: u64, high: u64) -> bool {
        self.with(|v| v.stack_of(low).is_some_and(|(_, end)| high <= end))
            .unwrap_or(false)
    }

    /// Calls `f` with the current buffer; `None` if the buffer flipped twice under us (the
    /// handler then records the leaf only).
    ///
    /// Signal context: no allocation, no lock; never waits.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&View<'_>) -> R) -> Option<R> {
        for _ in 0..2 {
            let i = self.current.load(SeqCst);
            let buf = &self.bufs[i];
            buf.readers.fetch_add(1, SeqCst);
            // The writer only writes a buffer that is not current and has no readers: if
            // `i` is still current after our increment, it will not be written until we leave.
            if self.current.load(SeqCst) == i {
                let view = View {
                    stack: &buf.stack[..2 * buf.stack_len.load(Relaxed)],
                    exec: &buf.exec[..2 * buf.exec_len.load(Relaxed)],
                };
                let r = f(&view);
                buf.readers.fetch_sub(1, SeqCst);
                return Some(r);
            }
            buf.readers.fetch_sub(1, SeqCst);
        }
        None
    }
}

/// Walks the frame-pointer chain from `(pc, fp, sp)` into `out`: `out[0] = pc`, then return
/// addresses, innermost first. Returns how many were written and whether the stack was cut
/// because `out` was full.
///
/// Signal context: no allocation, no lock. Every read is checked first (see the module docs).
#[inline]
pub(crate) fn walk(view: &View<'_>, pc: u64, fp: u64, sp: u64, out: &mut [u64]) -> (usize, bool) {
    if out.is_empty() {
        return (0, true);
    }
    out[0] = pc;
    let Some((_, stack_end)) = view.stack_of(sp) else {
        return (1, false);
    };
    // Most return addresses fall in the same module as the previous one: check its range
    // before searching.
    let mut code = (0u64, 0u64);
    let (n, full) = walk_chain(fp, sp, stack_end, &mut out[1..], |ret| {
        if !(code.0 <= ret && ret < code.1) {
            match view.code_range(ret) {
                Some(r) if ret != 0 => code = r,
                _ => return false,
            }
        }
        true
    });
    (n + 1, full)
}

/// Follows the frame-pointer chain from `fp` (reads at or above `low`, below `stack_end`),
/// writing each return address that `accept` takes into `out`, innermost first; stops at the
/// first frame out of line or return address refused. Returns how many were written and
/// whether `out` was full first. Signal context: no allocation, no lock.
#[inline(always)]
fn walk_chain(
    mut fp: u64,
    mut low: u64,
    stack_end: u64,
    out: &mut [u64],
    mut accept: impl FnMut(u64) -> bool,
) -> (usize, bool) {
    let mut n = 0;
    loop {
        if !frame_in_line(fp, low, stack_end) {
            return (n, false);
        }
        // `fp` is 8-aligned and `[fp, fp + 16)` lies inside the readable-writable mapping that
        // holds the running thread's stack (checked just above, against the bounds the caller
        // gave), which stays mapped while the thread runs this function.
        // SAFETY: as just said, for the saved frame pointer at `fp` ...
        let next = unsafe { std::ptr::read_volatile(fp as *const u64) };
        // SAFETY: ... and for the return address at `fp + 8`.
        let ret = unsafe { std::ptr::read_volatile((fp + 8) as *const u64) };
        if !accept(ret) {
            return (n, false);
        }
        if n == out.len() {
            return (n, true);
        }
        out[n] = ret;
        n += 1;
        // Strictly upward: a loop in the chain cannot keep the walk going.
        low = fp + 16;
        fp = next;
    }
}

/// Whether a frame record at `fp` (saved frame pointer, return address) may be read: 8-aligned,
/// at or above `low` (the previous frame's end, or the stack pointer) and at most
/// [`MAX_FRAME_BYTES`] above it, its 16 bytes below `stack_end`. Signal context.
#[inline(always)]
fn frame_in_line(fp: u64, low: u64, stack_end: u64) -> bool {
    fp % 8 == 0
        && fp >= low
        && fp - low <= MAX_FRAME_BYTES
        && fp.checked_add(16).is_some_and(|top| top <= stack_end)
}

/// Walks the calling thread's own frame-pointer chain into `out` (return addresses, innermost
/// first), inside `stack` (the thread's `[low, high)`, [`crate::sys::thread::own_stack`]):
/// the heap profiler's stack of a sampled allocation. No mapping list is needed: every read
/// is inside the calling thread's own stack, which stays mapped while it runs. Returns how
/// many were written and whether `out` was full first. A return address of 0, or a frame
/// pointer out of line (a frame built without one), ends the walk.
#[inline(never)]
pub(crate) fn walk_own(stack: (u64, u64), out: &mut [u64]) -> (usize, bool) {
    let (fp, sp) = here();
    walk_chain(fp, sp.max(stack.0), stack.1, out, |ret| ret != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps() -> Vec<MapEntry> {
        crate::symbolize::read_self_maps().unwrap()
    }

    #[inline(never)]
    fn recurse(depth: u32, out: &mut Vec<u64>, ranges: &Ranges) -> u64 {
        if depth == 0 {
            let (fp, sp) = here();
            let pc = recurse as *const () as u64;
            let mut buf = [0u64; MAX_FRAMES];
            let (n, truncated) = ranges.with(|v| walk(v, pc, fp, sp, &mut buf)).unwrap();
            assert!(!truncated);
            out.extend_from_slice(&buf[..n]);
            return n as u64;
        }
        // Not a tail call: the frame stays on the stack.
        std::hint::black_box(recurse(depth - 1, out, ranges)) + 1
    }

    #[test]
    fn walk_finds_every_frame_of_a_recursion() {
        let ranges = Ranges::new(4096);
        ranges.publish(&maps());
        let mut frames = Vec::new();
        recurse(20, &mut frames, &ranges);
        // The leaf, 20 returns into `recurse`, then the test's own callers.
        assert!(frames.len() > 21, "only {} frames", frames.len());
        let start = recurse as *const () as u64;
        let inside = frames[1..=20]
            .iter()
            .filter(|&&a| a > start && a < start + 4096)
            .count();
        assert_eq!(inside, 20, "return addresses into recurse: {frames:x?}");
    }

    #[test]
    fn walk_stops_at_a_frame_pointer_outside_the_stack() {
        let ranges = Ranges::new(4096);
        ranges.publish(&maps());
        let (_, sp) = here();
        let mut buf = [0u64; 8];
        // Below the stack pointer, misaligned, null: the leaf alone.
        for fp in [sp - 64, sp + 3, 0, u64::MAX - 7] {
            let (n, _) = ranges.with(|v| walk(v, 0x1234, fp, sp, &mut buf)).unwrap();
            assert_eq!(n, 1, "fp {fp:#x}");
        }
        // A stack pointer in no mapping: the leaf alone.
        let (n, _) = ranges.with(|v| walk(v, 0x1234, sp, 16, &mut buf)).unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn walk_marks_a_stack_deeper_than_the_buffer_truncated() {
        let ranges = Ranges::new(4096);
        ranges.publish(&maps());
        let (fp, sp) = here();
        let mut buf = [0u64; 2];
        let (n, truncated) = ranges.with(|v| walk(v, 1, fp, sp, &mut buf)).unwrap();
        assert_eq!((n, truncated), (2, true));
    }

    #[test]
    fn ranges_flip_between_buffers_and_keep_the_latest() {
        let ranges = Ranges::new(4);
        let entry = |start, end, w, x| MapEntry {
            start,
            end,
            offset: 0,
            readable: true,
            writable: w,
            executable: x,
            path: String::new(),
        };
        ranges.publish(&[entry(0x1000, 0x2000, true, false)]);
        ranges.publish(&[
            entry(0x5000, 0x6000, false, true),
            entry(0x8000, 0x9000, true, false),
        ]);
        let (s, c) = ranges
            .with(|v| (v.stack_of(0x8800), v.code_range(0x5800).is_some()))
            .unwrap();
        assert_eq!((s, c), (Some((0x8000, 0x9000)), true));
        assert!(ranges.with(|v| v.stack_of(0x1800)).unwrap().is_none());
        // More mappings than room: counted, not silently dropped.
        let many: Vec<_> = (0..6)
            .map(|i| entry(i * 0x1000, i * 0x1000 + 0x800, true, false))
            .collect();
        ranges.publish(&many);
        assert_eq!(ranges.dropped.load(Relaxed), 2);
    }
}
