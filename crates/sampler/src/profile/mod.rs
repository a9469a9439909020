//! The finished profile: symbolised at `stop()`, written as pprof, folded stacks, a top table
//! or a flame graph.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

#[cfg(feature = "flamegraph")]
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::table::{Counts, Key};
use super::{Error, ErrorKind, Mode, Source};
use crate::symbolize::{Frame, Module};

mod build;
mod heap;
mod pprof_out;
mod window;
pub(crate) use build::{build, keep_symbols};
pub(crate) use heap::{heap_pprof, HeapRaw, HeapSums};
pub(crate) use pprof_out::write_output;

/// Profiles with fewer samples than this print a warning: their shares are mostly noise.
const FEW_SAMPLES: u64 = super::host::FEW_SAMPLES;

/// One location of a stack: a code address, or a synthetic frame that says what is missing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Loc {
    /// The address symbols are looked up at: the interrupted pc, or a return address - 1
    /// (the call instruction).
    Addr(u64),
    Synthetic(&'static str),
}

#[derive(Clone, Debug)]
struct Sample {
    tid: u32,
    /// Leaf first.
    locs: Vec<Loc>,
    scopes: Vec<u32>,
    counts: Counts,
}

const UNSAMPLED: &str = "[not sampled: thread start before discovery]";
const BEFORE_START: &str = "[not sampled: before the profiler started]";
const UNACCOUNTED: &str =
    "[not sampled: threads that ended before discovery, last partial periods]";
const NO_SIGNAL: &str = "[not sampled: no signal arrived]";
/// A thread's time in system calls and faults, which the perf source cannot sample.
const KERNEL: &str = "[kernel mode]";
/// A process's end after its last thread's event stopped counting (sampled from outside).
const EXIT: &str = "[kernel mode: process exit]";
const HANDLER_REPLACED: &str = "[not sampled: signal handler replaced by the program]";
/// A walk cut short: by the frame limit, or (unwind tables) at the end of the stack bytes perf
/// copied.
const TRUNCATED: &str = "[truncated: deeper than 128 frames, or than the 16 KiB of stack copied]";
const _: () = assert!(
    super::unwind::MAX_FRAMES == 128 && super::timer::STACK_BYTES == 16 << 10,
    "TRUNCATED names both limits"
);

/// One function's row of [`Profile::functions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionTime {
    /// Demangled name (or `module+0xoffset` when no symbol was found).
    pub name: String,
    /// Nanoseconds with this function as the leaf.
    pub flat_ns: u64,
    /// Nanoseconds with this function anywhere on the stack.
    pub cum_ns: u64,
}

/// One thread's row of [`Profile::threads`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadTime {
    /// Kernel thread id.
    pub tid: u32,
    /// The thread's name (`/proc/self/task/<tid>/comm`), when it was read.
    pub name: Option<String>,
    /// Sampled nanoseconds, synthetic frames included.
    pub ns: u64,
}

/// Everything `stop()` gathered, before symbolisation.
pub(crate) struct Parts {
    /// A profile without a sample does not warn of it (its caller says so another way).
    pub unsampled_said: bool,
    pub mode: Mode,
    pub source: Source,
    pub requested_hz: u32,
    pub period_ns: u64,
    pub duration: Duration,
    pub start_time: SystemTime,
    pub stacks: HashMap<Key, Counts>,
    pub names: HashMap<u32, String>,
    pub unsampled: HashMap<u32, u64>,
    pub before_start: HashMap<u32, u64>,
    /// Per thread, the CPU time it used while armed (perf source and CPU timer).
    pub counted: HashMap<u32, u64>,
    /// Perf source: per thread, its CPU time in the kernel (not in `counted`).
    pub kernel: HashMap<u32, u64>,
    /// Perf source: task-clock time that was not the threads' CPU time (hypervisor steal).
    pub steal_ns: u64,
    /// Threads that asked to be armed as they started (`adopt_current_thread`), and readings
    /// of the mappings for the unwinder.
    pub adopted: u64,
    pub maps_reads: u64,
    /// The process's CPU time while sampling (CPU mode).
    pub process_cpu_ns: Option<u64>,
    pub lost: Vec<(&'static str, Counts)>,
    pub signals: u64,
    pub handler_ns: u64,
    /// The median handler time of one sample.
    pub handler_median_ns: u64,
    pub leaf_only: u64,
    pub truncated: u64,
    /// Timer signals that stood for more than one period, and the largest overrun.
    pub overrun_signals: u64,
    pub max_overrun: u64,
    /// Over those signals, the sum of the periods they stood for and of their squares.
    pub overrun_periods: u64,
    pub overrun_periods_sq: u64,
    /// Threads on the CPU timer because the perf source ran out of descriptors.
    pub on_cpu_timer: u64,
    /// Threads that blocked the signal, sampled through a perf ring; samples the rings lost.
    pub ring_threads: u64,
    /// Of those, the threads that unblocked it later and went back to it.
    pub ring_threads_back: u64,
    pub ring_lost: u64,
    /// tickscope's own threads, sampled by their frame pointers through a perf ring.
    pub own_chain: u64,
    /// How stacks were asked to be walked, and with the tables, what the walks did.
    pub unwind: super::Unwind,
    /// Samples read from perf rings (no signal).
    pub ring_sampled: u64,
    pub stack: super::cfi::WalkStats,
    /// perf events whose descriptor the program closed.
    pub closed_by_program: u64,
    pub overflowed: u64,
    pub unarmed: u64,
    pub arm_error: Option<String>,
    pub threads_seen: u64,
    pub table_bytes: usize,
    /// Signals that were not samples (`kill -PROF`, late ones), since start.
    pub stray: u64,
    /// Mappings the unwinder's snapshot had no room for (their stacks are not walked).
    pub ranges_dropped: u64,
    /// The program replaced the sampler's signal handler: the signal's name, and (CPU mode)
    /// the process's CPU time from then to the end, which no sample holds.
    pub handler_replaced: Option<(String, Option<u64>)>,
    /// Set when the samples are another process's, taken from outside it.
    pub target: Option<Target>,
    /// Sampled from outside, the process's exit after its threads' events stopped: its
    /// main thread and the CPU time.
    pub exit: Option<(u32, u64)>,
}

/// A process sampled from outside ([`super::attach`]): its mappings, as last read while it
/// ran (it may be gone by the end), and its program.
pub(crate) struct Target {
    pub maps: Vec<crate::symbolize::MapEntry>,
    pub exe: Option<std::path::PathBuf>,
    /// Sampled from its start by `tickscope record`, which judges the run's samples
    /// together (no warning of few samples for this one alone).
    pub whole: bool,
}

/// A finished profile. See the [module docs](super) for what it holds.
#[derive(Clone, Debug)]
pub struct Profile {
    mode: Mode,
    source: Option<Source>,
    requested_hz: u32,
    period_ns: u64,
    duration: Duration,
    start_time: SystemTime,
    samples: Vec<Sample>,
    names: HashMap<u32, String>,
    scope_names: HashMap<u32, String>,
    symbols: HashMap<u64, Vec<Frame>>,
    modules: Vec<Module>,
    module_of: HashMap<u64, usize>,
    /// The program (its mapping is pprof's first, for `File:`).
    exe: Option<std::path::PathBuf>,
    /// Samples taken: signals handled, and stacks read from perf rings.
    taken: u64,
    /// Of those, the signals (the handler's time is averaged over them).
    signalled: u64,
    /// The number of equally weighted samples the shares are as trustworthy as.
    effective_samples: f64,
    lost: u64,
    handler_ns: u64,
    handler_median_ns: u64,
    comments: Vec<String>,
    warnings: Vec<String>,
}

/// Nanoseconds as pprof's tables print them (`1.50ms`, `7.12s`): `tickscope_fmt::units`,
/// the copy the profile views use.
fn fmt_ns(ns: u64) -> String {
    tickscope_fmt::units::label(ns.min(i64::MAX as u64) as i64, "nanoseconds")
}

impl Profile {
    /// Adds comments after the first (which names the sampler).
    pub(crate) fn add_comments(&mut self, more: Vec<String>) {
        let at = self.comments.len().min(1);
        self.comments.splice(at..at, more);
    }

    /// The profile of a sampler whose process forked: empty.
    pub(crate) fn empty_after_fork() -> Profile {
        Profile {
            mode: Mode::Cpu,
            source: None,
            requested_hz: 0,
            period_ns: 0,
            duration: Duration::ZERO,
            start_time: SystemTime::now(),
            samples: Vec::new(),
            names: HashMap::new(),
            scope_names: HashMap::new(),
            symbols: HashMap::new(),
            modules: Vec::new(),
            module_of: HashMap::new(),
            exe: None,
            taken: 0,
            signalled: 0,
            effective_samples: 0.0,
            lost: 0,
            handler_ns: 0,
            handler_median_ns: 0,
            comments: vec!["sampler inherited across fork: nothing was sampled here".into()],
            warnings: Vec::new(),
        }
    }

    /// Stacks recorded, from signals or perf rings (each may stand for several periods).
    pub fn samples(&self) -> u64 {
        self.taken
    }

    /// How many equally weighted samples the shares are as precise as: [`Self::samples`]
    /// when every signal stood for one period, fewer when some stood for many (the thread
    /// CPU timer on a busy machine). A share p of the profile has a sampling error of about
    /// sqrt(p (1 − p) / this).
    pub fn effective_samples(&self) -> f64 {
        self.effective_samples
    }

    /// Samples lost because the table and its overflow log were full.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// The rate asked for, per second of CPU (or wall) time per thread.
    pub fn requested_hz(&self) -> u32 {
        self.requested_hz
    }

    /// Signals handled per second of sampled time. Below the requested rate when the kernel
    /// tick limits the timer; the CPU time is still exact (samples are weighted).
    pub fn achieved_hz(&self) -> f64 {
        let w = self.total_ns();
        if w == 0 {
            0.0
        } else {
            self.taken as f64 / (w as f64 / 1e9)
        }
    }

    /// The timer source used (`None` for a sampler inherited across fork).
    pub fn source(&self) -> Option<Source> {
        self.source
    }

    /// CPU or wall time.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// How long the sampler ran.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// Time the samples stand for, in nanoseconds (synthetic frames included).
    pub fn total_ns(&self) -> u64 {
        self.samples.iter().map(|s| s.counts.weight).sum()
    }

    /// Sampled time of thread `tid` (its kernel id), synthetic frames included.
    pub fn thread_ns(&self, tid: u32) -> u64 {
        self.samples
            .iter()
            .filter(|s| s.tid == tid)
            .map(|s| s.counts.weight)
            .sum()
    }

    /// Average time spent in the signal handler per sample (signal delivery excluded).
    pub fn handler_ns_per_sample(&self) -> u64 {
        self.handler_ns.checked_div(self.signalled).unwrap_or(0)
    }

    /// The median time spent in the signal handler by one sample (signal delivery
    /// excluded), good to 10% (its bucket's midpoint): unlike the mean, not moved by the
    /// few samples a loaded machine stretches.
    pub fn handler_ns_median(&self) -> u64 {
        self.handler_median_ns
    }

    /// Warnings printed at `stop()` (too few samples, lost samples).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How the profile was taken: source, rates, losses, handler cost (also written into
    /// the pprof file's comments).
    pub fn comments(&self) -> &[String] {
        &self.comments
    }

    /// The names of the frames of one location, innermost (inlined) first.
    fn names_of(&self, loc: &Loc) -> Vec<String> {
        match loc {
            Loc::Synthetic(s) => vec![s.to_string()],
            Loc::Addr(a) => match self.symbols.get(a) {
                Some(frames) => frames.iter().map(|f| f.name.clone()).collect(),
                None => vec![match self.module_of.get(a).map(|&m| &self.modules[m]) {
                    Some(m) => format!(
                        "{}+{:#x}",
                        m.path.rsplit('/').next().unwrap_or(&m.path),
                        a - m.start + m.offset
                    ),
                    None => format!("{a:#x}"),
                }],
            },
        }
    }

    /// Each sample's function names, leaf first, with its counts and thread.
    fn named_stacks(&self) -> Vec<(Vec<String>, &Sample)> {
        self.samples
            .iter()
            .map(|s| (s.locs.iter().flat_map(|l| self.names_of(l)).collect(), s))
            .collect()
    }

    /// Time by function, most flat time first: `flat` where the function was the leaf (the
    /// innermost inlined frame), `cum` where it was anywhere on the stack (counted once per
    /// sample). Synthetic frames (`[lost: ...]`, `[not sampled: ...]`) are rows too.
    pub fn functions(&self) -> Vec<FunctionTime> {
        let mut flat: HashMap<String, u64> = HashMap::new();
        let mut cum: HashMap<String, u64> = HashMap::new();
        for (names, s) in self.named_stacks() {
            if let Some(leaf) = names.first() {
                *flat.entry(leaf.clone()).or_default() += s.counts.weight;
            }
            let unique: BTreeSet<&String> = names.iter().collect();
            for name in unique {
                *cum.entry(name.clone()).or_default() += s.counts.weight;
            }
        }
        let mut rows: Vec<FunctionTime> = cum
            .into_iter()
            .map(|(name, cum_ns)| FunctionTime {
                flat_ns: flat.get(&name).copied().unwrap_or(0),
                cum_ns,
                name,
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.flat_ns, b.cum_ns)
                .cmp(&(a.flat_ns, a.cum_ns))
                .then(a.name.cmp(&b.name))
        });
        rows
    }

    /// Sampled time by thread, most first.
    pub fn threads(&self) -> Vec<ThreadTime> {
        let mut by: BTreeMap<u32, u64> = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.tid != 0) {
            *by.entry(s.tid).or_default() += s.counts.weight;
        }
        let mut rows: Vec<ThreadTime> = by
            .into_iter()
            .map(|(tid, ns)| ThreadTime {
                tid,
                name: self.names.get(&tid).cloned(),
                ns,
            })
            .collect();
        rows.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tid.cmp(&b.tid)));
        rows
    }

    /// The `n` functions with the most flat time, as a pprof-style table (flat, flat%, sum%,
    /// cum, cum%, name).
    pub fn top(&self, n: usize) -> String {
        let total = self.total_ns();
        let rows = self.functions();
        let kind = match self.mode {
            Mode::Cpu => "cpu",
            Mode::Wall => "wall",
        };
        let pct = |v: u64| {
            if total == 0 {
                0.0
            } else {
                v as f64 * 100.0 / total as f64
            }
        };
        let shown: u64 = rows.iter().take(n).map(|r| r.flat_ns).sum();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Type: {kind}\nDuration: {:.2}s, Total samples = {} ({:.2}%)",
            self.duration.as_secs_f64(),
            fmt_ns(total),
            if self.duration.is_zero() {
                0.0
            } else {
                total as f64 * 100.0 / self.duration.as_nanos() as f64
            }
        );
        let _ = writeln!(
            out,
            "Samples: {}, {} lost; requested {} Hz, achieved {:.0} Hz ({})",
            self.taken,
            self.lost,
            self.requested_hz,
            self.achieved_hz(),
            self.source.map(|s| s.name()).unwrap_or("none")
        );
        let _ = writeln!(
            out,
            "Showing nodes accounting for {}, {:.2}% of {} total",
            fmt_ns(shown),
            pct(shown),
            fmt_ns(total)
        );
        let _ = writeln!(
            out,
            "{:>10} {:>6} {:>6} {:>10} {:>6}",
            "flat", "flat%", "sum%", "cum", "cum%"
        );
        let mut sum = 0;
        for r in rows.into_iter().take(n) {
            let (name, f, c) = (r.name, r.flat_ns, r.cum_ns);
            sum += f;
            let _ = writeln!(
                out,
                "{:>10} {:>5.2}% {:>5.2}% {:>10} {:>5.2}%  {name}",
                fmt_ns(f),
                pct(f),
                pct(sum),
                fmt_ns(c),
                pct(c)
            );
        }
        out
    }

    /// Folded stacks (`thread;root;...;leaf periods`), one line per distinct stack, for
    /// flame graph tools. The value is sampled time in sampling periods (1 ms at 1000 Hz), the
    /// same unit for real stacks and synthetic frames.
    pub fn folded(&self) -> String {
        let mut lines: BTreeMap<String, u64> = BTreeMap::new();
        for (names, s) in self.named_stacks() {
            let thread = self.thread_label(s.tid);
            let mut line = thread.replace(';', ":");
            for n in names.iter().rev() {
                line.push(';');
                line.push_str(&n.replace(';', ":"));
            }
            // One unit for every stack and synthetic frame alike: periods of sampled time.
            let count = (s.counts.weight + self.period_ns / 2) / self.period_ns.max(1);
            if count > 0 {
                *lines.entry(line).or_default() += count;
            }
        }
        let mut out = String::new();
        for (l, c) in lines {
            let _ = writeln!(out, "{l} {c}");
        }
        out
    }

    fn thread_label(&self, tid: u32) -> String {
        match (tid, self.names.get(&tid)) {
            (0, _) => "[all threads]".to_string(),
            (_, Some(n)) => n.clone(),
            (_, None) => format!("thread {tid}"),
        }
    }

    /// Writes [`Profile::folded`] to `path`.
    pub fn write_folded(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        write_output(path, |w| w.write_all(self.folded().as_bytes()))
    }

    /// Writes an interactive flame graph (SVG, via inferno) to `path`.
    #[cfg(feature = "flamegraph")]
    pub fn flamegraph_svg(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        write_output(path, |w| self.flamegraph_svg_to(w))
    }

    /// Writes the flame graph of [`flamegraph_svg`](Profile::flamegraph_svg) to `out`.
    #[cfg(feature = "flamegraph")]
    pub fn flamegraph_svg_to(&self, out: &mut dyn Write) -> io::Result<()> {
        let folded = self.folded();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = match self.mode {
            Mode::Cpu => "CPU time".into(),
            Mode::Wall => "Wall time".into(),
        };
        opts.count_name = "periods".into();
        let mut w = io::BufWriter::new(out);
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut w)
            .map_err(|e| io::Error::other(e.to_string()))?;
        w.flush()
    }
}
