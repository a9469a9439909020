//! A program `record` execs starts its sampler a moment late: most of a shell script's
//! commands end before their first sample, and for them starting and stopping a sampler
//! (a perf ring, the drain thread, the tables) was most of what the profiler cost.
//!
//! Under `record`, a profiled program's descendants (CPU time, SIGINT/SIGTERM hooks: the
//! settings with which a program that ends before its first sample writes a line instead of
//! a file) do not start the sampler as the library loads. The constructor installs the
//! exit and signal hooks as before and starts one small thread (signals blocked, no
//! allocation while it waits, made on the CPU the constructor runs on and kept there while it
//! waits) that waits one sampling period (at most 1 ms) and then starts the sampler as the
//! constructor would have. Whatever comes first of:
//! - that wait's end: the sampler starts on the small thread, which then ends;
//! - a new thread (`pthread_create`) or the C API: the sampler starts at once, on the
//!   calling thread, so the new thread is armed from its first instruction as before;
//! - the program's end (`exit`, `_exit`, SIGINT/SIGTERM, `raise`/`kill` of itself): no
//!   sampler ever starts; the line for `record` is written with the process's CPU time,
//!   as for a program that ended before its first sample.
//!
//! The CPU time before the start is in the profile as `[not sampled: before the profiler
//! started]`, as the dynamic loader's always was: the wait, plus however long the small
//! thread takes to be scheduled (about one sample per process on an idle machine, more on a
//! busy one).

use super::*;

/// No start is waiting (the constructor started the sampler itself, or none was asked).
const NONE: u32 = 0;
/// The start waits for the small thread's wait to end.
const PENDING: u32 = 1;
/// A thread is starting the sampler.
const STARTING: u32 = 2;
/// The sampler was started (or failed to start: said as the constructor says it).
const STARTED: u32 = 3;
/// The program ended first: no sampler will start.
const ENDED: u32 = 4;

/// Where the deferred start stands; also the futex word the small thread and any thread
/// waiting for the start sleep on.
static STATE: AtomicU32 = AtomicU32::new(NONE);
/// The settings to start with: a leaked `Box` or null, set before [`STATE`] becomes
/// [`PENDING`], once per process (a fork child that samples too puts its own in place of its
/// copy of the parent's: see [`in_fork_child`]).
static SETTINGS: AtomicPtr<Settings> = AtomicPtr::new(std::ptr::null_mut());
/// The thread that is starting the sampler (0: none): its own `pthread_create` (the drain
/// thread's) must not wait for the start it is making.
static STARTER: AtomicI32 = AtomicI32::new(0);
/// A SIGINT/SIGTERM that came while the sampler was being started, left for the thread that
/// starts it to hand to the drain thread once it runs (0: none).
static SIGNAL_LEFT: AtomicI32 = AtomicI32::new(0);
/// The wait before the start, at most: one sampling period at 1000 Hz. A program that ends
/// within it would seldom have had a sample.
const DEFAULT_DELAY_NS: u64 = 1_000_000;
/// How long a thread waits for another's start, at most (ms): the exit path never hangs.
const START_WAIT_MS: u64 = 3000;

/// Defers the start with `settings` (see the module docs). False if the small thread could
/// not be started: the caller then starts the sampler itself.
pub(super) fn defer(settings: Settings) -> bool {
    let delay_ns = delay_ns(&settings);
    let new = Box::into_raw(Box::new(settings));
    if SETTINGS
        .compare_exchange(std::ptr::null_mut(), new, SeqCst, SeqCst)
        .is_err()
    {
        // SAFETY: `new` was made just above and handed to no one.
        drop(unsafe { Box::from_raw(new) });
        return false;
    }
    wait_then_start_later(delay_ns)
}

/// The wait before the start: one sampling period, at most [`DEFAULT_DELAY_NS`].
/// `TICKSCOPE_CPUPROFILE_START_DELAY_MS` sets it (the tests make it long, so that what
/// happens before the start does not depend on how busy the machine is).
fn delay_ns(settings: &Settings) -> u64 {
    tickscope_sys::env::env_var(tickscope_fmt::protocol::env::START_DELAY_MS)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(
            DEFAULT_DELAY_NS.min(1_000_000_000 / u64::from(settings.hz.max(1))),
            |ms| ms.saturating_mul(1_000_000),
        )
}

/// The deferred start, its settings in place: the process claims the profile and the small
/// thread is started. False (and nothing pending) if it could not be.
fn wait_then_start_later(delay_ns: u64) -> bool {
    // The process's own, from now: a fork child says it ran unprofiled, as with a sampler.
    profile::claim(std::process::id());
    DEFERRED_BY.store(std::process::id(), SeqCst);
    STATE.store(PENDING, SeqCst);
    if spawn_waiter(delay_ns) {
        return true;
    }
    STATE.store(NONE, SeqCst);
    false
}

/// Starts the small thread that waits `delay_ns` and then starts the sampler: libc's
/// `pthread_create` (not this library's, which would start the sampler first), the signals
/// blocked as on tickscope's other threads, no allocation on the new thread while it waits
/// (glibc would give it a malloc arena of its own: a 128 MiB reservation, unmaps, a
/// `mprotect`; a program that lives past the wait pays that as the sampler starts on it).
///
/// The small thread is made on the CPU its creator runs on, and kept there while it waits:
/// most programs end within the wait, and a thread placed on another CPU costs each of them
/// two interrupts between CPUs (to start it there, and to end it at `exit_group`), which
/// under a hypervisor are exits to it. On a 2-core EPYC VM a waiting thread made that way
/// added 0.16 ms to each `/bin/true`, 0.05 ms when made on its creator's CPU
/// (`bench/per_exec.py`). It takes the main thread's CPUs before it starts the sampler, so
/// the drain thread is placed as before (its creator is the main thread: the constructor's,
/// or a fork child's only thread).
fn spawn_waiter(delay_ns: u64) -> bool {
    let Some(real) = hooks::real_pthread_create() else {
        return false;
    };
    let attr = PinnedHere::new();
    let set = tickscope_sys::thread::quiet_mask(&[]);
    // SAFETY: sigset_t is plain data: the previous mask, filled in by pthread_sigmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid for the call; the mask only delays signals to this thread
    // for the moment of the spawn (the new thread inherits it).
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &set, &mut old) };
    // SAFETY: pthread_t is plain data, written by pthread_create.
    let mut thread: libc::pthread_t = unsafe { std::mem::zeroed() };
    // SAFETY: libc's pthread_create with a valid out-pointer, default attributes, and a
    // start routine that takes its argument as a number (no memory is handed over).
    let rc = unsafe {
        real(
            &mut thread,
            attr.as_ref().map_or(std::ptr::null(), |a| &a.0),
            wait_then_start,
            delay_ns as *mut c_void,
        )
    };
    // SAFETY: restores the mask read above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if rc != 0 {
        return false;
    }
    // SAFETY: a thread just created and joined by nobody: its resources go when it ends.
    unsafe { libc::pthread_detach(thread) };
    true
}

/// Thread attributes that place a new thread on the CPU the calling thread runs on; `None`
/// where that CPU cannot be known or set (the thread is then made as any other).
struct PinnedHere(libc::pthread_attr_t);

impl PinnedHere {
    fn new() -> Option<PinnedHere> {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 || cpu as usize >= libc::CPU_SETSIZE as usize {
            return None;
        }
        // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's size in bits.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        // SAFETY: pthread_attr_t is plain data, initialised by pthread_attr_init before use.
        let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
        // SAFETY: `attr` is valid and writable.
        if unsafe { libc::pthread_attr_init(&mut attr) } != 0 {
            return None;
        }
        let mut pinned = PinnedHere(attr);
        // SAFETY: an initialised attribute object and a set of the size given.
        let rc = unsafe {
            libc::pthread_attr_setaffinity_np(
                &mut pinned.0,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            )
        };
        (rc == 0).then_some(pinned)
    }
}

impl Drop for PinnedHere {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::pthread_attr_destroy(&mut self.0) };
    }
}

/// On the small thread, before it starts the sampler: the CPUs the main thread may run on
/// now (all of them, were it gone), in place of the one it was made on, so the threads the
/// start makes inherit them.
fn take_back_the_main_threads_cpus() {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: getpid has no preconditions. The main thread's id is the process's.
    let main = unsafe { libc::getpid() };
    // SAFETY: `set` is valid and writable for `size` bytes.
    if unsafe { libc::sched_getaffinity(main, size, &mut set) } != 0 {
        for cpu in 0..libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE, the set's size in bits.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
    }
    // SAFETY: a valid set of `size` bytes; 0 is the calling thread. The kernel keeps the
    // CPUs of the set the thread's cpuset allows.
    unsafe { libc::sched_setaffinity(0, size, &set) };
}

/// The small thread: waits (see [`defer`]), then starts the sampler if nothing else has.
extern "C-unwind" fn wait_then_start(delay: *mut c_void) -> *mut c_void {
    let _ = catch_unwind(|| {
        // Named as tickscope's own (record's table leaves them out).
        // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, c"tickscope-start".as_ptr()) };
        let deadline = std::time::Instant::now() + Duration::from_nanos(delay as u64);
        while STATE.load(SeqCst) == PENDING {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            futex_wait(PENDING, left);
        }
        if STATE.load(SeqCst) == PENDING {
            take_back_the_main_threads_cpus();
        }
        // Known as one of tickscope's own threads while it starts the sampler, which then
        // samples it (briefly) by its frame pointers, as the drain thread.
        tickscope_sys::thread::as_own_thread(|| start_now_if_pending(true));
    });
    std::ptr::null_mut()
}

/// Starts the sampler now if its start is still waiting; if another thread is starting it,
/// waits for that (bounded) when `wait`. Not in a signal handler, nor in a fork child (it
/// does nothing there).
pub(crate) fn start_now_if_pending(wait: bool) {
    // A fork child (whose copy of the state may say "starting", for a thread it does not
    // have) never starts one.
    if !deferred_here() {
        return;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    loop {
        match STATE.load(SeqCst) {
            PENDING => {
                if STATE
                    .compare_exchange(PENDING, STARTING, SeqCst, SeqCst)
                    .is_ok()
                {
                    STARTER.store(tid, SeqCst);
                    // Started (or failed) however this ends, a panic included: no thread
                    // waits for a start that is over.
                    struct Done;
                    impl Drop for Done {
                        fn drop(&mut self) {
                            STATE.store(STARTED, SeqCst);
                            STARTER.store(0, SeqCst);
                            futex_wake();
                        }
                    }
                    let done = Done;
                    if let Some(s) = settings() {
                        hooks::start_with(s.clone());
                    }
                    drop(done);
                    if let Some(sig) = take_signal_left() {
                        hooks::hand_over_signal(sig);
                    }
                    return;
                }
            }
            STARTING if wait && STARTER.load(SeqCst) != tid => {
                wait_started();
                return;
            }
            _ => return,
        }
    }
}

/// The process that deferred its start: a fork child (which may start a sampler of its own
/// through the C API) has nothing to start or end.
static DEFERRED_BY: AtomicU32 = AtomicU32::new(0);

/// True in the process that deferred its sampler's start. Async-signal-safe (`getpid`, and
/// only where a start was deferred: `pthread_create` and every exit path ask).
fn deferred_here() -> bool {
    let by = DEFERRED_BY.load(SeqCst);
    // SAFETY: getpid has no preconditions.
    by != 0 && by == unsafe { libc::getpid() } as u32
}

/// Where a deferred start's profile would go.
pub(crate) fn deferred_path() -> Option<&'static std::path::Path> {
    settings().map(|s| s.path.as_path())
}

/// The settings of the deferred start, if one was deferred.
fn settings() -> Option<&'static Settings> {
    // SAFETY: null, or a leaked `Box` that is never freed.
    unsafe { SETTINGS.load(SeqCst).as_ref() }
}

/// What a fork child that does not exec starts its sampler with, where the environment asks
/// that they be sampled too (`TICKSCOPE_CPUPROFILE_FORKS=1`).
struct ForkPlan {
    /// The parent's settings; the child's differ in their path.
    settings: Settings,
    /// `TICKSCOPE_CPUPROFILE`: the child's file is `<base>.<pid>`, as an exec'd program's.
    base: PathBuf,
    /// Under `record`'s settings: a child that ends before its start writes the line for
    /// `record` (its start is deferred in any case).
    line_if_unsampled: bool,
    delay_ns: u64,
}

static FORKS: OnceLock<ForkPlan> = OnceLock::new();

/// Fork children that do not exec start a sampler of their own (see [`in_fork_child`]).
pub(super) fn sample_fork_children(settings: &Settings, base: PathBuf, line_if_unsampled: bool) {
    let plan = ForkPlan {
        settings: settings.clone(),
        base,
        line_if_unsampled,
        delay_ns: delay_ns(settings),
    };
    // Looked up now, in the parent: `dlsym` in the child could wait forever for the loader's
    // lock, were another thread of the parent's holding it at the fork.
    let _ = hooks::real_pthread_create();
    if FORKS.set(plan).is_ok() {
        // SAFETY: registers a child handler that lives as long as the process (the library
        // is never unloaded); glibc runs it in the child of every `fork`.
        unsafe { libc::pthread_atfork(None, None, Some(in_fork_child)) };
    }
}

/// In the child of a `fork` (glibc's child handler: the forking thread is the only one,
/// malloc usable again): the child profiles into a file of its own, `<base>.<pid>`, as a
/// program exec'd would, its start deferred as there under `record` (a child that execs at
/// once, as a shell's do, then starts no sampler: its exec'd program does), whatever the
/// settings. Nothing is done where a lock of the sampler's was held at the fork by a thread
/// the child does not have: the child would wait for it forever; it is then counted as a
/// fork child unprofiled, as without this setting.
extern "C" fn in_fork_child() {
    let _ = catch_unwind(|| {
        let Some(plan) = FORKS.get() else {
            return;
        };
        if !ts::sampler::host::free_after_fork() || !profile::forget_the_parents() {
            return;
        }
        hooks::own_signals_in_fork_child();
        let mut settings = plan.settings.clone();
        settings.path = profile::file_of(&plan.base, std::process::id());
        // Deferred always, not only under `record`: a child that execs at once (a shell's)
        // would otherwise start and stop a whole sampler for nothing.
        settings.line_if_unsampled = plan.line_if_unsampled;
        // Only this thread runs: the parent's start, pending or made, is not this child's.
        STATE.store(NONE, SeqCst);
        STARTER.store(0, SeqCst);
        SIGNAL_LEFT.store(0, SeqCst);
        SETTINGS.store(Box::into_raw(Box::new(settings.clone())), SeqCst);
        if !wait_then_start_later(plan.delay_ns) {
            hooks::start_with(settings);
        }
    });
}

/// What [`end_if_pending`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// No start was waiting (or it is done): the sampler, if any, is running.
    NotPending,
    /// The start was waiting and will not happen now: the caller says the program ended
    /// before its first sample.
    Ended,
    /// Another thread is starting the sampler right now.
    Starting,
}

/// On the way out: if the sampler's start is still waiting, it never happens (the caller
/// writes the line for `record`). Async-signal-safe: atomics.
///
/// The small thread is not woken: the process is ending, and `exit_group` ends the thread
/// where it sleeps. Woken, it ran its own exit beside the program's (a switch to it, and
/// glibc returning its stack's pages), which most programs `record` runs paid for. Were the
/// end to take longer than the wait, the thread wakes at its deadline, finds the start
/// ended and returns.
pub(crate) fn end_if_pending() -> Start {
    if !deferred_here() {
        return Start::NotPending;
    }
    match STATE.compare_exchange(PENDING, ENDED, SeqCst, SeqCst) {
        Ok(_) => Start::Ended,
        Err(STARTING) => Start::Starting,
        Err(_) => Start::NotPending,
    }
}

/// Waits (at most [`START_WAIT_MS`]) while another thread starts the sampler; at once if the
/// calling thread is the one starting it. Async-signal-safe: `gettid`, `futex`,
/// `clock_gettime`.
pub(crate) fn wait_started() {
    // SAFETY: gettid has no preconditions.
    if STARTER.load(SeqCst) == unsafe { libc::gettid() } {
        // This thread is the one starting it (a handler that interrupted the start).
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_millis(START_WAIT_MS);
    while STATE.load(SeqCst) == STARTING {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        futex_wait(STARTING, left);
    }
}

/// From a SIGINT/SIGTERM handler that came while another thread starts the sampler: leaves
/// `sig` for that thread to hand over once the sampler runs. False if the start finished
/// meanwhile and did not take it: the handler hands it over itself. Async-signal-safe.
pub(crate) fn leave_signal(sig: c_int) -> bool {
    SIGNAL_LEFT.store(sig, SeqCst);
    if STATE.load(SeqCst) == STARTING {
        return true;
    }
    // Done meanwhile: whoever takes it back answers it.
    SIGNAL_LEFT.swap(0, SeqCst) == 0
}

fn take_signal_left() -> Option<c_int> {
    Some(SIGNAL_LEFT.swap(0, SeqCst)).filter(|&s| s != 0)
}

/// Sleeps while [`STATE`] is `value`, at most `left`. Async-signal-safe.
fn futex_wait(value: u32, left: Duration) {
    tickscope_sys::futex::futex_wait_while(&STATE, value, left);
}

/// Wakes every thread sleeping on [`STATE`]. Async-signal-safe.
fn futex_wake() {
    tickscope_sys::futex::futex_wake_all(&STATE);
}
