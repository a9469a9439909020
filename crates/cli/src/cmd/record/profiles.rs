//! The run's profiles: the program's read back, every process's labelled and merged, the
//! output written and the others kept beside it.

use super::*;

/// The run's profiles together: each labelled with its process where there are several,
/// merged (the programs that ended before their first sample in one profile of their own).
pub(super) struct Merged {
    pub(super) merged: Option<tickscope_profile::Profile>,
    pub(super) unsampled_profile: Option<tickscope_profile::Profile>,
    /// The processes whose profile could not be read: (pid, why).
    pub(super) damaged: Vec<(u32, String)>,
    /// Every process of the run: the program, those it exec'd (damaged profiles included),
    /// and those that ended before their first sample.
    pub(super) processes: usize,
}

/// [`Merged`] of the program's profile (`main`, of process `run`), those of the programs it
/// exec'd (`children`) and the lines of those that ended before their first sample.
pub(super) fn merged(
    main: tickscope_profile::Profile,
    children: &[(u32, PathBuf)],
    (unsampled, forks): (&[Unprofiled], &[Unprofiled]),
    args: &Args,
    run: u32,
) -> Merged {
    // Every process's profile, labelled with its process when there are several.
    let mut profiles = vec![main];
    let mut names = vec![args.output.display().to_string()];
    let mut damaged = Vec::new();
    // The process of each profile, in the same order (a damaged one is left out of both).
    let mut pids = vec![run];
    for (pid, path) in children {
        match tickscope_profile::load(path) {
            Ok(p) => {
                profiles.push(p);
                pids.push(*pid);
                names.push(format!("{} {pid}", names[0]));
            }
            Err(e) => damaged.push((*pid, e.to_string())),
        }
    }
    // The programs that ended before their first sample: one profile of them all.
    let unsampled_profile = match unsampled.is_empty() && forks.is_empty() {
        true => None,
        false => unsampled_profile(Some(&profiles[0]), args.hz, unsampled, forks),
    };
    // Every process of the run: the program, those it exec'd (damaged profiles included),
    // and those that ended before their first sample.
    let processes = 1 + children.len() + unsampled.len() + forks.len();
    let several = processes > 1;
    if several {
        for (p, pid) in profiles.iter_mut().zip(&pids) {
            let program = p
                .mappings
                .first()
                .and_then(|m| Path::new(&m.file).file_name())
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            p.label_all(&process_labels(*pid, program));
        }
    }
    if let Some(u) = &unsampled_profile {
        profiles.push(u.clone());
        names.push(format!(
            "{} (programs that ended before their first sample)",
            names[0]
        ));
    }
    let merged = if several {
        match tickscope_profile::views::merge(profiles, &names) {
            Ok(m) => Some(m),
            Err(e) => {
                say!("tickscope: warning: the run's profiles cannot be merged: {e}");
                None
            }
        }
    } else {
        profiles.pop()
    };
    Merged {
        merged,
        unsampled_profile,
        damaged,
        processes,
    }
}

/// The program's profile from the run's directory; `None`, said (the output is unchanged),
/// where it wrote none (`write_failed`: because it could not be written) or a damaged one.
pub(super) fn program_profile(
    run_dir: &RunDir,
    prog: &OsString,
    output: &Path,
    write_failed: bool,
) -> Option<tickscope_profile::Profile> {
    if std::fs::metadata(run_dir.profile()).map_or(0, |m| m.len()) == 0 {
        if write_failed {
            say!(
                "tickscope: error: no profile of {} written: {} is unchanged",
                Path::new(prog).display(),
                output.display()
            );
        } else {
            say!(
                "tickscope: error: {} wrote no profile to {}: it was killed or aborted, its _exit found the drain thread stuck for 3 s, or it is statically linked (LD_PRELOAD cannot load into it)",
                Path::new(prog).display(),
                output.display()
            );
        }
        return None;
    }
    match tickscope_profile::load(run_dir.profile()) {
        Ok(p) => Some(p),
        Err(e) => {
            let e = e.to_string();
            let tmp = format!("{}: ", run_dir.profile().display());
            say!(
                "tickscope: error: {} wrote a damaged profile, not kept ({}); {} is unchanged",
                Path::new(prog).display(),
                e.strip_prefix(&tmp).unwrap_or(&e),
                output.display()
            );
            None
        }
    }
}

/// Writes the run's profile to the output (the program's, or with `--merge` every process's)
/// and keeps the others beside it; where another process wrote the output meanwhile, this
/// run's is kept apart. Returns the name written (as the user named it), the other
/// processes' files and the unsampled programs' file.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_output(
    args: &Args,
    output: &Path,
    run_dir: &RunDir,
    seen: files::Seen,
    run: u32,
    (several, merged): (bool, Option<&tickscope_profile::Profile>),
    children: &[(u32, PathBuf)],
    unsampled_profile: Option<&tickscope_profile::Profile>,
) -> Result<(PathBuf, Vec<PathBuf>, Option<PathBuf>)> {
    let mut pending = pending_output(output)?;
    let others = if let (true, true, Some(m)) = (args.merge, several, merged) {
        tickscope_profile::write::write_gz(m, pending.file())
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        Vec::new()
    } else {
        let copied = std::fs::File::open(run_dir.profile())
            .and_then(|mut f| std::io::copy(&mut f, pending.file()));
        copied.with_context(|| format!("cannot write {}", args.output.display()))?;
        files::keep_children(children, output, run)
    };
    // Without --merge, their profile is a file of the run's like the others:
    // `<output>.<run>.unsampled`.
    let unsampled_file = match (args.merge, unsampled_profile) {
        (false, Some(u)) => run_dir.keep_unsampled(u, output, run),
        _ => None,
    };
    let written_to = commit_or_keep_apart(pending, output, seen, args, run, "profile")?;
    Ok((written_to, others, unsampled_file))
}

/// The run's output, written through a temporary file that is renamed over it only if no
/// other process wrote it meanwhile.
pub(super) fn pending_output(output: &Path) -> Result<Output> {
    Output::create_with(
        output,
        tickscope_sys::output::Options {
            refuse_if_changed: true,
            ..Default::default()
        },
    )
}

/// Commits `pending` over the output; where another run wrote the output while this one went
/// on, both are kept: this run's `what` apart, said. Returns the name written, as the user
/// named it.
pub(super) fn commit_or_keep_apart(
    pending: Output,
    output: &Path,
    seen: files::Seen,
    args: &Args,
    run: u32,
    what: &str,
) -> Result<PathBuf> {
    if seen.changed(output) || pending.changed() {
        let apart = named_as_user(&args.output, &files::keep_apart(pending, output, run)?);
        say!(
            "tickscope: warning: another process wrote {} while this run went on: it is kept, and this run's {what} is {}",
            args.output.display(),
            apart.display()
        );
        return Ok(apart);
    }
    pending.commit()?;
    Ok(args.output.clone())
}

/// The labels of a sample of process `pid` running `program`, in a profile of several.
pub(super) fn process_labels(pid: u32, program: String) -> [tickscope_profile::Label; 2] {
    [
        tickscope_profile::Label::Num {
            key: "pid".into(),
            value: i64::from(pid),
            unit: String::new(),
        },
        tickscope_profile::Label::Str {
            key: "program".into(),
            value: program,
        },
    ]
}
