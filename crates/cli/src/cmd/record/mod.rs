//! `tickscope record [-F HZ] [--wall] [-o FILE] [--merge] [--forks] -- PROG ARGS...`: runs
//! an unmodified program with libtickscope.so preloaded (`TICKSCOPE_CPUPROFILE`), forwards
//! its exit status, then prints the top functions of every process of the run and where
//! their profiles were written: the program's to FILE, each program it exec'd (and with
//! `--forks` each fork child that did not exec) to `FILE.<run>.<pid>` (the run is the
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

use tickscope::__private::protocol;

use super::out::{self, Output};

mod attached;
mod files;
mod messages;
mod outside;
mod table;
mod unsampled;
mod wait;

use attached::*;
use files::RunDir;
use messages::*;
use outside::*;
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
    /// Sample fork children that do not exec too (a `multiprocessing` pool's workers, a
    /// shell's subshells), each into a file of its own as a program exec'd. Each fork then
    /// starts a thread in its child (~0.15 ms), which a shell that forks for every command
    /// it runs pays for each one.
    #[arg(long)]
    forks: bool,
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
            bail!("TICKSCOPE_LIB={}: no such file", p.display());
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

/// "program it exec'd", or with `--forks` "process it started", for `n` of them.
fn started(n: usize) -> &'static str {
    match (FORKS.load(std::sync::atomic::Ordering::Relaxed), n == 1) {
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
    FORKS.store(args.forks, std::sync::atomic::Ordering::Relaxed);
    let lib = find_lib()?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let output = cwd.join(&args.output);
    let (prog, rest) = args
        .command
        .split_first()
        .expect("clap requires the program");
    // The output is checked before the program starts: never one of the files the run
    // reads (the program, the library, a file named in its arguments), and in a directory
    // that exists and takes files.
    let program = find_program(Path::new(prog));
    let mut inputs: Vec<&Path> = vec![&lib];
    inputs.extend(program.as_deref());
    inputs.extend(rest.iter().map(Path::new));
    out::refuse_inputs(&args.output, &inputs)?;
    // The output is written once the run holds a profile, through a temporary file renamed
    // over it: a run that writes none leaves an earlier profile as it was, and an earlier
    // one never passes for this run's. Checked now (a link at the name is refused); another
    // run that writes it meanwhile is not overwritten: this one's is kept apart, and said.
    out::check_writable(&output)?;
    let seen = files::Seen::of(&output);
    // The run's processes write their profiles, and tickscope's messages (not into the
    // program's stderr, which may be a file, or parsed by a build tool; printed once it
    // ends), into a directory of the run's own that no other user can enter.
    let run_dir = RunDir::create(&output)?;
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let mut command = Command::new(prog);
    command
        .args(rest)
        .env("LD_PRELOAD", preload)
        .env(protocol::env::PROFILE, run_dir.profile())
        .env(protocol::env::FREQUENCY, args.hz.to_string())
        .env(protocol::env::MODE, if args.wall { "wall" } else { "cpu" })
        .env(protocol::env::SIGNALS, "1")
        .env(protocol::env::QUIET, "1")
        .env(protocol::env::FORKS, if args.forks { "1" } else { "0" })
        .env(protocol::env::MESSAGES, run_dir.messages())
        .env_remove(protocol::env::ROOT_PID);
    // In CPU mode, where perf events may be opened on a process of this user, the program
    // is sampled from outside, by this command: the library in it only passes the settings
    // on to the programs it execs (which sample themselves). No thread of tickscope's runs
    // in it then; a shell that forks for every command pays for any thread there at each
    // fork (docs/design-changes.md, "The program record starts, sampled from outside").
    // (Frame pointers asked for, `TICKSCOPE_CPUPROFILE_UNWIND=fp`: the library's own way.)
    let outside = !args.wall
        && std::env::var_os(protocol::env::UNWIND).is_none_or(|v| v != "fp")
        && tickscope::sampler::Attached::permitted();
    match outside {
        true => command.env(protocol::env::OUTSIDE, std::process::id().to_string()),
        false => command.env_remove(protocol::env::OUTSIDE),
    };
    // In a terminal's foreground, the program shares this command's process group, as any
    // program run from a shell does: a Ctrl-C (or Ctrl-Z) reaches the program and this
    // command alike; this one waits for the program (which writes its profile on
    // SIGINT/SIGTERM), then shows it, and passes on a signal a process sent to it alone
    // (`kill`). Elsewhere (a script, `timeout`, a supervisor, CI), where a signal comes from
    // a process to this command alone or to its whole group and nothing tells which, the
    // program gets a group of its own and every signal this command receives is passed on
    // to that group, once: sent to the group, it reached the program twice before, and a
    // program with its own SIGINT handler could be killed by the second while writing.
    let own_group = !tickscope::__private::in_terminal_foreground();
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    // `record` killed (even by SIGKILL, which it cannot pass on) ends the program too: a
    // server it ran does not go on for ever, re-parented to init.
    tickscope::__private::end_with_parent(&mut command);
    if let Err(e) = tickscope::__private::hold_terminal_signals() {
        say!("tickscope: warning: cannot outlive a Ctrl-C ({e}): it would end record before the program writes its profile");
    }
    let mut run = 0;
    let mut sampling = None;
    let spawned = std::time::Instant::now();
    let status = match command.spawn().and_then(|c| {
        run = c.id();
        // Before any wait: the program cannot be reaped before it is attached to.
        let file = program
            .as_deref()
            .and_then(|p| std::fs::canonicalize(p).ok());
        sampling = outside.then(|| Outside::start(run, args.hz, spawned, file));
        let mut before_reap = sampling.as_mut().map(Outside::before_reap);
        wait_forwarding(
            c,
            own_group,
            before_reap.as_mut().map(|f| f as &mut dyn FnMut()),
        )
    }) {
        Ok(s) => s,
        // As a shell says it: 127 for a program not found, 126 for one that cannot run.
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            say!(
                "tickscope: error: cannot run {}: {e}",
                Path::new(prog).display()
            );
            return Ok(code);
        }
    };
    let code = match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => 1,
    };
    // A profile that could not be written (a full disk): said where it failed, and the run
    // ends with status 2 where the program's was 0.
    let mut write_failed = false;
    if let Some(sampling) = sampling {
        match sampling.finish() {
            Ok(profile) => {
                for w in profile.warnings() {
                    say!("tickscope: warning: {w}");
                }
                if let Err(e) = profile.write_pprof(run_dir.profile()) {
                    write_failed = true;
                    say!(
                        "tickscope: error: cannot write the profile of {} to {}: {}",
                        Path::new(prog).display(),
                        args.output.display(),
                        std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string())
                    );
                }
            }
            Err(e) => say!(
                "tickscope: error: cannot sample {} from outside: {e}",
                Path::new(prog).display()
            ),
        }
    }
    let Said {
        exit_cpu,
        ends,
        unreaped_written,
        forks,
        unsampled,
        write_failed: library_write_failed,
    } = print_messages(&run_dir.messages(), &run_dir.profile());
    let write_failed = write_failed || library_write_failed;
    let code = match (write_failed, code) {
        (true, 0) => 2,
        _ => code,
    };
    // Programs it exec'd profiled into files of their own, `profile.<pid>`.
    let children = run_dir.children();
    // Where the program itself left no profile to show: the other processes' are kept and
    // said all the same.
    let keep_the_others = |children: &[(u32, PathBuf)], unsampled: &[(u32, String, u64)]| {
        let others = files::keep_children(children, &output, run);
        say_children(&others, &args.output);
        keep_and_say_unsampled(unsampled, args.hz, &run_dir, &output, run, &args.output);
    };
    if std::fs::metadata(run_dir.profile()).map_or(0, |m| m.len()) == 0 {
        if write_failed {
            say!(
                "tickscope: error: no profile of {} written: {} is unchanged",
                Path::new(prog).display(),
                args.output.display()
            );
        } else {
            say!(
                "tickscope: error: {} wrote no profile to {}: it was killed or aborted, its _exit found the drain thread stuck for 3 s, or it is statically linked (LD_PRELOAD cannot load into it)",
                Path::new(prog).display(),
                args.output.display()
            );
        }
        keep_the_others(&children, &unsampled);
        return Ok(code);
    }
    // A profile cut short (the program killed while writing it) does not replace the old one.
    let main = match tickscope_profile::load(run_dir.profile()) {
        Ok(p) => p,
        Err(e) => {
            let e = e.to_string();
            let tmp = format!("{}: ", run_dir.profile().display());
            say!(
                "tickscope: error: {} wrote a damaged profile, not kept ({}); {} is unchanged",
                Path::new(prog).display(),
                e.strip_prefix(&tmp).unwrap_or(&e),
                args.output.display()
            );
            keep_the_others(&children, &unsampled);
            return Ok(code);
        }
    };
    // Every process's profile, labelled with its process when there are several.
    let mut profiles = vec![main];
    let mut names = vec![args.output.display().to_string()];
    let mut damaged = Vec::new();
    // The process of each profile, in the same order (a damaged one is left out of both).
    let mut pids = vec![run];
    for (pid, path) in &children {
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
    let unsampled_profile = match unsampled.is_empty() {
        true => None,
        false => unsampled_profile(Some(&profiles[0]), args.hz, &unsampled),
    };
    // Every process of the run: the program, those it exec'd (damaged profiles included),
    // and those that ended before their first sample.
    let processes = 1 + children.len() + unsampled.len();
    let several = processes > 1;
    if several {
        for (p, pid) in profiles.iter_mut().zip(&pids) {
            let program = p
                .mappings
                .first()
                .and_then(|m| Path::new(&m.file).file_name())
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            p.label_all(&[
                tickscope_profile::Label::Num {
                    key: "pid".into(),
                    value: i64::from(*pid),
                    unit: String::new(),
                },
                tickscope_profile::Label::Str {
                    key: "program".into(),
                    value: program,
                },
            ]);
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
    // The CPU the profiles hold against what the whole tree used: a process that was not
    // profiled (a fork child that did not exec, a static program) is said, not hidden.
    let tree_cpu = tickscope::__private::children_cpu_ns().ok();
    let held_cpu = merged.as_ref().and_then(cpu_ns);
    if let Some(line) = merged
        .as_ref()
        .and_then(|m| few_samples(m, args.hz, args.wall, several, args.own_threads))
    {
        say!("{line}");
    }
    let mut pending = Output::create_with(
        &output,
        tickscope::__private::output::Options {
            refuse_if_changed: true,
            ..Default::default()
        },
    )?;
    let others = if let (true, true, Some(m)) = (args.merge, several, merged.as_ref()) {
        tickscope_profile::write::write_gz(m, pending.file())
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        Vec::new()
    } else {
        let copied = std::fs::File::open(run_dir.profile())
            .and_then(|mut f| std::io::copy(&mut f, pending.file()));
        copied.with_context(|| format!("cannot write {}", args.output.display()))?;
        files::keep_children(&children, &output, run)
    };
    // Without --merge, their profile is a file of the run's like the others:
    // `<output>.<run>.unsampled`.
    let unsampled_file = match (args.merge, &unsampled_profile) {
        (false, Some(u)) => run_dir.keep_unsampled(u, &output, run),
        _ => None,
    };
    // Another run wrote the output while this one went on: both profiles are kept.
    let written_to = if seen.changed(&output) || pending.changed() {
        let apart = files::keep_apart(pending, &output, run)?;
        let apart = args
            .output
            .with_file_name(apart.file_name().unwrap_or_default());
        say!(
            "tickscope: warning: another process wrote {} while this run went on: it is kept, and this run's profile is {}",
            args.output.display(),
            apart.display()
        );
        apart
    } else {
        pending.commit()?;
        args.output.clone()
    };
    for (pid, e) in damaged {
        say!("tickscope: warning: process {pid} wrote a damaged profile, left out: {e}");
    }
    // Named as the user named the output (not by the absolute path the run used).
    let others: Vec<PathBuf> = others
        .iter()
        .map(|p| {
            args.output
                .with_file_name(p.file_name().unwrap_or_default())
        })
        .collect();
    if let (true, Some(mut profile)) = (args.top > 0, merged) {
        let own = own_threads_share(&profile);
        if several {
            // Each process's comments, once per kind of process: too many for a terminal
            // (the file keeps them).
            profile.comments.clear();
        }
        let ignore = (!args.own_threads && own.0 > 0)
            .then(|| OsString::from(format!("--tagignore=thread=^{OWN_THREADS}")));
        let text = top_table(profile, &args, ignore)?;
        if several {
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
    }
    say_unsampled(
        &unsampled,
        unsampled_file.as_deref(),
        &args.output,
        args.top > 0,
    );
    if !forks.is_empty() {
        say!("tickscope: {}", forks_line(&forks));
    }
    if let (false, Some(tree), Some(held)) = (args.wall, tree_cpu, held_cpu) {
        // The end of the program this command ran (it reaps it: the tree's CPU time is that
        // program's, its children's included) after the line that said its profile written.
        let ends = ends.saturating_add(
            unreaped_written
                .get(&run)
                .map_or(0, |&(cpu, children)| tree.saturating_sub(cpu + children)),
        );
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
        let explained = held + ends + forks.iter().map(|f| f.1).sum::<u64>();
        if (explained as f64) < 0.9 * tree as f64 && tree.saturating_sub(explained) > 20_000_000 {
            line.push_str(": the rest ran in processes that were not profiled (fork children that did not exec, statically linked programs, programs killed or ended by _exit), or in the ends of processes whose reaping no profiled parent saw");
        }
        say!("{line}");
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
