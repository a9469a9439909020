//! The process's threads as the kernel lists them (`/proc/self/task`, `tgkill`), their
//! names, and the descriptor limit the perf source budgets against: what the poller asks the
//! system about threads, apart from arming their timers (`timer.rs`).

use std::io;

/// The process's soft limit on open files (`RLIMIT_NOFILE`); 1024, the usual default, if it
/// cannot be read.
pub fn open_files_limit() -> usize {
    // SAFETY: rlimit is plain data; all-zero is a valid value to fill in.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes into `lim`, valid for the call.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } {
        0 => usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX),
        _ => 1024,
    }
}

/// The kernel ids of the process's threads (`/proc/self/task`).
/// Its descriptor is never 0-2 (the program's, even while they are closed: the drain thread
/// reads this every poll, while the program may be opening its standard streams).
pub fn list_threads(into: &mut Vec<i32>) -> io::Result<()> {
    list_threads_of(None, into)
}

/// `/proc/self`, or `/proc/PID` for another process (see `sampler::attach`).
pub fn proc_dir(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("/proc/{pid}"),
        None => "/proc/self".to_string(),
    }
}

/// [`list_threads`] of process `pid` (`None`: this one).
pub fn list_threads_of(pid: Option<u32>, into: &mut Vec<i32>) -> io::Result<()> {
    use std::os::fd::IntoRawFd;
    into.clear();
    let fd = crate::fd::open_read(format!("{}/task", proc_dir(pid)).as_ref())?.into_raw_fd();
    // SAFETY: `fd` is an open directory descriptor we own; fdopendir takes it over (closed
    // by closedir below), or fails and leaves it to us.
    let dir = unsafe { libc::fdopendir(fd) };
    if dir.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so the descriptor is still ours to close.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    loop {
        // SAFETY: `dir` is a live DIR stream only this thread uses.
        let ent = unsafe { libc::readdir64(dir) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir64 returned an entry valid until the next call on `dir`.
        let raw = unsafe { (*ent).d_name.as_ptr() };
        // SAFETY: the entry's name is NUL-terminated and lives as long as the entry.
        let name = unsafe { std::ffi::CStr::from_ptr(raw) };
        if let Some(tid) = name.to_str().ok().and_then(|s| s.parse().ok()) {
            into.push(tid);
        }
    }
    // SAFETY: closes the stream (and its descriptor) once.
    unsafe { libc::closedir(dir) };
    into.sort_unstable();
    Ok(())
}

/// Returns true if and only if thread `tid` of this process still exists. A listing of
/// `/proc/self/task` can skip live threads while others start and exit around it (it is read
/// in several `getdents` calls, positioned by index); this asks the kernel about one thread.
pub fn thread_alive(tid: i32) -> bool {
    thread_alive_of(std::process::id(), tid)
}

/// [`thread_alive`] for a thread of process `pid`.
pub fn thread_alive_of(pid: u32, tid: i32) -> bool {
    let pid = pid as libc::pid_t;
    // SAFETY: tgkill with signal 0 sends nothing; it only checks that the thread exists in
    // this thread group.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Whether thread `tid` blocks signal `sig` now (`SigBlk` of `/proc/self/task/TID/status`).
pub fn signal_blocked(tid: i32, sig: libc::c_int) -> bool {
    use std::io::Read;
    let mut s = String::new();
    let read = crate::fd::open_read(format!("/proc/self/task/{tid}/status").as_ref())
        .and_then(|mut f| f.read_to_string(&mut s));
    if read.is_err() || !(1..=64).contains(&sig) {
        return false;
    }
    s.lines()
        .find_map(|l| l.strip_prefix("SigBlk:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

/// Thread `tid`'s user and system CPU time so far, in clock ticks (`/proc/self/task/TID/stat`
/// fields 14 and 15: the kernel's split of its CPU time, sampled at its ticks).
pub fn thread_times(tid: i32) -> Option<(u64, u64)> {
    thread_times_of(None, tid)
}

/// [`thread_times`] of a thread of process `pid` (`None`: this one).
pub fn thread_times_of(pid: Option<u32>, tid: i32) -> Option<(u64, u64)> {
    let stat = read_stat(&format!("{}/task/{tid}/stat", proc_dir(pid)))?;
    Some((stat.field(14)?, stat.field(15)?))
}

/// A `stat` file of `/proc` (a process's or a thread's): its name and the fields after it.
pub struct Stat {
    /// Field 2, without its parentheses.
    pub name: String,
    /// Field 3 on.
    rest: Vec<String>,
}

impl Stat {
    /// Field `n` (1-based, as proc(5) numbers them; 3 and on), as a number.
    pub fn field<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.rest.get(n.checked_sub(3)?)?.parse().ok()
    }

    /// Dead, its parent yet to reap it (a zombie keeps its directory until then).
    pub fn zombie(&self) -> bool {
        matches!(self.rest.first().map(String::as_str), Some("Z" | "X" | "x"))
    }
}

/// The children of process `pid`, each thread's (`/proc/PID/task/TID/children`: a process
/// is listed under the thread that forked it), in no order; empty where the process is gone
/// or the kernel lacks the file (`CONFIG_PROC_CHILDREN`).
pub fn children_of(pid: u32) -> Vec<u32> {
    use std::io::Read;
    let mut tids = Vec::new();
    let mut out = Vec::new();
    if list_threads_of(Some(pid), &mut tids).is_err() {
        return out;
    }
    let mut s = String::new();
    for tid in tids {
        s.clear();
        let path = format!("/proc/{pid}/task/{tid}/children");
        if let Ok(mut f) = crate::fd::open_read(path.as_ref()) {
            if f.read_to_string(&mut s).is_ok() {
                out.extend(
                    s.split_ascii_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// What tells a process that forked and did not exec from one that exec'd: the start of its
/// code and of its stack (`/proc/PID/stat` fields 26 and 28). A fork child has its parent's
/// (the same image, the same stack); an exec lays out a new image, its stack placed at
/// random (ASLR). `None` for a process gone, a zombie (no image), or one whose figures the
/// kernel hides from this process (another user's: it shows zeros).
pub fn image_mark(pid: u32) -> Option<(u64, u64)> {
    let stat = process_stat(pid)?;
    let mark = (stat.field::<u64>(26)?, stat.field::<u64>(28)?);
    (!stat.zombie() && mark.0 > 1 && mark.1 > 1).then_some(mark)
}

/// `/proc/PID/stat` of process `pid`.
pub fn process_stat(pid: u32) -> Option<Stat> {
    read_stat(&format!("/proc/{pid}/stat"))
}

fn read_stat(path: &str) -> Option<Stat> {
    use std::io::Read;
    let mut s = String::new();
    crate::fd::open_read(path.as_ref())
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    // The name (field 2) may hold spaces and parentheses: it runs from the first '(' to the
    // last ')', and the fields after it follow, from field 3 (the state) on.
    let end = s.rfind(')')?;
    Some(Stat {
        name: s[s.find('(')? + 1..end].to_string(),
        rest: s[end + 1..]
            .split_ascii_whitespace()
            .map(str::to_string)
            .collect(),
    })
}

/// Thread `tid`'s name (`/proc/self/task/<tid>/comm`, read through a descriptor above 2).
pub fn thread_name(tid: i32) -> Option<String> {
    // The calling thread's own: asked of the kernel, no file opened (the start's poll names
    // the thread that starts the sampler this way).
    if tid as u64 == crate::thread::gettid() {
        return Some(crate::thread::name_text(&crate::thread::own_name()));
    }
    thread_name_of(None, tid)
}

/// [`thread_name`] of a thread of process `pid` (`None`: this one), from its `comm` file.
pub fn thread_name_of(pid: Option<u32>, tid: i32) -> Option<String> {
    use std::io::Read;
    let mut s = String::new();
    crate::fd::open_read(format!("{}/task/{tid}/comm", proc_dir(pid)).as_ref())
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    Some(s.trim_end_matches('\n').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fork child that has not exec'd has its parent's image mark; one that exec'd has
    /// another; both are listed among this process's children.
    #[test]
    fn a_fork_child_has_its_parents_image_and_an_exec_changes_it() {
        let own = image_mark(std::process::id()).expect("this process's own image");
        // SAFETY: the child only calls async-signal-safe functions (pause, _exit) before it
        // is killed below.
        let forked = unsafe { libc::fork() };
        if forked == 0 {
            loop {
                // SAFETY: async-signal-safe; the child waits to be killed.
                unsafe { libc::pause() };
            }
        }
        assert!(forked > 0, "fork: {}", io::Error::last_os_error());
        let mut exec = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let (forked, execd) = (forked as u32, exec.id());
        // The exec'd child is past its exec once its mark differs from ours: poll. (`spawn`
        // returns at the exec's point of no return, before the kernel has laid out the new
        // image: its code's start reads 0 for a moment, no mark.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while image_mark(execd).is_none_or(|m| m == own) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let children = children_of(std::process::id());
        let marks = (image_mark(forked), image_mark(execd));
        // SAFETY: kill has no memory arguments; `forked` is our child.
        unsafe { libc::kill(forked as libc::pid_t, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: reaps our own child into a valid local.
        unsafe { libc::waitpid(forked as libc::pid_t, &mut status, 0) };
        let _ = exec.kill();
        let _ = exec.wait();
        assert!(
            children.contains(&forked) && children.contains(&execd),
            "{children:?}"
        );
        assert_eq!(marks.0, Some(own));
        assert!(marks.1.is_some_and(|m| m != own), "{marks:?} {own:?}");
        // Gone: no mark.
        assert_eq!(image_mark(forked), None);
    }
}
