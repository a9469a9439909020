//! `record --pid`: a running process sampled from outside.

use super::*;

/// `record --pid`: samples a running process from outside until it ends, `--duration`
/// passes, or SIGINT/SIGTERM/SIGHUP; writes the profile and prints its top table.
pub(super) fn run_attached(args: &Args, pid: u32) -> Result<u8> {
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
pub(super) fn kernel_thread(pid: u32) -> Option<String> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    // After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    let flags: u64 = rest.split_whitespace().nth(6)?.parse().ok()?;
    (flags & PF_KTHREAD != 0).then_some(name)
}
