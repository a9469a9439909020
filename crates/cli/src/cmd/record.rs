//! `tickscope record [-F HZ] [--wall] [-o FILE] -- PROG ARGS...`: runs an unmodified program
//! with libtickscope.so preloaded (`TICKSCOPE_CPUPROFILE`), forwards its exit status, then
//! prints the top functions and where the profile was written.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;

use super::out::{self, Output};

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
    /// The program and its arguments.
    #[arg(required = true, last = true, value_name = "PROG ARGS")]
    command: Vec<OsString>,
}

/// libtickscope.so: `TICKSCOPE_LIB`, else next to this binary (or in `../lib`).
fn find_lib() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TICKSCOPE_LIB") {
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

/// Runs the program; returns the exit status to forward (128 + N for a signal, as shells do).
pub fn run(args: Args) -> Result<u8> {
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
    // The library writes to a temporary file, renamed over the output once it holds a
    // profile: a run that writes none leaves an earlier profile as it was, and an earlier
    // one never passes for this run's.
    let pending = Output::create(&output)?;
    // tickscope's messages from every process of the run come here, not into the program's
    // stderr (which may be a file, or parsed by a build tool); printed once it ends.
    let messages = Messages::create()?;
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let mut command = Command::new(prog);
    command
        .args(rest)
        .env("LD_PRELOAD", preload)
        .env("TICKSCOPE_CPUPROFILE", pending.tmp_path())
        .env("TICKSCOPE_CPUPROFILE_FREQUENCY", args.hz.to_string())
        .env(
            "TICKSCOPE_CPUPROFILE_MODE",
            if args.wall { "wall" } else { "cpu" },
        )
        .env("TICKSCOPE_CPUPROFILE_SIGNALS", "1")
        .env("TICKSCOPE_CPUPROFILE_QUIET", "1")
        .env("TICKSCOPE_MESSAGES", messages.path())
        .env_remove("TICKSCOPE_CPUPROFILE_PID");
    // A Ctrl-C reaches the program and this command alike: this one waits for the program
    // (which writes its profile on SIGINT/SIGTERM), then shows it. A signal sent to this
    // process alone (`kill`) is passed on to the program.
    if let Err(e) = tickscope::__private::hold_terminal_signals() {
        eprintln!("tickscope: warning: cannot outlive a Ctrl-C ({e}): it would end record before the program writes its profile");
    }
    let status = match command.spawn().and_then(wait_forwarding) {
        Ok(s) => s,
        // As a shell says it: 127 for a program not found, 126 for one that cannot run.
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            eprintln!(
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
    messages.print();
    // Programs it exec'd profiled into files of their own: `<tmp>.<pid>`, renamed to
    // `<output>.<pid>` whatever became of the main profile.
    let others = rename_children(pending.tmp_path(), &output);
    if std::fs::metadata(pending.tmp_path()).map_or(0, |m| m.len()) == 0 {
        eprintln!(
            "tickscope: error: {} wrote no profile to {}: it ended by _exit, abort or a signal, or it is statically linked (LD_PRELOAD cannot load into it)",
            Path::new(prog).display(),
            args.output.display()
        );
        return Ok(if code != 0 { code } else { 2 });
    }
    // A profile cut short (the program killed while writing it) does not replace the old one.
    if let Err(e) = tickscope_profile::load(pending.tmp_path()) {
        let e = e.to_string();
        let tmp = format!("{}: ", pending.tmp_path().display());
        eprintln!(
            "tickscope: error: {} wrote a damaged profile, not kept ({}); {} is unchanged",
            Path::new(prog).display(),
            e.strip_prefix(&tmp).unwrap_or(&e),
            args.output.display()
        );
        return Ok(if code != 0 { code } else { 2 });
    }
    pending.commit()?;
    if args.top > 0 {
        let top = TopOnly::try_parse_from([
            OsString::from("top"),
            output.clone().into_os_string(),
            OsString::from(format!("--nodecount={}", args.top)),
        ])?;
        let mut report = top.args.common_report()?;
        let text = tickscope_profile::views::top_text(&mut report, super::common::name_width(58));
        eprint!("{text}");
    }
    eprintln!("tickscope: profile written to {}", args.output.display());
    for p in others {
        eprintln!("tickscope: a program it exec'd: {}", p.display());
    }
    Ok(code)
}

/// Waits for the program, passing on to it each signal a process sent to `record` alone.
fn wait_forwarding(mut child: std::process::Child) -> std::io::Result<std::process::ExitStatus> {
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forwarder = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some((sig, true)) = tickscope::__private::held_signal() {
                    let _ = tickscope::__private::signal_process(pid, sig);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let status = child.wait();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = forwarder.join();
    status
}

/// The file the run's processes append tickscope's messages to (`TICKSCOPE_MESSAGES`): new,
/// private to this user, in the temporary directory; removed when dropped.
struct Messages(PathBuf);

impl Messages {
    fn create() -> Result<Messages> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::env::temp_dir();
        let mut last = None;
        // A name nobody holds: this process's id, then a counter past files left by others.
        for n in 0..1000 {
            let path = dir.join(format!("tickscope-messages-{}-{n}", std::process::id()));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(_) => return Ok(Messages(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    last = Some(e);
                    break;
                }
            }
        }
        Err(last.expect("the loop ran"))
            .with_context(|| format!("cannot create a file for messages in {}", dir.display()))
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// Prints the messages to this process's stderr: each kind once, with how many of the
    /// run's processes said it (lines alike but for their numbers are one kind).
    fn print(&self) {
        let text = std::fs::read_to_string(&self.0).unwrap_or_default();
        let mut kinds: Vec<(String, &str, usize)> = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
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
                eprintln!(
                    "{line} (and {} more like it from the run's processes)",
                    n - 1
                );
            } else {
                eprintln!("{line}");
            }
        }
    }
}

impl Drop for Messages {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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

/// Renames the profiles of the programs the run exec'd, `<tmp>.<pid>`, to `<output>.<pid>`;
/// returns the new names, sorted.
fn rename_children(tmp: &Path, output: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(tmp_name), Some(out_name)) =
        (tmp.parent(), tmp.file_name(), output.file_name())
    else {
        return Vec::new();
    };
    let tmp_name = tmp_name.to_string_lossy().into_owned();
    let mut renamed: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = name.strip_prefix(&tmp_name)?.strip_prefix('.')?;
                    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                        return None;
                    }
                    let mut new_name = out_name.to_owned();
                    new_name.push(format!(".{pid}"));
                    let to = output.with_file_name(new_name);
                    match std::fs::rename(e.path(), &to) {
                        Ok(()) => Some(to),
                        Err(err) => {
                            eprintln!(
                                "tickscope: warning: cannot rename {} to {}: {err}",
                                e.path().display(),
                                to.display()
                            );
                            None
                        }
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    renamed.sort();
    renamed
}
