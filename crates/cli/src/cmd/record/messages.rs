//! The messages of the run's processes: printed once each, and what the lines for `record` alone say.

use super::*;

/// Prints the messages of the run's processes (the file `path`) to this process's stderr: each
/// kind once, with how many of the run's processes said it (lines alike but for their numbers
/// are one kind). Returns what the lines for `record` alone said (not printed), the CPU time
/// of the processes that ended unprofiled taken as they ended where their parent said it, and
/// the processes that said they could not write their profile.
pub(super) fn print_messages(path: &Path) -> Said {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut write_failed = Vec::new();
    let mut kinds: Vec<(String, &str, usize)> = Vec::new();
    let mut exit_cpu = 0u64;
    let mut forks = Vec::new();
    let mut unsampled = Vec::new();
    // The processes whose line came and whose reaping was not said yet, by pid (a later
    // process of the same pid replaces an earlier one never reaped where this command
    // could hear of it: an orphan, whose pid the kernel may have given again).
    let mut awaiting: HashMap<u32, Awaiting> = HashMap::new();
    let mut ends = 0u64;
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix(protocol::marks::WRITE_FAILED) {
            write_failed.extend(protocol::Process::parse(rest).map(|p| p.pid));
            continue;
        }
        if let Some(rest) = line.strip_prefix(protocol::marks::EXIT_CPU) {
            let ns = rest.split(' ').next().and_then(|n| n.trim().parse().ok());
            exit_cpu = exit_cpu.saturating_add(ns.unwrap_or(0));
            if let Some(pid) = protocol::field::<u32>(rest, "pid=") {
                match (
                    protocol::field(rest, "cpu-ns="),
                    protocol::field(rest, "children-ns="),
                ) {
                    (Some(cpu), Some(children)) => {
                        awaiting.insert(pid, Awaiting::Written { cpu, children })
                    }
                    _ => awaiting.remove(&pid),
                };
            }
            continue;
        }
        let unprofiled = match (
            line.strip_prefix(protocol::marks::FORK_CHILD),
            line.strip_prefix(protocol::marks::UNSAMPLED),
        ) {
            (Some(rest), _) => Some((true, rest)),
            (None, Some(rest)) => Some((false, rest)),
            (None, None) => None,
        };
        if let Some((fork, rest)) = unprofiled {
            if let Some(protocol::Process {
                pid,
                cpu_ns: cpu,
                children_ns: children,
                name,
            }) = protocol::Process::parse(rest)
            {
                let list = if fork { &mut forks } else { &mut unsampled };
                // A line that does not say its children's time (an older library's)
                // cannot be told from theirs: held as it says.
                match children {
                    Some(children) => awaiting.insert(
                        pid,
                        Awaiting::Unprofiled {
                            fork,
                            index: list.len(),
                            children,
                        },
                    ),
                    None => awaiting.remove(&pid),
                };
                list.push((pid, name, cpu));
            }
            continue;
        }
        // Its parent reaped it: the CPU time the kernel gave for it, its end included
        // (its own line came before).
        if let Some(rest) = line.strip_prefix(protocol::marks::REAPED) {
            let lists = (&mut forks, &mut unsampled);
            ends = ends.saturating_add(reaped(rest, &mut awaiting, lists));
            continue;
        }
        let shape: String = line
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        match kinds.iter_mut().find(|k| k.0 == shape) {
            Some(k) => k.2 += 1,
            None => kinds.push((shape, line, 1)),
        }
    }
    say_kinds(kinds);
    Said {
        exit_cpu,
        ends,
        unreaped_written: awaiting
            .into_iter()
            .filter_map(|(pid, a)| match a {
                Awaiting::Written { cpu, children } => Some((pid, (cpu, children))),
                Awaiting::Unprofiled { .. } => None,
            })
            .collect(),
        forks,
        unsampled,
        write_failed,
    }
}

/// A process that ended unprofiled: its pid, name and CPU time (ns).
pub(super) type Unprofiled = (u32, String, u64);

/// A line saying a parent reaped a process (`rest`, after its mark): one that ended
/// unprofiled is held in its list (`lists`: the fork children, the unsampled programs) as
/// reaped, less what its children used, where larger than its own line's figure; returns, for
/// one that wrote a profile, what its end took after its line.
fn reaped(
    rest: &str,
    awaiting: &mut HashMap<u32, Awaiting>,
    lists: (&mut Vec<Unprofiled>, &mut Vec<Unprofiled>),
) -> u64 {
    let Some((a, reaped)) =
        protocol::Reaped::parse(rest).and_then(|r| Some((awaiting.remove(&r.pid)?, r.cpu_ns)))
    else {
        return 0;
    };
    match a {
        Awaiting::Unprofiled {
            fork,
            index,
            children,
        } => {
            let list = if fork { lists.0 } else { lists.1 };
            list[index].2 = list[index].2.max(reaped.saturating_sub(children));
            0
        }
        Awaiting::Written { cpu, children } => reaped.saturating_sub(children + cpu),
    }
}

/// A process whose line `record` read and whose reaping no line has said yet: what the
/// figure its parent reaps it with completes.
pub(super) enum Awaiting {
    /// It ended unprofiled (a fork child, or a program that ended before its first sample):
    /// its entry in `forks` or `unsampled`, and its children's CPU time (ns).
    Unprofiled {
        fork: bool,
        index: usize,
        children: u64,
    },
    /// It wrote a profile: its CPU time and its children's (ns) at the line that said so.
    Written { cpu: u64, children: u64 },
}

/// What the run's processes said for `record` alone.
pub(super) struct Said {
    /// CPU time (ns) the processes said writing their profiles took.
    pub(super) exit_cpu: u64,
    /// CPU time (ns) the ends of the processes that wrote a profile took after it was
    /// written (the kernel unmapping their memory), as their parents found them reaped.
    pub(super) ends: u64,
    /// The processes that wrote a profile whose reaping no line said (the program `record`
    /// ran, which it reaps itself; orphans), by pid: their CPU time and their children's at
    /// the line that said the profile written.
    pub(super) unreaped_written: HashMap<u32, (u64, u64)>,
    /// Fork children that did not exec and were not sampled: (pid, name, CPU time in ns),
    /// their time in no profile (a followed one's is taken out as its profile is written).
    pub(super) forks: Vec<(u32, String, u64)>,
    /// Programs exec'd that ended before their first sample, and wrote a line instead of a
    /// profile: (pid, name, CPU time in ns).
    pub(super) unsampled: Vec<(u32, String, u64)>,
    /// The processes that said they could not write their profile (a full disk).
    pub(super) write_failed: Vec<u32>,
}

/// Says each kind of message once (`kinds`: its shape, a line of it, how many), with how many
/// of the run's processes said it.
fn say_kinds(kinds: Vec<(String, &str, usize)>) {
    for (_, line, n) in kinds {
        if n > 1 {
            say!(
                "{line} (and {} more like it from the run's processes)",
                n - 1
            );
        } else {
            say!("{line}");
        }
    }
}
