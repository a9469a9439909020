//! The drain thread and what it exchanges: the [`Poller`] finds threads, arms their timers
//! and disarms those of threads that exited; [`drain_loop`] runs it every 10 ms, empties the
//! sample table, and answers [`Msg`]s (stop, snapshot, a new thread asking to be armed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::*};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::handler::{self, Shared};
use super::table::{Counts, Key};
use super::{timer, Mode, Source};
use crate::sys::procfs;

mod clocks;
mod rings;
#[cfg(feature = "capture")]
mod timeline;

pub(super) use clocks::kernel_part;
use clocks::READ_TASK_CLOCK_EVERY;
pub(super) use rings::{drain_ring, Rings, Walk};
#[cfg(feature = "capture")]
pub(crate) use timeline::*;

/// What `stop()` and `snapshot()` ask of the drain thread.
pub(super) enum Msg {
    /// Disarm every timer and hand back everything; `quick`: the process is about to end and
    /// the caller takes "nothing sampled" for an answer (see [`Poller::finish`]).
    Stop { quick: bool },
    /// Drain the table and send a copy of everything so far; keep sampling.
    Snapshot(mpsc::Sender<Drained>),
    /// Arm this new thread's timer now, and answer. With the thread's stack `[low, high)`
    /// where it could be read.
    Adopt(i32, Adopting, Reply),
}

/// What a new thread tells the drain thread about itself: its stack `[low, high)` where it
/// could be read, and its name as it starts (its creator's, until it names itself; the
/// next poll reads it again), read without opening a file.
pub(super) struct Adopting {
    pub stack: Option<(u64, u64)>,
    pub name: [u8; 16],
}

/// A new thread's wait for its timer ([`adopt_current_thread`](super::adopt_current_thread)): a flag it waits on with a
/// futex, set to 1 (armed) or 2 (not) and woken. A request dropped unanswered (the sampler
/// stopped with it still in the channel, whose pending messages go with the receiver)
/// answers 2 as it goes, so no thread waits out its deadline for a sampler that has gone.
pub(super) struct Reply(pub std::sync::Arc<AtomicU32>);

impl Reply {
    pub fn answer(&self, armed: bool) {
        let v = if armed { 1 } else { 2 };
        if self.0.compare_exchange(0, v, Release, Relaxed).is_ok() {
            crate::sys::futex::futex_wake(&self.0);
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        self.answer(false);
    }
}

/// What the drain thread hands back.
#[derive(Clone, Default)]
pub(super) struct Drained {
    /// It stopped at this request (see `sampler::request_stop`), not at a message.
    pub request: Option<u32>,
    /// Stopped at the process's exit with nothing sampled, under
    /// [`Builder::unsampled_said`](super::Builder::unsampled_said): the rings were only
    /// disabled (left to the process's end) and nothing else was gathered.
    pub unsampled_exit: bool,
    pub stacks: HashMap<Key, Counts>,
    /// What the timeline capture has been given of the samples (see [`to_timeline`]).
    #[cfg(feature = "capture")]
    pub timeline: Timeline,
    pub names: HashMap<u32, String>,
    /// CPU time threads used before their timer was armed.
    pub unsampled: HashMap<u32, u64>,
    /// With [`Builder::whole_process`](super::Builder::whole_process): CPU time the threads alive at `start()` used before
    /// it (the program's loading and constructors).
    pub before_start: HashMap<u32, u64>,
    /// Threads whose timer could not be armed, and the last error.
    pub unarmed: u64,
    pub arm_error: Option<String>,
    pub threads_seen: u64,
    /// Per thread, the CPU time it used while armed (its perf event's count, in the CPU
    /// clock's terms: see [`Poller::task_clock_to_cpu`]).
    pub counted: HashMap<u32, u64>,
    /// Perf source: per thread, the part of its CPU time spent in the kernel (the event
    /// samples user mode only), from the kernel's user/system split; left out of `counted`.
    pub kernel: HashMap<u32, u64>,
    /// Task-clock time left out of `counted`: the hypervisor ran another guest while the
    /// thread was scheduled in (steal).
    pub steal_ns: u64,
    /// Threads that asked to be armed as they started (a poll may have found one first), and
    /// readings of the mappings for the handler.
    pub adopted: u64,
    pub maps_reads: u64,
    /// Threads put on the CPU timer because the perf source ran out of descriptors.
    pub on_cpu_timer: u64,
    /// Threads that blocked the signal, sampled through a perf ring instead, and the
    /// samples their rings lost for want of room.
    pub ring_threads: u64,
    /// Of those, the threads that unblocked it later and went back to it.
    pub ring_threads_back: u64,
    pub ring_lost: u64,
    /// tickscope's own threads, sampled by their frame pointers through a perf ring.
    pub own_chain: u64,
    /// Samples read from rings (call chains and stacks).
    pub ring_sampled: u64,
    /// With [`Unwind::Tables`](super::Unwind::Tables): what the walks did.
    pub stack: super::cfi::WalkStats,
    /// perf events whose descriptor the program closed.
    pub closed_by_program: u64,
    /// The process's CPU time (absolute) when the drain thread found that the program had
    /// replaced the signal handler; 0 in wall mode.
    pub handler_replaced_at: Option<u64>,
}

/// Finds threads, arms their timers, and disarms those of threads that exited. The first
/// poll runs in `start()` itself, so threads alive then are sampled from the start; later
/// polls run on the drain thread.
pub(super) struct Poller {
    source: Source,
    mode: Mode,
    period_ns: u64,
    signal: libc::c_int,
    armed: HashMap<i32, Option<timer::Armed>>,
    /// Threads alive at `start()` and the CPU time they had used by then.
    baseline: HashMap<i32, u64>,
    /// With `whole_process`: the threads alive at `start()` (no baseline then).
    initial: std::collections::HashSet<i32>,
    /// CPU mode: each armed thread's CPU time when its timer was armed.
    armed_at: HashMap<i32, u64>,
    /// CPU mode, perf source: each thread's CPU time since it was armed and its event's
    /// count, read together at the last reading, and the sums of all readings (their ratio is
    /// the share of the task clock that was the thread's CPU time).
    perf_seen: HashMap<i32, (u64, u64)>,
    perf_seen_sum: (u64, u64),
    /// Perf source: each thread's user and system time (ticks) at the last reading.
    times_seen: HashMap<i32, (u64, u64)>,
    /// With [`Unwind::Tables`](super::Unwind::Tables): threads are sampled through stack
    /// rings, walked by the unwind tables.
    tables: bool,
    rings: Rings,
    /// Threads on a signalled perf event that ran since the task clocks' last reading.
    ran: Vec<i32>,
    /// Threads on a perf event that ran since the last full reading of the task clocks.
    ran_since_full: std::collections::HashSet<i32>,
    /// Threads on a perf event that ran between their last two readings: read every poll.
    running: std::collections::HashSet<i32>,
    /// Threads on a call-chain ring because they blocked the signal, and the poll that put
    /// them there (see [`Poller::move_unblocking_threads_to_signals`]).
    blocked_rings: HashMap<i32, u64>,
    polls: u64,
    /// When the mappings were last read for the handler.
    maps_read_at: Instant,
    /// With the unwind tables: threads were found since the mappings were last read. The
    /// handler's copy is brought up to date only before a thread is put on the signal (a
    /// thread whose ring cannot be had): a short program whose threads all get rings never
    /// reads them (the tables walk reads them itself, at its first sample).
    ranges_stale: bool,
    /// With the unwind tables: some thread was put on the signal (or a kernel-chain ring)
    /// since the start, so the handler's copy of the mappings is kept current (read again
    /// every [`MAPS_EVERY`]); until then nothing reads it.
    signal_path_used: bool,
    /// Threads armed at their own request whose names are still to be read.
    unnamed: Vec<i32>,
    tids: Vec<i32>,
    rng: u64,
    tombstones: usize,
    /// perf events armed now, and how many the sampler may hold (a quarter of the
    /// process's descriptor limit: the program's own files come first).
    perf_armed: usize,
    perf_cap: usize,
    /// See [`Poller::quick_unsampled_exit`].
    quick_exit: bool,
    /// `tids` holds the listing `new` made, for the start's poll to use.
    listed: bool,
    out: Drained,
}

impl Poller {
    /// `whole_process`: no baseline, so a thread's CPU time before its timer is armed counts
    /// from the thread's start, not from `start()`.
    pub fn new(
        source: Source,
        mode: Mode,
        period_ns: u64,
        signal: libc::c_int,
        seed: u64,
        whole_process: bool,
        tables: bool,
    ) -> Poller {
        let mut p = Poller {
            source,
            mode,
            period_ns,
            signal,
            armed: HashMap::new(),
            baseline: HashMap::new(),
            initial: Default::default(),
            armed_at: HashMap::new(),
            perf_seen: HashMap::new(),
            times_seen: HashMap::new(),
            tables: tables && source == Source::PerfTaskClock,
            rings: Rings::default(),
            ran: Vec::new(),
            ran_since_full: Default::default(),
            running: Default::default(),
            perf_seen_sum: (0, 0),
            polls: 0,
            maps_read_at: Instant::now(),
            ranges_stale: false,
            blocked_rings: HashMap::new(),
            signal_path_used: false,
            unnamed: Vec::new(),
            tids: Vec::new(),
            rng: crate::sys::clock::monotonic_ns() ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            tombstones: 0,
            perf_armed: 0,
            perf_cap: procfs::open_files_limit() / 4,
            quick_exit: false,
            listed: false,
            out: Drained::default(),
        };
        if mode == Mode::Cpu && procfs::list_threads(&mut p.tids).is_ok() {
            p.listed = true;
            if whole_process {
                p.initial = p.tids.iter().copied().collect();
            } else {
                for &tid in &p.tids {
                    if let Some(ns) = timer::thread_cpu_ns(tid) {
                        p.baseline.insert(tid, ns);
                    }
                }
            }
        }
        p
    }

    /// With `yes`, a stop at the process's exit that finds nothing sampled only disables the
    /// rings and gathers nothing (see [`Poller::finish`]).
    pub fn quick_unsampled_exit(&mut self, yes: bool) {
        self.quick_exit = yes;
    }

    pub fn poll(&mut self, shared: &Shared) {
        self.check_handler();
        if self.out.handler_replaced_at.is_some() {
            // Nothing more to arm: the signal is the program's now.
            return;
        }
        // The start's poll follows `new`'s listing at once: a thread started in between is
        // found by the next poll (or asks to be armed), its time until then counted.
        if !std::mem::take(&mut self.listed) && procfs::list_threads(&mut self.tids).is_err() {
            return;
        }
        let new: Vec<i32> = self
            .tids
            .iter()
            .copied()
            .filter(|t| !self.armed.contains_key(t))
            .collect();
        // The handler may walk a new thread's stack only once its mapping is known; and code
        // loaded since the last reading (dlopen) is found within a second.
        // With the unwind tables, only once a thread is on the signal path.
        let periodic = self.maps_read_at.elapsed() >= MAPS_EVERY;
        if self.tables {
            self.ranges_stale |= !new.is_empty();
            if periodic && self.signal_path_used {
                self.refresh_maps(shared);
            }
        } else if !new.is_empty() || periodic {
            self.refresh_maps(shared);
        }
        for tid in new {
            self.arm(shared, tid);
        }
        for tid in std::mem::take(&mut self.unnamed) {
            if let Some(name) = procfs::thread_name(tid) {
                self.out.names.insert(tid as u32, name);
            }
        }
        // Missing from the listing is not gone: a live thread skipped by one listing and
        // armed again by the next would count its CPU time twice (its first event's count,
        // then all its time so far as "before discovery"): 1.49 × the real CPU time was seen
        // while other threads came and went.
        let gone: Vec<i32> = self
            .armed
            .keys()
            .copied()
            .filter(|&t| self.tids.binary_search(&t).is_err() && !procfs::thread_alive(t))
            .collect();
        for tid in gone {
            self.blocked_rings.remove(&tid);
            if let Some(Some(a)) = self.armed.remove(&tid) {
                self.disarm(tid, a);
            }
            shared.known.remove(tid as u32);
            self.tombstones += 1;
        }
        self.polls += 1;
        let full = self.polls % READ_TASK_CLOCK_EVERY == 0;
        self.read_task_clocks(full);
        if full {
            self.move_blocking_threads_to_rings(shared);
        }
        self.move_unblocking_threads_to_signals(shared);
        self.read_rings(shared);
        self.replace_first_rings(shared);
        if self.tombstones > 4096 {
            let live: Vec<i32> = self.armed.keys().copied().collect();
            shared.known.rebuild(&live);
            self.tombstones = 0;
        }
    }

    /// A thread that asked to be armed at once ([`adopt_current_thread`](super::adopt_current_thread)), unless a poll
    /// found it first.
    fn adopt(&mut self, shared: &Shared, tid: i32, me: Adopting) {
        self.out.adopted += 1;
        if self.armed.contains_key(&tid) {
            return;
        }
        let stack = me.stack;
        let name = crate::sys::thread::name_text(&me.name);
        if !name.is_empty() {
            self.out.names.insert(tid as u32, name);
        }
        // The handler may walk the thread's stack only once its mapping is known. A program
        // that starts thread after thread mostly gets stacks its thread library kept from
        // threads that ended, already known: reading the mappings again for each cost more
        // than 100 µs a thread.
        let known = stack.is_some_and(|(low, high)| shared.ranges.covers(low, high));
        if !known && self.tables {
            self.ranges_stale = true;
        } else if !known {
            self.refresh_maps(shared);
        }
        // Its name is read at the next poll, off the new thread's path (and after the thread
        // has had a moment to name itself: until then it has its creator's).
        self.unnamed.push(tid);
        self.arm(shared, tid);
    }

    /// Reads the process's mappings again for the handler.
    fn refresh_maps(&mut self, shared: &Shared) {
        if let Ok(maps) = crate::symbolize::read_self_maps() {
            shared.ranges.publish(&maps);
            if let Some(cfi) = self.rings.cfi.as_mut() {
                cfi.set_maps(&maps);
            }
        }
        self.out.maps_reads += 1;
        self.maps_read_at = Instant::now();
        self.ranges_stale = false;
    }

    /// Before a thread is put on the signal with the unwind tables asked for: the handler's
    /// copy of the mappings brought up to date, and the clock it reads chosen (outside
    /// signal context).
    fn prepare_signal_path(&mut self, shared: &Shared) {
        self.signal_path_used = true;
        (crate::library::get().now)();
        if self.ranges_stale {
            self.refresh_maps(shared);
        }
    }

    fn arm(&mut self, shared: &Shared, tid: i32) {
        self.out.threads_seen += 1;
        shared.known.insert(tid as u32);
        if self.unnamed.last() != Some(&tid) {
            if let Some(name) = procfs::thread_name(tid) {
                self.out.names.insert(tid as u32, name);
            }
        }
        if self.source == Source::ProcessTimer {
            self.armed.insert(tid, None);
            return;
        }
        let first = self.first_expiry();
        // CPU time the thread used since `start()` (or since it began, if it began later)
        // before its timer runs: reported, so the total stays exact.
        let before = match self.mode {
            Mode::Cpu => timer::thread_cpu_ns(tid),
            Mode::Wall => None,
        };
        let mut armed = match self.source {
            Source::PerfTaskClock if self.perf_armed >= self.perf_cap => {
                Err(std::io::Error::from_raw_os_error(libc::EMFILE))
            }
            // tickscope's own threads: frame pointers (our code has them), walked by the
            // kernel into a small ring; no stack copies.
            Source::PerfTaskClock
                if self.tables && crate::sys::thread::own_threads::contains(tid) =>
            {
                timer::arm_ring(tid, self.period_ns, false).inspect(|_| self.out.own_chain += 1)
            }
            Source::PerfTaskClock => {
                // Stacks walked by the unwind tables: no signal. Where the ring cannot be
                // had (the locked-memory limit for perf rings, say), the signal and frame
                // pointers, counted.
                // Threads alive as the sampler starts (the start's own poll) get a first
                // ring while samples are far enough apart.
                let first_ring =
                    self.polls == 0 && self.period_ns >= timer::FIRST_RING_MIN_PERIOD_NS;
                match self.tables.then(|| match first_ring {
                    true => timer::arm_first_ring(tid, self.period_ns),
                    false => timer::arm_ring(tid, self.period_ns, true),
                }) {
                    Some(Ok(a)) => {
                        self.out.stack.threads += 1;
                        Ok(a)
                    }
                    not_armed => {
                        if let Some(Err(e)) = not_armed {
                            self.out.stack.unarmed += 1;
                            self.out.stack.error = Some(e.to_string());
                        }
                        self.prepare_signal_path(shared);
                        // A thread that blocks the signal would never be sampled by it.
                        if procfs::signal_blocked(tid, self.signal) {
                            let r = timer::arm_ring(tid, self.period_ns, false);
                            if r.is_ok() {
                                self.out.ring_threads += 1;
                                self.blocked_rings.insert(tid, self.polls);
                            }
                            r
                        } else {
                            timer::arm(self.source, tid, self.signal, self.period_ns, first)
                        }
                    }
                }
            }
            s => timer::arm(s, tid, self.signal, self.period_ns, first),
        };
        if let (Source::PerfTaskClock, Err(_)) = (self.source, &armed) {
            // Out of descriptors (ours or the process's): this thread gets the CPU timer.
            self.prepare_signal_path(shared);
            armed = timer::arm(
                Source::ThreadCpuTimer,
                tid,
                self.signal,
                self.period_ns,
                first,
            );
            if armed.is_ok() {
                self.out.on_cpu_timer += 1;
            }
        }
        match armed {
            Ok(a) => {
                // A new event counts from zero (its descriptor number may be reused).
                if let timer::Armed::Perf { fd, .. } | timer::Armed::Ring { fd, .. } = &a {
                    self.perf_armed += 1;
                    if let Some(c) = shared.perf_tid.get(*fd as usize) {
                        c.store(tid as u32, Relaxed);
                    }
                }
                if let Some(at) = before {
                    self.armed_at.insert(tid, at);
                }
                let base = self.baseline.get(&tid).copied().unwrap_or(0);
                if let Some(ns) = before.map(|b| b.saturating_sub(base)).filter(|&ns| ns > 0) {
                    let into = match self.initial.contains(&tid) {
                        true => &mut self.out.before_start,
                        false => &mut self.out.unsampled,
                    };
                    *into.entry(tid as u32).or_default() += ns;
                }
                self.armed.insert(tid, Some(a));
            }
            Err(e) => {
                // Exited already (not counted), or out of timers: counted and reported.
                if procfs::thread_name(tid).is_some() {
                    self.out.unarmed += 1;
                    self.out.arm_error = Some(e.to_string());
                }
                self.armed.insert(tid, None);
            }
        }
    }

    /// A random first expiry (ns), so that threads started together do not sample in
    /// lockstep (xorshift64).
    fn first_expiry(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        1 + self.rng % self.period_ns
    }

    /// Whether the program replaced the signal handler (its own `sigaction`, say for its own
    /// `SIGPROF` profiler). The first time: its signals are the program's now, so every
    /// timer is stopped (a perf event's count up to now kept), and the moment is recorded,
    /// so that the CPU time from then on is reported as not sampled rather than put on the
    /// stacks sampled before.
    fn check_handler(&mut self) {
        if self.out.handler_replaced_at.is_some()
            || handler::current(self.signal) == handler::on_signal as *const () as usize
        {
            return;
        }
        self.out.handler_replaced_at = Some(match self.mode {
            Mode::Cpu => timer::process_cpu_ns().unwrap_or(0),
            Mode::Wall => 0,
        });
        let armed: Vec<_> = self.armed.drain().collect();
        for (tid, a) in armed {
            if let Some(a) = a {
                self.disarm(tid, a);
            }
            // Still known: the thread is not armed again.
            self.armed.insert(tid, None);
        }
    }

    /// Disarms one thread's timer, keeping what its thread used while sampled: for a perf
    /// event its final count, in CPU-clock terms; for a CPU timer the thread's CPU clock.
    fn disarm(&mut self, tid: i32, a: timer::Armed) {
        if let timer::Armed::Perf { .. } | timer::Armed::Ring { .. } = a {
            self.perf_armed -= 1;
        }
        if !timer::still_ours(&a) {
            self.out.closed_by_program += 1;
            self.armed_at.remove(&tid);
            self.perf_seen.remove(&tid);
            // Its ring, if any, is unmapped; no descriptor is touched.
            timer::disarm(a);
            return;
        }
        drain_ring(&a, &mut self.rings, &mut self.out.ring_lost);
        let cpu_timer = matches!(a, timer::Armed::Timer(_));
        let counted = timer::disarm(a);
        // A CPU timer's signals come when a kernel tick lands on the thread: on a busy machine
        // the last one may come tens of milliseconds before the thread's end, and that stretch
        // would be no thread's. The thread's CPU clock says what it used while armed.
        let counted = match (cpu_timer, counted) {
            (true, _) => self
                .armed_at
                .get(&tid)
                .and_then(|&at| Some(timer::thread_cpu_ns(tid)?.saturating_sub(at))),
            (false, Some(count)) => {
                let cpu = self.task_clock_to_cpu(tid, count);
                self.out.steal_ns += count - cpu;
                // The event samples user mode only: the thread's time in the kernel is its
                // own row, never spread over its user stacks. The kernel's split now if the
                // thread is alive, else at the last reading.
                let times =
                    procfs::thread_times(tid).or_else(|| self.times_seen.get(&tid).copied());
                let kernel = kernel_part(cpu, times);
                if kernel > 0 {
                    *self.out.kernel.entry(tid as u32).or_default() += kernel;
                }
                Some(cpu - kernel)
            }
            (false, None) => None,
        };
        self.armed_at.remove(&tid);
        self.perf_seen.remove(&tid);
        self.times_seen.remove(&tid);
        self.running.remove(&tid);
        if let Some(ns) = counted {
            *self.out.counted.entry(tid as u32).or_default() += ns;
        }
    }

    /// True if and only if nothing was sampled so far in CPU mode by the perf source: every
    /// armed thread is on a ring (at least one is) that holds no record (no sample, no
    /// loss), none was read, no signal came, the program did not take the signal over.
    fn nothing_sampled(&self, shared: &Shared) -> bool {
        let mut armed = self.armed.values().flatten().peekable();
        self.mode == Mode::Cpu
            && self.source == Source::PerfTaskClock
            && self.out.handler_replaced_at.is_none()
            && shared.signals.load(SeqCst) == 0
            && self.out.stacks.is_empty()
            && self.out.ring_sampled == 0
            && self.out.ring_lost == 0
            && self.rings.samples.is_empty()
            && armed.peek().is_some()
            && armed.all(timer::ring_untouched)
    }

    /// Disarms every timer and returns what was gathered. `quick` (the process is about to
    /// end, and the caller takes "nothing sampled" for an answer) with
    /// [`quick_unsampled_exit`](Poller::quick_unsampled_exit) and nothing sampled: nothing
    /// is read (each thread's name, times and count would cost a program that ended before
    /// its first sample more than the rest of its profiling), each ring is only disabled
    /// (left mapped and open for the process's end to close), and
    /// [`Drained::unsampled_exit`] says so.
    fn finish(mut self, shared: &Shared, quick: bool) -> Drained {
        if quick && self.quick_exit && self.nothing_sampled(shared) {
            for a in std::mem::take(&mut self.armed).into_values().flatten() {
                timer::disable_at_exit(a);
            }
            return Drained {
                unsampled_exit: true,
                ..Drained::default()
            };
        }
        self.check_handler();
        let armed: Vec<_> = self.armed.drain().collect();
        for (tid, a) in armed {
            if let Some(name) = procfs::thread_name(tid) {
                self.out.names.insert(tid as u32, name);
            }
            if let Some(a) = a {
                self.disarm(tid, a);
            }
        }
        self.flush_ring_samples(shared);
        // The table's last counts are taken by `finish`, once no handler can run.
        std::mem::take(&mut self.out)
    }
}

impl Drop for Poller {
    /// Disarms whatever is still armed (a poller dropped without `finish`, when the drain
    /// thread could not start).
    fn drop(&mut self) {
        for (_, a) in self.armed.drain() {
            if let Some(a) = a {
                timer::disarm(a);
            }
        }
    }
}

/// How often the poller reads the process's mappings again when no new thread asks for it.
const MAPS_EVERY: Duration = Duration::from_secs(1);

/// The drain thread: polls for threads and empties the table until told to stop, by a
/// message or by a request (`request`, non-zero: see `sampler::request_stop`; what it
/// gathered then says which). It sleeps on `wake`, which every message and request bumps
/// and wakes.
pub(super) fn drain_loop(
    shared: &Shared,
    mut poller: Poller,
    every: Duration,
    rx: mpsc::Receiver<Msg>,
    wake: &AtomicU32,
    request: &AtomicU32,
) -> Drained {
    let mut next = Instant::now() + poller.first_wait(every);
    loop {
        // Read before looking: a message or request that comes after the look changes it,
        // and the wait below returns at once.
        let seen = wake.load(SeqCst);
        let reply = match rx.try_recv() {
            Ok(Msg::Snapshot(reply)) => Some(reply),
            Ok(Msg::Adopt(tid, me, reply)) => {
                poller.adopt(shared, tid, me);
                reply.answer(true);
                // Polls stay on their schedule however many threads start.
                if Instant::now() < next {
                    continue;
                }
                None
            }
            Ok(Msg::Stop { quick }) => return poller.finish(shared, quick),
            Err(mpsc::TryRecvError::Disconnected) => {
                // A thread that asked to be armed as the sampler stopped runs unsampled now,
                // rather than wait out its 2 s for an answer that will not come: its request,
                // here or still to come, is answered "not armed" when dropped with `rx`.
                return poller.finish(shared, false);
            }
            Err(mpsc::TryRecvError::Empty) => {
                let code = request.swap(0, SeqCst);
                if code != 0 {
                    // A signal's or `_exit`'s request: the process ends once it is answered.
                    let mut d = poller.finish(shared, true);
                    d.request = Some(code);
                    return d;
                }
                let left = next.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    crate::sys::futex::futex_wait_while(wake, seen, left);
                    continue;
                }
                None
            }
        };
        next = Instant::now() + every;
        poller.poll(shared);
        shared.store.drain(&mut poller.out.stacks, 3, false);
        #[cfg(feature = "capture")]
        to_timeline(shared, &poller.out.stacks, &mut poller.out.timeline, false);
        if let Some(reply) = reply {
            let _ = reply.send(poller.out.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::clocks::task_clock_to_cpu;
    use super::{mpsc, Adopting, AtomicU32, Msg, Relaxed, Reply};
    use std::sync::Arc;

    fn me() -> Adopting {
        Adopting {
            stack: None,
            name: [0; 16],
        }
    }

    #[test]
    fn a_request_to_be_armed_is_answered_even_when_nobody_reads_it() {
        let (answered, dropped, refused) = (
            Arc::new(AtomicU32::new(0)),
            Arc::new(AtomicU32::new(0)),
            Arc::new(AtomicU32::new(0)),
        );
        let (tx, rx) = mpsc::channel();
        tx.send(Msg::Adopt(1, me(), Reply(answered.clone())))
            .unwrap();
        tx.send(Msg::Adopt(2, me(), Reply(dropped.clone())))
            .unwrap();
        if let Ok(Msg::Adopt(_, _, r)) = rx.recv() {
            r.answer(true);
        }
        // The drain thread stops with a request still queued, then one more comes.
        drop(rx);
        assert!(tx
            .send(Msg::Adopt(3, me(), Reply(refused.clone())))
            .is_err());
        assert_eq!(
            answered.load(Relaxed),
            1,
            "armed, and the drop does not undo it"
        );
        assert_eq!(dropped.load(Relaxed), 2, "queued when the receiver went");
        assert_eq!(refused.load(Relaxed), 2, "sent after");
    }

    #[test]
    fn task_clock_steal_is_taken_out_at_the_threads_own_rate() {
        // Read at 100 ms of CPU for 125 ms of task clock (a fifth of it stolen); exited at
        // 165 ms of task clock: 100 + 40 × 0.8.
        assert_eq!(
            task_clock_to_cpu(165_000_000, Some((100_000_000, 125_000_000)), (1, 1)),
            132_000_000
        );
        // Never read (it lived between two readings): the rate of every reading.
        assert_eq!(
            task_clock_to_cpu(50_000_000, None, (300_000_000, 400_000_000)),
            37_500_000
        );
        // No steal seen, or nothing read at all: the count stands.
        assert_eq!(task_clock_to_cpu(7, Some((5, 5)), (0, 0)), 7);
        assert_eq!(task_clock_to_cpu(7, None, (0, 0)), 7);
        // Clocks read a moment apart never make more CPU time than the task clock counted.
        assert_eq!(task_clock_to_cpu(100, Some((90, 80)), (90, 80)), 100);
        // A reading later than the final count (cannot be: a descriptor reused) is ignored.
        assert_eq!(task_clock_to_cpu(100, Some((40, 200)), (1, 2)), 50);
    }
}
