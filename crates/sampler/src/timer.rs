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

/// `perf_event_attr` up to `clockid` (`PERF_ATTR_SIZE_VER3`, 96 bytes). The libc crate does
/// not declare it; the kernel accepts every published size (perf_event_open(2), "size").
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    ty: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// The bitfield: disabled (bit 0), exclude_kernel (5), exclude_hv (6), ...
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    /// Which user registers a `PERF_SAMPLE_REGS_USER` sample carries (the arch's
    /// `perf_regs.h` numbering), and how many bytes of user stack `PERF_SAMPLE_STACK_USER`
    /// copies.
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
/// `_IOR('$', 7, __u64 *)`: the event's id, unique for the kernel's lifetime (Linux 3.12+).
const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;
/// fcntl(2) commands the libc crate does not declare for glibc targets.
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// `struct f_owner_ex` (fcntl(2)); not declared by the libc crate for glibc targets.
#[repr(C)]
struct FOwnerEx {
    ty: libc::c_int,
    pid: libc::pid_t,
}

/// What keeps one thread's timer alive.
#[derive(Debug)]
pub(crate) enum Armed {
    Timer(libc::timer_t),
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
    /// (walked by the unwind tables, [`super::cfi`]). `ring` is the mapping's address,
    /// `len` its length.
    Ring {
        fd: libc::c_int,
        id: u64,
        ring: usize,
        len: usize,
        /// Its samples carry registers and stack, not a call chain.
        stack: bool,
    },
}

// SAFETY: a timer_t is a kernel timer id (an integer in a pointer); the process owns it, not
// the thread that created it, so any thread may delete it.
unsafe impl Send for Armed {}

/// `PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN`.
const RING_CHAIN: u64 = 1 << 1 | 1 << 5;
/// `PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER`.
const RING_STACK: u64 = 1 << 1 | 1 << 12 | 1 << 13;
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
/// `perf_event_header.type` of a sample and of a loss.
const PERF_RECORD_SAMPLE: u32 = 9;
const PERF_RECORD_LOST: u32 = 2;
/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_USER`, ...).
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

/// One sample read from a ring.
pub(crate) enum RingSample<'a> {
    /// The user call chain: the interrupted address, then return addresses.
    Chain(&'a [u64]),
    /// The user registers and the stack bytes from the stack pointer up.
    Stack(super::cfi::UserRegs, &'a [u8]),
}

/// Opens the perf event `attr` on thread `tid`, close-on-exec, never on descriptors 0-2 (a
/// program started with them closed opens its own there).
fn perf_open(attr: &PerfEventAttr, tid: i32) -> io::Result<libc::c_int> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    } as libc::c_int;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    crate::sys::fd::above_stdio(fd)
}

/// Whether perf events may be opened here (the kernel's `perf_event_paranoid`, a seccomp
/// filter), asked without making one: an event of a type no PMU has gets `ENOENT` once the
/// checks that refuse it are passed. A real event is not the probe: the first per-task event
/// after a second without any waits for an RCU grace period (the kernel switches its
/// context-switch hooks on), 10-20 ms that a caller about to start a program would make it
/// wait.
pub(crate) fn perf_permitted() -> bool {
    let attr = PerfEventAttr {
        ty: u32::MAX - 1,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        sample_period: 10_000_000,
        // disabled, exclude_kernel, exclude_hv: what the real events ask.
        flags: 1 | 1 << 5 | 1 << 6,
        ..PerfEventAttr::default()
    };
    match perf_open(&attr, 0) {
        Ok(fd) => {
            // SAFETY: closes the descriptor just opened (no kernel gives one for this).
            unsafe { libc::close(fd) };
            true
        }
        Err(e) => matches!(
            e.raw_os_error(),
            Some(libc::ENOENT | libc::EINVAL | libc::EOPNOTSUPP)
        ),
    }
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
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    matches!(a, Armed::Ring { stack: true, len, .. } if *len == page * (1 + FIRST_STACK_RING_PAGES))
}

fn arm_ring_of(tid: i32, period_ns: u64, stack: bool, first: bool) -> io::Result<Armed> {
    let attr = PerfEventAttr {
        ty: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: period_ns,
        sample_type: if stack { RING_STACK } else { RING_CHAIN },
        // disabled, exclude_kernel, exclude_hv (as `arm_perf`), exclude_callchain_kernel (21).
        flags: 1 | 1 << 5 | 1 << 6 | 1 << 21,
        sample_regs_user: if stack { USER_REGS } else { 0 },
        sample_stack_user: if stack { STACK_BYTES } else { 0 },
        ..PerfEventAttr::default()
    };
    let fd = perf_open(&attr, tid)?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let pages = match (stack, first) {
        (true, true) => FIRST_STACK_RING_PAGES,
        (true, false) => STACK_RING_PAGES,
        (false, _) => CHAIN_RING_PAGES,
    };
    let len = page * (1 + pages);
    // SAFETY: maps the event's ring (a control page and a power of two of data pages), as
    // perf_event_open(2) describes, shared with the kernel; checked against MAP_FAILED.
    let ring = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if ring == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        // SAFETY: closes the descriptor this function opened.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let armed = Armed::Ring {
        fd,
        id: perf_id(fd).unwrap_or(0),
        ring: ring as usize,
        len,
        stack,
    };
    // SAFETY: an ioctl on the descriptor we own.
    if unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) } != 0 {
        let e = io::Error::last_os_error();
        disarm(armed);
        return Err(e);
    }
    Ok(armed)
}

/// A word of a ring's control page (struct perf_event_mmap_page): `DATA_HEAD`, how far the
/// kernel has written (0 before its first record), or `DATA_TAIL`, how far we have read.
/// `None` for another kind of timer.
fn ring_word(armed: &Armed, offset: usize) -> Option<&std::sync::atomic::AtomicU64> {
    let Armed::Ring { ring, .. } = *armed else {
        return None;
    };
    let word = (ring as *const u8).wrapping_add(offset) as *const std::sync::atomic::AtomicU64;
    // SAFETY: in the control page of the live mapping (a ring is unmapped only when
    // disarmed, which takes the `Armed` this borrows), 8-aligned; the kernel reads or
    // writes it concurrently, hence an atomic.
    Some(unsafe { &*word })
}

const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// True if and only if `armed` is a ring the kernel has written no record into (no sample,
/// no loss) since it was mapped.
pub(crate) fn ring_untouched(armed: &Armed) -> bool {
    ring_word(armed, DATA_HEAD)
        .is_some_and(|head| head.load(std::sync::atomic::Ordering::Acquire) == 0)
}

/// Reads the samples a ring holds, oldest first, calling `sample(tid, what)` for each, and
/// frees their room; returns the samples the kernel lost for want of room. `record` is
/// scratch space, kept between calls. Nothing for another kind of timer.
pub(crate) fn drain_ring(
    armed: &Armed,
    record: &mut Vec<u8>,
    mut sample: impl FnMut(u32, RingSample<'_>),
) -> u64 {
    let Armed::Ring {
        ring, len, stack, ..
    } = *armed
    else {
        return 0;
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let base = ring as *mut u8;
    let (Some(head), Some(tail)) = (ring_word(armed, DATA_HEAD), ring_word(armed, DATA_TAIL))
    else {
        return 0;
    };
    let size = len - page;
    // The data pages follow the control page inside the mapping.
    let data = base.wrapping_add(page);
    let end = head.load(std::sync::atomic::Ordering::Acquire);
    let mut at = tail.load(std::sync::atomic::Ordering::Relaxed);
    let mut lost = 0;
    let mut ips = Vec::new();
    // A record may wrap around the end of the data pages: copied out in up to two pieces.
    let copy = |from: u64, n: usize, out: &mut Vec<u8>| {
        out.clear();
        out.reserve(n);
        let start = (from % size as u64) as usize;
        let first = n.min(size - start);
        let to = out.as_mut_ptr();
        // SAFETY: `start..start + first` lies inside the data pages (the caller checks that
        // n is at most the data size); the bytes between tail and head are the kernel's
        // finished records; `out` has room for `n` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.wrapping_add(start), to, first) };
        // SAFETY: as above, for `0..n - first`, the part that wrapped, after the first.
        unsafe { std::ptr::copy_nonoverlapping(data, to.wrapping_add(first), n - first) };
        // SAFETY: the `n` bytes were just written.
        unsafe { out.set_len(n) };
    };
    while at < end {
        copy(at, 8, record);
        let ty = u32::from_ne_bytes(record[0..4].try_into().expect("4 bytes"));
        let n = u16::from_ne_bytes(record[6..8].try_into().expect("2 bytes")) as usize;
        if n < 8 || n > size || at + n as u64 > end {
            break;
        }
        copy(at, n, record);
        let word = |i: usize| -> Option<u64> {
            record
                .get(8 + i * 8..16 + i * 8)
                .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        };
        match ty {
            PERF_RECORD_SAMPLE => {
                // pid and tid (u32 each), then what the sample type asked for.
                let Some(ids) = word(0) else {
                    at += n as u64;
                    continue;
                };
                let tid = (ids >> 32) as u32;
                if stack {
                    if let Some((regs, bytes)) = parse_stack(record) {
                        sample(tid, RingSample::Stack(regs, bytes));
                    }
                } else {
                    // A call chain: nr, then nr addresses.
                    let nr = word(1).unwrap_or(0);
                    ips.clear();
                    for i in 0..nr.min(512) as usize {
                        match word(2 + i) {
                            Some(ip) if ip < PERF_CONTEXT_MAX => ips.push(ip),
                            Some(_) => {}
                            None => break,
                        }
                    }
                    if !ips.is_empty() {
                        sample(tid, RingSample::Chain(&ips));
                    }
                }
            }
            PERF_RECORD_LOST => lost += word(1).unwrap_or(0),
            _ => {}
        }
        at += n as u64;
    }
    tail.store(at, std::sync::atomic::Ordering::Release);
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

/// The CPU-time clock of thread `tid` (MAKE_THREAD_CPUCLOCK in the kernel's
/// include/linux/posix-timers.h: `~tid << 3 | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED`).
pub(crate) fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    (!tid << 3) | 4 | 2
}

/// CPU time thread `tid` has used so far, in nanoseconds.
pub(crate) fn thread_cpu_ns(tid: i32) -> Option<u64> {
    crate::sys::clock::clock_ns(thread_cpu_clock(tid))
}

/// CPU time the whole process has used so far, in nanoseconds.
pub(crate) fn process_cpu_ns() -> Option<u64> {
    crate::sys::clock::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time process `pid`, all its threads, has used so far, in nanoseconds: its CPU clock
/// (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)), which the kernel lets any process read (a
/// thread's, [`thread_cpu_clock`], only its own process's threads); a zombie's holds until
/// it is reaped.
pub(crate) fn process_cpu_ns_of(pid: u32) -> Option<u64> {
    crate::sys::clock::clock_ns((!(pid as libc::clockid_t) << 3) | 2)
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Arms `source` for thread `tid`: first expiry at `first_ns`, then every `period_ns`.
pub(crate) fn arm(
    source: Source,
    tid: i32,
    signal: libc::c_int,
    period_ns: u64,
    first_ns: u64,
) -> io::Result<Armed> {
    match source {
        Source::ThreadCpuTimer => {
            arm_timer(thread_cpu_clock(tid), tid, signal, period_ns, first_ns)
        }
        Source::WallTimer => arm_timer(libc::CLOCK_MONOTONIC, tid, signal, period_ns, first_ns),
        Source::PerfTaskClock => arm_perf(tid, signal, period_ns),
        Source::ProcessTimer => Err(io::Error::from(io::ErrorKind::Unsupported)),
    }
}

fn arm_timer(
    clock: libc::clockid_t,
    tid: i32,
    signal: libc::c_int,
    period_ns: u64,
    first_ns: u64,
) -> io::Result<Armed> {
    // SAFETY: sigevent is plain data; all-zero is a valid value to fill in.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = signal;
    sev.sigev_notify_thread_id = tid;
    // The handler learns the thread from the signal, without a gettid call.
    sev.sigev_value = libc::sigval {
        sival_ptr: tid as usize as *mut libc::c_void,
    };
    let mut timer: libc::timer_t = std::ptr::null_mut();
    // SAFETY: `sev` and `timer` are valid for the call; the kernel copies `sev`.
    if unsafe { libc::timer_create(clock, &mut sev, &mut timer) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let spec = libc::itimerspec {
        it_interval: timespec(period_ns),
        it_value: timespec(first_ns.max(1)),
    };
    // SAFETY: `timer` was just created; `spec` is valid; the old value is not wanted.
    if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
        let e = io::Error::last_os_error();
        disarm(Armed::Timer(timer));
        return Err(e);
    }
    Ok(Armed::Timer(timer))
}

fn arm_perf(tid: i32, signal: libc::c_int, period_ns: u64) -> io::Result<Armed> {
    let attr = PerfEventAttr {
        ty: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: period_ns,
        // disabled until armed below; exclude_kernel and exclude_hv, which
        // perf_event_paranoid = 2 (the usual default) requires of unprivileged users.
        flags: 1 | 1 << 5 | 1 << 6,
        wakeup_events: 1,
        ..PerfEventAttr::default()
    };
    let fd = perf_open(&attr, tid)?;
    let armed = Armed::Perf { fd, id: 0 };
    let owner = FOwnerEx {
        ty: F_OWNER_TID,
        pid: tid,
    };
    // Four calls on the descriptor we own, with valid arguments (`owner` outlives its call).
    // SAFETY: as just said.
    let ok = unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) } == 0
        // SAFETY: as above.
        && unsafe { libc::fcntl(fd, F_SETSIG, signal) } == 0
        // SAFETY: as above.
        && unsafe { libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) } == 0
        // SAFETY: as above.
        && unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) } == 0;
    if !ok {
        let e = io::Error::last_os_error();
        disarm(armed);
        return Err(e);
    }
    Ok(Armed::Perf {
        fd,
        id: perf_id(fd).unwrap_or(0),
    })
}

/// Whether a task-clock event can be had on thread `tid` (perf_event_paranoid, a seccomp
/// filter, a kernel without perf events): one opened disabled and closed at once. Two system
/// calls, where arming one with its signal and taking it down again took ten (every profiled
/// process makes this check as it starts); what arming adds (`fcntl`s and an `ioctl` on the
/// descriptor just opened) does not fail where the open succeeded.
fn probe_perf(tid: i32) -> io::Result<()> {
    let attr = PerfEventAttr {
        ty: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: 1_000_000_000,
        // disabled, exclude_kernel, exclude_hv: as `arm_perf`.
        flags: 1 | 1 << 5 | 1 << 6,
        ..PerfEventAttr::default()
    };
    let fd = perf_open(&attr, tid)?;
    // SAFETY: closes the descriptor just opened, which nothing else holds.
    unsafe { libc::close(fd) };
    Ok(())
}

/// The id of the perf event open as `fd`, if it is one.
fn perf_id(fd: libc::c_int) -> Option<u64> {
    let mut id: u64 = 0;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 into `id`, valid for the call; on a
    // descriptor that is not a perf event it fails and writes nothing.
    let r = unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ID as _, &mut id as *mut u64) };
    (r == 0).then_some(id)
}

/// Whether `armed` is still the sampler's: false once the program has closed the perf
/// event's descriptor (a `closefrom`, or a loop closing every descriptor), whose number may
/// now be one of the program's files, never to be disabled or closed by the sampler.
pub(crate) fn still_ours(armed: &Armed) -> bool {
    match *armed {
        Armed::Perf { fd, id } | Armed::Ring { fd, id, .. } if id != 0 => perf_id(fd) == Some(id),
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
    if id == 0 || perf_id(fd) != Some(id) {
        return None;
    }
    read_count(fd)
}

/// The count of the perf event open as `fd` (one u64: the event has no read_format).
/// The caller knows `fd` is the sampler's perf event.
fn read_count(fd: libc::c_int) -> Option<u64> {
    let mut count: u64 = 0;
    // SAFETY: reads 8 bytes into `count`, valid for the call, from a perf event descriptor
    // (the caller's contract). The count stays readable after the thread exits.
    let n = unsafe { libc::read(fd, &mut count as *mut u64 as *mut libc::c_void, 8) };
    (n == 8).then_some(count)
}

/// Stops and frees one thread's timer. For a perf event, returns its final count (the
/// thread's CPU time in nanoseconds while the event was enabled). A perf event whose
/// descriptor the program has closed (its number may hold one of the program's files now)
/// has its ring unmapped and nothing else: no descriptor is touched, and `None`.
pub(crate) fn disarm(armed: Armed) -> Option<u64> {
    if let Armed::Ring { ring, len, .. } = armed {
        // First: it needs no descriptor, and it is the slowest of these calls (the ring's
        // pages are freed), so the descriptor is checked as late as possible below.
        // SAFETY: unmaps the ring mapped by `arm_ring`, once (moved in).
        unsafe { libc::munmap(ring as *mut libc::c_void, len) };
    }
    if !still_ours(&armed) {
        return None;
    }
    match armed {
        Armed::Timer(t) => {
            // SAFETY: the timer id came from timer_create and is deleted once (moved in).
            unsafe { libc::timer_delete(t) };
            None
        }
        Armed::Perf { fd, .. } | Armed::Ring { fd, .. } => {
            // Disable first: a fork child may hold a copy of the descriptor, and closing ours
            // alone would leave the event counting.
            // SAFETY: an ioctl on the descriptor we own (checked just above).
            unsafe { libc::ioctl(fd, PERF_EVENT_IOC_DISABLE as _, 0) };
            let count = read_count(fd);
            // SAFETY: closes the descriptor once (moved in).
            unsafe { libc::close(fd) };
            count
        }
    }
}

/// At the process's exit, a timer nothing will read (see `Poller::finish`): a perf event is
/// disabled, if its descriptor is still ours, so that it writes no more; its ring stays
/// mapped and its descriptor open until the process ends (unmapping a ring frees its pages,
/// which the end does anyway).
pub(crate) fn disable_at_exit(armed: Armed) {
    if let Armed::Perf { fd, .. } | Armed::Ring { fd, .. } = armed {
        if still_ours(&armed) {
            // SAFETY: an ioctl on our own event's descriptor (checked just above).
            unsafe { libc::ioctl(fd, PERF_EVENT_IOC_DISABLE as _, 0) };
        }
    }
}

/// Starts (or, with 0, stops) the process-wide `ITIMER_PROF` timer.
pub(crate) fn process_timer(period_ns: u64) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
        tv_usec: ((period_ns % 1_000_000_000) / 1000).max((period_ns > 0) as u64)
            as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: `it` is valid for the call; the old value is not wanted.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
