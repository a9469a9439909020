//! Waiting for the program, passing signals on to it, as one job with it in a shell.

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
pub(super) fn wait_as_one_job(
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
