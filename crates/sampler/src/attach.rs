//! Sampling another process, from outside it: [`Attached`].
//!
//! No code of tickscope's runs in the process sampled. Each of its threads gets a perf
//! task-clock event opened by this process (`perf_event_open` on the thread's id: allowed
//! for a process of the same user at `perf_event_paranoid` 2, user mode only), whose ring
//! receives the thread's registers and the top 16 KiB of its stack at every period, as
//! libtickscope's own rings do. Every [`Attached::poll`] lists `/proc/PID/task` (arming the
//! threads found since), empties the rings and walks each stack copy by the unwind tables of
//! the files `/proc/PID/maps` names (`Cfi`). Symbols are read at the end from the same files,
//! by the mappings last read while the process ran.
//!
//! What differs from the in-process sampler, and how the profile says so:
//! - [`Attached::new`]'s profile spans the attachment, not the process: CPU time used before
//!   it is not in it. [`Attached::from_start`] (a program `tickscope record` has just
//!   started) spans the process: its CPU time before the attachment is
//!   `[not sampled: before the profiler started]`.
//! - A thread started since is found by the next poll (every 10 ms). The process's CPU clock
//!   (readable for any process) is read at every poll beside the events' counts: what it
//!   used that no event counted (a thread's start before it was found, threads that began
//!   and ended between two polls) is the profile's
//!   `[not sampled: threads that ended before discovery, last partial periods]` row, up to
//!   the last poll before the process ended.
//! - No scope labels, no signals: nothing is installed in the process.
//! - A process that execs keeps its events: the samples before the exec are named by the
//!   mappings read before it (kept beside the new ones unless an address range was mapped
//!   again), `File:` is the program last seen running.
//! - Time in system calls is each thread's `[kernel mode]` row, by the kernel's split of the
//!   thread's time (the event samples user mode only).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use super::cfi::{Cfi, WalkStats};
use super::error::{Error, ErrorKind};
use super::poller::{drain_ring, kernel_part, Rings, Walk};
use super::profile::{self, Profile, Target};
use super::table::{Counts, Key};
use super::{timer, Mode, Source, Unwind};
use crate::symbolize::MapEntry;
use crate::sys::procfs;

/// How often the process's mappings are read again for the end's symbols, besides the
/// readings the unwinder makes when a sample is in a mapping it does not know.
const MAPS_EVERY: Duration = Duration::from_secs(1);

/// A process being sampled from outside. See the module docs.
///
/// ```no_run
/// # fn main() -> Result<(), tickscope_sampler::Error> {
/// use tickscope_sampler::Attached;
/// let mut a = Attached::new(1234, 1000)?;
/// while a.poll() {
///     std::thread::sleep(std::time::Duration::from_millis(10));
/// }
/// a.finish().write_pprof("p.pb.gz")?;
/// # Ok(()) }
/// ```
pub struct Attached {
    pid: u32,
    hz: u32,
    period_ns: u64,
    started: Instant,
    start_time: SystemTime,
    /// How long the process had run when attached to.
    age_at_start: Option<Duration>,
    /// [`Attached::from_start`]: the profile spans the process since its start.
    whole: bool,
    /// The process's CPU clock when attached to (read once the threads found first were
    /// armed).
    cpu_at_attach: Option<u64>,
    /// What the process's CPU clock said, at the last poll, that no event had counted.
    missed: u64,
    /// Final counts of the threads already disarmed (user and kernel parts together).
    counted_gone: u64,
    /// When the process was found gone (the profile ends there).
    ended: Option<Instant>,
    exe: Option<PathBuf>,
    /// Its name at the last poll (an exec changes it).
    comm: Option<String>,
    /// Threads armed now, by id.
    threads: HashMap<i32, Thread>,
    tids: Vec<i32>,
    rings: Rings,
    stacks: HashMap<Key, Counts>,
    names: HashMap<u32, String>,
    counted: HashMap<u32, u64>,
    kernel: HashMap<u32, u64>,
    ring_lost: u64,
    sampled: u64,
    threads_seen: u64,
    armed_ever: u64,
    unarmed: u64,
    arm_error: Option<String>,
    /// Every mapping read, by start; a later reading replaces those it overlaps.
    maps: BTreeMap<u64, MapEntry>,
    maps_read_at: Instant,
    maps_reads: u64,
    /// The unwinder's readings of the mappings already kept in `maps`.
    cfi_readings: u64,
    polls: u64,
}

/// One armed thread: its event, and the kernel's split of its time at the last reading.
struct Thread {
    armed: timer::Armed,
    times: Option<(u64, u64)>,
}

impl Attached {
    /// Attaches to process `pid`, sampling each of its threads `hz` times per second of
    /// its CPU time. Fails if the process does not exist, its mappings cannot be read
    /// (another user's, or not dumpable), or no thread could be armed (perf events not
    /// permitted: `/proc/sys/kernel/perf_event_paranoid` above 2).
    pub fn new(pid: u32, hz: u32) -> Result<Attached, Error> {
        let a = Attached::make(pid, hz, None)?;
        if a.ended.is_some() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("process {pid}: it has ended"),
                None,
            ));
        }
        Ok(a)
    }

    /// [`Attached::new`] for a program this process started at `spawned` (and has not
    /// reaped yet): the profile spans it from then, its CPU time before the attachment
    /// being `[not sampled: before the profiler started]`. One that has already ended gives
    /// a profile of that alone. Fails only when the process runs and cannot be sampled.
    pub fn from_start(pid: u32, hz: u32, spawned: Instant) -> Result<Attached, Error> {
        Attached::make(pid, hz, Some(spawned))
    }

    /// [`Attached::from_start`] for a process another process started (a fork child of a
    /// program `tickscope record` runs): the profile spans it from its start, as its age
    /// says, its CPU time before the attachment being `[not sampled: before the profiler
    /// started]`. Fails where it cannot be sampled, or has ended already.
    pub fn from_fork(pid: u32, hz: u32) -> Result<Attached, Error> {
        let age = process_age(pid).unwrap_or_default();
        let spawned = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        let mut a = Attached::make(pid, hz, Some(spawned))?;
        // The start is known to the kernel's tick (10 ms): a process of one thread cannot
        // have used more CPU time than it has lived.
        if let (Some(age), Some(cpu), 1) = (a.age_at_start, a.cpu_at_attach, a.threads.len()) {
            a.age_at_start = Some(age.max(Duration::from_nanos(cpu)));
        }
        match a.ended {
            Some(_) => Err(Error::new(
                ErrorKind::Unsupported,
                format!("process {pid}: it has ended"),
                None,
            )),
            None => Ok(a),
        }
    }

    /// The program's file, for a process that may end before it is read from
    /// `/proc/PID/exe` (the profile's `File:`).
    pub fn program(mut self, path: PathBuf) -> Attached {
        if self.exe.is_none() {
            self.exe = Some(path);
        }
        self
    }

    /// Whether this process may sample others of its user through perf events (the
    /// kernel's `perf_event_paranoid` and seccomp allow it), asked without opening one (see
    /// `timer::perf_permitted`: the first real one can take 10-20 ms).
    pub fn permitted() -> bool {
        timer::perf_permitted()
    }

    fn make(pid: u32, hz: u32, spawned: Option<Instant>) -> Result<Attached, Error> {
        let whole = spawned.is_some();
        if hz == 0 || hz > 100_000 {
            return Err(Error::new(
                ErrorKind::BadFrequency,
                format!("frequency {hz} Hz: must be 1 to 100000"),
                None,
            ));
        }
        if pid == 0 || pid == std::process::id() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("process {pid}: not another process"),
                None,
            ));
        }
        if !whole && std::fs::metadata(format!("/proc/{pid}")).is_err() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("process {pid}: no such process"),
                None,
            ));
        }
        let maps = match crate::symbolize::read_maps_of(Some(pid)) {
            Ok(maps) => maps,
            // Gone (or a zombie's, which reads empty) before it could be read.
            Err(_) if whole && process_ended(pid) => Vec::new(),
            Err(e) => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("process {pid}: cannot read its mappings"),
                    Some(e),
                ))
            }
        };
        let mut a = Attached {
            pid,
            hz,
            period_ns: (1_000_000_000 / hz as u64).max(1),
            started: Instant::now(),
            start_time: SystemTime::now(),
            age_at_start: match spawned {
                Some(at) => Some(at.elapsed()),
                None => process_age(pid),
            },
            whole,
            cpu_at_attach: None,
            missed: 0,
            counted_gone: 0,
            ended: None,
            exe: std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
            comm: procfs::process_stat(pid).map(|s| s.name),
            threads: HashMap::new(),
            tids: Vec::new(),
            rings: Rings::default(),
            stacks: HashMap::new(),
            names: HashMap::new(),
            counted: HashMap::new(),
            kernel: HashMap::new(),
            ring_lost: 0,
            sampled: 0,
            threads_seen: 0,
            armed_ever: 0,
            unarmed: 0,
            arm_error: None,
            maps: BTreeMap::new(),
            // Read again at the first poll: right after an exec (a program `record` has
            // just started) the program's own segments may not be mapped yet.
            maps_read_at: Instant::now()
                .checked_sub(MAPS_EVERY)
                .unwrap_or_else(Instant::now),
            maps_reads: 1,
            cfi_readings: 0,
            polls: 0,
        };
        a.rings.cfi = Some(Box::new(Cfi::of_process(pid)));
        a.keep_maps(&maps);
        a.find_threads();
        // Read once the first events run: arming them may wait for an RCU grace period
        // (10-20 ms, the first perf event after a second without any) while the process
        // runs, and that time is before the profiler started, not a thread missed.
        a.cpu_at_attach = timer::process_cpu_ns_of(pid);
        if a.threads.is_empty() && a.ended.is_none() {
            if process_ended(pid) {
                a.end();
            } else {
                let why = a
                    .arm_error
                    .take()
                    .unwrap_or_else(|| "it has no thread".into());
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("process {pid}: cannot sample it: {why}"),
                    None,
                ));
            }
        }
        Ok(a)
    }

    /// The process sampled.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Finds new threads, empties the rings and walks their samples. Call it every 10 ms
    /// or so: a ring holds 15 samples (15 ms of a busy thread at 1000 Hz), and a thread
    /// started since the last call is unsampled until the next. False once the process is
    /// gone (everything it left is gathered by then).
    pub fn poll(&mut self) -> bool {
        if self.ended.is_some() {
            return false;
        }
        self.polls += 1;
        self.find_threads();
        self.drain_all();
        self.read_missed();
        // The kernel's split of each thread's time, for its `[kernel mode]` row when it has
        // ended (a thread gone takes its figures with it; the main thread's are read again
        // at the end, a zombie's): every 10th poll, as the in-process sampler does.
        if self.polls % 10 == 0 {
            self.read_times();
        }
        if self.ended.is_none() && self.maps_read_at.elapsed() >= MAPS_EVERY {
            if let Ok(maps) = crate::symbolize::read_maps_of(Some(self.pid)) {
                self.keep_maps(&maps);
            }
            self.maps_read_at = Instant::now();
            self.maps_reads += 1;
        }
        self.ended.is_none()
    }

    /// Stops sampling (if the process still runs, it goes on unsampled) and builds the
    /// profile.
    pub fn finish(self) -> Profile {
        self.finish_with(None)
    }

    /// [`Attached::finish`] for a process that has ended, given its CPU clock read as a
    /// zombie ([`Attached::process_cpu_ns`], before its parent reaped it): what it used
    /// after its threads' events stopped counting (its exit: the kernel unmapping its
    /// memory) is a row of its own, `[kernel mode: process exit]`, and the profile's total
    /// is the process's CPU time.
    pub fn finish_ended(self, process_cpu_ns: u64) -> Profile {
        self.finish_with(Some(process_cpu_ns))
    }

    /// Process `pid`'s CPU time so far, all its threads' (its CPU clock, which the kernel
    /// lets any process read; a zombie's holds until it is reaped).
    pub fn process_cpu_ns(pid: u32) -> Option<u64> {
        timer::process_cpu_ns_of(pid)
    }

    fn finish_with(mut self, final_cpu: Option<u64>) -> Profile {
        if self.ended.is_none() {
            self.find_threads();
            self.read_missed();
            if let Ok(maps) = crate::symbolize::read_maps_of(Some(self.pid)) {
                self.keep_maps(&maps);
                self.maps_reads += 1;
            }
            self.read_times();
        }
        let end = self.ended.unwrap_or_else(Instant::now);
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.disarm(tid);
        }
        self.drain_all();
        let cfi = self.rings.cfi.take().expect("made in new");
        let sampled = end.duration_since(self.started);
        let age = self.age_at_start.unwrap_or_default();
        let before = match self.whole {
            true => self.cpu_at_attach.unwrap_or(0),
            false => 0,
        };
        let comments = match self.whole {
            true => vec![format!(
                "sampled from outside the process, from {} after its start (its CPU time before that, {}, is [not sampled: before the profiler started])",
                tickscope_fmt::duration(age.as_nanos() as f64),
                tickscope_fmt::duration(before as f64),
            )],
            false => vec![
                format!(
                    "attached to process {} from outside it, {} after its start, for {}",
                    self.pid,
                    // Its start is known to the kernel's clock tick (10 ms) only.
                    match age.as_millis() / 10 * 10 {
                        0 => "less than 10 ms".to_string(),
                        ms => format!("{} (to 10 ms)", tickscope_fmt::duration(ms as f64 * 1e6)),
                    },
                    tickscope_fmt::duration(sampled.as_nanos() as f64)
                ),
                "not in this profile: the CPU time the process used before the attachment".into(),
            ],
        };
        let mut before_start = HashMap::new();
        if before > 0 {
            before_start.insert(self.pid, before);
        }
        let held = before + self.counted_gone;
        // Since the attachment, on the process's clock: the events' counts and what they
        // missed; the rest of its final reading is its exit.
        let since = self
            .cpu_at_attach
            .map(|at| held + self.missed + at.saturating_sub(before));
        let exit = match (final_cpu, since) {
            (Some(total), Some(since)) if self.whole => total.saturating_sub(since),
            _ => 0,
        };
        let (duration, start_time) = match self.whole {
            true => (
                sampled + age,
                self.start_time.checked_sub(age).unwrap_or(self.start_time),
            ),
            false => (sampled, self.start_time),
        };
        let mut p = profile::build(profile::Parts {
            unsampled_said: false,
            mode: Mode::Cpu,
            source: Source::PerfTaskClock,
            requested_hz: self.hz,
            period_ns: self.period_ns,
            duration,
            start_time,
            stacks: std::mem::take(&mut self.stacks),
            names: std::mem::take(&mut self.names),
            unsampled: HashMap::new(),
            before_start,
            counted: std::mem::take(&mut self.counted),
            kernel: std::mem::take(&mut self.kernel),
            steal_ns: 0,
            adopted: 0,
            maps_reads: self.maps_reads,
            process_cpu_ns: self.cpu_at_attach.map(|_| held + self.missed + exit),
            exit: (exit > 0).then_some((self.pid, exit)),
            lost: Vec::new(),
            signals: 0,
            handler_ns: 0,
            handler_median_ns: 0,
            leaf_only: 0,
            truncated: 0,
            overrun_signals: 0,
            max_overrun: 0,
            overrun_periods: 0,
            overrun_periods_sq: 0,
            on_cpu_timer: 0,
            ring_threads: 0,
            ring_threads_back: 0,
            ring_lost: self.ring_lost,
            own_chain: 0,
            unwind: Unwind::Tables,
            ring_sampled: self.sampled,
            stack: WalkStats {
                threads: self.armed_ever,
                unarmed: 0,
                error: None,
                walked: cfi.walked,
                truncated: cfi.truncated,
            },
            closed_by_program: 0,
            overflowed: 0,
            unarmed: self.unarmed,
            arm_error: self.arm_error.take(),
            threads_seen: self.threads_seen,
            table_bytes: 0,
            stray: 0,
            ranges_dropped: 0,
            handler_replaced: None,
            target: Some(Target {
                maps: std::mem::take(&mut self.maps).into_values().collect(),
                exe: self.exe.take(),
                whole: self.whole,
            }),
        });
        p.add_comments(comments);
        p
    }

    /// Lists the process's threads, arms those not armed yet and disarms those gone; marks
    /// the process ended when its directory is.
    fn find_threads(&mut self) {
        let mut tids = std::mem::take(&mut self.tids);
        let stat = procfs::process_stat(self.pid);
        // Its program may have changed (an `exec`: `env`, `nice`, `sh -c 'exec …'`, which
        // changes its name): the profile's `File:` is the last one seen running.
        if let Some(name) = stat.as_ref().map(|s| &s.name) {
            if self.comm.as_ref() != Some(name) {
                if let Ok(exe) = std::fs::read_link(format!("/proc/{}/exe", self.pid)) {
                    self.exe = Some(exe);
                }
                self.comm = Some(name.clone());
            }
        }
        if stat.as_ref().map_or(true, |s| s.zombie())
            || procfs::list_threads_of(Some(self.pid), &mut tids).is_err()
            || tids.is_empty()
        {
            self.tids = tids;
            self.end();
            return;
        }
        for &tid in &tids {
            if self.threads.contains_key(&tid) || self.names.contains_key(&(tid as u32)) {
                continue;
            }
            self.threads_seen += 1;
            let times = procfs::thread_times_of(Some(self.pid), tid);
            // Every ring is this process's locked memory (perf_event_mlock_kb, then
            // RLIMIT_MEMLOCK), however many threads the other has: at 125 Hz or less the
            // small one (3 samples: 24 ms and more, past a poll) lets four times as many
            // threads have one.
            let ring = match self.period_ns >= 8_000_000 {
                true => timer::arm_first_ring(tid, self.period_ns),
                false => timer::arm_ring(tid, self.period_ns, true),
            };
            match ring {
                Ok(armed) => {
                    self.armed_ever += 1;
                    self.threads.insert(tid, Thread { armed, times });
                }
                Err(e) => {
                    self.unarmed += 1;
                    self.arm_error = Some(format!("perf_event_open on thread {tid}: {e}"));
                }
            }
            let name = procfs::thread_name_of(Some(self.pid), tid).unwrap_or_default();
            self.names.insert(tid as u32, name);
        }
        let gone: Vec<i32> = self
            .threads
            .keys()
            .copied()
            .filter(|t| tids.binary_search(t).is_err() && !procfs::thread_alive_of(self.pid, *t))
            .collect();
        for tid in gone {
            self.disarm(tid);
        }
        self.tids = tids;
    }

    /// The process is gone: every thread's ring is emptied and its count kept.
    fn end(&mut self) {
        if self.ended.is_some() {
            return;
        }
        self.ended = Some(Instant::now());
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.disarm(tid);
        }
    }

    /// Empties one thread's ring and frees its event, keeping the CPU time it counted: its
    /// user part as sampled, its kernel part (by the kernel's split at the last reading)
    /// as the thread's `[kernel mode]` row.
    fn disarm(&mut self, tid: i32) {
        let Some(t) = self.threads.remove(&tid) else {
            return;
        };
        drain_ring(&t.armed, &mut self.rings, &mut self.ring_lost);
        self.take_samples();
        let times = procfs::thread_times_of(Some(self.pid), tid).or(t.times);
        let Some(count) = timer::disarm(t.armed) else {
            return;
        };
        self.counted_gone += count;
        let kernel = kernel_part(count, times);
        if kernel > 0 {
            *self.kernel.entry(tid as u32).or_default() += kernel;
        }
        *self.counted.entry(tid as u32).or_default() += count - kernel;
    }

    fn drain_all(&mut self) {
        if let Some(cfi) = &mut self.rings.cfi {
            cfi.new_pass();
        }
        for t in self.threads.values() {
            drain_ring(&t.armed, &mut self.rings, &mut self.ring_lost);
        }
        self.take_samples();
    }

    /// Moves the walked samples into the stacks, one period each.
    fn take_samples(&mut self) {
        for s in self.rings.samples.drain(..) {
            self.sampled += 1;
            let truncated = matches!(s.walk, Walk::Tables { cut: true });
            let mut frames = s.ips;
            frames.truncate(super::unwind::MAX_FRAMES);
            let key = Key {
                tid: s.tid,
                truncated,
                frames,
                scopes: Vec::new(),
            };
            self.stacks.entry(key).or_default().add(Counts {
                count: 1,
                weight: self.period_ns,
            });
        }
        // The unwinder's reading of the mappings (taken when a walk met an address in none
        // it knew: a library just loaded), kept for the end's symbols once.
        if let Some(cfi) = self.rings.cfi.take() {
            if cfi.readings != self.cfi_readings {
                self.cfi_readings = cfi.readings;
                self.keep_maps(cfi.maps());
            }
            self.rings.cfi = Some(cfi);
        }
    }

    /// What the process's CPU clock says it used since the attachment that no event has
    /// counted (both read now; the clock first, so that a count read after it never makes
    /// the difference negative by more than the moment between).
    fn read_missed(&mut self) {
        if self.ended.is_some() {
            return;
        }
        let (Some(at), Some(now)) = (self.cpu_at_attach, timer::process_cpu_ns_of(self.pid)) else {
            return;
        };
        let live: u64 = self
            .threads
            .values()
            .filter_map(|t| timer::perf_count(&t.armed))
            .sum();
        self.missed = now
            .saturating_sub(at)
            .saturating_sub(self.counted_gone + live);
    }

    /// The kernel's split of each live thread's time, kept for when it has ended.
    fn read_times(&mut self) {
        for (&tid, t) in self.threads.iter_mut() {
            if let Some(times) = procfs::thread_times_of(Some(self.pid), tid) {
                t.times = Some(times);
            }
        }
    }

    fn keep_maps(&mut self, maps: &[MapEntry]) {
        for m in maps {
            if self.maps.get(&m.start) == Some(m) {
                continue;
            }
            let overlapping: Vec<u64> = self
                .maps
                .range(..m.end)
                .filter(|(_, o)| o.end > m.start)
                .map(|(&s, _)| s)
                .collect();
            for s in overlapping {
                self.maps.remove(&s);
            }
            self.maps.insert(m.start, m.clone());
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        for (_, t) in self.threads.drain() {
            timer::disarm(t.armed);
        }
    }
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached")
            .field("pid", &self.pid)
            .field("threads", &self.threads.len())
            .field("samples", &self.sampled)
            .finish()
    }
}

/// Whether process `pid` is gone, or a zombie (dead, its parent yet to reap it).
fn process_ended(pid: u32) -> bool {
    procfs::process_stat(pid).map_or(true, |s| s.zombie())
}

/// How long process `pid` has run (its start time, field 22 of `/proc/PID/stat`, in clock
/// ticks since boot, against `/proc/uptime`).
fn process_age(pid: u32) -> Option<Duration> {
    let start_ticks: u64 = procfs::process_stat(pid)?.field(22)?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()?;
    let start = start_ticks as f64 / crate::sys::clock::clock_ticks_per_second().max(1) as f64;
    Some(Duration::from_secs_f64((uptime - start).max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe that opens nothing says what opening a real stack ring on this thread
    /// finds: permitted or not.
    #[test]
    fn the_probe_agrees_with_opening_a_real_event() {
        let real = timer::arm_ring(crate::sys::thread::gettid() as i32, 10_000_000, true)
            .map(timer::disarm)
            .is_ok();
        assert_eq!(timer::perf_permitted(), real);
    }

    /// `/proc/PID/stat` of this process: its name, its state, a start time.
    #[test]
    fn the_stat_file_gives_the_name_the_state_and_the_start() {
        let stat = procfs::process_stat(std::process::id()).unwrap();
        let own = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(stat.name, own.trim_end());
        assert!(!stat.zombie());
        assert!(stat.field::<u64>(22).is_some_and(|t| t > 0));
        assert!(process_age(std::process::id()).is_some());
        assert!(!process_ended(std::process::id()));
        assert!(process_ended(u32::MAX));
    }
}
