//! Starting the program (its command, its settings) and waiting for it, passing signals on to
//! it, as one job with it in a shell.

use super::*;

/// Waits for the program, passing on to it each signal a process sent to `record` alone, or,
/// with the program in a process group of its own (`own_group`), each signal `record`
/// received, to that whole group (looked for every 10 ms). The forwarding thread is told at
/// once when the program has ended: it used to sleep out its 10 ms, which every run waited
/// for, 5 ms on average.
pub(super) fn wait_forwarding(
    mut child: std::process::Child,
    own_group: bool,
    mut before_reap: Option<&mut dyn FnMut()>,
) -> std::io::Result<std::process::ExitStatus> {
    use tickscope_sys::job as p;
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
        if job {
            p::kick_stale_wait();
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
pub(super) fn wait_as_one_job(
    pid: u32,
    mut before_reap: Option<&mut dyn FnMut()>,
) -> std::io::Result<std::process::ExitStatus> {
    use tickscope_sys::job::{self as p, Waited};
    // The terminal while the program's group has it.
    let mut lent = None;
    let mut stopped = false;
    let mut seen = p::continues();
    loop {
        match p::wait_job_unless_continued(
            pid,
            seen,
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

/// The program's command: the library preloaded, the settings for it (`protocol::env`), the
/// program sampled from outside where perf permits (the first of the results), in a process
/// group of its own outside a terminal's foreground (the second), ending with `record`.
pub(super) fn command_for(
    args: &Args,
    prog: &OsString,
    rest: &[OsString],
    lib: &Path,
    run_dir: &RunDir,
) -> (Command, bool, bool) {
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
    // fork (docs/decisions/0028-record-samples-its-program-from-outside.md).
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
    let own_group = !tickscope_sys::job::in_terminal_foreground();
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    // `record` killed (even by SIGKILL, which it cannot pass on) ends the program too: a
    // server it ran does not go on for ever, re-parented to init.
    tickscope_sys::job::end_with_parent(&mut command);
    if let Err(e) = tickscope_sys::job::hold_terminal_signals() {
        say!("tickscope: warning: cannot outlive a Ctrl-C ({e}): it would end record before the program writes its profile");
    }
    (command, outside, own_group)
}

/// Starts the program, attaches to it from outside where asked (before any wait: it cannot be
/// reaped before), following its fork children with `follow`, and waits for it, passing
/// signals on. Its pid, how it ended and the
/// sampling; or, where it could not run, the status a shell gives (127, 126), said.
pub(super) fn spawn_and_wait(
    mut command: Command,
    prog: &OsString,
    program: Option<&Path>,
    hz: u32,
    (outside, follow): (bool, bool),
    own_group: bool,
) -> std::result::Result<(u32, std::process::ExitStatus, Option<Outside>), u8> {
    let mut run = 0;
    let mut sampling = None;
    let spawned = std::time::Instant::now();
    let status = match command.spawn().and_then(|c| {
        run = c.id();
        // Before any wait: the program cannot be reaped before it is attached to.
        let file = program.and_then(|p| std::fs::canonicalize(p).ok());
        sampling = outside.then(|| Outside::start(run, hz, spawned, file, follow));
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
            return Err(code);
        }
    };
    Ok((run, status, sampling))
}

/// The status to forward: the program's, or 128 + N for a signal, as shells do.
pub(super) fn exit_code(status: std::process::ExitStatus) -> u8 {
    match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}
