//! Threads and signals: thread ids and names, errno kept across a handler, tickscope's own
//! threads (started with the program's signals blocked, known by id), and their stacks.

/// The kernel's id of the calling thread (what `top -H`, `perf` and `gdb` show).
///
/// Signal context (the sampler's handler calls it): one system call, no allocation, no lock.
pub fn gettid() -> u64 {
    // SAFETY: SYS_gettid takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as u64
}

/// Runs `f`, then puts the calling thread's errno back as it was: what a signal handler must
/// do for the code it interrupted. Async-signal-safe if `f` is.
#[inline(always)]
pub fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
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

/// The signal the running sampler's handler is installed for (0 before any): kept unblocked
/// in tickscope's own threads, which the sampler samples too.
pub static SAMPLER_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

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
pub fn spawn_quiet<F, T>(
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
pub fn quiet_mask(keep: &[libc::c_int]) -> libc::sigset_t {
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

thread_local! {
    /// True while this thread starts one of tickscope's own ([`spawn_quiet`]).
    static SPAWNING_OWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while the calling thread is starting one of tickscope's own threads: libtickscope's
/// `pthread_create` does not have the sampler arm such a thread before it runs (a round trip
/// to the drain thread and a stack ring, ~0.1 ms of every profiled process's start, for a
/// thread that mostly waits); the sampler finds it by its poll if it lives that long.
pub fn spawning_own_thread() -> bool {
    SPAWNING_OWN.try_with(|s| s.get()).unwrap_or(false)
}

/// The thread ids of tickscope's own threads that are running ([`spawn_quiet`] registers
/// each as it starts): the sampler samples them by frame pointers (the kernel's call chain)
/// rather than by copies of their stacks. Our code is built with frame pointers; a copy of
/// 16 KiB of stack per sample and a 256 KiB ring, made for every profiled process's writer
/// thread, bought nothing for threads that mostly wait.
pub mod own_threads {
    use std::sync::atomic::{AtomicI32, Ordering::*};

    /// More than tickscope ever runs at once (drain, signal writer, capture, reporter); a
    /// thread that finds no free slot is sampled as a program's thread would be.
    static TIDS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];

    /// Records `tid`; the slot to free when the thread ends.
    pub fn register(tid: i32) -> Option<usize> {
        (0..TIDS.len()).find(|&i| TIDS[i].compare_exchange(0, tid, SeqCst, Relaxed).is_ok())
    }

    /// A registration, undone when dropped.
    pub struct Registered(pub Option<usize>);

    impl Drop for Registered {
        fn drop(&mut self) {
            if let Some(i) = self.0 {
                TIDS[i].store(0, SeqCst);
            }
        }
    }

    /// True if and only if `tid` is one of tickscope's running threads.
    pub fn contains(tid: i32) -> bool {
        tid != 0 && TIDS.iter().any(|t| t.load(SeqCst) == tid)
    }
}

/// Runs `f` with the calling thread known as one of tickscope's own (see [`own_threads`]): a
/// sampler started meanwhile samples it by frame pointers, as the drain thread
/// (libtickscope's thread that starts a deferred sampler).
pub fn as_own_thread<T>(f: impl FnOnce() -> T) -> T {
    let _ours = own_threads::Registered(own_threads::register(gettid() as i32));
    f()
}

/// The calling thread's stack, `[low, high)`, as its thread library set it up.
pub fn own_stack() -> Option<(u64, u64)> {
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

/// The calling thread's name as it is now (`PR_GET_NAME`: no file opened), NUL-padded.
pub fn own_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `name`.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name
}

/// A thread name as the kernel keeps it (NUL-padded, 16 bytes) as text.
pub fn name_text(name: &[u8; 16]) -> String {
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..len]).into_owned()
}
