//! The signal handler: the only code of tickscope that runs in signal context.
//!
//! **Contract, for every function reachable from [`on_signal`]:** no allocation, no lock, no
//! libc or libgcc unwinder, no panic; `errno` is saved on entry and restored on exit. It reads
//! the interrupted registers, walks the frame pointers ([`super::unwind`]), reads the thread's
//! active scopes ([`crate::scope::active_scopes`]) and stores the sample in the lock-free
//! [`Store`](super::table::Store). A counting global allocator test proves it never allocates.
//!
//! The handler finds the running sampler through [`SHARED`]. `stop()` clears it and then
//! waits until [`ACTIVE`] (handlers between their load of `SHARED` and their last access) is
//! zero before freeing anything: a late signal sees null and returns.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};

use super::table::{Raw, Store, MAX_SCOPES};
use super::unwind::{self, Ranges, MAX_FRAMES};
use super::Source;

/// Everything the handler touches, allocated once per sampler start.
pub(crate) struct Shared {
    pub store: Store,
    pub ranges: Ranges,
    /// Threads whose stacks are in `ranges` (for the process-wide timer, which may interrupt
    /// a thread before the drain thread has seen it).
    pub known: Tids,
    pub source: Source,
    pub period_ns: u64,
    /// Per perf-event descriptor: the thread it samples (saves a gettid call per signal).
    pub perf_tid: crate::sys::memory::Zeroed<AtomicU32>,
    /// Signals handled.
    pub signals: AtomicU64,
    /// Ticks spent in the handler, signal delivery excluded.
    pub handler_ticks: AtomicU64,
    /// The same, per sample, by [`handler_bucket`]: the median a loaded machine's outliers
    /// do not move (a host that takes the CPU away mid-handler adds milliseconds to a mean).
    pub handler_times: [AtomicU32; HANDLER_BUCKETS],
    /// Samples recorded with the leaf only: the thread's stack was not known yet.
    pub leaf_only: AtomicU64,
    /// Samples whose stack was deeper than [`MAX_FRAMES`].
    pub truncated: AtomicU64,
    /// Timer signals that stood for more than one period (`si_overrun > 0`), and the
    /// largest overrun: the kernel noticed the expiry late, so the time of the periods in
    /// between lands on the stack the thread had when it did.
    pub overrun_signals: AtomicU64,
    pub max_overrun: AtomicU64,
    /// Over the signals that stood for more than one period: the sum of the periods each
    /// stood for, and of their squares (how far the shares can trust them: a signal for 20
    /// periods is one draw, not 20).
    pub overrun_periods: AtomicU64,
    pub overrun_periods_sq: AtomicU64,
    /// Each sample's time, thread and stack, while a timeline capture runs (the drain
    /// thread moves them into it).
    #[cfg(feature = "capture")]
    pub timeline: super::table::SampleLog,
}

/// Buckets of [`Shared::handler_times`]: four per power of two of ticks (19% wide), up to
/// 2^24 ticks (7 ms at 2.5 GHz); longer lands in the last.
pub(crate) const HANDLER_BUCKETS: usize = 92;

/// The bucket of a handler time of `ticks`. Signal context: a few instructions.
#[inline(always)]
pub(crate) fn handler_bucket(ticks: u64) -> usize {
    if ticks < 4 {
        return ticks as usize;
    }
    let e = 63 - ticks.leading_zeros() as usize;
    (4 * (e - 1) + ((ticks >> (e - 2)) & 3) as usize).min(HANDLER_BUCKETS - 1)
}

/// The lowest time, in ticks, bucket `i` of [`handler_bucket`] holds.
pub(crate) fn handler_bucket_low(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let (e, sub) = (i / 4 + 1, (i % 4) as u64);
    (4 + sub) << (e - 2)
}

/// The median of the handler times counted in `times` (by [`handler_bucket`]), in ticks:
/// its bucket's midpoint; 0 with none.
pub(crate) fn handler_median_ticks(times: &[AtomicU32]) -> u64 {
    let counts: Vec<u64> = times.iter().map(|c| c.load(Relaxed) as u64).collect();
    let total: u64 = counts.iter().sum();
    let mut seen = 0;
    for (i, n) in counts.iter().enumerate() {
        seen += n;
        if total > 0 && 2 * seen >= total {
            let (lo, hi) = (handler_bucket_low(i), handler_bucket_low(i + 1));
            return (lo + hi) / 2;
        }
    }
    0
}

/// The running sampler's state; null when none runs.
pub(crate) static SHARED: AtomicPtr<Shared> = AtomicPtr::new(std::ptr::null_mut());
/// Handlers between their load of [`SHARED`] and their last access to it.
pub(crate) static ACTIVE: AtomicU32 = AtomicU32::new(0);
/// Signals that arrived with no sampler running (pending at stop, or another process's
/// `kill -PROF`): ignored, counted.
pub(crate) static STRAY: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread is inside the handler (for the allocation test).
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// Returns true if and only if the calling thread is running the sampler's signal handler.
pub(crate) fn in_handler() -> bool {
    IN_HANDLER.get()
}

/// A fixed open-addressing set of thread ids, lock-free for readers (the handler) with one
/// writer (the drain thread). A miss only costs a leaf-only sample, never a wrong walk:
/// removal writes a tombstone, and a rebuild clears before re-adding.
pub(crate) struct Tids(crate::sys::memory::Zeroed<AtomicU32>);

const TOMBSTONE: u32 = u32::MAX;

impl Tids {
    pub(crate) fn new(cap: usize) -> Tids {
        Tids(crate::sys::memory::zeroed_slice(cap.next_power_of_two()))
    }

    fn start(&self, tid: u32) -> usize {
        (tid.wrapping_mul(0x9e37_79b9) as usize) & (self.0.len() - 1)
    }

    /// Signal context: bounded probe, no allocation.
    pub(crate) fn contains(&self, tid: u32) -> bool {
        let mask = self.0.len() - 1;
        let s = self.start(tid);
        for i in 0..self.0.len() {
            match self.0[(s + i) & mask].load(Acquire) {
                0 => return false,
                t if t == tid => return true,
                _ => {}
            }
        }
        false
    }

    /// Drain thread only. Returns false when full.
    pub(crate) fn insert(&self, tid: u32) -> bool {
        let mask = self.0.len() - 1;
        let s = self.start(tid);
        for i in 0..self.0.len() {
            let c = &self.0[(s + i) & mask];
            let t = c.load(Relaxed);
            if t == tid {
                return true;
            }
            if t == 0 || t == TOMBSTONE {
                c.store(tid, Release);
                return true;
            }
        }
        false
    }

    /// Drain thread only.
    pub(crate) fn remove(&self, tid: u32) {
        let mask = self.0.len() - 1;
        let s = self.start(tid);
        for i in 0..self.0.len() {
            let c = &self.0[(s + i) & mask];
            match c.load(Relaxed) {
                0 => return,
                t if t == tid => return c.store(TOMBSTONE, Release),
                _ => {}
            }
        }
    }

    /// Drain thread only: drops tombstones by clearing and re-adding `live`.
    pub(crate) fn rebuild(&self, live: &[i32]) {
        for c in self.0.iter() {
            c.store(0, Release);
        }
        for &t in live {
            self.insert(t as u32);
        }
    }
}

/// `si_code` of an `F_SETSIG` I/O signal with data ready (`POLL_IN`).
const POLL_IN: libc::c_int = 1;

/// The signal handler (`SA_SIGINFO`).
///
/// Signal context: see the module docs.
pub(crate) extern "C" fn on_signal(
    _sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    crate::sys::thread::keeping_errno(|| {
        ACTIVE.fetch_add(1, SeqCst);
        let shared = SHARED.load(SeqCst);
        if shared.is_null() {
            STRAY.fetch_add(1, Relaxed);
        } else {
            IN_HANDLER.set(true);
            // SAFETY: `shared` stays valid while ACTIVE counts us (stop waits for zero after
            // clearing SHARED).
            let shared = unsafe { &*shared };
            // SAFETY: `info` and `ctx` are the kernel's, valid during the handler.
            unsafe { sample(shared, info, ctx) };
            IN_HANDLER.set(false);
        }
        ACTIVE.fetch_sub(1, SeqCst);
    })
}

/// Records one sample.
///
/// # Safety
/// `info` and `ctx` must be the arguments the kernel passed to an `SA_SIGINFO` handler.
///
/// Signal context: see the module docs.
unsafe fn sample(s: &Shared, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // The library's side (the clock, the open scopes, a running capture): one atomic load.
    let lib = crate::library::get();
    let t0 = (lib.now_in_signal)();
    // SAFETY: `info` is the kernel's siginfo for this signal (caller's contract).
    let info = unsafe { &*info };
    let (tid, count, weight) = match info.si_code {
        libc::SI_TIMER => {
            // SAFETY: a POSIX timer signal carries si_overrun ...
            let overrun = unsafe { info.si_overrun() };
            // SAFETY: ... and the sigev_value we set when creating the timer.
            let value = unsafe { info.si_value() };
            let overrun = overrun.max(0) as u64;
            let n = 1 + overrun;
            if overrun > 0 {
                s.overrun_signals.fetch_add(1, Relaxed);
                s.max_overrun.fetch_max(overrun, Relaxed);
                s.overrun_periods.fetch_add(n, Relaxed);
                s.overrun_periods_sq.fetch_add(n.saturating_mul(n), Relaxed);
            }
            (value.sival_ptr as usize as u32, n, n * s.period_ns)
        }
        POLL_IN if s.source == Source::PerfTaskClock => {
            // SAFETY: an F_SETSIG signal carries the descriptor in si_fd.
            let fd = unsafe { info.si_fd() };
            let tid = match s.perf_tid.get(fd as usize).map(|t| t.load(Relaxed)) {
                Some(tid) if tid != 0 => tid,
                _ => crate::sys::thread::gettid() as u32,
            };
            // One period per signal; the drain thread reads each event's count when it
            // disarms it, and the profile scales the thread's samples to that exact total
            // (reading the count here would be a system call per sample).
            (tid, 1, s.period_ns)
        }
        libc::SI_KERNEL if s.source == Source::ProcessTimer => {
            (crate::sys::thread::gettid() as u32, 1, s.period_ns)
        }
        // `kill -PROF`, or a signal of another source: not a sample of this profile.
        _ => {
            STRAY.fetch_add(1, Relaxed);
            return;
        }
    };
    if count == 0 {
        return;
    }
    // SAFETY: `ctx` is the kernel's ucontext_t (caller's contract).
    let (pc, fp, sp) = unsafe { unwind::regs(ctx) };
    let mut frames = [0u64; MAX_FRAMES];
    let walkable = s.source != Source::ProcessTimer || s.known.contains(tid);
    let (n, truncated) = match walkable {
        true => s
            .ranges
            .with(|v| unwind::walk(v, pc, fp, sp, &mut frames))
            .unwrap_or((0, false)),
        false => (0, false),
    };
    let n = if n == 0 {
        s.leaf_only.fetch_add(1, Relaxed);
        frames[0] = pc;
        1
    } else {
        n
    };
    if truncated {
        s.truncated.fetch_add(1, Relaxed);
    }
    let mut scopes = [0u32; MAX_SCOPES];
    let nscopes = (lib.active_scopes)(&mut scopes);
    let stack = s.store.record(&Raw {
        tid,
        truncated,
        frames: &frames[..n],
        scopes: &scopes[..nscopes],
        count,
        weight,
    });
    // A capture running: the sample goes on the timeline too (an atomic load, a queue push).
    #[cfg(feature = "capture")]
    if (lib.capturing)() {
        s.timeline.push(t0, tid, stack);
    }
    #[cfg(not(feature = "capture"))]
    let _ = stack;
    s.signals.fetch_add(1, Relaxed);
    let ticks = (lib.now_in_signal)().wrapping_sub(t0);
    s.handler_ticks.fetch_add(ticks, Relaxed);
    s.handler_times[handler_bucket(ticks)].fetch_add(1, Relaxed);
}

/// The installed disposition of `signal` before ours, if any.
pub(crate) fn current(signal: libc::c_int) -> libc::sighandler_t {
    // SAFETY: sigaction is plain data; all-zero is a valid value.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: with a null new action, sigaction only writes the current one into `old`.
    unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) };
    old.sa_sigaction
}

/// Installs [`on_signal`] for `signal`, unless a handler other than ours owns it: returns
/// that handler's address then.
pub(crate) fn install(signal: libc::c_int) -> Result<(), usize> {
    let ours = on_signal as *const () as usize;
    let old = current(signal);
    if old != libc::SIG_DFL && old != libc::SIG_IGN && old != ours {
        return Err(old);
    }
    // SAFETY: sigaction is plain data; all-zero is a valid value to fill in.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = ours;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    // SAFETY: `sa.sa_mask` is a valid sigset_t to clear.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: installs an SA_SIGINFO handler that follows the signal-context contract.
    unsafe { libc::sigaction(signal, &sa, std::ptr::null_mut()) };
    // tickscope's threads started from now keep it unblocked (`sys::thread::spawn_quiet`).
    crate::sys::thread::SAMPLER_SIGNAL.store(signal, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}

/// After stop: ignore the signal, so one still pending cannot kill the process (the default
/// action of SIGPROF is to terminate) and the next start finds it free.
pub(crate) fn uninstall(signal: libc::c_int) {
    // Threads of ours started from now on block it like any other signal: it is ignored
    // now, and a program may wait for it.
    let _ = crate::sys::thread::SAMPLER_SIGNAL.compare_exchange(
        signal,
        0,
        std::sync::atomic::Ordering::SeqCst,
        std::sync::atomic::Ordering::SeqCst,
    );
    if current(signal) == on_signal as *const () as usize {
        // SAFETY: installs SIG_IGN, a valid disposition.
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every handler time lands in the bucket whose range holds it; the median is the
    /// middle sample's bucket's midpoint, within 10% of it.
    #[test]
    fn handler_times_bucket_and_give_their_median() {
        for i in 0..HANDLER_BUCKETS {
            let (lo, hi) = (handler_bucket_low(i), handler_bucket_low(i + 1));
            assert!(lo < hi, "bucket {i}");
            assert_eq!(handler_bucket(lo), i);
            if i + 1 < HANDLER_BUCKETS {
                assert_eq!(handler_bucket(hi - 1), i);
            }
        }
        assert_eq!(handler_bucket(u64::MAX), HANDLER_BUCKETS - 1);
        let times: Vec<AtomicU32> = (0..HANDLER_BUCKETS).map(|_| AtomicU32::new(0)).collect();
        assert_eq!(handler_median_ticks(&times), 0);
        // 60 samples near 2,000 ticks, 40 stretched to a million: the median stays.
        for _ in 0..60 {
            times[handler_bucket(2_000)].fetch_add(1, Relaxed);
        }
        for _ in 0..40 {
            times[handler_bucket(1_000_000)].fetch_add(1, Relaxed);
        }
        let m = handler_median_ticks(&times) as f64;
        assert!((m - 2_000.0).abs() <= 200.0, "{m}");
    }

    #[test]
    fn tid_set_finds_inserted_ids_and_forgets_removed_ones() {
        let t = Tids::new(8);
        for tid in [5, 13, 21, 29] {
            assert!(t.insert(tid));
        }
        t.remove(13);
        assert!(t.contains(5) && t.contains(21) && t.contains(29));
        assert!(!t.contains(13) && !t.contains(6));
        t.rebuild(&[7]);
        assert!(t.contains(7) && !t.contains(5));
    }
}
