//! `tickscope record [-F HZ] [--wall] [-o FILE] [--merge] [--forks] -- PROG ARGS...`: runs
//! an unmodified program with libtickscope.so preloaded (`TICKSCOPE_CPUPROFILE`), forwards
//! its exit status, then prints the top functions of every process of the run and where
//! their profiles were written: the program's to FILE, each program it exec'd and each fork
//! child that did not exec (followed from outside) to `FILE.<run>.<pid>` (the run is the
//! program's pid, so two runs never mix), or all of them merged into FILE with `--merge`.
//!
//! `tickscope record --pid PID [-F HZ] [-o FILE] [--duration SECS]` samples a process that
//! is already running, from outside it (`tickscope::sampler::Attached`), until it ends, the
//! duration passes, or Ctrl-C; then writes FILE and prints the same table.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;

use tickscope_fmt::protocol;

use super::out::{self, Output};

mod attached;
mod files;
mod forks;
mod heap;
mod messages;
mod outside;
mod profiles;
mod table;
mod unsampled;
mod wait;

use attached::*;
use files::RunDir;
use forks::*;
use messages::*;
use outside::*;
use profiles::*;
use table::*;
use unsampled::*;
use wait::*;

/// Options of `tickscope record`.
#[derive(clap::Args)]
pub struct Args {
    /// Samples per second of CPU time (of wall time with --wall), per thread.
    #[arg(short = 'F', long = "frequency", default_value_t = 100, value_name = "HZ",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    hz: u32,
    /// Sample wall-clock time (threads blocked or sleeping too) instead of CPU time.
    #[arg(long)]
    wall: bool,
    /// Where to write the profile (pprof, gzipped).
    #[arg(short, long, default_value = "tickscope.pb.gz", value_name = "FILE")]
    output: PathBuf,
    /// Rows of the top table printed at the end (0: none).
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    /// Write one profile of every process of the run to FILE (each sample labelled with its
    /// process's `pid` and `program`) instead of a file per program it exec'd.
    #[arg(long)]
    merge: bool,
    /// Keep tickscope's own threads (its sampler's) in the printed table; they are always in
    /// the profile, labelled `thread=tickscope-...`.
    #[arg(long)]
    own_threads: bool,
    /// Fork children that do not exec (a `multiprocessing` pool's workers, a shell's
    /// subshells) sample themselves, each into a file of its own as a program exec'd, instead
    /// of being followed from outside (the default in CPU mode where perf events are
    /// permitted). Each fork then starts a thread in its child (~0.15 ms), which a shell that
    /// forks for every command it runs pays for each one.
    #[arg(long)]
    forks: bool,
    /// Profile the run's heap instead of its CPU time: every process's `malloc`, `free` and
    /// the rest of their family sampled every `TICKSCOPE_HEAP_RATE` bytes on average (512 KiB),
    /// one profile of them all (as --merge) with Go's four sample types, its top table by the
    /// bytes still in use at each process's exit. Stacks by frame pointers.
    #[arg(long, conflicts_with_all = ["wall", "forks", "pid"])]
    heap: bool,
    /// Sample this running process (of the same user) from outside it, instead of running a
    /// program: until it ends, --duration passes, or Ctrl-C. CPU time only.
    #[arg(long, value_name = "PID", conflicts_with_all = ["command", "wall", "merge", "forks"],
          value_parser = clap::value_parser!(u32).range(1..))]
    pid: Option<u32>,
    /// With --pid: stop after this many seconds.
    #[arg(long, value_name = "SECS", requires = "pid")]
    duration: Option<f64>,
    /// The program and its arguments.
    #[arg(required_unless_present = "pid", last = true, value_name = "PROG ARGS")]
    command: Vec<OsString>,
}

/// libtickscope.so: `TICKSCOPE_LIB`, else next to this binary (or in `../lib`).
fn find_lib() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(protocol::env::LIB) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{}={}: no such file", protocol::env::LIB, p.display());
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("cannot find the tickscope binary's directory")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let tried = [
        dir.join("libtickscope.so"),
        dir.join("../lib/libtickscope.so"),
    ];
    for p in &tried {
        if p.is_file() {
            return Ok(p.clone());
        }
    }
    bail!(
        "libtickscope.so is not at {} or {}: build it (`cargo build --release -p tickscope-preload`) or set TICKSCOPE_LIB",
        tried[0].display(),
        tried[1].display()
    )
}

/// The `top` view over the written profile, through the `top` command's own options.
#[derive(Parser)]
struct TopOnly {
    #[command(flatten)]
    args: super::top::Args,
}

/// `--forks`: fork children that did not exec write profiles too, and are said with the
/// programs exec'd as the processes the run started.
static FORKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Fork children that did not exec were followed from outside (see `forks`), and at least
/// one has a profile: the run's other processes are not all programs it exec'd.
static FOLLOWED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// "program it exec'd", or with `--forks` "process it started", for `n` of them.
fn started(n: usize) -> &'static str {
    let forks = FORKS.load(std::sync::atomic::Ordering::Relaxed)
        || FOLLOWED.load(std::sync::atomic::Ordering::Relaxed);
    match (forks, n == 1) {
        (false, true) => "program it exec'd",
        (false, false) => "programs it exec'd",
        (true, true) => "process it started",
        (true, false) => "processes it started",
    }
}

/// Runs the program; returns the exit status to forward (128 + N for a signal, as shells do).
pub fn run(args: Args) -> Result<u8> {
    if let Some(pid) = args.pid {
        return run_attached(&args, pid);
    }
    if args.heap {
        return heap::run_heap(&args);
    }
    FORKS.store(args.forks, std::sync::atomic::Ordering::Relaxed);
    let lib = find_lib()?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let output = cwd.join(&args.output);
    let prog = &args.command[0];
    let (program, seen, run_dir) = prepare(&args, &lib, &output)?;
    let Ran {
        run,
        code,
        write_failed,
        said:
            Said {
                exit_cpu,
                ends,
                unreaped_written,
                forks,
                unsampled,
                ..
            },
        short_forks,
    } = match run_and_hear(&args, &lib, program.as_deref(), &run_dir) {
        Ok(ran) => ran,
        Err(code) => return Ok(code),
    };
    // Programs it exec'd profiled into files of their own, `profile.<pid>`.
    let children = run_dir.children();
    // Where the program itself left no profile to show: the other processes' are kept and
    // said all the same.
    let keep_the_others = |children: &[(u32, PathBuf)], unsampled: &[(u32, String, u64)]| {
        let others = files::keep_children(children, &output, run);
        say_children(&others, &args.output);
        let lines = (unsampled, &short_forks[..]);
        keep_and_say_unsampled(lines, args.hz, &run_dir, &output, run, &args.output);
    };
    // A profile cut short (the program killed while writing it) does not replace the old one.
    let Some(main) = program_profile(&run_dir, prog, &args.output, write_failed) else {
        keep_the_others(&children, &unsampled);
        return Ok(code);
    };
    let Merged {
        merged,
        unsampled_profile,
        damaged,
        processes,
    } = merged(main, &children, (&unsampled, &short_forks), &args, run);
    let several = processes > 1;
    // The CPU the profiles hold against what the whole tree used: a process that was not
    // profiled (a fork child that did not exec, a static program) is said, not hidden.
    let tree_cpu = tickscope_sys::clock::children_cpu_ns().ok();
    let held_cpu = merged.as_ref().and_then(cpu_ns);
    if let Some(line) = merged
        .as_ref()
        .and_then(|m| few_samples(m, args.hz, args.wall, several, args.own_threads))
    {
        say!("{line}");
    }
    let (written_to, others, unsampled_file) = write_output(
        &args,
        &output,
        &run_dir,
        seen,
        run,
        (several, merged.as_ref()),
        &children,
        unsampled_profile.as_ref(),
    )?;
    for (pid, e) in damaged {
        say!("tickscope: warning: process {pid} wrote a damaged profile, left out: {e}");
    }
    let others: Vec<PathBuf> = others
        .iter()
        .map(|p| named_as_user(&args.output, p))
        .collect();
    if let (true, Some(profile)) = (args.top > 0, merged) {
        say_top(profile, &args, several.then_some(processes))?;
    }
    say_unsampled(
        &unsampled,
        unsampled_file.as_deref(),
        &args.output,
        args.top > 0,
    );
    if !short_forks.is_empty() {
        say!(
            "tickscope: {}",
            short_forks_line(&short_forks, args.top > 0)
        );
    }
    if !forks.is_empty() {
        say!("tickscope: {}", forks_line(&forks));
    }
    if let (false, Some(tree), Some(held)) = (args.wall, tree_cpu, held_cpu) {
        let ends = ends.saturating_add(run_end_after_written(tree, unreaped_written.get(&run)));
        say!("{}", cpu_line(held, tree, ends, exit_cpu, &forks));
    }
    if args.merge && several {
        say!(
            "tickscope: profile of {} processes written to {} (labelled pid and program)",
            processes,
            written_to.display()
        );
    } else {
        say!("tickscope: profile written to {}", written_to.display());
        say_children(&others, &args.output);
    }
    Ok(code)
}

/// What the run left to account for: the program's pid, the exit status to forward (2 where
/// a profile of the program's could not be written), what its processes said, and the fork
/// children that ended before they were followed.
struct Ran {
    run: u32,
    code: u8,
    write_failed: bool,
    said: Said,
    short_forks: Vec<(u32, String, u64)>,
}

/// Runs the program and waits for it (`Err`: the status to end with, where it was not
/// waited for to its end), writes what was sampled from outside and reads the lines its
/// processes wrote back.
fn run_and_hear(
    args: &Args,
    lib: &Path,
    program: Option<&Path>,
    run_dir: &RunDir,
) -> std::result::Result<Ran, u8> {
    let (prog, rest) = args
        .command
        .split_first()
        .expect("clap requires the program");
    let (command, outside, own_group) = command_for(args, prog, rest, lib, run_dir);
    // Sampled from outside, the fork children that do not exec are followed the same way,
    // unless `--forks` has them sample themselves.
    let follow = outside && !args.forks;
    let (run, status, sampling) = spawn_and_wait(
        command,
        prog,
        program,
        args.hz,
        (outside, follow),
        own_group,
    )?;
    let code = exit_code(status);
    // A profile that could not be written (a full disk): said where it failed, and the run
    // ends with status 2 where the program's was 0.
    let (written, followed) = match sampling {
        Some(o) => write_sampled(o, run_dir, prog, &args.output),
        None => (true, None),
    };
    let mut said = print_messages(&run_dir.messages());
    // Followed from outside, the fork children have profiles of their own; those that ended
    // before they were found said their CPU time, held as a row of the unsampled profile.
    let short_forks = match followed {
        Some(followed) => {
            say_not_followed(&followed);
            let forks = &mut said.forks;
            let written = write_followed(followed.into_followed(), forks, &said.unsampled, run_dir);
            FOLLOWED.store(written > 0, std::sync::atomic::Ordering::Relaxed);
            std::mem::take(forks)
        }
        None => Vec::new(),
    };
    // The program itself (its pid, whatever it exec'd in its place) could not write it.
    let write_failed = !written || said.write_failed.contains(&run);
    let code = match (write_failed, code) {
        (true, 0) => 2,
        _ => code,
    };
    Ok(Ran {
        run,
        code,
        write_failed,
        said,
        short_forks,
    })
}

/// `path` (a file the run wrote beside the output) named as the user named the output, not
/// by the absolute path the run used.
pub(super) fn named_as_user(output: &Path, path: &Path) -> PathBuf {
    output.with_file_name(path.file_name().unwrap_or_default())
}

/// The CPU time the program this command ran used after the line that said its profile
/// written (`written`: that line's CPU time and its children's), up to its end (record reaps
/// it: the tree's CPU time `tree` is that program's, its children's included).
fn run_end_after_written(tree: u64, written: Option<&(u64, u64)>) -> u64 {
    written.map_or(0, |&(cpu, children)| tree.saturating_sub(cpu + children))
}

/// Before the program starts: the file it runs, the output checked (never one of the files the
/// run reads, in a directory that takes files, no link planted at its name), what was at the
/// output's name, and the run's private directory.
fn prepare(
    args: &Args,
    lib: &Path,
    output: &Path,
) -> Result<(Option<PathBuf>, files::Seen, RunDir)> {
    // The output is checked before the program starts: never one of the files the run
    // reads (the program, the library, a file named in its arguments), and in a directory
    // that exists and takes files.
    let (prog, rest) = args
        .command
        .split_first()
        .expect("clap requires the program");
    let program = find_program(Path::new(prog));
    let mut inputs: Vec<&Path> = vec![lib];
    inputs.extend(program.as_deref());
    inputs.extend(rest.iter().map(Path::new));
    out::refuse_inputs(&args.output, &inputs)?;
    // The output is written once the run holds a profile, through a temporary file renamed
    // over it: a run that writes none leaves an earlier profile as it was, and an earlier
    // one never passes for this run's. Checked now (a link at the name is refused); another
    // run that writes it meanwhile is not overwritten: this one's is kept apart, and said.
    out::check_writable(output)?;
    let seen = files::Seen::of(output);
    // The run's processes write their profiles, and tickscope's messages (not into the
    // program's stderr, which may be a file, or parsed by a build tool; printed once it
    // ends), into a directory of the run's own that no other user can enter.
    let run_dir = RunDir::create(output)?;
    Ok((program, seen, run_dir))
}

/// The file `prog` runs: itself when it names a path, else the first match on `PATH`.
fn find_program(prog: &Path) -> Option<PathBuf> {
    if prog.components().count() > 1 {
        return Some(prog.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}
