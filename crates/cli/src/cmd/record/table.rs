//! What `record` prints at its end: the top table, the samples judged, the profiles kept.

use super::*;

/// The `top` view of `profile` as `record` prints it (`--top` rows, `extra` a further option
/// of the `top` command's).
pub(super) fn top_table(
    profile: tickscope_profile::Profile,
    args: &Args,
    extra: Option<OsString>,
) -> Result<String> {
    let mut argv = vec![
        OsString::from("top"),
        OsString::from("-"),
        OsString::from(format!("--nodecount={}", args.top)),
    ];
    argv.extend(extra);
    let top = TopOnly::try_parse_from(argv)?;
    let mut report = top
        .args
        .report_of(profile, &args.output.display().to_string())?;
    Ok(tickscope_profile::views::top_text(
        &mut report,
        crate::cmd::common::name_width(58),
    ))
}

/// How tickscope's own threads are named (`thread` label).
pub(super) const OWN_THREADS: &str = "tickscope-";

/// Whether `s` is a sample of one of tickscope's own threads (label `thread`).
pub(super) fn own_thread(p: &tickscope_profile::Profile, s: &tickscope_profile::Sample) -> bool {
    p.labels(s).iter().any(|l| {
        matches!(l, tickscope_profile::Label::Str { key, value }
            if key == "thread" && value.starts_with(OWN_THREADS))
    })
}

/// Samples of tickscope's own threads, and of all threads (default sample type's values).
pub(super) fn own_threads_share(p: &tickscope_profile::Profile) -> (i64, i64) {
    let index = p
        .sample_types
        .iter()
        .position(|t| t.ty == p.default_sample_type)
        .unwrap_or(p.sample_types.len().saturating_sub(1));
    let (mut own, mut all) = (0i64, 0i64);
    for s in &p.samples {
        let v = p.values(s).get(index).copied().unwrap_or(0);
        all = all.saturating_add(v);
        if own_thread(p, s) {
            own = own.saturating_add(v);
        }
    }
    (own, all)
}

/// `ns` as seconds, or milliseconds below one second (`2.31 s`, `4.6 ms`).
pub(super) fn seconds(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

/// The CPU time a profile holds (its `cpu` nanoseconds), if it measures CPU time.
pub(super) fn cpu_ns(p: &tickscope_profile::Profile) -> Option<u64> {
    total_of(p, "cpu", "nanoseconds", |_| true)
}

/// The sum of a profile's values of one sample type (`cpu` nanoseconds, `samples` count)
/// over the samples `keep` keeps, if it has that type.
pub(super) fn total_of(
    p: &tickscope_profile::Profile,
    ty: &str,
    unit: &str,
    keep: impl Fn(&tickscope_profile::Sample) -> bool,
) -> Option<u64> {
    let i = p
        .sample_types
        .iter()
        .position(|t| t.ty == ty && t.unit == unit)?;
    Some(
        p.samples
            .iter()
            .filter(|s| keep(s))
            .map(|s| p.values(s).get(i).copied().unwrap_or(0).max(0) as u64)
            .sum(),
    )
}

/// The warning for a run whose profiles (`profile`, all of them merged when `several`) hold
/// too few samples for their shares to mean much, or `None`. Judged here on the run's
/// profiles together: each process leaves it to `record` (a shell that mostly waited has
/// next to no samples of its own, however many the run holds). Rows of time not sampled
/// (`[not sampled: ...]`, the programs that ended before their first sample) count no
/// sample, nor do tickscope's own threads unless the table shows them (`own_threads`).
pub(super) fn few_samples(
    profile: &tickscope_profile::Profile,
    hz: u32,
    wall: bool,
    several: bool,
    own_threads: bool,
) -> Option<String> {
    // The table's samples: tickscope's own threads' left out, as the table leaves them.
    let counted = |s: &tickscope_profile::Sample| own_threads || !own_thread(profile, s);
    let samples = total_of(profile, "samples", "count", counted)?;
    if samples >= tickscope::sampler::host::FEW_SAMPLES {
        return None;
    }
    let kind = if wall { "wall" } else { "cpu" };
    let over = total_of(profile, kind, "nanoseconds", counted).unwrap_or(0);
    let (what, hold) = match several {
        true => ("the run's profiles", "hold"),
        false => ("the profile", "holds"),
    };
    Some(format!(
        "tickscope: warning: {what} {hold} only {samples} sample{} ({hz} Hz requested, over {} of {} time): shares from fewer than {} samples are mostly noise; profile longer or at a higher rate (-F)",
        if samples == 1 { "" } else { "s" },
        seconds(over),
        if wall { "wall" } else { "CPU" },
        tickscope::sampler::host::FEW_SAMPLES
    ))
}

/// Says where the profiles of the programs the run exec'd are.
pub(super) fn say_children(others: &[PathBuf], output: &Path) {
    match others {
        [] => {}
        [one] => say!("tickscope: a {}: {}", started(1), one.display()),
        [first, .., last] => say!(
            "tickscope: {} {}: {} … {} (`tickscope top {} {}.*` shows them together; record --merge writes one file)",
            others.len(),
            started(2),
            first.display(),
            last.display(),
            output.display(),
            first
                .display()
                .to_string()
                .rsplit_once('.')
                .map_or(String::new(), |(stem, _)| stem.to_string())
        ),
    }
}

/// Prints the top table of the run's profile (`processes`: how many, where several).
pub(super) fn say_top(
    mut profile: tickscope_profile::Profile,
    args: &Args,
    processes: Option<usize>,
) -> Result<()> {
    let own = own_threads_share(&profile);
    if processes.is_some() {
        // Each process's comments, once per kind of process: too many for a terminal
        // (the file keeps them).
        profile.comments.clear();
    }
    let ignore = (!args.own_threads && own.0 > 0)
        .then(|| OsString::from(format!("--tagignore=thread=^{OWN_THREADS}")));
    let text = top_table(profile, args, ignore)?;
    if let Some(processes) = processes {
        say!(
            "Processes: {} (the program and the {})",
            processes,
            started(2)
        );
    }
    say_part!("{text}");
    if !args.own_threads && own.0 > 0 {
        say!(
            "tickscope: its own threads (the sampler's) took {:.1}% of the samples, left out of this table (--own-threads shows them; the profile keeps them, labelled thread=tickscope-...)",
            100.0 * own.0 as f64 / own.1.max(1) as f64
        );
    }
    Ok(())
}

/// The line of the CPU time the profiles hold (`held`) against what the run's processes used
/// (`tree`), with the ends of the processes that wrote them (`ends`, after the program's own
/// end was added), what writing them took (`exit_cpu`) and the fork children's time.
pub(super) fn cpu_line(
    held: u64,
    tree: u64,
    ends: u64,
    exit_cpu: u64,
    forks: &[(u32, String, u64)],
) -> String {
    // Writing the profiles is tickscope's, after their accounting ended: not a process
    // left out.
    let tree = tree.saturating_sub(exit_cpu);
    let share = 100.0 * held as f64 / tree.max(1) as f64;
    let mut line = format!(
        "tickscope: the profiles hold {} of the {} of CPU time the run's processes used ({share:.0}%",
        seconds(held),
        seconds(tree),
    );
    // Where the processes that wrote the profiles still ran after them: their ends, the
    // kernel unmapping their memory (no sample can come then).
    if ends >= 50_000 {
        line.push_str(&format!(
            "; {} more was the ends of the processes that wrote them, after they were written: the kernel unmapping their memory",
            seconds(ends)
        ));
    }
    line.push_str(&format!("); writing them took {} more", seconds(exit_cpu)));
    // What the fork children said they used is explained above, and the ends here.
    let explained = held + ends + forks.iter().map(|f| f.2).sum::<u64>();
    if (explained as f64) < 0.9 * tree as f64 && tree.saturating_sub(explained) > 20_000_000 {
        line.push_str(": the rest ran in processes that were not profiled (fork children that did not exec, statically linked programs, programs killed or ended by _exit), or in the ends of processes whose reaping no profiled parent saw");
    }
    line
}
