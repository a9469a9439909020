//! `tickscope record [-F HZ] [--wall] [-o FILE] -- PROG ARGS...`: runs an unmodified program
//! with libtickscope.so preloaded (`TICKSCOPE_CPUPROFILE`), forwards its exit status, then
//! prints the top functions and where the profile was written.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;

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
    // A profile left from an earlier run must not pass for this one's.
    match std::fs::remove_file(&output) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            bail!("cannot replace {}: {e}", output.display())
        }
        _ => {}
    }
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let (prog, rest) = args
        .command
        .split_first()
        .expect("clap requires the program");
    let status = Command::new(prog)
        .args(rest)
        .env("LD_PRELOAD", preload)
        .env("TICKSCOPE_CPUPROFILE", &output)
        .env("TICKSCOPE_CPUPROFILE_FREQUENCY", args.hz.to_string())
        .env(
            "TICKSCOPE_CPUPROFILE_MODE",
            if args.wall { "wall" } else { "cpu" },
        )
        .env("TICKSCOPE_CPUPROFILE_SIGNALS", "1")
        .env("TICKSCOPE_CPUPROFILE_QUIET", "1")
        .env_remove("TICKSCOPE_CPUPROFILE_PID")
        .status()
        .with_context(|| format!("cannot run {}", Path::new(prog).display()))?;
    let code = match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => 1,
    };
    if !output.is_file() {
        eprintln!(
            "tickscope: error: {} wrote no profile to {}: it ended by _exit, abort or a signal, or it is statically linked (LD_PRELOAD cannot load into it)",
            Path::new(prog).display(),
            output.display()
        );
        return Ok(if code != 0 { code } else { 2 });
    }
    if args.top > 0 {
        let top = TopOnly::try_parse_from([
            OsString::from("top"),
            output.clone().into_os_string(),
            OsString::from(format!("--nodecount={}", args.top)),
        ])?;
        let mut report = top.args.common_report()?;
        let text = tickscope_analyze::views::top_text(&mut report, super::view::name_width(58));
        eprint!("{text}");
    }
    eprintln!("tickscope: profile written to {}", args.output.display());
    // Programs it exec'd profiled into files of their own.
    let mut others: Vec<PathBuf> = std::fs::read_dir(output.parent().unwrap_or(&cwd))
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let (Some(name), Some(base)) = (p.file_name(), output.file_name()) else {
                        return false;
                    };
                    let (name, base) = (name.to_string_lossy(), base.to_string_lossy());
                    name.strip_prefix(&*base)
                        .and_then(|s| s.strip_prefix('.'))
                        .is_some_and(|pid| {
                            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
                        })
                })
                .collect()
        })
        .unwrap_or_default();
    others.sort();
    for p in others {
        eprintln!("tickscope: a program it exec'd: {}", p.display());
    }
    Ok(code)
}
