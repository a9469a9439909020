//! The drain thread's side of a running sampler: the messages it is sent, the stop a signal
//! handler or `_exit` asks of it (with nothing that locks), what it hands to the `stop()` that
//! follows, and threads that ask to be armed at once.

use super::*;

/// The running sampler's process id (0: none), checked before [`ADOPT`] is locked, so a fork
/// child never waits on a lock a parent's thread held at the fork.
pub(super) static ADOPT_PID: AtomicU32 = AtomicU32::new(0);
/// The running sampler's drain thread, for threads that ask to be armed at once.
pub(super) static ADOPT: Mutex<Option<mpsc::Sender<Msg>>> = Mutex::new(None);
/// Bumped and woken for each message to the drain thread and for each stop request
/// ([`request_stop`]): the drain thread sleeps on it between polls (a futex, which a signal
/// handler may wake, where a channel's wait cannot be).
pub(super) static DRAIN_WAKE: AtomicU32 = AtomicU32::new(0);
/// A stop a signal handler or `_exit` asked for ([`request_stop`]): its code, 0 for none.
pub(super) static REQUEST: AtomicU32 = AtomicU32::new(0);
/// The process whose running sampler was asked to stop (0: none since the start): a later
/// request (a second Ctrl-C, `record` passing on the signal) is the first one's to answer.
pub(super) static REQUESTED: AtomicU32 = AtomicU32::new(0);
/// What to run on the drain thread when it stops at a request (libtickscope's: write the
/// profile, then end the process as the signal or `_exit` would have).
pub(super) static ON_REQUEST: std::sync::OnceLock<fn(u32)> = std::sync::OnceLock::new();
/// A request that came as the sampler was being stopped by another thread (`stop()` at the
/// program's exit, say), after the drain thread had taken its `Stop`: left for that stop's
/// caller to answer once the profile is written ([`take_unanswered_request`]).
pub(super) static UNANSWERED: AtomicU32 = AtomicU32::new(0);
/// What the drain thread gathered when it stopped at a request (a leaked `Box`, or null):
/// taken by the `stop()` that follows (on the drain thread itself, or on another that joins
/// it). A pointer, not a lock: a fork child never finds it taken.
pub(super) static HANDED: crate::sys::futex::Handoff<Drained> = crate::sys::futex::Handoff::new();

/// Sends `msg` to the drain thread and wakes it.
pub(super) fn to_drain(tx: &mpsc::Sender<Msg>, msg: Msg) -> Result<(), mpsc::SendError<Msg>> {
    tx.send(msg)?;
    DRAIN_WAKE.fetch_add(1, SeqCst);
    crate::sys::futex::futex_wake(&DRAIN_WAKE);
    Ok(())
}

/// Asks the running sampler to stop from where no lock may be taken (a signal handler,
/// `_exit`): the drain thread disarms the timers and runs the function given to
/// [`on_request`] with `code` (non-zero), on its own thread, where it may stop the sampler
/// and write its profile. False (and nothing asked) if no sampler runs in this process.
/// Async-signal-safe: atomics and one system call.
pub(crate) fn request_stop(code: u32) -> bool {
    let pid = std::process::id();
    if code == 0 {
        return false;
    }
    // Asked already (here, or by another thread at the same moment): what that request's
    // function does (write the profile, end the process) answers this one too.
    if REQUESTED.load(SeqCst) == pid {
        return true;
    }
    if ADOPT_PID.load(SeqCst) != pid {
        return false;
    }
    if REQUESTED.swap(pid, SeqCst) == pid {
        return true;
    }
    REQUEST.store(code, SeqCst);
    DRAIN_WAKE.fetch_add(1, SeqCst);
    crate::sys::futex::futex_wake(&DRAIN_WAKE);
    true
}

/// A request the drain thread did not take because another thread was stopping the sampler
/// (see [`UNANSWERED`]): its code, once, for the caller of that stop to answer after writing
/// the profile.
pub(crate) fn take_unanswered_request() -> Option<u32> {
    let code = UNANSWERED.swap(0, SeqCst);
    (code != 0).then_some(code)
}

/// Leaves `code` for the thread that is stopping the sampler to answer (the request's
/// function found the sampler being stopped by another thread, which writes the profile).
pub(crate) fn leave_unanswered(code: u32) {
    UNANSWERED.store(code, SeqCst);
}

/// Sets what the drain thread runs when it stops at a [`request_stop`]; the first setting
/// stays.
pub(crate) fn on_request(f: fn(u32)) {
    let _ = ON_REQUEST.set(f);
}

/// The drain thread's whole life: its loop, then, if it stopped at a request, the request's
/// function (see [`request_stop`]), what it gathered left in [`HANDED`].
pub(super) fn drain_thread(
    shared: &Shared,
    poller: Poller,
    every: Duration,
    rx: mpsc::Receiver<Msg>,
) -> Drained {
    let drained = drain_loop(shared, poller, every, rx, &DRAIN_WAKE, &REQUEST);
    let Some(code) = drained.request else {
        return drained;
    };
    HANDED.put(drained);
    if let Some(f) = ON_REQUEST.get() {
        let _ = std::panic::catch_unwind(|| f(code));
    }
    Drained::default()
}

/// How long a new thread waits for its timer before it runs unsampled (counted then as
/// `[not sampled: thread start before discovery]`, as a thread found by polling is). Generous:
/// the drain thread answers in microseconds, but a busy machine may not run it for a while.
pub(super) const ADOPT_WAIT: Duration = Duration::from_secs(2);

/// Returns true if and only if a sampler this process started is running.
pub fn running_here() -> bool {
    ADOPT_PID.load(Relaxed) == std::process::id()
}

/// Arms the calling thread's timer now, if a sampler runs in this process and has not found
/// the thread yet; returns true if and only if the thread is sampled when this returns.
///
/// Threads are otherwise found by polling `/proc/self/task` every 10 ms, and the CPU time a
/// thread uses before it is found is reported as not sampled. A thread that calls this first
/// thing is sampled from its first instruction on: libtickscope's `pthread_create` does it
/// for every thread of a preloaded program. Not for signal handlers (it locks and waits).
pub fn adopt_current_thread() -> bool {
    if ADOPT_PID.load(SeqCst) != std::process::id() {
        return false;
    }
    let tx = match ADOPT.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    let Some(tx) = tx else { return false };
    // The wait is a bare futex, not a channel's: std's blocking calls name the current
    // thread, and this runs before std's own spawn code has set that (for threads this
    // library's std starts), which std aborts on.
    let done = std::sync::Arc::new(AtomicU32::new(0));
    let tid = crate::sys::thread::gettid() as i32;
    let me = Adopting {
        stack: crate::sys::thread::own_stack(),
        name: crate::sys::thread::own_name(),
    };
    if to_drain(&tx, Msg::Adopt(tid, me, Reply(done.clone()))).is_err() {
        return false;
    }
    let deadline = Instant::now() + ADOPT_WAIT;
    while done.load(Acquire) == 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        crate::sys::futex::futex_wait(&done, left);
    }
    // 1: armed; 2: the sampler stopped first.
    done.load(Acquire) == 1
}
