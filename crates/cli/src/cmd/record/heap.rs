//! `record --heap`: the run's heap instead of its CPU time. Every process of the run that
//! loads the preload library samples its `malloc` family into a heap profile of its own
//! (the library's `TICKSCOPE_HEAPPROFILE`, `<profile>.<pid>` for the programs it execs),
//! written as each exits; the run's profiles are then merged into the output (labelled with
//! their process where there are several) and its top table printed by `inuse_space`.

use super::*;

/// Runs the program with its heap profiled; returns the exit status to forward.
pub(super) fn run_heap(args: &Args) -> Result<u8> {
    let lib = find_lib()?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let output = cwd.join(&args.output);
    let (program, seen, run_dir) = prepare(args, &lib, &output)?;
    let (prog, rest) = args
        .command
        .split_first()
        .expect("clap requires the program");
    // The CPU profile's settings go; the heap profile's come in their place. Ctrl-C, job
    // control and the program's end with this command's are as for a CPU profile.
    let (mut command, _, own_group) = command_for(args, prog, rest, &lib, &run_dir);
    command
        .env_remove(protocol::env::PROFILE)
        .env_remove(protocol::env::OUTSIDE)
        .env(protocol::env::HEAP_PROFILE, run_dir.profile());
    let (run, status, _) = match spawn_and_wait(
        command,
        prog,
        program.as_deref(),
        args.hz,
        (false, false),
        own_group,
    ) {
        Ok(ran) => ran,
        Err(code) => return Ok(code),
    };
    let code = exit_code(status);
    print_messages(&run_dir.messages());
    // The program's own profile (its pid, and whatever it exec'd in its place), then those of
    // the programs it exec'd. A shell that ends by `_exit` (dash) writes none of its own.
    let mut files = run_dir.children();
    if std::fs::metadata(run_dir.profile()).is_ok_and(|m| m.len() > 0) {
        files.insert(0, (run, run_dir.profile()));
    } else if !files.is_empty() {
        say!(
            "tickscope: {} itself wrote no heap profile (ended by _exit or a signal): the profile holds the {} processes it exec'd",
            Path::new(prog).display(),
            files.len()
        );
    }
    let mut damaged = Vec::new();
    let mut first = None;
    while first.is_none() && !files.is_empty() {
        let (pid, path) = files.remove(0);
        match tickscope_profile::load(&path) {
            Ok(p) => first = Some((pid, p)),
            Err(e) => damaged.push((pid, e.to_string())),
        }
    }
    let Some((first_pid, main)) = first else {
        say!(
            "tickscope: error: {} wrote no heap profile to {}: it was killed, ended by _exit or a signal (the heap profile is written at exit() or a return from main), or it is statically linked (LD_PRELOAD cannot load into it)",
            Path::new(prog).display(),
            args.output.display()
        );
        say_damaged(&damaged);
        return Ok(code);
    };
    let Merged {
        merged,
        damaged: more,
        processes,
        ..
    } = merged(main, &files, (&[], &[]), args, first_pid);
    damaged.extend(more);
    say_damaged(&damaged);
    let Some(profile) = merged else {
        return Ok(code);
    };
    let written_to = write_heap(&profile, &output, args, seen, run)?;
    let several = processes > 1;
    if args.top > 0 {
        say_top(profile, args, several.then_some(processes))?;
    }
    let of = match several {
        true => format!(" of {processes} processes"),
        false => String::new(),
    };
    say!(
        "tickscope: heap profile{of} written to {} (alloc_objects, alloc_space, inuse_objects, inuse_space: `tickscope top --sample-index alloc_space {}` for what was allocated)",
        written_to.display(),
        written_to.display()
    );
    Ok(code)
}

/// Says the processes whose heap profile could not be read.
fn say_damaged(damaged: &[(u32, String)]) {
    for (pid, e) in damaged {
        say!("tickscope: warning: process {pid} wrote a damaged heap profile, left out: {e}");
    }
}

/// Writes the run's heap profile to the output; where another process wrote the output
/// meanwhile, this run's is kept apart (said). Returns the name written, as the user named it.
fn write_heap(
    profile: &tickscope_profile::Profile,
    output: &Path,
    args: &Args,
    seen: files::Seen,
    run: u32,
) -> Result<PathBuf> {
    let mut pending = pending_output(output)?;
    tickscope_profile::write::write_gz(profile, pending.file())
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    commit_or_keep_apart(pending, output, seen, args, run, "heap profile")
}
