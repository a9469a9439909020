//! The timers that interrupt threads: one per thread, delivered to that thread.
//!
//! - [`Source::PerfTaskClock`], the first choice in CPU mode: a `perf_event_open` task-clock
//!   event per thread, an hrtimer that runs while the thread runs and fires at the requested
//!   rate whatever the tick, signalled with `F_SETSIG` to the owning thread (`F_SETOWN_EX`,
//!   `F_OWNER_TID`). Each signal weighs one period; when the event is disarmed its count (the
//!   thread's exact CPU time) rescales the thread's weights, which covers signals the kernel
//!   dropped (fired in kernel mode) or merged. perf offers no first-expiry offset, so these
//!   samples are not phase-randomised. Each event holds a file descriptor: the sampler takes
//!   at most a quarter of `RLIMIT_NOFILE` and puts further threads on the CPU timer below.
//! - [`Source::ThreadCpuTimer`], where perf events are not permitted: `timer_create` on the
//!   thread's CPU clock with `SIGEV_THREAD_ID`. The kernel checks POSIX CPU timers only when
//!   a tick lands on the running thread, so above the tick rate one signal stands for several
//!   periods; `si_overrun` says how many, and the handler weights the sample by
//!   `1 + si_overrun`: the CPU time stays exact. But under CPU contention a thread can run
//!   many short slices that no tick lands on (measured in this VM with 8 busy processes on 2
//!   CPUs: 150 ms of a thread's CPU time without a signal), and then one late signal carries
//!   all of that time to wherever the thread is when the kernel notices. The profile counts
//!   such signals and names the largest, so a smeared profile says so.
//! - [`Source::WallTimer`]: `timer_create(CLOCK_MONOTONIC)` per thread, for wall-clock mode.
//! - [`Source::ProcessTimer`]: `setitimer(ITIMER_PROF)`, the last fallback: one process-wide
//!   timer, no overrun information, so above the tick rate it undercounts (the profile says
//!   so through its achieved rate).

use std::io;

use super::{Mode, Source};
use crate::sys::perf::{self, Attr};
use crate::sys::timer::{thread_cpu_clock, Timer};

/// What arming asks of every event: disabled until armed, and only where the thread is in
/// user mode (`exclude_kernel` and `exclude_hv`, which `perf_event_paranoid` = 2, the usual
/// default, requires of unprivileged users).
const FLAGS: u64 = perf::DISABLED | perf::EXCLUDE_KERNEL | perf::EXCLUDE_HV;

/// What keeps one thread's timer alive.
#[derive(Debug)]
pub(crate) enum Armed {
    Timer(Timer),
    /// The event's descriptor and its id (0 where the kernel cannot tell it): a program may
    /// close every descriptor it did not open and reuse the number, and the id tells whether
    /// the number still holds our event before it is disabled and closed.
    Perf {
        fd: libc::c_int,
        id: u64,
    },
    /// A perf event that writes its samples into a ring the drain thread reads
    /// ([`drain_ring`]) instead of signalling: the thread id and either its user call chain
    /// (the kernel's frame-pointer walk) or its user registers and the top of its stack
    /// (walked by the unwind tables, [`super::cfi`]).
    Ring {
        fd: libc::c_int,
        id: u64,
        ring: perf::Ring,
        /// Its samples carry registers and stack, not a call chain.
        stack: bool,
    },
}

/// What a call-chain sample carries.
const RING_CHAIN: u64 = perf::SAMPLE_TID | perf::SAMPLE_CALLCHAIN;
/// What a stack sample carries.
const RING_STACK: u64 = perf::SAMPLE_TID | perf::SAMPLE_REGS_USER | perf::SAMPLE_STACK_USER;
/// The registers a stack sample carries, in the order of their numbers: frame pointer,
/// stack pointer and pc on x86_64 (`PERF_REG_X86_BP`, `SP`, `IP`: 6, 7, 8); x29, x30 (the
/// link register), sp and pc on aarch64 (29 to 32).
#[cfg(target_arch = "x86_64")]
const USER_REGS: u64 = 1 << 6 | 1 << 7 | 1 << 8;
#[cfg(target_arch = "aarch64")]
const USER_REGS: u64 = 1 << 29 | 1 << 30 | 1 << 31 | 1 << 32;
/// Bytes of user stack a stack sample copies from the stack pointer up: twice `perf record
/// --call-graph dwarf`'s default. A deeper stack's walk ends there, marked truncated.
pub(crate) const STACK_BYTES: u32 = 16 << 10;
/// Data pages of a ring (a power of two), after its control page. A call-chain ring: 32 KiB
/// holds ~100 ms of samples at 1000 Hz with deep stacks. A stack ring: 256 KiB, 15 samples
/// of 16 KiB; the drain thread reads the rings every 10 ms, and what finds no room is
/// counted as lost.
const CHAIN_RING_PAGES: usize = 8;
const STACK_RING_PAGES: usize = 64;
/// The stack ring of a thread armed as the sampler starts, when samples are at least
/// [`FIRST_RING_MIN_PERIOD_NS`] apart: 64 KiB, 3 samples, until the drain thread's first poll
/// ([`FIRST_POLL`], 2 ms in) puts a full one in its place. Most programs a script runs end
/// before then: the kernel's work to map and unmap 256 KiB of ring was ~0.15 ms of each
/// profiled `/bin/true`, a quarter of what profiling added to it.
const FIRST_STACK_RING_PAGES: usize = 16;
pub(crate) const FIRST_RING_MIN_PERIOD_NS: u64 = 1_000_000;
/// When the drain thread first polls while some thread is on a first ring: before the ring
/// can fill (2 samples at 1000 Hz, with room for a third).
pub(crate) const FIRST_POLL: std::time::Duration = std::time::Duration::from_millis(2);
/// One sample read from a ring.
pub(crate) enum RingSample<'a> {
    /// The user call chain: the interrupted address, then return addresses.
    Chain(&'a [u64]),
    /// The user registers and the stack bytes from the stack pointer up.
    Stack(super::cfi::UserRegs, &'a [u8]),
}

/// Whether perf events may be opened here: see [`perf::permitted`].
pub(crate) fn perf_permitted() -> bool {
    perf::permitted()
}

/// Arms a task-clock event on thread `tid` that samples into a ring rather than signal it
/// (see [`Armed::Ring`]), only where the thread is in user mode. With `stack`, each sample
/// copies the user registers and [`STACK_BYTES`] of stack, to be walked by the unwind
/// tables; without, the kernel walks the user stack by frame pointers, as the handler does.
pub(crate) fn arm_ring(tid: i32, period_ns: u64, stack: bool) -> io::Result<Armed> {
    arm_ring_of(tid, period_ns, stack, false)
}

/// [`arm_ring`] with stacks, on a first ring ([`FIRST_STACK_RING_PAGES`]).
pub(crate) fn arm_first_ring(tid: i32, period_ns: u64) -> io::Result<Armed> {
    arm_ring_of(tid, period_ns, true, true)
}

/// Whether `a` is a first ring, to be replaced by a full one.
pub(crate) fn is_first_ring(a: &Armed) -> bool {
    matches!(a, Armed::Ring { stack: true, ring, .. } if ring.data_pages() == FIRST_STACK_RING_PAGES)
}

fn arm_ring_of(tid: i32, period_ns: u64, stack: bool, first: bool) -> io::Result<Armed> {
    let attr = Attr {
        ty: perf::TYPE_SOFTWARE,
        config: perf::COUNT_SW_TASK_CLOCK,
        sample_period: period_ns,
        sample_type: if stack { RING_STACK } else { RING_CHAIN },
        flags: FLAGS | perf::EXCLUDE_CALLCHAIN_KERNEL,
        sample_regs_user: if stack { USER_REGS } else { 0 },
        sample_stack_user: if stack { STACK_BYTES } else { 0 },
        ..Attr::default()
    };
    let fd = perf::open(&attr, tid)?;
    let pages = match (stack, first) {
        (true, true) => FIRST_STACK_RING_PAGES,
        (true, false) => STACK_RING_PAGES,
        (false, _) => CHAIN_RING_PAGES,
    };
    let ring = match perf::Ring::map(fd, pages) {
        Ok(r) => r,
        Err(e) => {
            perf::close(fd);
            return Err(e);
        }
    };
    let armed = Armed::Ring {
        fd,
        id: perf::id(fd).unwrap_or(0),
        ring,
        stack,
    };
    if let Err(e) = perf::enable(fd) {
        disarm(armed);
        return Err(e);
    }
    Ok(armed)
}

/// True if and only if `armed` is a ring the kernel has written no record into (no sample,
/// no loss) since it was mapped.
pub(crate) fn ring_untouched(armed: &Armed) -> bool {
    matches!(armed, Armed::Ring { ring, .. } if ring.untouched())
}

/// Reads the samples a ring holds, oldest first, calling `sample(tid, what)` for each, and
/// frees their room; returns the samples the kernel lost for want of room. `record` is
/// scratch space, kept between calls. Nothing for another kind of timer.
pub(crate) fn drain_ring(
    armed: &Armed,
    record: &mut Vec<u8>,
    mut sample: impl FnMut(u32, RingSample<'_>),
) -> u64 {
    let Armed::Ring { ring, stack, .. } = armed else {
        return 0;
    };
    let mut lost = 0;
    let mut ips = Vec::new();
    ring.drain(record, |record| {
        let ty = u32::from_ne_bytes(record[0..4].try_into().expect("4 bytes"));
        let word = |i: usize| -> Option<u64> {
            record
                .get(8 + i * 8..16 + i * 8)
                .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        };
        match ty {
            perf::RECORD_SAMPLE => {
                // pid and tid (u32 each), then what the sample type asked for.
                let Some(ids) = word(0) else {
                    return;
                };
                let tid = (ids >> 32) as u32;
                if *stack {
                    if let Some((regs, bytes)) = parse_stack(record) {
                        sample(tid, RingSample::Stack(regs, bytes));
                    }
                } else {
                    // A call chain: nr, then nr addresses.
                    let nr = word(1).unwrap_or(0);
                    ips.clear();
                    for i in 0..nr.min(512) as usize {
                        match word(2 + i) {
                            Some(ip) if ip < perf::CONTEXT_MAX => ips.push(ip),
                            Some(_) => {}
                            None => break,
                        }
                    }
                    if !ips.is_empty() {
                        sample(tid, RingSample::Chain(&ips));
                    }
                }
            }
            perf::RECORD_LOST => lost += word(1).unwrap_or(0),
            _ => {}
        }
    });
    lost
}

/// The registers and stack bytes of a stack sample record (header, pid/tid, then
/// `PERF_SAMPLE_REGS_USER`: abi, registers; `PERF_SAMPLE_STACK_USER`: size, bytes,
/// dyn_size); `None` for one taken in no user context (abi 0) or cut short.
fn parse_stack(record: &[u8]) -> Option<(super::cfi::UserRegs, &[u8])> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(record.get(at..at + 8)?.try_into().ok()?))
    };
    let nregs = USER_REGS.count_ones() as usize;
    // The abi: 0 none (no user context), 1 32-bit, 2 64-bit.
    if word(16)? == 0 {
        return None;
    }
    let r = |i: usize| word(24 + i * 8).unwrap_or(0);
    #[cfg(target_arch = "x86_64")]
    let regs = super::cfi::UserRegs {
        fp: r(0),
        sp: r(1),
        pc: r(2),
        lr: 0,
    };
    #[cfg(target_arch = "aarch64")]
    let regs = super::cfi::UserRegs {
        fp: r(0),
        lr: r(1),
        sp: r(2),
        pc: r(3),
    };
    let at = 24 + nregs * 8;
    let size = word(at)? as usize;
    let bytes = record.get(at + 8..at + 8 + size)?;
    let dyn_size = word(at + 8 + size).unwrap_or(0) as usize;
    Some((regs, &bytes[..dyn_size.min(size)]))
}

/// CPU time thread `tid` has used so far, in nanoseconds.
pub(crate) fn thread_cpu_ns(tid: i32) -> Option<u64> {
    crate::sys::clock::clock_ns(thread_cpu_clock(tid))
}

/// CPU time the whole process has used so far, in nanoseconds.
pub(crate) fn process_cpu_ns() -> Option<u64> {
    crate::sys::clock::process_cpu_ns()
}

/// CPU time process `pid`, all its threads, has used so far, in nanoseconds (see
/// [`crate::sys::timer::process_cpu_clock`]).
pub(crate) fn process_cpu_ns_of(pid: u32) -> Option<u64> {
    crate::sys::clock::clock_ns(crate::sys::timer::process_cpu_clock(pid))
}

/// Arms `source` for thread `tid`: first expiry at `first_ns`, then every `period_ns`.
pub(crate) fn arm(
    source: Source,
    tid: i32,
    signal: libc::c_int,
    period_ns: u64,
    first_ns: u64,
) -> io::Result<Armed> {
    let timer = |clock| {
        let t = Timer::create(clock, tid, signal)?;
        match t.set(first_ns, period_ns) {
            Ok(()) => Ok(Armed::Timer(t)),
            Err(e) => {
                t.delete();
                Err(e)
            }
        }
    };
    match source {
        Source::ThreadCpuTimer => timer(thread_cpu_clock(tid)),
        Source::WallTimer => timer(libc::CLOCK_MONOTONIC),
        Source::PerfTaskClock => arm_perf(tid, signal, period_ns),
        Source::ProcessTimer => Err(io::Error::from(io::ErrorKind::Unsupported)),
    }
}

/// A task-clock event on thread `tid`, signalling it with `signal` every `period_ns` of its
/// CPU time.
fn arm_perf(tid: i32, signal: libc::c_int, period_ns: u64) -> io::Result<Armed> {
    let attr = Attr {
        ty: perf::TYPE_SOFTWARE,
        config: perf::COUNT_SW_TASK_CLOCK,
        sample_period: period_ns,
        flags: FLAGS,
        wakeup_events: 1,
        ..Attr::default()
    };
    let fd = perf::open(&attr, tid)?;
    if let Err(e) = perf::signal_thread(fd, signal, tid).and_then(|()| perf::enable(fd)) {
        disarm(Armed::Perf { fd, id: 0 });
        return Err(e);
    }
    Ok(Armed::Perf {
        fd,
        id: perf::id(fd).unwrap_or(0),
    })
}

/// Whether a task-clock event can be had on thread `tid` (perf_event_paranoid, a seccomp
/// filter, a kernel without perf events): one opened disabled and closed at once. Two system
/// calls, where arming one with its signal and taking it down again took ten (every profiled
/// process makes this check as it starts); what arming adds (`fcntl`s and an `ioctl` on the
/// descriptor just opened) does not fail where the open succeeded.
fn probe_perf(tid: i32) -> io::Result<()> {
    let attr = Attr {
        ty: perf::TYPE_SOFTWARE,
        config: perf::COUNT_SW_TASK_CLOCK,
        sample_period: 1_000_000_000,
        flags: FLAGS,
        ..Attr::default()
    };
    perf::close(perf::open(&attr, tid)?);
    Ok(())
}

/// Whether `armed` is still the sampler's: false once the program has closed the perf
/// event's descriptor (a `closefrom`, or a loop closing every descriptor), whose number may
/// now be one of the program's files, never to be disabled or closed by the sampler.
pub(crate) fn still_ours(armed: &Armed) -> bool {
    match *armed {
        Armed::Perf { fd, id } | Armed::Ring { fd, id, .. } if id != 0 => perf::id(fd) == Some(id),
        _ => true,
    }
}

/// A perf event's count so far (the thread's task clock while enabled), leaving it running;
/// `None` for a CPU timer, or once the program has closed the descriptor (whose number may
/// hold one of its files now, never to be read by the sampler).
pub(crate) fn perf_count(armed: &Armed) -> Option<u64> {
    let (Armed::Perf { fd, id } | Armed::Ring { fd, id, .. }) = *armed else {
        return None;
    };
    if id == 0 || perf::id(fd) != Some(id) {
        return None;
    }
    perf::count(fd)
}

/// Stops and frees one thread's timer. For a perf event, returns its final count (the
/// thread's CPU time in nanoseconds while the event was enabled). A perf event whose
/// descriptor the program has closed (its number may hold one of the program's files now)
/// has its ring unmapped and nothing else: no descriptor is touched, and `None`.
pub(crate) fn disarm(armed: Armed) -> Option<u64> {
    let (fd, id) = match armed {
        Armed::Timer(t) => {
            t.delete();
            return None;
        }
        Armed::Perf { fd, id } => (fd, id),
        Armed::Ring { fd, id, ring, .. } => {
            // First: it needs no descriptor, and it is the slowest of these calls (the
            // ring's pages are freed), so the descriptor is checked as late as possible.
            drop(ring);
            (fd, id)
        }
    };
    if !still_ours(&Armed::Perf { fd, id }) {
        return None;
    }
    // Disable first: a fork child may hold a copy of the descriptor, and closing ours
    // alone would leave the event counting.
    let _ = perf::disable(fd);
    let count = perf::count(fd);
    perf::close(fd);
    count
}

/// At the process's exit, a timer nothing will read (see `Poller::finish`): a perf event is
/// disabled, if its descriptor is still ours, so that it writes no more; its ring stays
/// mapped and its descriptor open until the process ends (unmapping a ring frees its pages,
/// which the end does anyway).
pub(crate) fn disable_at_exit(armed: Armed) {
    if let Armed::Perf { fd, .. } | Armed::Ring { fd, .. } = armed {
        if still_ours(&armed) {
            let _ = perf::disable(fd);
        }
    }
    std::mem::forget(armed);
}

/// Starts (or, with 0, stops) the process-wide `ITIMER_PROF` timer.
pub(crate) fn process_timer(period_ns: u64) -> io::Result<()> {
    crate::sys::timer::process_timer(period_ns)
}

/// The source to use for `mode`, or the one asked for, probed on the calling thread
/// (a timer or event created and deleted at once). `Err` when the asked-for one does not work.
pub(crate) fn choose(
    mode: Mode,
    asked: Option<Source>,
    signal: libc::c_int,
) -> Result<Source, (Source, io::Error)> {
    let tid = crate::sys::thread::gettid() as i32;
    let probe = |s: Source| match s {
        // setitimer has nothing to probe per thread; `start` reports its own failure.
        Source::ProcessTimer => Ok(()),
        Source::PerfTaskClock => probe_perf(tid),
        _ => arm(s, tid, signal, 1_000_000_000, 1_000_000_000).map(|a| {
            disarm(a);
        }),
    };
    if let Some(s) = asked {
        return probe(s).map(|_| s).map_err(|e| (s, e));
    }
    let works = |s: Source| probe(s).is_ok();
    Ok(match mode {
        Mode::Wall => Source::WallTimer,
        // The perf event fires on time at any rate and under any load; a CPU timer waits for
        // a kernel tick to land on the thread (see the module docs), so it is the fallback.
        Mode::Cpu if works(Source::PerfTaskClock) => Source::PerfTaskClock,
        Mode::Cpu if works(Source::ThreadCpuTimer) => Source::ThreadCpuTimer,
        Mode::Cpu => Source::ProcessTimer,
    })
}
