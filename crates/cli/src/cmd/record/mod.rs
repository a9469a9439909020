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

mod files;
use files::RunDir;

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

/// The program `record` started, sampled from outside it (see `run`) on a thread of
/// `record`'s own until it ends; or why it could not be.
enum Outside {
    Sampling {
        thread: std::thread::JoinHandle<tickscope::sampler::Profile>,
        ask: std::sync::mpsc::Sender<Ask>,
        /// The thread's answer to [`Ask::Ended`] (taken by [`Outside::before_reap`]).
        answer: Option<std::sync::mpsc::Receiver<()>>,
    },
    Failed(String),
}

/// What the sampling thread is told.
enum Ask {
    /// The program has ended and is not reaped yet: take the last readings now, while its
    /// threads' figures and its CPU clock can still be read (a zombie's), then answer.
    Ended,
    Stop,
}

impl Outside {
    /// Attaches to the program `pid`, started at `spawned` (before it is waited for).
    fn start(pid: u32, hz: u32, spawned: std::time::Instant, program: Option<PathBuf>) -> Outside {
        use std::sync::mpsc::{channel, RecvTimeoutError};
        let mut attached = match tickscope::sampler::Attached::from_start(pid, hz, spawned) {
            Ok(a) => match program {
                Some(p) => a.program(p),
                None => a,
            },
            Err(e) => return Outside::Failed(e.to_string()),
        };
        let (ask, asked) = channel();
        let (answer_tx, answer) = channel();
        let thread = std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || {
                let mut final_cpu = None;
                loop {
                    match asked.recv_timeout(std::time::Duration::from_millis(10)) {
                        Err(RecvTimeoutError::Timeout) => {
                            attached.poll();
                        }
                        Ok(Ask::Ended) => {
                            attached.poll();
                            final_cpu = tickscope::sampler::Attached::process_cpu_ns(pid);
                            let _ = answer_tx.send(());
                        }
                        Ok(Ask::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                match final_cpu {
                    Some(ns) => attached.finish_ended(ns),
                    None => attached.finish(),
                }
            });
        match thread {
            Ok(thread) => Outside::Sampling {
                thread,
                ask,
                answer: Some(answer),
            },
            Err(e) => Outside::Failed(format!("cannot start a thread: {e}")),
        }
    }

    /// What runs once the program has ended, before it is reaped: the sampling thread's
    /// last readings (waited for, at most 5 s: the program is reaped after them either way).
    fn before_reap(&mut self) -> impl FnMut() {
        let (ask, answer) = match self {
            Outside::Sampling { ask, answer, .. } => (Some(ask.clone()), answer.take()),
            Outside::Failed(_) => (None, None),
        };
        move || {
            if let (Some(ask), Some(answer)) = (&ask, &answer) {
                if ask.send(Ask::Ended).is_ok() {
                    let _ = answer.recv_timeout(std::time::Duration::from_secs(5));
                }
            }
        }
    }

    /// Once the program has ended: its profile.
    fn finish(self) -> Result<tickscope::sampler::Profile, String> {
        match self {
            Outside::Sampling { thread, ask, .. } => {
                let _ = ask.send(Ask::Stop);
                thread
                    .join()
                    .map_err(|_| "the sampling thread panicked".to_string())
            }
            Outside::Failed(e) => Err(e),
        }
    }
}

/// `record --pid`: samples a running process from outside until it ends, `--duration`
/// passes, or SIGINT/SIGTERM/SIGHUP; writes the profile and prints its top table.
fn run_attached(args: &Args, pid: u32) -> Result<u8> {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let deadline = match args.duration {
        Some(d) if !(d > 0.0 && d < 1e9) => {
            bail!("--duration {d}: must be a positive number of seconds")
        }
        Some(d) => Some(std::time::Instant::now() + std::time::Duration::from_secs_f64(d)),
        None => None,
    };
    // Checked before sampling: never the program's own file, in a directory that exists.
    // (Not `out::check_writable`: it installs the handler that ends this command on Ctrl-C,
    // which here ends the sampling and still writes the profile.)
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    out::refuse_inputs(
        &args.output,
        &exe.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
    )?;
    let dir = match args.output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!(
            "cannot write {}: {} is not a directory",
            args.output.display(),
            dir.display()
        );
    }
    // Registered before anything else takes these signals: the first ends the sampling,
    // and the profile is still written.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .with_context(|| format!("cannot take signal {sig}"))?;
    }
    if let Some(name) = kernel_thread(pid) {
        bail!("process {pid} ({name}) is a kernel thread: it runs no user-space code to sample");
    }
    let mut attached =
        tickscope::sampler::Attached::new(pid, args.hz).map_err(|e| anyhow::anyhow!("{e}"))?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|n| n.trim_end().to_string())
        .unwrap_or_default();
    say!(
        "tickscope: attached to process {pid} ({name}) at {} Hz: sampling until it ends{}, or Ctrl-C",
        args.hz,
        match args.duration {
            Some(d) => format!(", {d} s pass"),
            None => String::new(),
        }
    );
    let why = loop {
        if !attached.poll() {
            break "the process ended";
        }
        if stop.load(Relaxed) {
            break "interrupted";
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break "the duration passed";
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let profile = attached.finish();
    for w in profile.warnings() {
        say!("tickscope: warning: {w}");
    }
    let mut pending = Output::create(&args.output)?;
    let mut bytes = Vec::new();
    profile
        .write_pprof_to(&mut bytes)
        .and_then(|()| std::io::Write::write_all(pending.file(), &bytes))
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    let written = tickscope_profile::parse(&bytes, &args.output.display().to_string());
    pending.commit()?;
    say!("tickscope: stopped sampling process {pid}: {why}");
    if let (true, Ok(profile)) = (args.top > 0, written) {
        say_part!("{}", top_table(profile, args, None)?);
    }
    say!("tickscope: profile written to {}", args.output.display());
    Ok(0)
}

/// The name of process `pid` if it is a kernel thread (`PF_KTHREAD` in its flags, the ninth
/// field of `/proc/PID/stat`).
fn kernel_thread(pid: u32) -> Option<String> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    // After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    let flags: u64 = rest.split_whitespace().nth(6)?.parse().ok()?;
    (flags & PF_KTHREAD != 0).then_some(name)
}

/// The `top` view of `profile` as `record` prints it (`--top` rows, `extra` a further option
/// of the `top` command's).
fn top_table(
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
        super::common::name_width(58),
    ))
}

/// How tickscope's own threads are named (`thread` label).
const OWN_THREADS: &str = "tickscope-";

/// Whether `s` is a sample of one of tickscope's own threads (label `thread`).
fn own_thread(p: &tickscope_profile::Profile, s: &tickscope_profile::Sample) -> bool {
    p.labels(s).iter().any(|l| {
        matches!(l, tickscope_profile::Label::Str { key, value }
            if key == "thread" && value.starts_with(OWN_THREADS))
    })
}

/// Samples of tickscope's own threads, and of all threads (default sample type's values).
fn own_threads_share(p: &tickscope_profile::Profile) -> (i64, i64) {
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
fn seconds(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

/// The CPU time a profile holds (its `cpu` nanoseconds), if it measures CPU time.
fn cpu_ns(p: &tickscope_profile::Profile) -> Option<u64> {
    total_of(p, "cpu", "nanoseconds", |_| true)
}

/// The sum of a profile's values of one sample type (`cpu` nanoseconds, `samples` count)
/// over the samples `keep` keeps, if it has that type.
fn total_of(
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
fn few_samples(
    profile: &tickscope_profile::Profile,
    hz: u32,
    wall: bool,
    several: bool,
    own_threads: bool,
) -> Option<String> {
    // The table's samples: tickscope's own threads' left out, as the table leaves them.
    let counted = |s: &tickscope_profile::Sample| own_threads || !own_thread(profile, s);
    let samples = total_of(profile, "samples", "count", counted)?;
    if samples >= tickscope::__private::FEW_SAMPLES {
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
        tickscope::__private::FEW_SAMPLES
    ))
}

/// Says where the profiles of the programs the run exec'd are.
fn say_children(others: &[PathBuf], output: &Path) {
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

/// Waits for the program, passing on to it each signal a process sent to `record` alone, or,
/// with the program in a process group of its own (`own_group`), each signal `record`
/// received, to that whole group (looked for every 10 ms). The forwarding thread is told at
/// once when the program has ended: it used to sleep out its 10 ms, which every run waited
/// for, 5 ms on average.
fn wait_forwarding(
    mut child: std::process::Child,
    own_group: bool,
    mut before_reap: Option<&mut dyn FnMut()>,
) -> std::io::Result<std::process::ExitStatus> {
    use tickscope::__private as p;
    let pid = child.id();
    // A program in a group of its own on a terminal: a job, with `record` (below).
    let job = own_group && p::terminal().is_some() && p::count_continues().is_ok();
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let forwarder = std::thread::spawn(move || loop {
        match p::held_signal() {
            Some((sig, _)) if own_group => {
                let _ = p::signal_group(pid, sig);
            }
            Some((sig, true)) => {
                let _ = p::signal_process(pid, sig);
            }
            _ => {}
        }
        match ended.recv_timeout(std::time::Duration::from_millis(10)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    });
    let status = if job {
        wait_as_one_job(pid, before_reap)
    } else {
        // Seen ended first, still a zombie, for what must be read before it is reaped.
        let ended = match before_reap.as_mut() {
            Some(f) => p::wait_ended_unreaped(pid).map(|()| f()),
            None => Ok(()),
        };
        ended.and_then(|()| child.wait())
    };
    drop(done);
    let _ = forwarder.join();
    status
}

/// Waits for the program in a process group of its own as a shell waits for a job, `record`
/// and the program being one job to the shell that runs `record`.
/// - Started in the background (`record … &`), the program is stopped by `SIGTTIN` when it
///   reads the terminal, and so is `record`: the shell says `Stopped (tty input)`.
/// - Continued in the foreground (`fg`, which continues `record`), `record` hands the
///   terminal to the program's group and continues it; by `bg`, it continues it only.
///   A program stopped for the terminal while `record` has it gets it.
/// - Stopped there (Ctrl-Z reaches the program's group), `record` takes the terminal back
///   and stops too, so that the shell has its prompt again.
///
/// Before, `record` never stopped: after `fg` the program stayed in the background,
/// stopped, and both waited for ever. A stop signal that does not stop `record` (ignored
/// since it started, or an orphaned group) leaves the program stopped until `record` is
/// continued, never continued at once only to stop again.
fn wait_as_one_job(
    pid: u32,
    mut before_reap: Option<&mut dyn FnMut()>,
) -> std::io::Result<std::process::ExitStatus> {
    use tickscope::__private::{self as p, Waited};
    // The terminal while the program's group has it.
    let mut lent = None;
    let mut stopped = false;
    let mut seen = p::continues();
    loop {
        match p::wait_job(
            pid,
            before_reap.as_mut().map(|f| &mut **f as &mut dyn FnMut()),
        )? {
            Waited::Ended(raw) => {
                if let Some(fd) = lent {
                    let _ = p::give_terminal(fd, p::own_group());
                }
                return Ok(std::os::unix::process::ExitStatusExt::from_raw(raw));
            }
            Waited::Stopped(sig) => {
                stopped = true;
                if let Some(fd) = lent.take() {
                    let _ = p::give_terminal(fd, p::own_group());
                }
                if !(p::for_the_terminal(sig) && p::foreground_terminal().is_some()) {
                    p::stop_as(sig);
                    if p::continues() == seen {
                        continue;
                    }
                }
            }
            Waited::Interrupted if p::continues() == seen => continue,
            Waited::Interrupted => {}
        }
        // Continued, or the program wants the terminal `record` has.
        seen = p::continues();
        if lent.is_none() {
            if let Some(fd) = p::foreground_terminal() {
                if p::give_terminal(fd, pid).is_ok() {
                    lent = Some(fd);
                }
            }
        }
        if std::mem::take(&mut stopped) {
            let _ = p::continue_group(pid);
        }
    }
}

/// Prints the messages of the run's processes (the file `path`) to this process's stderr: each
/// kind once, with how many of the run's processes said it (lines alike but for their numbers
/// are one kind). Returns what the lines for `record` alone said (not printed), the CPU time
/// of the processes that ended unprofiled taken as they ended where their parent said it, and
/// whether one said it could not write the program's profile (`profile`).
fn print_messages(path: &Path, profile: &Path) -> Said {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let cannot_write = format!("cannot write the profile to {}", profile.display());
    let write_failed = text.lines().any(|l| l.contains(&cannot_write));
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
            match protocol::Reaped::parse(rest)
                .and_then(|r| Some((awaiting.remove(&r.pid)?, r.cpu_ns)))
            {
                // Ended unprofiled: held as reaped, less what its children used, where
                // larger than its own line's figure.
                Some((
                    Awaiting::Unprofiled {
                        fork,
                        index,
                        children,
                    },
                    reaped,
                )) => {
                    let list = if fork { &mut forks } else { &mut unsampled };
                    list[index].2 = list[index].2.max(reaped.saturating_sub(children));
                }
                // Wrote a profile: what its end took after its line.
                Some((Awaiting::Written { cpu, children }, reaped)) => {
                    ends = ends.saturating_add(reaped.saturating_sub(children + cpu));
                }
                None => {}
            }
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
        forks: forks
            .into_iter()
            .map(|(_, name, cpu)| (name, cpu))
            .collect(),
        unsampled,
        write_failed,
    }
}

/// A process whose line `record` read and whose reaping no line has said yet: what the
/// figure its parent reaps it with completes.
enum Awaiting {
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
struct Said {
    /// CPU time (ns) the processes said writing their profiles took.
    exit_cpu: u64,
    /// CPU time (ns) the ends of the processes that wrote a profile took after it was
    /// written (the kernel unmapping their memory), as their parents found them reaped.
    ends: u64,
    /// The processes that wrote a profile whose reaping no line said (the program `record`
    /// ran, which it reaps itself; orphans), by pid: their CPU time and their children's at
    /// the line that said the profile written.
    unreaped_written: HashMap<u32, (u64, u64)>,
    /// Fork children that did not exec: (name, CPU time in ns), their time in no profile.
    forks: Vec<(String, u64)>,
    /// Programs exec'd that ended before their first sample, and wrote a line instead of a
    /// profile: (pid, name, CPU time in ns).
    unsampled: Vec<(u32, String, u64)>,
    /// A process said it could not write the program's profile (a full disk).
    write_failed: bool,
}

/// The row that holds the CPU time of the programs that ended before their first sample.
const UNSAMPLED_ROW: &str = "[not sampled: programs that ended before their first sample]";

/// A profile of the programs the run exec'd that ended before their first sample (`procs`:
/// pid, name, CPU time in ns): one sample each on [`UNSAMPLED_ROW`], labelled with its pid
/// and program, in the sample types of `like` (the run's first profile; without one, those
/// the library writes at `hz`). `None` if `like` has no CPU time to put it in.
fn unsampled_profile(
    like: Option<&tickscope_profile::Profile>,
    hz: u32,
    procs: &[(u32, String, u64)],
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
    let f = p.push_function(1, UNSAMPLED_ROW, UNSAMPLED_ROW, "", 0);
    let loc = p.push_location(
        1,
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
        p.push_sample(
            [loc],
            &values,
            &[
                tickscope_profile::Label::Num {
                    key: "pid".into(),
                    value: i64::from(*pid),
                    unit: String::new(),
                },
                tickscope_profile::Label::Str {
                    key: "program".into(),
                    value: name.clone(),
                },
            ],
        );
    }
    Some(p)
}

/// Says how many programs the run exec'd ended before their first sample, and where their
/// profile is (`kept`, named as the user named `output`); nothing if there were none.
fn say_unsampled(
    unsampled: &[(u32, String, u64)],
    kept: Option<&Path>,
    output: &Path,
    in_table: bool,
) {
    if unsampled.is_empty() {
        return;
    }
    let file = kept
        .map(|f| {
            format!(
                " (their profile: {})",
                output
                    .with_file_name(f.file_name().unwrap_or_default())
                    .display()
            )
        })
        .unwrap_or_default();
    say!("tickscope: {}{file}", unsampled_line(unsampled, in_table));
}

/// Where the program wrote no profile (or a damaged one): the programs it exec'd that ended
/// before their first sample are still kept (`<output>.<run>.unsampled`) and said.
fn keep_and_say_unsampled(
    unsampled: &[(u32, String, u64)],
    hz: u32,
    run_dir: &RunDir,
    output: &Path,
    run: u32,
    user_output: &Path,
) {
    let kept = match unsampled.is_empty() {
        true => None,
        false => unsampled_profile(None, hz, unsampled)
            .and_then(|u| run_dir.keep_unsampled(&u, output, run)),
    };
    say_unsampled(unsampled, kept.as_deref(), user_output, false);
}

/// "400 programs it exec'd ended before their first sample, 0.52 s of CPU time, in the table
/// as [...]: true (400)": the names by CPU time, the largest first.
fn unsampled_line(procs: &[(u32, String, u64)], in_table: bool) -> String {
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
fn forks_line(forks: &[(String, u64)]) -> String {
    let (total, names) = by_cpu(forks.iter().map(|f| (f.0.as_str(), f.1)));
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

/// Processes by name (name, CPU time in ns): their total CPU time, and "python3 (2), sh
/// (1)", the names by CPU time, the largest first.
fn by_cpu<'a>(procs: impl Iterator<Item = (&'a str, u64)>) -> (u64, String) {
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
