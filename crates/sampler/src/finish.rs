//! Stopping a sampler: the timers disarmed, the handlers waited for, the drain thread's
//! samples taken, and the profile made; in a fork child, the inherited sampler left alone.

use super::*;

/// In a fork child: whether [`RUNNING`] and [`ADOPT`] are free (see
/// [`host::free_after_fork`]). A poisoned lock is free: its holder is gone.
pub(crate) fn free_after_fork() -> bool {
    use std::sync::TryLockError::WouldBlock;
    let running = !matches!(RUNNING.try_lock(), Err(WouldBlock));
    let adopt = !matches!(ADOPT.try_lock(), Err(WouldBlock));
    running && adopt
}

pub(super) fn lock_running() -> std::sync::MutexGuard<'static, Option<u32>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until no handler holds the shared state.
pub(super) fn wait_handlers() {
    while ACTIVE.load(SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// How a sampler is stopped.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Ending {
    /// Dropped: no profile is built.
    Dropped,
    /// [`Sampler::stop`].
    Stopped,
    /// [`Sampler::stop_at_exit`]: the process is about to end, the shared state is left.
    AtExit,
    /// [`Sampler::stop_at_exit_unless_unsampled`]: as `AtExit`, and "nothing sampled" is an
    /// answer.
    AtExitUnlessUnsampled,
}

/// [`finish`] for a caller that wants the profile.
pub(super) fn finish_profile(r: Running, how: Ending) -> Profile {
    match finish(r, how) {
        Some(Ok(p)) => p,
        // Only a caller that takes "nothing sampled" for an answer gets it.
        Some(Err(_)) | None => Profile::empty_after_fork(),
    }
}

/// Stops a running sampler and, unless it was dropped, returns its profile. `None` when
/// dropped, and in a fork child, where the drain thread and the timers do not exist. At exit, the shared state
/// is not freed (see [`Sampler::stop_at_exit`]); with
/// [`Ending::AtExitUnlessUnsampled`], `Err` with the CPU time instead of a profile when the
/// sampler was started with [`Builder::unsampled_said`] and nothing was sampled.
pub(super) fn finish(r: Running, how: Ending) -> Option<Result<Profile, u64>> {
    let exiting = matches!(how, Ending::AtExit | Ending::AtExitUnlessUnsampled);
    let unsampled_ok = how == Ending::AtExitUnlessUnsampled;
    if r.pid != std::process::id() {
        // A fork child: nothing of the parent's sampler runs here. Leak the state rather
        // than touch timers and a thread that belong to the parent.
        let mut running = lock_running();
        if *running == Some(r.pid) {
            *running = None;
            forget_shared_in_fork_child();
        }
        std::mem::forget(r.drain);
        return None;
    }
    // No thread asks to be armed any more; one waiting now gets its answer from the drain
    // thread before it stops, or a closed channel.
    ADOPT_PID.store(0, SeqCst);
    *ADOPT.lock().unwrap_or_else(|p| p.into_inner()) = None;
    // The drain thread disarms every timer and hands back what it gathered; if it stopped
    // at a request, it left that in HANDED (and this may be it, stopping the sampler from
    // the request's function: it cannot join itself).
    let _ = to_drain(
        &r.tx,
        Msg::Stop {
            quick: unsampled_ok,
        },
    );
    let on_drain_thread = std::thread::current().id() == r.drain.thread().id();
    let mut drained = match on_drain_thread {
        true => Drained::default(),
        false => r.drain.join().unwrap_or_default(),
    };
    if let Some(handed) = HANDED.take() {
        drained = handed;
    }
    if !on_drain_thread {
        // A request that came while this stop was under way, too late for the drain thread
        // (it took the `Stop` first): the caller answers it once the profile is written.
        // Later signals find no sampler and act at once.
        let late = REQUEST.swap(0, SeqCst);
        if late != 0 {
            UNANSWERED.store(late, SeqCst);
        }
        REQUESTED.store(0, SeqCst);
    }
    let process_cpu_ns = r.meta.process_cpu_ns();
    let (shared, meta) = (r.shared, r.meta);
    let meta = &meta;
    // The drain thread also stops so at a signal's or `_exit`'s request (the process ends
    // once it is answered): a caller that wants a profile still gets one, of nothing.
    if drained.unsampled_exit && unsampled_ok {
        // Nothing sampled, and the process is ending: its timers (rings that hold nothing,
        // disabled) go with it, and no profile is built. No signal came, so no handler
        // holds the state; none will (the rings deliver none).
        SHARED.store(std::ptr::null_mut(), SeqCst);
        wait_handlers();
        *lock_running() = None;
        std::mem::forget(shared);
        return Some(Err(process_cpu_ns.unwrap_or(0)));
    }
    // A program that took the signal over may run its own ITIMER_PROF now: leave it.
    if meta.source == Source::ProcessTimer && drained.handler_replaced_at.is_none() {
        let _ = timer::process_timer(0);
    }
    SHARED.store(std::ptr::null_mut(), SeqCst);
    wait_handlers();
    handler::uninstall(meta.settings.signal);
    // Held only here, not across the join above: a fork during `stop()` must not leave the
    // child with this lock taken.
    *lock_running() = None;
    // SHARED is null and no handler holds it (ACTIVE was zero after the store); the drain
    // thread has been joined: `shared` is the last owner, and freed at the end.
    shared.store.drain(&mut drained.stacks, 0, true);
    #[cfg(feature = "capture")]
    poller::to_timeline(&shared, &drained.stacks, &mut drained.timeline, true);
    let profile = (how != Ending::Dropped)
        .then(|| profile::build(parts(meta, &shared, drained, process_cpu_ns)));
    // The symboliser snapshots on this thread kept goes with the sampler.
    profile::keep_symbols(false);
    if exiting {
        std::mem::forget(shared);
    }
    profile.map(Ok)
}
