//! The programs that ended before their first sample, and the fork children that ran unprofiled: their profile and their lines.

use super::*;

/// The row that holds the CPU time of the programs that ended before their first sample.
pub(super) const UNSAMPLED_ROW: &str =
    "[not sampled: programs that ended before their first sample]";

/// The row that holds the CPU time of the fork children that ended before `record`, which
/// follows them from outside, found them (each said its CPU time as it ended).
pub(super) const SHORT_FORKS_ROW: &str =
    "[not sampled: fork children that ended before record found them]";

/// A profile of the programs the run exec'd that ended before their first sample (`procs`:
/// pid, name, CPU time in ns): one sample each on [`UNSAMPLED_ROW`], labelled with its pid
/// and program, in the sample types of `like` (the run's first profile; without one, those
/// the library writes at `hz`); and of the fork children that ended before they were found
/// (`forks`), on [`SHORT_FORKS_ROW`]. `None` if `like` has no CPU time to put it in.
pub(super) fn unsampled_profile(
    like: Option<&tickscope_profile::Profile>,
    hz: u32,
    procs: &[(u32, String, u64)],
    forks: &[(u32, String, u64)],
) -> Option<tickscope_profile::Profile> {
    use tickscope_profile::ValueType;
    let mut p = tickscope_profile::Profile::default();
    match like {
        Some(like) => {
            p.sample_types = like.sample_types.clone();
            p.default_sample_type = like.default_sample_type.clone();
            p.period_type = like.period_type.clone();
            p.period = like.period;
            p.time_nanos = like.time_nanos;
        }
        // No profile of the program to take them from: the library's own (see the
        // sampler's `to_pprof`).
        None => {
            p.sample_types = vec![
                ValueType::new("samples", "count"),
                ValueType::new("cpu", "nanoseconds"),
            ];
            p.default_sample_type = "cpu".into();
            p.period_type = ValueType::new("cpu", "nanoseconds");
            p.period = 1_000_000_000 / i64::from(hz.max(1));
        }
    }
    let cpu = p
        .sample_types
        .iter()
        .position(|t| t.ty == "cpu" && t.unit == "nanoseconds")?;
    p.comments = vec![format!(
        "{} programs exec'd under tickscope record ended before their first sample: each said its CPU time (all of it before the first sample: loading, the exec, the exit) and wrote no profile of its own",
        procs.len()
    )];
    if !forks.is_empty() {
        p.comments.push(format!(
            "{} fork children that did not exec ended before tickscope record, which looks for them every 10 ms, found them: each said its CPU time as it ended",
            forks.len()
        ));
    }
    for (id, (row, procs)) in [(UNSAMPLED_ROW, procs), (SHORT_FORKS_ROW, forks)]
        .into_iter()
        .enumerate()
        .filter(|(_, (_, procs))| !procs.is_empty())
    {
        let id = id as u64 + 1;
        let f = p.push_function(id, row, row, "", 0);
        let loc = p.push_location(
            id,
            None,
            0,
            &[tickscope_profile::Line {
                function: f,
                line: 0,
            }],
            false,
        );
        let mut values = vec![0i64; p.sample_types.len()];
        for (pid, name, ns) in procs {
            values[cpu] = i64::try_from(*ns).unwrap_or(i64::MAX);
            p.push_sample([loc], &values, &process_labels(*pid, name.clone()));
        }
    }
    Some(p)
}

/// Says how many programs the run exec'd ended before their first sample, and where their
/// profile is (`kept`, named as the user named `output`); nothing if there were none.
pub(super) fn say_unsampled(
    unsampled: &[(u32, String, u64)],
    kept: Option<&Path>,
    output: &Path,
    in_table: bool,
) {
    if unsampled.is_empty() {
        return;
    }
    let file = kept
        .map(|f| format!(" (their profile: {})", named_as_user(output, f).display()))
        .unwrap_or_default();
    say!("tickscope: {}{file}", unsampled_line(unsampled, in_table));
}

/// Where the program wrote no profile (or a damaged one): the programs it exec'd that ended
/// before their first sample are still kept (`<output>.<run>.unsampled`) and said.
pub(super) fn keep_and_say_unsampled(
    (unsampled, forks): (&[Unprofiled], &[Unprofiled]),
    hz: u32,
    run_dir: &RunDir,
    output: &Path,
    run: u32,
    user_output: &Path,
) {
    let kept = match unsampled.is_empty() && forks.is_empty() {
        true => None,
        false => unsampled_profile(None, hz, unsampled, forks)
            .and_then(|u| run_dir.keep_unsampled(&u, output, run)),
    };
    say_unsampled(unsampled, kept.as_deref(), user_output, false);
    if !forks.is_empty() {
        say!("tickscope: {}", short_forks_line(forks, false));
    }
}

/// "400 programs it exec'd ended before their first sample, 0.52 s of CPU time, in the table
/// as [...]: true (400)": the names by CPU time, the largest first.
pub(super) fn unsampled_line(procs: &[(u32, String, u64)], in_table: bool) -> String {
    let (total, names) = by_cpu(procs.iter().map(|p| (p.1.as_str(), p.2)));
    let (what, whose) = match procs.len() {
        1 => (started(1), "its"),
        n => (started(n), "their"),
    };
    let table = match in_table {
        true => format!(", in the table as {UNSAMPLED_ROW}"),
        false => String::new(),
    };
    format!(
        "{} {what} ended before {whose} first sample, {} of CPU time{table}: {names}",
        procs.len(),
        seconds(total),
    )
}

/// "3 fork children that did not exec ran unprofiled, 1.20 s of CPU time: python3 (2), sh
/// (1)": the names by CPU time, the largest first.
pub(super) fn forks_line(forks: &[(u32, String, u64)]) -> String {
    let (total, names) = by_cpu(forks.iter().map(|f| (f.1.as_str(), f.2)));
    format!(
        "{} fork {} that did not exec ran unprofiled ({}), {} of CPU time: {names}",
        forks.len(),
        if forks.len() == 1 {
            "child"
        } else {
            "children"
        },
        match FORKS.load(std::sync::atomic::Ordering::Relaxed) {
            false => "record --forks samples them too",
            true => "made by vfork or clone, or forked while another thread held a lock of the sampler's",
        },
        seconds(total),
    )
}

/// "18 fork children that did not exec ended before record found them (it looks for them
/// every 10 ms), 12.7 ms of CPU time, in the table as [...]: bash (18)".
pub(super) fn short_forks_line(forks: &[(u32, String, u64)], in_table: bool) -> String {
    let (total, names) = by_cpu(forks.iter().map(|f| (f.1.as_str(), f.2)));
    let table = match in_table {
        true => format!(", in the table as {SHORT_FORKS_ROW}"),
        false => String::new(),
    };
    format!(
        "{} fork {} that did not exec ended before record found {} (it looks for them every 10 ms), {} of CPU time{table}: {names}",
        forks.len(),
        if forks.len() == 1 { "child" } else { "children" },
        if forks.len() == 1 { "it" } else { "them" },
        seconds(total),
    )
}

/// Processes by name (name, CPU time in ns): their total CPU time, and "python3 (2), sh
/// (1)", the names by CPU time, the largest first.
pub(super) fn by_cpu<'a>(procs: impl Iterator<Item = (&'a str, u64)>) -> (u64, String) {
    let mut by_name: Vec<(&str, usize, u64)> = Vec::new();
    let mut total = 0u64;
    for (name, cpu) in procs {
        total = total.saturating_add(cpu);
        match by_name.iter_mut().find(|n| n.0 == name) {
            Some(n) => {
                n.1 += 1;
                n.2 = n.2.saturating_add(cpu);
            }
            None => by_name.push((name, 1, cpu)),
        }
    }
    by_name.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let names: Vec<String> = by_name
        .iter()
        .map(|(name, n, _)| format!("{name} ({n})"))
        .collect();
    (total, names.join(", "))
}
