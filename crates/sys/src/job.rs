//! Terminal and job control for a command that runs a program and must outlive it (`tickscope
//! record`): the signals it holds, the terminal it hands over, the waits that see a child stop,
//! and the program ending with it. Nothing here runs in an instrumented program.

use crate::thread::{gettid, keeping_errno};

/// Makes the process `command` starts receive `SIGTERM` when this thread (the one that
/// spawns it) ends, `SIGKILL` of the whole process included (`PR_SET_PDEATHSIG`, kept across
/// the exec); a child whose parent ended before the setting took is sent it at once.
pub fn end_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec; `end_with` makes only
    // async-signal-safe calls (prctl, getppid, raise) and allocates nothing.
    unsafe { command.pre_exec(move || end_with(parent)) };
}

/// In a child between fork and exec: `SIGTERM` when `parent` ends (see [`end_with_parent`]).
/// The parent's handler for it (the child runs the parent's image until the exec) would take
/// a signal that came before the exec and do nothing with it: the default action is set
/// first, and the signal unblocked. A parent that ended before the setting took ends the
/// child here, before the exec.
fn end_with(parent: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: sets a disposition (the default), no handler code.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_DFL) };
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset fill it in.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t for both calls.
    unsafe { libc::sigemptyset(&mut set) };
    // SAFETY: as above.
    unsafe { libc::sigaddset(&mut set, libc::SIGTERM) };
    // SAFETY: `set` is valid; the old mask is not asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    let sig = libc::SIGTERM as libc::c_ulong;
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// The terminating signal that reached a process holding them (see [`hold_terminal_signals`]),
/// and whether another process sent it to this one alone (`kill`), rather than a terminal to
/// its whole group (Ctrl-C): 0 if none yet. Bits 0-7 the signal, bit 8 "sent by a process".
static HELD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn hold(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    let by_process = (code == libc::SI_USER || code == libc::SI_QUEUE) as u32;
    HELD.store(
        sig as u32 & 0xff | by_process << 8,
        std::sync::atomic::Ordering::SeqCst,
    );
}

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT no longer end this process; [`held_signal`] says which
/// came last. For a command that runs a program and must outlive it (`tickscope record`): a
/// Ctrl-C reaches the whole terminal group, the program included, and the command waits for
/// it to finish writing. The handler is async-signal-safe (one atomic store).
pub fn hold_terminal_signals() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: sigaction is plain data; all-zero is a valid value to fill in.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = hold as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: installs a handler that only stores to an atomic; `act` is valid.
        if unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The last signal [`hold_terminal_signals`] held, taken (so each is seen once): the signal,
/// and whether a process sent it to this one alone.
pub fn held_signal() -> Option<(i32, bool)> {
    let v = HELD.swap(0, std::sync::atomic::Ordering::SeqCst);
    (v != 0).then_some(((v & 0xff) as i32, v & 0x100 != 0))
}

/// True when this process's group is the foreground group of the terminal on its standard
/// input, output or error: a Ctrl-C there reaches this process and its group.
pub fn in_terminal_foreground() -> bool {
    foreground_terminal().is_some()
}

/// The first of this process's standard input, output and error that is a terminal whose
/// foreground group is this process's group.
pub fn foreground_terminal() -> Option<i32> {
    let own = own_group() as libc::pid_t;
    // SAFETY: tcgetpgrp takes a descriptor only; one that is not a terminal only fails.
    (0..3).find(|&fd| is_terminal(fd) && unsafe { libc::tcgetpgrp(fd) } == own)
}

/// The first of this process's standard input, output and error that is a terminal.
pub fn terminal() -> Option<i32> {
    (0..3).find(|&fd| is_terminal(fd))
}

fn is_terminal(fd: i32) -> bool {
    // SAFETY: isatty takes a descriptor only; a bad one only fails.
    unsafe { libc::isatty(fd) == 1 }
}

/// This process's group.
pub fn own_group() -> u32 {
    // SAFETY: getpgrp has no arguments and cannot fail.
    unsafe { libc::getpgrp() as u32 }
}

/// Makes `pgid` the foreground group of the terminal `fd`. Allowed from the background too:
/// `SIGTTOU`, which the kernel sends a background process that tries, is blocked in this
/// thread for the call.
pub fn give_terminal(fd: i32, pgid: u32) -> std::io::Result<()> {
    let old = block_in_thread(libc::SIGTTOU);
    // SAFETY: tcsetpgrp takes a descriptor and a group only; a bad one only fails.
    let r = unsafe { libc::tcsetpgrp(fd, pgid as libc::pid_t) };
    let err = std::io::Error::last_os_error();
    restore_mask(&old);
    if r != 0 {
        return Err(err);
    }
    Ok(())
}

/// Blocks `sig` in the calling thread; returns the mask it had, for [`restore_mask`].
fn block_in_thread(sig: i32) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; all-zero is a valid value for sigemptyset to fill.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, the mask pthread_sigmask fills in.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable set.
    unsafe { libc::sigemptyset(&mut set) };
    // SAFETY: as above; `sig` is a valid signal number.
    unsafe { libc::sigaddset(&mut set, sig) };
    // SAFETY: valid sets; blocking a signal in this thread only defers it.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
    old
}

/// Restores a thread's mask [`block_in_thread`] returned.
fn restore_mask(old: &libc::sigset_t) {
    // SAFETY: `old` is a valid set read by pthread_sigmask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// What `wait_job` saw of a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The child ended: its wait status, as `waitpid` gives it.
    Ended(i32),
    /// The child stopped, by this signal.
    Stopped(i32),
    /// A signal whose handler does not restart the wait came first (`count_continues`).
    Interrupted,
}

/// Waits for child `pid` to end or to stop (`WUNTRACED`). With `before_reap`, a child that
/// ended is seen first without being reaped (`waitid` with `WNOWAIT`: it stays a zombie,
/// whose CPU clock can still be read), `before_reap` runs, and then it is reaped.
pub fn wait_job(pid: u32, before_reap: Option<&mut dyn FnMut()>) -> std::io::Result<Waited> {
    if let Some(before_reap) = before_reap {
        let flags = libc::WEXITED | libc::WSTOPPED | libc::WNOWAIT;
        match peek_child(pid, flags)? {
            None => return Ok(Waited::Interrupted),
            // Stopped: the `waitpid` below takes the stop (still pending) at once.
            Some(libc::CLD_STOPPED) => {}
            Some(_) => before_reap(),
        }
    }
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int for the call to fill.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WUNTRACED) };
    if r == -1 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(Waited::Interrupted);
        }
        return Err(e);
    }
    Ok(if libc::WIFSTOPPED(status) {
        Waited::Stopped(libc::WSTOPSIG(status))
    } else {
        Waited::Ended(status)
    })
}

/// Waits (`waitid` with `flags`) for child `pid` without reaping it; the `si_code` of what
/// it saw (`CLD_EXITED`, `CLD_STOPPED`, ...), `None` if a signal interrupted the wait.
fn peek_child(pid: u32, flags: libc::c_int) -> std::io::Result<Option<libc::c_int>> {
    // SAFETY: siginfo_t is plain data; all-zero is a valid value for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid and writable for the call.
    let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if r == -1 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(info.si_code))
}

/// Waits for child `pid` to end, without reaping it (it stays a zombie until its parent
/// waits for it again). Retries when a signal interrupts the wait.
pub fn wait_ended_unreaped(pid: u32) -> std::io::Result<()> {
    loop {
        if peek_child(pid, libc::WEXITED | libc::WNOWAIT)?.is_some() {
            return Ok(());
        }
    }
}

/// How many times this process was continued (`SIGCONT`) since [`count_continues`].
static CONTINUED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The thread that called [`count_continues`], whose waits a continue interrupts.
static WAITER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn continued(_: libc::c_int) {
    CONTINUED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // The kernel gives a process's SIGCONT to any thread that does not block it, and not to
    // one still stopped as it is sent: the waiter, just continued, is often passed over.
    // Sent on to it, the continue interrupts its wait or is counted before the wait starts.
    let waiter = WAITER.load(std::sync::atomic::Ordering::SeqCst);
    if waiter != 0 && gettid() != waiter {
        keeping_errno(|| {
            // SAFETY: getpid has no arguments and cannot fail.
            let own = unsafe { libc::getpid() };
            // SAFETY: tgkill has no memory arguments; the waiter is a thread of this process
            // (it waits as long as the handler is installed). Async-signal-safe: a system
            // call.
            unsafe { libc::syscall(libc::SYS_tgkill, own, waiter as libc::c_long, libc::SIGCONT) };
        });
    }
}

/// Counts this process's `SIGCONT`s ([`continues`]) with a handler that does not restart
/// an interrupted system call: a [`wait_job`] on the calling thread returns
/// [`Waited::Interrupted`], whichever thread the kernel hands the signal to. (The
/// continuing itself is the kernel's, handler or not.) Also installs the handler of the
/// signal [`kick_stale_wait`] sends.
pub fn count_continues() -> std::io::Result<()> {
    WAITER.store(gettid(), std::sync::atomic::Ordering::SeqCst);
    for (sig, handler) in [
        (libc::SIGCONT, continued as *const () as usize),
        (kick_signal(), kicked as *const () as usize),
    ] {
        // SAFETY: sigaction is plain data; all-zero is a valid value to fill in.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = handler;
        // SAFETY: installs a handler that adds to an atomic and makes two system calls
        // (`continued`) or does nothing (`kicked`); `act` is valid.
        if unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The continue count the waiter saw before the wait it is in, plus one; 0 outside a wait.
static WAITING_SINCE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The signal that interrupts a wait begun just before a continue (`record`'s own process
/// only: the program it runs gets the default disposition back at its exec).
fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 6
}

extern "C" fn kicked(_: libc::c_int) {}

/// [`wait_job`] on the thread that called [`count_continues`], unless the process was
/// continued since the count `seen`: then [`Waited::Interrupted`] at once. A continue that
/// comes between the check and the wait's start (its handler runs before the wait blocks,
/// so it cannot interrupt it) is made good by [`kick_stale_wait`], which another thread calls
/// every few milliseconds: without it, the wait would block until the program ended, and a
/// program stopped for its terminal never ends (`fg` hung so, once, in a test run beside two
/// busy loops).
pub fn wait_job_unless_continued(
    pid: u32,
    seen: u32,
    before_reap: Option<&mut dyn FnMut()>,
) -> std::io::Result<Waited> {
    use std::sync::atomic::Ordering::SeqCst;
    WAITING_SINCE.store(seen.wrapping_add(1).max(1), SeqCst);
    let waited = match continues() == seen {
        true => wait_job(pid, before_reap),
        false => Ok(Waited::Interrupted),
    };
    WAITING_SINCE.store(0, SeqCst);
    waited
}

/// Interrupts the waiter's [`wait_job_unless_continued`] if it began before the last
/// continue (with a signal whose handler does nothing and does not restart the wait).
/// Called every few milliseconds by a thread other than the waiter.
pub fn kick_stale_wait() {
    use std::sync::atomic::Ordering::SeqCst;
    let since = WAITING_SINCE.load(SeqCst);
    let waiter = WAITER.load(SeqCst);
    if since == 0 || waiter == 0 || continues().wrapping_add(1).max(1) == since {
        return;
    }
    // SAFETY: getpid has no arguments and cannot fail.
    let own = unsafe { libc::getpid() };
    // SAFETY: tgkill has no memory arguments; the waiter is a thread of this process that
    // installed the signal's handler (`count_continues`).
    unsafe { libc::syscall(libc::SYS_tgkill, own, waiter as libc::c_long, kick_signal()) };
}

/// How many `SIGCONT`s came since [`count_continues`].
pub fn continues() -> u32 {
    CONTINUED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Stops this process as a job's process stops: by `sig` where that is one of the stop
/// signals a terminal or job control sends, by `SIGSTOP` otherwise. Returns once it is
/// continued, or at once where the signal does not stop it (ignored since this process
/// started; in an orphaned process group the kernel discards all but `SIGSTOP`).
pub fn stop_as(sig: i32) {
    let sig = match sig {
        libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => sig,
        _ => libc::SIGSTOP,
    };
    // SAFETY: getpid has no arguments and cannot fail.
    let own = unsafe { libc::getpid() };
    // SAFETY: kill has no memory arguments; a stop signal's default action stops the
    // process until a SIGCONT.
    unsafe { libc::kill(own, sig) };
}

/// Sends `sig` to process group `pgid`.
pub fn signal_group(pgid: u32, sig: i32) -> std::io::Result<()> {
    // SAFETY: killpg has no memory arguments; a wrong group or signal only fails.
    if unsafe { libc::killpg(pgid as libc::pid_t, sig) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `sig` to process `pid`.
pub fn signal_process(pid: u32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill has no memory arguments; a wrong pid or signal only fails.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// True for the signals that stop a background process for using its terminal (`SIGTTIN`,
/// `SIGTTOU`).
pub fn for_the_terminal(sig: i32) -> bool {
    sig == libc::SIGTTIN || sig == libc::SIGTTOU
}

/// Continues the stopped processes of group `pgid` (`SIGCONT`).
pub fn continue_group(pgid: u32) -> std::io::Result<()> {
    signal_group(pgid, libc::SIGCONT)
}
