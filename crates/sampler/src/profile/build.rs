//! Assembling a [`Profile`] from what the sampler gathered: each thread's samples scaled to the
//! CPU time it used while armed, the synthetic rows for what no sample holds (not sampled,
//! lost, handler replaced, unaccounted), symbolisation, and the comments and warnings that
//! say how far the figures can be trusted.

use std::collections::{BTreeSet, HashMap};

use super::super::{Mode, Source};
use super::*;
use crate::symbolize::Symbolizer;

/// Symbolises and assembles the profile.
pub(crate) fn build(mut p: Parts) -> Profile {
    let effective_samples = effective_samples(&p);
    let walk = walk_comment(&p);
    let mut samples = stack_samples(std::mem::take(&mut p.stacks));
    let scaled = scale_to_counted(&mut samples, &p);
    let lost = synthetic_rows(&mut samples, &p);
    let excess = unaccounted(&mut samples, p.process_cpu_ns);
    samples.sort_by(|a, b| (a.tid, &a.locs, &a.scopes).cmp(&(b.tid, &b.locs, &b.scopes)));
    let (symbols, modules, module_of, exe) = symbolize(&samples, &p);
    let scope_names = scope_names(&samples);
    let weight: u64 = samples.iter().map(|s| s.counts.weight).sum();
    // Samples read from perf rings were taken without a signal; they count as one each.
    let taken = p.signals + p.ring_sampled;
    let achieved = if weight > 0 {
        taken as f64 / (weight as f64 / 1e9)
    } else {
        0.0
    };
    let mut comments = comments(
        &p,
        &samples,
        walk,
        lost,
        achieved,
        scaled,
        effective_samples,
    );
    let warnings = warnings(&p, &mut comments, taken, achieved, excess, lost);
    Profile {
        mode: p.mode,
        source: Some(p.source),
        requested_hz: p.requested_hz,
        period_ns: p.period_ns,
        duration: p.duration,
        start_time: p.start_time,
        samples,
        names: p.names,
        scope_names,
        symbols,
        modules,
        module_of,
        exe,
        taken,
        signalled: p.signals,
        effective_samples,
        lost,
        handler_ns: p.handler_ns,
        handler_median_ns: p.handler_median_ns,
        comments,
        warnings,
    }
}

/// The sampled stacks, as samples: the leaf's address as it is, each caller's one byte back
/// (inside its call instruction), `[truncated]` under a stack cut at the depth limit.
fn stack_samples(stacks: HashMap<Key, Counts>) -> Vec<Sample> {
    stacks
        .into_iter()
        .map(|(k, counts)| {
            let mut locs: Vec<Loc> = k
                .frames
                .iter()
                .enumerate()
                .map(|(i, &a)| Loc::Addr(if i == 0 { a } else { a.saturating_sub(1) }))
                .collect();
            if k.truncated {
                locs.push(Loc::Synthetic(TRUNCATED));
            }
            Sample {
                tid: k.tid,
                locs,
                scopes: k.scopes,
                counts,
            }
        })
        .collect()
}

/// Scales each thread's samples to the CPU time it used while armed (`p.counted`); a thread
/// counted but never signalled gets a row [`NO_SIGNAL`] with its time. Returns the
/// smallest and largest factor (`(inf, 0)`: none scaled).
fn scale_to_counted(samples: &mut Vec<Sample>, p: &Parts) -> (f64, f64) {
    // The perf source weights each signal by one period; signals the kernel dropped (the
    // timer fired in kernel mode) or merged are in the event's exact count. The CPU timer's
    // last signal may come well before the thread's end. Scale each thread's samples to the
    // CPU time it used while armed: exact per-thread totals, shares as sampled.
    let mut scaled = (f64::INFINITY, 0.0f64);
    let mut sampled: HashMap<u32, u64> = HashMap::new();
    for s in samples.iter() {
        *sampled.entry(s.tid).or_default() += s.counts.weight;
    }
    let mut factors: HashMap<u32, f64> = HashMap::new();
    for (&tid, &counted) in &p.counted {
        match sampled.get(&tid).copied().unwrap_or(0) {
            0 if counted > 0 => samples.push(Sample {
                tid,
                locs: vec![Loc::Synthetic(NO_SIGNAL)],
                scopes: Vec::new(),
                counts: Counts {
                    count: 0,
                    weight: counted,
                },
            }),
            0 => {}
            held => {
                let factor = counted as f64 / held as f64;
                scaled = (scaled.0.min(factor), scaled.1.max(factor));
                factors.insert(tid, factor);
            }
        }
    }
    for s in samples.iter_mut() {
        if let Some(f) = factors.get(&s.tid) {
            s.counts.weight = (s.counts.weight as f64 * f).round() as u64;
        }
    }
    scaled
}

/// The synthetic rows for what no stack holds: kernel mode, the exit, not sampled, before
/// the start, lost samples, the handler replaced. Returns the samples lost.
fn synthetic_rows(samples: &mut Vec<Sample>, p: &Parts) -> u64 {
    for (&tid, &ns) in &p.kernel {
        samples.push(Sample {
            tid,
            locs: vec![Loc::Synthetic(KERNEL)],
            scopes: Vec::new(),
            counts: Counts {
                count: 0,
                weight: ns,
            },
        });
    }
    if let Some((tid, ns)) = p.exit {
        samples.push(Sample {
            tid,
            locs: vec![Loc::Synthetic(EXIT)],
            scopes: Vec::new(),
            counts: Counts {
                count: 0,
                weight: ns,
            },
        });
    }
    let unsampled = p.unsampled.iter().map(|u| (u, UNSAMPLED));
    for ((tid, ns), label) in unsampled.chain(p.before_start.iter().map(|u| (u, BEFORE_START))) {
        samples.push(Sample {
            tid: *tid,
            locs: vec![Loc::Synthetic(label)],
            scopes: Vec::new(),
            counts: Counts {
                count: 0,
                weight: *ns,
            },
        });
    }
    let mut lost = 0;
    let rescaled = !p.counted.is_empty();
    for (reason, c) in &p.lost {
        if c.count == 0 && c.weight == 0 {
            continue;
        }
        lost += c.count;
        let name: &'static str = match *reason {
            "table and log full" => "[lost: table and log full]",
            _ => "[lost: other]",
        };
        // With the perf source the threads' totals were rescaled to their exact counts,
        // which already hold the lost samples' time: here they count, but weigh nothing.
        let counts = match rescaled {
            true => Counts {
                count: c.count,
                weight: 0,
            },
            false => *c,
        };
        samples.push(Sample {
            tid: 0,
            locs: vec![Loc::Synthetic(name)],
            scopes: Vec::new(),
            counts,
        });
    }
    if let Some((_, Some(ns))) = &p.handler_replaced {
        samples.push(Sample {
            tid: 0,
            locs: vec![Loc::Synthetic(HANDLER_REPLACED)],
            scopes: Vec::new(),
            counts: Counts {
                count: 0,
                weight: *ns,
            },
        });
    }
    lost
}

/// The process's CPU time that no sample or row holds, as `[unaccounted]`; returns what the
/// samples hold and the CPU time, if they hold more than the process used (a bug, said).
fn unaccounted(samples: &mut Vec<Sample>, process_cpu_ns: Option<u64>) -> Option<(u64, u64)> {
    // Whatever CPU time the process used that no sample or synthetic frame holds: threads
    // that began and ended between two polls, and each thread's last partial period.
    let mut excess = None;
    if let Some(cpu) = process_cpu_ns {
        let held: u64 = samples.iter().map(|s| s.counts.weight).sum();
        // More than the process used is a bug, never noise: said, not hidden (2% leaves room
        // for the two clocks being read a moment apart).
        if held as f64 > cpu as f64 * 1.02 && held - cpu > 10_000_000 {
            excess = Some((held, cpu));
        }
        if cpu > held {
            samples.push(Sample {
                tid: 0,
                locs: vec![Loc::Synthetic(UNACCOUNTED)],
                scopes: Vec::new(),
                counts: Counts {
                    count: 0,
                    weight: cpu - held,
                },
            });
        }
    }
    excess
}

/// Names for the samples' addresses, the modules they fall in, and the executable.
#[allow(clippy::type_complexity)]
fn symbolize(
    samples: &[Sample],
    p: &Parts,
) -> (
    HashMap<u64, Vec<Frame>>,
    Vec<Module>,
    HashMap<u64, usize>,
    Option<std::path::PathBuf>,
) {
    let addrs: BTreeSet<u64> = samples
        .iter()
        .flat_map(|s| s.locs.iter())
        .filter_map(|l| match l {
            Loc::Addr(a) => Some(*a),
            Loc::Synthetic(_) => None,
        })
        .collect();
    // Without a sample, only the program's own mapping, for `File:`, read from memory: a
    // short program exec'd under `record` reads neither its mappings nor a file to say so.
    let main_only = (addrs.is_empty() && p.target.is_none())
        .then(crate::symbolize::main_module)
        .flatten();
    let exe = match &p.target {
        Some(t) => t.exe.clone(),
        None => std::fs::read_link("/proc/self/exe").ok(),
    };
    let (symbols, modules, module_of) = match (main_only, &p.target) {
        (Some(main), _) => (HashMap::new(), vec![main], HashMap::new()),
        (None, Some(t)) => symbolized(&addrs, Ok(t.maps.clone()), exe.as_deref()),
        (None, None) => symbolized(&addrs, crate::symbolize::read_self_maps(), exe.as_deref()),
    };

    (symbols, modules, module_of, exe)
}

/// The names of the scopes the samples carry.
fn scope_names(samples: &[Sample]) -> HashMap<u32, String> {
    let library = crate::library::get();
    let scope_ids: BTreeSet<u32> = samples
        .iter()
        .flat_map(|s| s.scopes.iter().copied())
        .collect();
    scope_ids
        .into_iter()
        .filter_map(|id| (library.scope_name)(id).map(|n| (id, n)))
        .collect()
}

/// The profile's comments: what sampled it, at what rate, and each thing that bears on how
/// far its figures can be trusted.
fn comments(
    p: &Parts,
    samples: &[Sample],
    walk: String,
    lost: u64,
    achieved: f64,
    scaled: (f64, f64),
    effective_samples: f64,
) -> Vec<String> {
    let kind = match p.mode {
        Mode::Cpu => "CPU",
        Mode::Wall => "wall",
    };
    let mut comments = vec![
        format!("tickscope sampler: {kind} time, source {}", p.source.name()),
        format!(
            "requested {} Hz, achieved {achieved:.0} samples per second of sampled time (each weighted by the periods it stands for)",
            p.requested_hz
        ),
    ];
    if p.target.is_some() {
        // Sampled from outside: no signal, no handler, no table in the process.
        comments.extend([
            format!(
                "{} threads seen (found by polling /proc/PID/task every 10 ms); mappings read: {} times",
                p.threads_seen, p.maps_reads
            ),
            walk,
            depth_comment(samples),
        ]);
    } else {
        comments.extend([
            format!(
                "{} signals, {} threads seen, {} lost samples, {} stacks cut at the leaf (its mapping not in the unwinder's snapshot), {} truncated stacks, {} found the table full, {} stray signals ignored, {} mappings beyond the unwinder's snapshot",
                p.signals, p.threads_seen, lost, p.leaf_only, p.truncated, p.overflowed, p.stray, p.ranges_dropped
            ),
            walk,
            depth_comment(samples),
            match p.signals {
                0 => format!("table {} KiB", p.table_bytes / 1024),
                n => format!(
                    "handler: {} ns per sample on average ({} the median), signal delivery \
                     excluded; table {} KiB",
                    p.handler_ns / n,
                    p.handler_median_ns,
                    p.table_bytes / 1024
                ),
            },
            format!(
                "threads that asked to be armed as they started: {} (the others were found by polling /proc/self/task); mappings read for the unwinder: {} times",
                p.adopted, p.maps_reads
            ),
        ]);
    }
    if scaled.1 > 0.0 {
        comments.push(format!(
            "each thread's sample weights scaled to the CPU time it used while sampled ({}; factors {:.3} to {:.3})",
            match p.source {
                Source::PerfTaskClock => "its perf task-clock count",
                _ => "its CPU clock",
            },
            scaled.0, scaled.1
        ));
    }
    let kernel: u64 = p.kernel.values().sum();
    if kernel > 0 {
        comments.push(format!(
            "{} in the kernel (system calls, page faults) is each thread's [kernel mode] row, never spread over its user stacks: the perf source samples user mode only; the amount is the kernel's own user/system split of the thread's CPU time",
            tickscope_fmt::duration(kernel as f64)
        ));
    }
    if p.steal_ns >= 1_000_000 {
        comments.push(format!(
            "{} of the perf task clock left out: the hypervisor gave the virtual CPU to another guest while a thread was scheduled in (steal time, which the threads' CPU clocks and getrusage leave out too)",
            tickscope_fmt::duration(p.steal_ns as f64)
        ));
    }
    if p.overrun_signals > 0 {
        let most = p.max_overrun + 1;
        comments.push(format!(
            "{} stood for more than one period, the largest for {most} periods ({}): the kernel checks CPU timers only when a tick lands on the thread, and each such signal puts the periods before it on the stack the thread had when it arrived; the shares are as precise as {effective_samples:.0} equally weighted samples would make them",
            tickscope_fmt::count(p.overrun_signals, "timer signal"),
            tickscope_fmt::duration((most * p.period_ns) as f64)
        ));
    }
    if p.ring_threads > 0 {
        let back = match p.ring_threads_back {
            0 => String::new(),
            n => format!(
                "; {n} of them unblocked it later and went back to it (glibc starts a thread with every signal blocked)"
            ),
        };
        comments.push(format!(
            "{} blocked the sampling signal: sampled through a perf ring instead (the kernel walks their user stacks by frame pointers; no scope labels){back}",
            tickscope_fmt::count(p.ring_threads, "thread"),
        ));
    }
    if p.own_chain > 0 {
        comments.push(format!(
            "tickscope's own {} sampled through a perf ring by frame pointers (the kernel walks them; tickscope is built with them)",
            tickscope_fmt::count(p.own_chain, "thread"),
        ));
    }
    if p.ring_lost > 0 {
        comments.push(format!(
            "{} lost for want of room in the perf rings (their time is in their threads' other samples)",
            tickscope_fmt::count(p.ring_lost, "sample")
        ));
    }
    if p.on_cpu_timer > 0 {
        comments.push(format!(
            "{} sampled by timer_create(thread CPU clock): the perf source had no file descriptor left (it takes at most a quarter of RLIMIT_NOFILE)",
            tickscope_fmt::count(p.on_cpu_timer, "thread")
        ));
    }
    if p.closed_by_program > 0 {
        comments.push(format!(
            "the program closed {}: those threads were not sampled from then on (that CPU time is in the [not sampled: ...] rows), and the descriptor numbers were left alone",
            tickscope_fmt::count(p.closed_by_program, "perf event descriptor")
        ));
    }
    if p.unarmed > 0 {
        comments.push(format!(
            "{} threads could not be sampled: {}",
            p.unarmed,
            p.arm_error.as_deref().unwrap_or("unknown error")
        ));
    }
    comments
}

/// The profile's warnings (printed here for this process's own profile); a replaced handler
/// is said in `comments` too.
fn warnings(
    p: &Parts,
    comments: &mut Vec<String>,
    taken: u64,
    achieved: f64,
    excess: Option<(u64, u64)>,
    lost: u64,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some((signal, ns)) = &p.handler_replaced {
        let what = match ns {
            Some(ns) => format!(
                "its {} of CPU time from then on are the row {HANDLER_REPLACED}",
                tickscope_fmt::duration(*ns as f64)
            ),
            None => "nothing was sampled from then on".to_string(),
        };
        let said = format!(
            "the program installed its own {signal} handler while the sampler used that signal: the sampler stopped its timers, and {what}"
        );
        comments.push(said.clone());
        warnings.push(said);
    }
    // Under `record` (messages to its file), a process's few samples are not judged alone:
    // the run's profiles are read together, and `record` judges their sum.
    let judged_by_record =
        crate::sys::stderr::messages_to_record() || p.target.as_ref().is_some_and(|t| t.whole);
    if taken < FEW_SAMPLES && !(taken == 0 && p.unsampled_said) && !judged_by_record {
        let over = tickscope_fmt::duration(p.duration.as_nanos() as f64);
        // No sample, no rate: the period it would be measured over is not known.
        let rate = match taken {
            0 => format!("{} Hz requested, over {over}", p.requested_hz),
            _ => format!(
                "{achieved:.0} Hz achieved of {} Hz requested over {over}",
                p.requested_hz
            ),
        };
        warnings.push(format!(
            "the profile holds only {taken} samples ({rate}): shares from fewer than {FEW_SAMPLES} samples are mostly noise; profile longer or at a higher rate",
        ));
    }
    if let Some((held, cpu)) = excess {
        warnings.push(format!(
            "the profile holds {} of CPU time, more than the {} the process used while sampled: its figures are too high by {:.1}%",
            tickscope_fmt::duration(held as f64),
            tickscope_fmt::duration(cpu as f64),
            (held as f64 / cpu as f64 - 1.0) * 100.0
        ));
    }
    if lost > 0 {
        warnings.push(format!(
            "{lost} samples were lost (the table and its overflow log were full); they appear as [lost: ...] frames"
        ));
    }
    // Another process's profile: its warnings are the caller's to say (`warnings()`).
    if p.target.is_none() {
        for w in &warnings {
            crate::sys::stderr::warn(w);
        }
    }
    warnings
}

/// Kish's effective sample size of the signals, (Σn)² / Σn² where each stood for n periods:
/// a share estimated from weighted draws varies as p(1 − p) / that, not / the signal count.
fn effective_samples(p: &Parts) -> f64 {
    // Ring samples stand for one period each.
    let single = (p.signals + p.ring_sampled).saturating_sub(p.overrun_signals) as f64;
    let n = single + p.overrun_periods as f64;
    let n2 = single + p.overrun_periods_sq as f64;
    match n2 > 0.0 {
        true => n * n / n2,
        false => 0.0,
    }
}

/// Frames of each address, the mappings, and each address's mapping.
pub(super) type Symbolized = (
    HashMap<u64, Vec<crate::symbolize::Frame>>,
    Vec<crate::symbolize::Module>,
    HashMap<u64, usize>,
);

/// Frames and mapping index of each address, and the mappings (executable files, by
/// `/proc/<pid>/maps`), with build ids for the program's (`exe`) and those the addresses
/// are in (what `Profile::to_pprof` lists). Nothing if the mappings could not be read.
pub(super) fn symbolized(
    addrs: &BTreeSet<u64>,
    maps: std::io::Result<Vec<crate::symbolize::MapEntry>>,
    exe: Option<&std::path::Path>,
) -> Symbolized {
    let Ok(maps) = maps else {
        return (HashMap::new(), Vec::new(), HashMap::new());
    };
    if KEEP.get() {
        return KEPT.with(|k| {
            let mut k = k.borrow_mut();
            // The executable mappings: memory the program maps as it runs changes the rest.
            let code: Vec<_> = maps
                .iter()
                .filter(|m| m.executable && !m.path.is_empty())
                .cloned()
                .collect();
            let kept = match k.take() {
                Some(kept) if kept.maps == code => k.insert(kept),
                // The first snapshot, or the code mapped changed (a library loaded): anew.
                _ => k.insert(Kept {
                    sym: Symbolizer::new(&maps),
                    maps: code,
                    symbols: HashMap::new(),
                    module_of: HashMap::new(),
                }),
            };
            let new: Vec<u64> = addrs
                .iter()
                .copied()
                .filter(|a| !kept.symbols.contains_key(a))
                .collect();
            kept.sym.will_look_up(new.iter().copied());
            for &a in &new {
                let m = kept.sym.module_of(a);
                let frames = kept.sym.lookup(a);
                kept.symbols.insert(a, frames);
                if let Some(m) = m {
                    kept.module_of.insert(a, m);
                }
            }
            let symbols = addrs
                .iter()
                .filter_map(|a| Some((*a, kept.symbols.get(a).filter(|f| !f.is_empty())?.clone())))
                .collect();
            let module_of = addrs
                .iter()
                .filter_map(|a| Some((*a, *kept.module_of.get(a)?)))
                .collect();
            with_modules(&mut kept.sym, symbols, module_of, exe)
        });
    }
    let mut sym = Symbolizer::new(&maps);
    sym.will_look_up(addrs.iter().copied());
    let mut symbols = HashMap::new();
    let mut module_of = HashMap::new();
    for &a in addrs {
        if let Some(m) = sym.module_of(a) {
            module_of.insert(a, m);
        }
        let frames = sym.lookup(a);
        if !frames.is_empty() {
            symbols.insert(a, frames);
        }
    }
    with_modules(&mut sym, symbols, module_of, exe)
}

/// A symboliser kept between the snapshots one thread takes (a pusher's, every interval):
/// built once for the process's mappings, it looks up only the addresses it has not seen,
/// where one built at each snapshot read the program's DWARF again each time (110–130 ms of
/// CPU a snapshot of the release demo).
struct Kept {
    /// The executable file mappings it was built for.
    maps: Vec<crate::symbolize::MapEntry>,
    sym: Symbolizer,
    /// Every address looked up so far (an empty list: no name).
    symbols: HashMap<u64, Vec<crate::symbolize::Frame>>,
    module_of: HashMap<u64, usize>,
}

thread_local! {
    /// This thread keeps its symboliser between profiles ([`keep_symbols`]).
    static KEEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// From now on the profiles this thread builds share one symboliser (`true`: a sampler's
/// snapshots), or no longer (`false`: it is let go, its memory with it).
pub(crate) fn keep_symbols(on: bool) {
    KEEP.set(on);
    if !on {
        KEPT.with(|k| k.borrow_mut().take());
    }
}

/// The modules `module_of` uses and the program's, with their build ids; `module_of`
/// renumbered where the program is put first.
fn with_modules(
    sym: &mut Symbolizer,
    symbols: HashMap<u64, Vec<crate::symbolize::Frame>>,
    mut module_of: HashMap<u64, usize>,
    exe: Option<&std::path::Path>,
) -> Symbolized {
    // Build ids for the mappings the profile lists: the program's and those a sample
    // is in (`Profile::to_pprof`).
    let used: BTreeSet<usize> = module_of.values().copied().collect();
    sym.read_module_info(|i, m| used.contains(&i) || exe == Some(std::path::Path::new(&m.path)));
    let mut modules = sym.modules().to_vec();
    // The program, for `File:`, even where no reading of the mappings had it (another
    // process's, read as its exec was still mapping it, or not at all before it ended).
    let exe = exe.and_then(|e| e.to_str());
    if let Some(path) = exe.filter(|p| modules.iter().all(|m| m.path != *p)) {
        modules.insert(0, crate::symbolize::file_module(path));
        module_of.values_mut().for_each(|m| *m += 1);
    }
    (symbols, modules, module_of)
}

/// How the stacks were walked.
fn walk_comment(p: &Parts) -> String {
    const FP: &str = "stacks are walked by frame pointers: a function built without them (most C libraries) hides its callers up to the next function that has them, and its caller appears to be that function's; no frame is ever invented";
    if p.unwind != super::super::Unwind::Tables {
        return FP.to_string();
    }
    if p.stack.threads == 0 && p.target.is_some() {
        return "no thread was sampled: the process had ended before it could be attached to"
            .to_string();
    }
    if p.stack.threads == 0 {
        let why = match (p.mode, p.source, &p.stack.error) {
            (_, _, Some(e)) => format!("no thread could get a perf stack ring ({e})"),
            (Mode::Wall, ..) => "wall-clock mode samples by signals".to_string(),
            _ => format!("the source is {}, not perf events", p.source.name()),
        };
        return format!("unwind tables were asked for, but {why}: {FP}");
    }
    let mut c = format!(
        "stacks are walked by the unwind tables (.eh_frame, DWARF CFI) {}, from the registers and the top {} KiB of stack a perf event copies at each sample, for {}: {} walked, {} ({:.1}%) ran past the copied bytes and are cut at their root end (counted as truncated); these samples carry no scope labels",
        match p.target {
            Some(_) => "outside the process",
            None => "on the drain thread",
        },
        super::super::timer::STACK_BYTES / 1024,
        tickscope_fmt::count(p.stack.threads, "thread"),
        p.stack.walked,
        p.stack.truncated,
        100.0 * p.stack.truncated as f64 / p.stack.walked.max(1) as f64
    );
    if p.stack.unarmed > 0 {
        c.push_str(&format!(
            "; {} could not get a stack ring ({}) and were walked by frame pointers",
            tickscope_fmt::count(p.stack.unarmed, "thread"),
            p.stack.error.as_deref().unwrap_or("unknown error")
        ));
    }
    c
}

/// What the stacks' depths say: their mean, and the share of samples whose walk stopped at
/// the leaf (one frame), the mark of code built without frame pointers.
fn depth_comment(samples: &[Sample]) -> String {
    let (mut n, mut frames, mut one) = (0u64, 0u64, 0u64);
    for s in samples {
        let depth = s.locs.iter().filter(|l| matches!(l, Loc::Addr(_))).count() as u64;
        if depth == 0 {
            continue;
        }
        n += s.counts.count;
        frames += depth * s.counts.count;
        if depth == 1 {
            one += s.counts.count;
        }
    }
    if n == 0 {
        return "stack depth: no sampled stacks".into();
    }
    let share = one as f64 / n as f64;
    let mut c = format!(
        "stack depth: {:.2} frames on average; {:.1}% of samples one frame deep",
        frames as f64 / n as f64,
        100.0 * share
    );
    if share > 0.5 {
        c.push_str(" (the walk stopped at the leaf: most of the sampled code has no frame pointers, so callers are unknown)");
    }
    c
}
