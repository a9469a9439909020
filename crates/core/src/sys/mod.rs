//! Thin wrappers over the few libc calls the scope and report code needs.
//!
//! DESIGN.md keeps `unsafe` out of the scope, report and capture modules; the calls they need
//! (the reference clocks, the OS thread id, `atexit`) are wrapped here once, each with the reason
//! it is sound, so those modules stay free of `unsafe`.

mod job;
mod memory;
pub mod output;
mod stderr;

pub use job::Waited;
pub(crate) use job::*;
#[cfg(feature = "sampler")]
pub(crate) use memory::*;
pub(crate) use stderr::*;

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Reads `clock` with `clock_gettime`, in nanoseconds; `None` if the clock does not exist
/// (a CPU clock of a thread that has exited).
pub(crate) fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; clock_gettime
    // writes only into it and is async-signal-safe.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64),
    )
}

/// `CLOCK_MONOTONIC` in nanoseconds: the reference clock the CPU counter is calibrated and
/// checked against.
///
/// Signal context (the sampler's handler may call it): the vDSO, no allocation, no lock.
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    // Never fails for this clock on Linux.
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// `CLOCK_BOOTTIME` in nanoseconds (counts suspend too); used with the process start time from
/// `/proc/self/stat`, which is measured on the same clock.
pub(crate) fn boottime_ns() -> u64 {
    // Never fails for this clock on Linux.
    clock_ns(libc::CLOCK_BOOTTIME).unwrap_or(0)
}

/// The kernel's id of the calling thread (what `top -H`, `perf` and `gdb` show).
///
/// Signal context (the sampler's handler calls it): one system call, no allocation, no lock.
pub(crate) fn gettid() -> u64 {
    // SAFETY: SYS_gettid takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as u64
}

/// Runs `f`, then puts the calling thread's errno back as it was: what a signal handler must
/// do for the code it interrupted. Async-signal-safe if `f` is.
#[inline(always)]
pub(crate) fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: __errno_location has no preconditions; it returns the calling thread's errno
    // slot, valid for the thread's life.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: `slot` is this thread's errno, valid and aligned.
    let errno = unsafe { *slot };
    let r = f();
    // SAFETY: as above: restores the interrupted code's errno.
    unsafe { *slot = errno };
    r
}

/// Clock ticks per second of the `/proc` time fields (`_SC_CLK_TCK`).
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Registers `f` to run at process exit (after `main` returns, on `std::process::exit`, and
/// after a panic in `main`, which returns through the runtime to `exit`). Returns true if and
/// only if the registration succeeded.
pub(crate) fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain `extern "C" fn()` with 'static lifetime, as atexit requires; the
    // callee catches every panic so nothing unwinds into libc.
    unsafe { libc::atexit(f) == 0 }
}

/// The process's start time as `CLOCK_BOOTTIME` nanoseconds, from field 22 of
/// `/proc/self/stat` (see proc(5)); `None` where `/proc` is unavailable or unparsable.
pub(crate) fn process_start_boottime_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields after the name start at field 3; starttime is field 22.
    let start_ticks: u64 = after.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let hz = clock_ticks_per_second();
    Some(start_ticks.saturating_mul(1_000_000_000) / hz)
}

/// The signal the running sampler's handler is installed for (0 before any): kept unblocked
/// in tickscope's own threads, which the sampler samples too.
pub(crate) static SAMPLER_SIGNAL: std::sync::atomic::AtomicI32 =
    std::sync::atomic::AtomicI32::new(0);

/// Starts one of tickscope's own threads with every signal blocked, except those a fault
/// raises, `SIGPROF`, the running sampler's signal and `keep`. A signal sent to the
/// process is for the program's threads: the kernel delivers it to any thread that does not
/// block it, so without this a program's handler could run on a tickscope thread, and a
/// signal every program thread blocks, to take it with `sigwait` or a signalfd, would land
/// on ours and kill the process by its default action. (Each also woke tickscope's drain
/// thread: a shell's `SIGCHLD`, once per command.)
///
/// Real-time signals are blocked too (a program may wait for one it sends the process, as
/// for SIGTERM, and their default action also ends the process), except the running
/// sampler's: a sampler started later by another real-time signal samples threads of ours
/// that are older than it through their perf rings, not by its signal (and, in wall mode or
/// without perf events, not at all: their CPU time is then "no signal arrived", as for a
/// program's thread that blocks the signal). The mask is set whole (not added to the
/// caller's) around the spawn, so the thread never runs without it and inherits nothing the
/// caller blocked.
pub(crate) fn spawn_quiet<F, T>(
    builder: std::thread::Builder,
    keep: &[libc::c_int],
    f: F,
) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let set = quiet_mask(keep);
    // SAFETY: as above: the previous mask, filled in by pthread_sigmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid for the call; masking signals in this thread for the
    // moment of the spawn only delays them (pending signals arrive when it is restored).
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &set, &mut old) };
    SPAWNING_OWN.with(|s| s.set(true));
    let spawned = builder.spawn(move || {
        // Unregistered as the thread ends, by a panic too (its id may go to a program's
        // thread next).
        let _ours = own_threads::Registered(own_threads::register(gettid() as i32));
        f()
    });
    SPAWNING_OWN.with(|s| s.set(false));
    // SAFETY: restores the mask read above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    spawned
}

/// The signal mask of tickscope's own threads ([`spawn_quiet`]): every signal blocked but
/// the synchronous faults, `SIGPROF`, the running sampler's signal and `keep`.
pub(crate) fn quiet_mask(keep: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; all-zero is a valid value for sigfillset to fill.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset_t.
    unsafe { libc::sigfillset(&mut set) };
    let unblocked = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGSYS,
        libc::SIGPROF,
        SAMPLER_SIGNAL.load(std::sync::atomic::Ordering::SeqCst),
    ];
    for sig in unblocked.into_iter().chain(keep.iter().copied()) {
        // SAFETY: `set` is a valid sigset_t; a number out of range (0) only fails.
        unsafe { libc::sigdelset(&mut set, sig) };
    }
    set
}

/// One value handed from a thread to another without a lock (a fork child never finds it
/// taken): a leaked `Box` behind an atomic pointer.
#[cfg_attr(not(feature = "sampler"), allow(dead_code))]
pub(crate) struct Handoff<T: Send>(std::sync::atomic::AtomicPtr<T>);

#[cfg_attr(not(feature = "sampler"), allow(dead_code))]
impl<T: Send> Handoff<T> {
    pub(crate) const fn new() -> Handoff<T> {
        Handoff(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()))
    }

    /// Leaves `value` here, dropping what was left before.
    pub(crate) fn put(&self, value: T) {
        let old = self.0.swap(
            Box::into_raw(Box::new(value)),
            std::sync::atomic::Ordering::SeqCst,
        );
        // SAFETY: a non-null pointer here is a Box leaked by `put`, and the swap made this
        // its only owner.
        (!old.is_null()).then(|| drop(unsafe { Box::from_raw(old) }));
    }

    /// Takes what was left, if anything.
    pub(crate) fn take(&self) -> Option<T> {
        let p = self
            .0
            .swap(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
        // SAFETY: as in `put`.
        (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
    }
}

thread_local! {
    /// True while this thread starts one of tickscope's own ([`spawn_quiet`]).
    static SPAWNING_OWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while the calling thread is starting one of tickscope's own threads: libtickscope's
/// `pthread_create` does not have the sampler arm such a thread before it runs (a round trip
/// to the drain thread and a stack ring, ~0.1 ms of every profiled process's start, for a
/// thread that mostly waits); the sampler finds it by its poll if it lives that long.
pub(crate) fn spawning_own_thread() -> bool {
    SPAWNING_OWN.try_with(|s| s.get()).unwrap_or(false)
}

/// The thread ids of tickscope's own threads that are running ([`spawn_quiet`] registers
/// each as it starts): the sampler samples them by frame pointers (the kernel's call chain)
/// rather than by copies of their stacks. Our code is built with frame pointers; a copy of
/// 16 KiB of stack per sample and a 256 KiB ring, made for every profiled process's writer
/// thread, bought nothing for threads that mostly wait.
pub(crate) mod own_threads {
    use std::sync::atomic::{AtomicI32, Ordering::*};

    /// More than tickscope ever runs at once (drain, signal writer, capture, reporter); a
    /// thread that finds no free slot is sampled as a program's thread would be.
    static TIDS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];

    /// Records `tid`; the slot to free when the thread ends.
    pub(crate) fn register(tid: i32) -> Option<usize> {
        (0..TIDS.len()).find(|&i| TIDS[i].compare_exchange(0, tid, SeqCst, Relaxed).is_ok())
    }

    /// A registration, undone when dropped.
    pub(crate) struct Registered(pub Option<usize>);

    impl Drop for Registered {
        fn drop(&mut self) {
            if let Some(i) = self.0 {
                TIDS[i].store(0, SeqCst);
            }
        }
    }

    /// True if and only if `tid` is one of tickscope's running threads.
    #[cfg_attr(not(feature = "sampler"), allow(dead_code))]
    pub(crate) fn contains(tid: i32) -> bool {
        tid != 0 && TIDS.iter().any(|t| t.load(SeqCst) == tid)
    }
}

/// Registers `f` to run in the child after every `fork` (`pthread_atfork`). `f` runs in
/// the child before `fork` returns there, where only async-signal-safe work is allowed.
/// Returns true if and only if the registration succeeded.
#[cfg(any(feature = "sampler", feature = "capture"))]
pub(crate) fn at_fork_child(f: unsafe extern "C" fn()) -> bool {
    // SAFETY: `f` lives as long as the process and, by the caller's design, does only
    // async-signal-safe work (atomic stores).
    unsafe { libc::pthread_atfork(None, None, Some(f)) == 0 }
}

/// True if and only if the process runs with privileges the user who started it does not
/// have (a setuid or setgid program, file capabilities): the kernel's `AT_SECURE`, which
/// glibc's `secure_getenv` checks. Such a process must not let its environment choose files
/// to write or sockets to open.
pub(crate) fn privileged() -> bool {
    static SECURE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave the process; an
    // absent entry reads as 0.
    *SECURE.get_or_init(|| unsafe { libc::getauxval(libc::AT_SECURE) } != 0)
}

/// Descriptors 0, 1 and 2 are the program's: a descriptor of tickscope's that would land
/// there (the program closed them) is moved to the lowest free number from 3, close-on-exec.
/// On failure `fd` is closed and the error returned.
pub(crate) fn above_stdio(fd: libc::c_int) -> std::io::Result<libc::c_int> {
    if !(0..3).contains(&fd) {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor this process just opened and owns; no memory involved.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    let e = std::io::Error::last_os_error();
    // SAFETY: closes the low duplicate, which this process opened and nothing else holds.
    unsafe { libc::close(fd) };
    if high < 0 {
        return Err(e);
    }
    Ok(high)
}

/// [`above_stdio`] for a file or socket std opened.
pub(crate) fn file_above_stdio<F>(f: F) -> std::io::Result<F>
where
    F: std::os::fd::IntoRawFd + std::os::fd::FromRawFd,
{
    let fd = above_stdio(f.into_raw_fd())?;
    // SAFETY: `fd` is open, of the same kind, and owned by nothing else (the original was
    // consumed above).
    Ok(unsafe { F::from_raw_fd(fd) })
}

/// Opens `path` for reading, close-on-exec, never as descriptor 0, 1 or 2.
#[cfg(feature = "sampler")]
pub(crate) fn open_read(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    file_above_stdio(std::fs::File::open(path)?)
}

/// The program's wall time so far: since its `exec` (see [`LOAD_NS`]); else (in a fork
/// child, whose process began at the fork, or where nothing recorded the load) since the
/// process started per `/proc/self/stat` (10 ms resolution); else since tickscope's first use.
pub(crate) fn process_wall_ns() -> u64 {
    let loaded = LOAD_NS.load(std::sync::atomic::Ordering::Relaxed);
    if loaded != 0 && LOAD_PID.load(std::sync::atomic::Ordering::Relaxed) == std::process::id() {
        return monotonic_ns().saturating_sub(loaded);
    }
    match process_start_boottime_ns() {
        Some(start) => boottime_ns().saturating_sub(start),
        None => monotonic_ns().saturating_sub(first_use_ns()),
    }
}

/// When tickscope was first used (the first call), for [`process_wall_ns`]'s fallback.
pub(crate) fn first_use_ns() -> u64 {
    static FIRST_USE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *FIRST_USE.get_or_init(monotonic_ns)
}

/// `CLOCK_MONOTONIC` when the program began, at its `exec`: read by an `.init_array` entry
/// (which runs after `exec` and before `main`), less the CPU time the process used until then
/// (the kernel's `exec` and the dynamic loader: one thread that does not wait, 0.3-1 ms). The
/// kernel's process start time is the *fork*, which for a program started by `cargo run` (it
/// `exec`s the program) would include the whole build. Its entry has a
/// priority (`.init_array.00098`: the linkers run those first, lowest first, std's own
/// `.00099` next), so that it comes before the constructors of the object it is linked into:
/// libtickscope's starts the sampler, which takes a millisecond, and a profile that spans
/// the process from its load (`sampler::parts`) would otherwise begin after it.
static LOAD_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The process [`LOAD_NS`] is of: a fork child has its parent's.
static LOAD_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[used]
#[cfg_attr(target_os = "linux", link_section = ".init_array.00098")]
static RECORD_LOAD_TIME: extern "C" fn() = record_load_time;

extern "C" fn record_load_time() {
    // Runs before main: nothing here can panic or allocate.
    let before = clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0);
    LOAD_NS.store(
        monotonic_ns().saturating_sub(before),
        std::sync::atomic::Ordering::Relaxed,
    );
    LOAD_PID.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
}

/// The calling thread's stack, `[low, high)`, as its thread library set it up.
#[cfg(feature = "sampler")]
pub(crate) fn own_stack() -> Option<(u64, u64)> {
    // SAFETY: pthread_attr_t is plain data, filled in by pthread_getattr_np below.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    // SAFETY: `attr` is valid for writing; on success it is initialised and destroyed below.
    if unsafe { libc::pthread_getattr_np(me, &mut attr) } != 0 {
        return None;
    }
    let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
    // SAFETY: `attr` was initialised above; the outputs are valid locals.
    let r = unsafe { libc::pthread_attr_getstack(&attr, &mut addr, &mut size) };
    // SAFETY: destroys the attributes initialised above, once.
    unsafe { libc::pthread_attr_destroy(&mut attr) };
    let low = addr as u64;
    (r == 0 && size > 0).then(|| (low, low + size as u64))
}

/// Sleeps until `word` may have changed from 0 (woken by [`futex_wake`]), or `timeout`.
#[cfg(feature = "sampler")]
pub(crate) fn futex_wait(word: &std::sync::atomic::AtomicU32, timeout: std::time::Duration) {
    futex_wait_while(word, 0, timeout)
}

/// Sleeps while `word` holds `expected`, until woken ([`futex_wake`]), `timeout` passes or a
/// signal interrupts; returns at once if it holds something else already.
pub(crate) fn futex_wait_while(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: std::time::Duration,
) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a valid relative timeout; the kernel
    // compares the word with `expected` atomically before it sleeps.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Wakes the thread waiting on `word` in [`futex_wait`] or [`futex_wait_while`].
/// Async-signal-safe (one system call).
#[cfg(feature = "sampler")]
pub(crate) fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    futex_wake_up_to(word, 1);
}

/// Wakes every thread waiting on `word` in [`futex_wait_while`]. Async-signal-safe (one
/// system call).
pub(crate) fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    futex_wake_up_to(word, i32::MAX);
}

fn futex_wake_up_to(word: &std::sync::atomic::AtomicU32, waiters: i32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            waiters,
        )
    };
}

/// The calling thread's name as it is now (`PR_GET_NAME`: no file opened), NUL-padded.
#[cfg(feature = "sampler")]
pub(crate) fn own_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `name`.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name
}

/// A thread name as the kernel keeps it (NUL-padded, 16 bytes) as text.
#[cfg(feature = "sampler")]
pub(crate) fn name_text(name: &[u8; 16]) -> String {
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..len]).into_owned()
}

/// CPU time the whole process has used so far, in nanoseconds.
pub(crate) fn process_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time (user and system, ns) of this process's children that have ended and been
/// waited for, with theirs in turn (`getrusage(RUSAGE_CHILDREN)`).
pub(crate) fn children_cpu_ns() -> std::io::Result<u64> {
    // SAFETY: all-zero bytes are a valid `rusage` (integers and timevals only).
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable rusage for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rusage_cpu_ns(&r))
}

/// The CPU time (user and system, ns) a `rusage` holds.
pub(crate) fn rusage_cpu_ns(r: &libc::rusage) -> u64 {
    let ns = |t: libc::timeval| {
        (t.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_usec.max(0) as u64 * 1_000)
    };
    ns(r.ru_utime).saturating_add(ns(r.ru_stime))
}

extern "C" {
    /// The process's environment (glibc's `environ`): a null-terminated array of `NAME=value`,
    /// which `setenv` may replace.
    static mut environ: *const *const libc::c_char;
}

/// The environment variables whose names begin with `prefix`, as (name, value), those that
/// are UTF-8 only; read in place from `environ`, so that nothing is allocated where none
/// matches (the preload library's constructor runs this in every program it is loaded into,
/// most of which have no `TICKSCOPE_*` variable: copying the whole environment, as
/// `std::env::vars_os` does, was the first use of malloc in a `/bin/true`, and cost it
/// ~0.15 ms). Not safe beside another thread's `setenv`, as `getenv` is not.
pub(crate) fn env_with_prefix(prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // The address of the pointer glibc keeps (taking it reads nothing).
    let slot = std::ptr::addr_of!(environ);
    // SAFETY: reads that pointer (null before the environment is set up) as a variable
    // libc may change.
    let mut entry = unsafe { slot.read_volatile() };
    if entry.is_null() {
        return out;
    }
    loop {
        // SAFETY: `entry` points into the null-terminated array `environ` names.
        let item = unsafe { *entry };
        if item.is_null() {
            return out;
        }
        // SAFETY: each item is a NUL-terminated string, valid while the environment is not
        // changed (nothing here changes it).
        let bytes = unsafe { std::ffi::CStr::from_ptr(item) }.to_bytes();
        if bytes.starts_with(prefix.as_bytes()) {
            if let Some((name, value)) = std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.split_once('='))
            {
                out.push((name.to_string(), value.to_string()));
            }
        }
        // SAFETY: not past the terminating null, which ended the loop above.
        entry = unsafe { entry.add(1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes copied into a mapping of their own (populated at once) are the bytes, at
    /// every length.
    #[test]
    #[cfg(feature = "sampler")]
    fn bytes_not_forked_are_a_copy_of_the_bytes() {
        for n in [0usize, 1, 4095, 4097, 1 << 20] {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let copy = bytes_not_forked(&bytes);
            assert_eq!(&copy[..], &bytes[..], "{n} bytes");
        }
    }

    /// A zeroed table reads as zeros, at every length, and writes stick.
    #[test]
    #[cfg(feature = "sampler")]
    fn zeroed_slices_are_zero_and_usable() {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        for n in [0, 1, 7, 1 << 20] {
            let t = zeroed_slice::<AtomicU64>(n);
            assert_eq!(t.len(), n);
            assert!(t.iter().all(|c| c.load(Relaxed) == 0));
            if let Some(last) = t.last() {
                last.store(7, Relaxed);
                assert_eq!(t[n - 1].load(Relaxed), 7);
            }
        }
    }

    /// A tickscope thread blocks what the program may send the process, and keeps what it
    /// was asked to keep, the sampling signals and what a fault raises, whatever the
    /// spawning thread blocked; the spawning thread's mask is as before.
    #[test]
    fn quiet_threads_block_signals_but_those_kept() {
        fn mask(how: libc::c_int, sigs: &[libc::c_int]) {
            // SAFETY: as in `spawn_quiet`.
            let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: `set` is a valid sigset_t.
            unsafe { libc::sigemptyset(&mut set) };
            for &sig in sigs {
                // SAFETY: as above.
                unsafe { libc::sigaddset(&mut set, sig) };
            }
            // SAFETY: changes this test thread's own mask.
            unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
        }
        fn blocked(sig: libc::c_int) -> bool {
            // SAFETY: as in `spawn_quiet`.
            let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: reads this thread's mask into `now`.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now) };
            // SAFETY: `now` is a valid sigset_t.
            unsafe { libc::sigismember(&now, sig) == 1 }
        }
        // The spawning thread blocks SIGPROF and SIGUSR2, and not SIGTERM.
        mask(libc::SIG_BLOCK, &[libc::SIGPROF, libc::SIGUSR2]);
        // A real-time signal kept (a sampler's), and one not (a program's).
        let keep = [libc::SIGUSR2, libc::SIGRTMIN() + 4];
        let there = spawn_quiet(std::thread::Builder::new(), &keep, || {
            [
                libc::SIGTERM,
                libc::SIGCHLD,
                libc::SIGINT,
                libc::SIGRTMIN() + 1,
                libc::SIGUSR2,
                libc::SIGPROF,
                libc::SIGRTMIN() + 4,
                libc::SIGSEGV,
            ]
            .map(blocked)
        })
        .unwrap()
        .join()
        .unwrap();
        let here = [libc::SIGTERM, libc::SIGPROF, libc::SIGUSR2].map(blocked);
        mask(libc::SIG_UNBLOCK, &[libc::SIGPROF, libc::SIGUSR2]);
        assert_eq!(there, [true, true, true, true, false, false, false, false]);
        assert_eq!(
            here,
            [false, true, true],
            "the spawning thread's mask changed"
        );
    }

    /// What is left is taken once, by one taker; leaving another drops the first.
    #[test]
    fn a_handoff_gives_what_was_left_once() {
        let h: Handoff<std::sync::Arc<()>> = Handoff::new();
        assert!(h.take().is_none());
        let first = std::sync::Arc::new(());
        h.put(first.clone());
        h.put(std::sync::Arc::new(()));
        assert_eq!(
            std::sync::Arc::strong_count(&first),
            1,
            "the first was not dropped"
        );
        let got = std::thread::scope(|s| s.spawn(|| h.take()).join().unwrap());
        assert!(got.is_some());
        assert!(h.take().is_none(), "taken twice");
    }

    /// A thread `spawn_quiet` starts is known as tickscope's while it runs (the sampler
    /// samples it by frame pointers), and the spawning thread is marked as starting one of
    /// ours only for the spawn (libtickscope's `pthread_create` does not have it armed).
    #[test]
    fn quiet_threads_are_known_as_ours_while_they_run() {
        assert!(!spawning_own_thread());
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = spawn_quiet(std::thread::Builder::new(), &[], move || {
            let tid = gettid() as i32;
            tx.send((tid, own_threads::contains(tid))).unwrap();
            go_rx.recv().unwrap();
            tid
        })
        .unwrap();
        assert!(!spawning_own_thread(), "still marked after the spawn");
        let (tid, inside) = rx.recv().unwrap();
        assert!(inside, "not known as ours from inside");
        assert!(own_threads::contains(tid), "not known as ours from outside");
        assert!(
            !own_threads::contains(gettid() as i32),
            "the test thread is not ours"
        );
        go_tx.send(()).unwrap();
        assert_eq!(t.join().unwrap(), tid);
        assert!(!own_threads::contains(tid), "still known after its end");
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b > a + 1_000_000, "{a} then {b}");
    }

    #[test]
    fn process_start_is_in_the_past() {
        let start = process_start_boottime_ns().expect("/proc/self/stat readable on Linux");
        assert!(start <= boottime_ns());
    }

    #[test]
    fn gettid_of_main_test_thread_differs_from_spawned() {
        let here = gettid();
        let there = std::thread::spawn(gettid).join().unwrap();
        assert_ne!(here, there);
    }
}
