//! Starting a sampler: the settings checked, the signal's handler installed, the source
//! chosen and each thread armed, the drain thread started; what the start knew, kept for
//! the profile.

use super::*;

/// [`forget_shared_in_fork_child`] registered, once per process.
pub(super) static FORK_CHILD_HANDLER: std::sync::Once = std::sync::Once::new();

/// In the child of a `fork` (glibc's child handler, async-signal-safe: atomic stores): the
/// handler forgets the parent's state, whose tables are not mapped in the child
/// (`sys::memory::not_into_fork_children`). A sampling signal there (a timer the child made itself
/// with this signal and no handler of its own) is counted stray, where it would have read
/// them. The child's own sampler, if it starts one, publishes its own.
pub(super) extern "C" fn forget_shared_in_fork_child() {
    SHARED.store(std::ptr::null_mut(), SeqCst);
    ACTIVE.store(0, SeqCst);
}

pub(super) fn start(b: Builder) -> Result<Sampler, Error> {
    check(&b)?;
    let pid = std::process::id();
    let mut running = lock_running();
    match *running {
        Some(p) if p == pid => {
            return Err(Error::new(
                ErrorKind::AlreadyRunning,
                "a sampler is already running in this process".into(),
                None,
            ))
        }
        // Inherited from the parent across fork: that sampler has no timers or threads here,
        // and a handler the parent's other threads were running does not exist either
        // (already forgotten at the fork, unless the child was made without fork handlers).
        Some(_) => forget_shared_in_fork_child(),
        None => {}
    }
    let signal = b.signal;
    let source = claim_signal(&b)?;
    let period_ns = (1_000_000_000 / b.hz as u64).max(1);
    // The handler reads the clock; choose its source here, outside signal context. With the
    // unwind tables no thread is signalled unless its ring cannot be had; the poller chooses
    // it then (a short program exec'd under `record` is spared the CPU counter's checks).
    if !(b.unwind == Unwind::Tables && source == Source::PerfTaskClock) {
        (crate::library::get().now)();
    }
    let shared = shared_state(&b, source, period_ns);
    FORK_CHILD_HANDLER.call_once(|| {
        crate::sys::process::at_fork_child(forget_shared_in_fork_child);
    });
    SHARED.store(Arc::as_ptr(&shared).cast_mut(), SeqCst);
    if source == Source::ProcessTimer {
        if let Err(e) = timer::process_timer(period_ns) {
            SHARED.store(std::ptr::null_mut(), SeqCst);
            handler::uninstall(signal);
            // No timer was armed; no handler holds the state once this returns.
            wait_handlers();
            drop(shared);
            return Err(Error::new(
                ErrorKind::Unsupported,
                "cannot start setitimer(ITIMER_PROF)".into(),
                Some(e),
            ));
        }
    }
    let n = STARTS.fetch_add(1, Relaxed);
    let cpu_at_start = match b.whole_process {
        true => Some(0),
        false => timer::process_cpu_ns(),
    };
    let mut poller = Poller::new(
        source,
        b.mode,
        period_ns,
        signal,
        n,
        b.whole_process,
        b.unwind == Unwind::Tables,
    );
    poller.quick_unsampled_exit(b.unsampled_said);
    poller.poll(&shared);
    // Nothing of an earlier sampler's request is this one's.
    REQUEST.store(0, SeqCst);
    REQUESTED.store(0, SeqCst);
    UNANSWERED.store(0, SeqCst);
    drop(HANDED.take());
    let (tx, rx) = mpsc::channel();
    let every = b.poll;
    let drains = shared.clone();
    // Its own samples still come by the signal where that is the walk.
    let spawned = crate::sys::thread::spawn_quiet(
        std::thread::Builder::new().name("tickscope-sampler".into()),
        &[signal],
        move || drain_thread(&drains, poller, every, rx),
    );
    let drain = match spawned {
        Ok(d) => d,
        Err(e) => {
            // The poller went down with the closure and disarmed its timers (its Drop).
            if source == Source::ProcessTimer {
                let _ = timer::process_timer(0);
            }
            SHARED.store(std::ptr::null_mut(), SeqCst);
            // No timer is armed; no handler holds the state once this returns.
            wait_handlers();
            handler::uninstall(signal);
            drop(shared);
            return Err(Error::new(
                ErrorKind::Unsupported,
                "cannot start the sampler's drain thread".into(),
                Some(e),
            ));
        }
    };
    *running = Some(pid);
    *ADOPT.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx.clone());
    ADOPT_PID.store(pid, SeqCst);
    Ok(Sampler {
        inner: Some(Running {
            pid,
            tx,
            drain,
            shared,
            meta: StartInfo {
                settings: b,
                source,
                started: Instant::now(),
                cpu_at_start,
                stray_at_start: handler::STRAY.load(Relaxed),
                unsampled_said: false,
                start_time: SystemTime::now(),
            },
        }),
    })
}

/// The settings `start` refuses: a rate out of range, a source that does not measure the
/// mode's time, a signal that cannot carry samples.
fn check(b: &Builder) -> Result<(), Error> {
    if b.hz == 0 || b.hz > 100_000 {
        return Err(Error::new(
            ErrorKind::BadFrequency,
            format!("sampling frequency {} Hz: must be 1 to 100000", b.hz),
            None,
        ));
    }
    if let (Mode::Cpu, Some(Source::WallTimer))
    | (Mode::Wall, Some(Source::ThreadCpuTimer))
    | (Mode::Wall, Some(Source::PerfTaskClock))
    | (Mode::Wall, Some(Source::ProcessTimer)) = (b.mode, b.source)
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "source {:?} does not measure {:?} time",
                b.source.unwrap(),
                b.mode
            ),
            None,
        ));
    }
    let signal = b.signal;
    if signal <= 0 || signal > libc::SIGRTMAX() || [libc::SIGKILL, libc::SIGSTOP].contains(&signal)
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("signal {signal} cannot carry samples"),
            None,
        ));
    }
    if signal != libc::SIGPROF && b.source == Some(Source::ProcessTimer) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("setitimer(ITIMER_PROF) delivers SIGPROF only, not signal {signal}"),
            None,
        ));
    }
    Ok(())
}

/// Installs the handler for the builder's signal (refused if another owns it) and chooses
/// the timer source; the handler is uninstalled again if no source works.
fn claim_signal(b: &Builder) -> Result<Source, Error> {
    let signal = b.signal;
    if let Err(owner) = handler::install(signal) {
        return Err(Error::new(
            ErrorKind::SignalInUse,
            format!(
                "another handler ({owner:#x}) owns {}; the sampler will not replace it",
                signal_name(signal)
            ),
            None,
        ));
    }
    match timer::choose(b.mode, b.source, signal) {
        Ok(Source::ProcessTimer) if signal != libc::SIGPROF => {
            handler::uninstall(signal);
            Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "no per-thread timer works here, and setitimer(ITIMER_PROF) cannot deliver {}",
                    signal_name(signal)
                ),
                None,
            ))
        }
        Ok(s) => Ok(s),
        Err((s, e)) => {
            handler::uninstall(signal);
            Err(Error::new(
                ErrorKind::Unsupported,
                format!("the timer source {} does not work here", s.name()),
                Some(e),
            ))
        }
    }
}

/// The state the handler and the drain thread share, for `source` at `period_ns`.
fn shared_state(b: &Builder, source: Source, period_ns: u64) -> Arc<Shared> {
    Arc::new(Shared {
        store: Store::new(b.table_entries, b.log_entries),
        ranges: Ranges::new(16_384),
        known: Tids::new(16_384),
        source,
        period_ns,
        // Zeroed, untouched until a descriptor is used: 16 KiB a short program never reads.
        perf_tid: crate::sys::memory::zeroed_slice(PERF_FDS),
        signals: AtomicU64::new(0),
        handler_ticks: AtomicU64::new(0),
        handler_times: [const { AtomicU32::new(0) }; handler::HANDLER_BUCKETS],
        leaf_only: AtomicU64::new(0),
        truncated: AtomicU64::new(0),
        overrun_signals: AtomicU64::new(0),
        max_overrun: AtomicU64::new(0),
        overrun_periods: AtomicU64::new(0),
        overrun_periods_sq: AtomicU64::new(0),
        #[cfg(feature = "capture")]
        timeline: table::SampleLog::new(16_384),
    })
}

/// `SIGPROF`, `SIGRTMIN+4` or `signal 12`: how messages name a signal.
pub(super) fn signal_name(signal: libc::c_int) -> String {
    match signal {
        libc::SIGPROF => "SIGPROF".into(),
        s if s >= libc::SIGRTMIN() && s <= libc::SIGRTMAX() => {
            format!("SIGRTMIN+{}", s - libc::SIGRTMIN())
        }
        s => format!("signal {s}"),
    }
}

impl StartInfo {
    /// The process's CPU time since `start()` (CPU mode).
    pub(super) fn process_cpu_ns(&self) -> Option<u64> {
        match (
            self.settings.mode,
            timer::process_cpu_ns(),
            self.cpu_at_start,
        ) {
            (Mode::Cpu, Some(now), Some(then)) => Some(now.saturating_sub(then)),
            _ => None,
        }
    }
}

/// What `profile::build` needs, from the sampler and what the drain thread gathered.
pub(super) fn parts(
    r: &StartInfo,
    shared: &Shared,
    d: Drained,
    process_cpu_ns: Option<u64>,
) -> profile::Parts {
    let sampled = r.started.elapsed();
    // A profile of the whole process also holds the CPU time it used before the start (in
    // `[not sampled: ...]` rows): it spans the process since it was loaded, so that its total
    // is read against the time that holds it. A program `record` execs starts its sampler
    // late; its profile said "Duration: 240us, Total samples = 1.50ms (622%)", single-threaded.
    let span = match r.settings.whole_process {
        true => sampled.max(Duration::from_nanos(crate::sys::clock::process_wall_ns())),
        false => sampled,
    };
    profile::Parts {
        unsampled_said: r.unsampled_said,
        mode: r.settings.mode,
        source: r.source,
        requested_hz: r.settings.hz,
        period_ns: shared.period_ns,
        duration: span,
        start_time: r
            .start_time
            .checked_sub(span - sampled)
            .unwrap_or(r.start_time),
        stacks: d.stacks,
        names: d.names,
        unsampled: d.unsampled,
        before_start: d.before_start,
        lost: shared.store.lost(),
        signals: shared.signals.load(Relaxed),
        // Without waiting for the clock's calibration: a process that lived a few ms would
        // otherwise sleep out the rest of its window at exit, for a diagnostic figure.
        // No signal, no handler time (and the clock may never have been chosen).
        handler_ns: match shared.signals.load(Relaxed) {
            0 => 0,
            _ => (crate::library::get().rate_without_waiting)().map_or(0, |r| {
                (shared.handler_ticks.load(Relaxed) as f64 * 1e9 / r) as u64
            }),
        },
        handler_median_ns: (crate::library::get().rate_without_waiting)().map_or(0, |r| {
            (handler::handler_median_ticks(&shared.handler_times) as f64 * 1e9 / r) as u64
        }),
        leaf_only: shared.leaf_only.load(Relaxed),
        truncated: shared.truncated.load(Relaxed),
        overrun_signals: shared.overrun_signals.load(Relaxed),
        max_overrun: shared.max_overrun.load(Relaxed),
        overrun_periods: shared.overrun_periods.load(Relaxed),
        overrun_periods_sq: shared.overrun_periods_sq.load(Relaxed),
        on_cpu_timer: d.on_cpu_timer,
        ring_threads: d.ring_threads,
        ring_threads_back: d.ring_threads_back,
        ring_lost: d.ring_lost,
        own_chain: d.own_chain,
        unwind: r.settings.unwind,
        ring_sampled: d.ring_sampled,
        stack: d.stack,
        closed_by_program: d.closed_by_program,
        overflowed: shared.store.overflowed.load(Relaxed),
        unarmed: d.unarmed,
        arm_error: d.arm_error,
        threads_seen: d.threads_seen,
        counted: d.counted,
        kernel: d.kernel,
        steal_ns: d.steal_ns,
        adopted: d.adopted,
        maps_reads: d.maps_reads,
        process_cpu_ns,
        table_bytes: shared.store.bytes(),
        stray: handler::STRAY
            .load(Relaxed)
            .saturating_sub(r.stray_at_start),
        ranges_dropped: shared.ranges.dropped.load(Relaxed),
        handler_replaced: d.handler_replaced_at.map(|at| {
            let since = match (process_cpu_ns, r.cpu_at_start) {
                // From the moment it was found to the end of the profile.
                (Some(total), Some(start)) => Some(total.saturating_sub(at.saturating_sub(start))),
                _ => None,
            };
            (signal_name(r.settings.signal), since)
        }),
        target: None,
        exit: None,
    }
}
