//! The one sampler a process runs through this library: started by `TICKSCOPE_CPUPROFILE`
//! (LD_PRELOAD) or by `tickscope_sampler_start`, written by `stop`, `flush`, at exit or on a
//! signal. Everything here runs on ordinary threads, never in a signal handler.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use ts::sampler::{ErrorKind, Mode, Sampler, Unwind};

use crate::{Code, Failure};

/// The running sampler and where its profile goes.
struct Active {
    sampler: Sampler,
    path: PathBuf,
    line_if_unsampled: bool,
}

static ACTIVE: Mutex<Option<Active>> = Mutex::new(None);
/// The process that started the sampler: a fork child (which inherits the state but no
/// timers) writes nothing, and never waits on a lock the parent held at the fork.
static OWNER: AtomicU32 = AtomicU32::new(0);

/// The lock, unless it stays taken for `wait` (a thread stopped at the fork held it, or a
/// stop is already writing): the exit path must never hang.
fn lock(wait: Duration) -> Option<MutexGuard<'static, Option<Active>>> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match ACTIVE.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// In a fork child that starts a sampler of its own: the parent's, copied by the fork, is
/// forgotten (it has no timers or threads here). False, nothing done, if the lock was held
/// at the fork by a thread the child does not have (it would never be released).
pub(crate) fn forget_the_parents() -> bool {
    let mut active = match ACTIVE.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return false,
    };
    if let Some(old) = active.take() {
        std::mem::forget(old);
    }
    // Nor is a parent's thread that was stopping it.
    STOPPING.store(false, SeqCst);
    true
}

/// The file of process `pid` among those of a run profiling into `base`: `<base>.<pid>`
/// (a program exec'd by the profiled one, or with `TICKSCOPE_CPUPROFILE_FORKS=1` a fork
/// child).
pub(crate) fn file_of(base: &Path, pid: u32) -> PathBuf {
    let mut name = base.as_os_str().to_os_string();
    name.push(format!(".{pid}"));
    PathBuf::from(name)
}

/// Makes `pid` the process whose sampler this is before it starts (a deferred start, see
/// `ffi::deferred`): its fork children say they ran unprofiled, as with a sampler running.
pub(crate) fn claim(pid: u32) {
    OWNER.store(pid, SeqCst);
}

fn owned_here() -> bool {
    OWNER.load(SeqCst) == std::process::id()
}

/// How a sampler is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub hz: u32,
    pub mode: Mode,
    pub path: PathBuf,
    /// `None`: `SIGPROF`.
    pub signal: Option<libc::c_int>,
    /// The profile accounts for the process's CPU time from its start (a profile started
    /// when the library loads), not from the call.
    pub whole_process: bool,
    /// How stacks are walked: by the unwind tables unless the environment asks for frame
    /// pointers (a program's own code is rarely built with them).
    pub unwind: Unwind,
    /// A program exec'd under `record` (CPU time): if it ends before its first sample, it
    /// writes a line for `record` ([`tickscope_fmt::protocol::marks::UNSAMPLED`]) rather than a file.
    pub line_if_unsampled: bool,
}

/// Starts the process's sampler.
pub(crate) fn start(s: &Settings) -> Result<(), Failure> {
    if s.path.as_os_str().is_empty() {
        return Err(Failure::new(Code::Invalid, "the profile path is empty"));
    }
    let mut active = lock(Duration::from_secs(5))
        .ok_or_else(|| Failure::new(Code::State, "another thread is stopping the sampler"))?;
    if active.is_some() && owned_here() {
        return Err(Failure::new(
            Code::State,
            "a sampler is already running in this process",
        ));
    }
    // Inherited across fork: the parent's, with no timers here. Forget it.
    if let Some(old) = active.take() {
        std::mem::forget(old);
    }
    // The sampler's clock, scopes and capture, in a static link too (see the function).
    ts::sampler_library::install();
    let mut b = Sampler::builder()
        .frequency(s.hz)
        .mode(s.mode)
        .whole_process(s.whole_process)
        .unwind(s.unwind)
        .unsampled_said(s.line_if_unsampled);
    if let Some(sig) = s.signal {
        b = b.signal(sig);
    }
    let sampler = b.start().map_err(|e| {
        let code = match e.kind() {
            ErrorKind::AlreadyRunning => Code::State,
            ErrorKind::BadFrequency => Code::Invalid,
            ErrorKind::Io => Code::Io,
            _ => Code::Unsupported,
        };
        Failure::new(code, format!("cannot start the sampler: {e}"))
    })?;
    OWNER.store(std::process::id(), SeqCst);
    *active = Some(Active {
        sampler,
        path: s.path.clone(),
        line_if_unsampled: s.line_if_unsampled,
    });
    Ok(())
}

/// What a written profile holds, for the line that reports it.
pub(crate) struct Written {
    pub path: PathBuf,
    pub samples: u64,
    pub total_ns: u64,
    pub mode: Mode,
    /// False: no sample, said to `record` by a line instead of a file.
    pub file: bool,
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, time) = match self.mode {
            Mode::Cpu => ("CPU", "CPU"),
            Mode::Wall => ("wall-clock", "wall"),
        };
        if !self.file {
            return write!(
                f,
                "no sample taken ({} of CPU time, all before the first sample): said to tickscope record, no file written to {}",
                tickscope_fmt::duration(self.total_ns as f64),
                self.path.display()
            );
        }
        write!(
            f,
            "{kind} profile written to {} ({} of {time} time in {} samples)",
            self.path.display(),
            tickscope_fmt::duration(self.total_ns as f64),
            self.samples
        )
    }
}

fn write(profile: &ts::sampler::Profile, path: &Path) -> Result<Written, Failure> {
    profile
        .write_pprof(path)
        .map_err(|e| Failure::new(Code::Io, e.to_string()))?;
    Ok(Written {
        path: path.to_path_buf(),
        samples: profile.samples(),
        total_ns: profile.total_ns(),
        mode: profile.mode(),
        file: true,
    })
}

/// For `record`, instead of a profile file: the process's id, the CPU time its profile
/// would have held (`total_ns`) and its name (`PR_GET_NAME`, as the kernel has it after the
/// exec).
fn say_unsampled(total_ns: u64, path: &Path) -> Written {
    // In the one form every line for `record` about a process has (the first version of
    // this one lacked the children's time, and `record` held them twice).
    let name = ts::sampler::host::process_name();
    crate::ffi::record_line(
        tickscope_fmt::protocol::marks::UNSAMPLED,
        total_ns,
        name.as_bytes(),
    );
    unsampled(total_ns, path)
}

/// What a profile that was never written holds: no sample, `total_ns` of CPU time.
fn unsampled(total_ns: u64, path: &Path) -> Written {
    Written {
        path: path.to_path_buf(),
        samples: 0,
        total_ns,
        mode: Mode::Cpu,
        file: false,
    }
}

/// Stops the sampler and writes its profile; `exiting` when the process is about to end (see
/// `Sampler::stop_at_exit`).
pub(crate) fn stop(exiting: bool) -> Result<Written, Failure> {
    if !owned_here() {
        return Err(Failure::new(
            Code::State,
            "no sampler is running in this process",
        ));
    }
    // A start deferred until after the program ended: none now, and the line for `record`
    // says the program ended before its first sample. One being made is waited for.
    if exiting {
        match crate::ffi::end_pending_start() {
            // The line is written already (async-signal-safe, as `_exit` needs it).
            crate::ffi::Start::Ended => {
                let total_ns = tickscope_sys::clock::process_cpu_ns().unwrap_or(0);
                let path = crate::ffi::deferred_path().unwrap_or(Path::new(""));
                return Ok(unsampled(total_ns, path));
            }
            crate::ffi::Start::Starting => crate::ffi::wait_started(),
            crate::ffi::Start::NotPending => {}
        }
    }
    let mut active = lock(Duration::from_secs(5))
        .ok_or_else(|| Failure::new(Code::State, "another thread is stopping the sampler"))?;
    let a = active
        .take()
        .ok_or_else(|| Failure::new(Code::State, "no sampler is running"))?;
    STOPPING.store(true, SeqCst);
    drop(active);
    // Cleared however this ends (a panic included): a request left for this thread is
    // answered by `finish` after it.
    struct Stopped;
    impl Drop for Stopped {
        fn drop(&mut self) {
            STOPPING.store(false, SeqCst);
        }
    }
    let _stopped = Stopped;
    // Under `record`, a program it exec'd that ended before its first sample: a line, not
    // a file (creating, renaming and reading one per command cost a shell script's commands
    // more than the rest of the profiler did). Nothing sampled, the sampler gives the CPU
    // time without building a profile.
    let profile = match (exiting, a.line_if_unsampled) {
        (true, true) => match a.sampler.stop_at_exit_unless_unsampled() {
            Ok(p) => p,
            Err(total_ns) => return Ok(say_unsampled(total_ns, &a.path)),
        },
        (true, false) => a.sampler.stop_at_exit(),
        (false, _) => a.sampler.stop(),
    };
    // Sampled, but nothing kept (every sample lost, say): a line still, with the CPU time
    // so far (the profile's building included: no line follows for it).
    if exiting && a.line_if_unsampled && profile.samples() == 0 && profile.mode() == Mode::Cpu {
        let total_ns = tickscope_sys::clock::process_cpu_ns().unwrap_or(0);
        return Ok(say_unsampled(total_ns.max(profile.total_ns()), &a.path));
    }
    write(&profile, &a.path)
}

/// A thread is stopping the sampler and writing its profile ([`stop`]).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// True while a thread stops the sampler and writes its profile: a signal's or `_exit`'s
/// request that finds the sampler gone meanwhile is left for that thread to answer.
pub(crate) fn stopping() -> bool {
    STOPPING.load(SeqCst)
}

/// Writes everything sampled so far; sampling goes on.
pub(crate) fn flush() -> Result<Written, Failure> {
    if !owned_here() {
        return Err(Failure::new(
            Code::State,
            "no sampler is running in this process",
        ));
    }
    let active = lock(Duration::from_secs(5))
        .ok_or_else(|| Failure::new(Code::State, "another thread is stopping the sampler"))?;
    let a = active
        .as_ref()
        .ok_or_else(|| Failure::new(Code::State, "no sampler is running"))?;
    let profile = a.sampler.snapshot();
    write(&profile, &a.path)
}

/// At exit or on a signal: stops a sampler this process started and writes its profile,
/// saying so on stderr. A fork child writes none (see the crate docs) unless it samples too
/// (`TICKSCOPE_CPUPROFILE_FORKS=1`); under `record` it says it ran unprofiled
/// ([`report_fork_child`]).
pub(crate) fn finish(why: &str) {
    let _ = std::panic::catch_unwind(|| finish_stopping(why));
    // A signal or `_exit` that came while this stopped the sampler, too late for the drain
    // thread: answered now that the profile is written.
    crate::ffi::answer_unanswered();
}

/// [`finish`] without answering a request; false if the sampler was already stopped or
/// being stopped by another thread.
pub(crate) fn finish_stopping(why: &str) -> bool {
    if !owned_here() {
        crate::ffi::report_fork_child();
        return true;
    }
    let quiet =
        tickscope_sys::env::env_var(tickscope_fmt::protocol::env::QUIET).is_some_and(|v| v == "1");
    match stop(true) {
        Ok(w) => {
            // Under `record`, what writing the profile cost, which no profile can hold (a
            // line said instead of a file holds the CPU time up to it).
            let recorded = tickscope_sys::env::env_var(tickscope_fmt::protocol::env::MESSAGES)
                .is_some_and(|v| !v.is_empty());
            // Its CPU time now, and its children's, with which `record` tells, from the
            // figure its parent gets as it reaps it, how much its end took after this line
            // (the kernel unmapping its memory). In the one form of every line for `record`
            // about a process.
            if let (true, true, Mode::Cpu, Some(cpu)) = (
                recorded,
                w.file,
                w.mode,
                tickscope_sys::clock::process_cpu_ns(),
            ) {
                let mark = format!(
                    "{}{} ",
                    tickscope_fmt::protocol::marks::EXIT_CPU,
                    cpu.saturating_sub(w.total_ns)
                );
                let name = ts::sampler::host::process_name();
                crate::ffi::record_line(&mark, cpu, name.as_bytes());
            }
            if !quiet {
                tickscope_sys::stderr::say(&format!("tickscope: {w}"));
            }
            true
        }
        // Stopped by the program already, or another exit path is writing.
        Err(f) if f.code == Code::State => false,
        Err(f) => {
            tickscope_sys::stderr::say(&format!("tickscope: {why}: {}", f.message));
            // Under `record`: the cause of the missing profile, for it to give.
            let recorded = tickscope_sys::env::env_var(tickscope_fmt::protocol::env::MESSAGES)
                .is_some_and(|v| !v.is_empty());
            if recorded && f.code == Code::Io {
                let cpu = tickscope_sys::clock::process_cpu_ns().unwrap_or(0);
                let name = ts::sampler::host::process_name();
                crate::ffi::record_line(
                    tickscope_fmt::protocol::marks::WRITE_FAILED,
                    cpu,
                    name.as_bytes(),
                );
            }
            true
        }
    }
}

/// The process that started the sampler (0 before any): a process that has the sampler
/// but is not this one is a fork child that did not exec.
pub(crate) fn owner() -> u32 {
    OWNER.load(SeqCst)
}

/// The variable `name`, one of two words: `first`'s value when unset, empty or that word,
/// `second`'s for its word; anything else is reported (`warn`) and taken as `first`.
fn either<T>(
    var: &impl Fn(&str) -> Option<String>,
    warn: &mut dyn FnMut(String),
    name: &str,
    first: (&str, T),
    second: (&str, T),
) -> T {
    match var(name).as_deref().map(str::trim) {
        None | Some("") => first.1,
        Some(v) if v == first.0 => first.1,
        Some(v) if v == second.0 => second.1,
        Some(v) => {
            warn(format!(
                "{name}={v:?} is neither {} nor {}; using {}",
                first.0, second.0, first.0
            ));
            first.1
        }
    }
}

/// Reads `TICKSCOPE_CPUPROFILE` and its companions. `None` when it is not set; bad values are
/// reported (`warn`) and replaced by their defaults.
pub(crate) fn settings_from_env(
    var: impl Fn(&str) -> Option<String>,
    pid: u32,
    parent: u32,
    warn: &mut dyn FnMut(String),
) -> Option<(Settings, EnvExtras)> {
    let base = PathBuf::from(var(tickscope_fmt::protocol::env::PROFILE).filter(|p| !p.is_empty())?);
    // A program exec'd by the profiled one inherits the environment: it profiles into a file
    // of its own, `<path>.<pid>`, rather than overwrite the first one's.
    let root = var(tickscope_fmt::protocol::env::ROOT_PID).and_then(|p| p.parse::<u32>().ok());
    let descendant = matches!(root, Some(r) if r != pid);
    let path = match descendant {
        true => file_of(&base, pid),
        false => base.clone(),
    };
    let hz = match var(tickscope_fmt::protocol::env::FREQUENCY) {
        None => 100,
        Some(v) => match v.trim().parse::<u32>() {
            Ok(hz) if (1..=100_000).contains(&hz) => hz,
            _ => {
                warn(format!(
                    "{}={v:?} is not a rate from 1 to 100000 Hz; using 100",
                    tickscope_fmt::protocol::env::FREQUENCY
                ));
                100
            }
        },
    };
    let mode = either(
        &var,
        warn,
        tickscope_fmt::protocol::env::MODE,
        ("cpu", Mode::Cpu),
        ("wall", Mode::Wall),
    );
    let signal = match var(tickscope_fmt::protocol::env::SIGNAL) {
        None => Some(default_signal()),
        Some(v) => match parse_signal(&v) {
            Some(s) => Some(s),
            None => {
                warn(format!(
                    "{}={v:?} is not PROF, RTMIN+N or a signal number; using RTMIN+{}",
                    tickscope_fmt::protocol::env::SIGNAL,
                    DEFAULT_RT_OFFSET
                ));
                Some(default_signal())
            }
        },
    };
    let on_signals = either(
        &var,
        warn,
        tickscope_fmt::protocol::env::SIGNALS,
        ("0", false),
        ("1", true),
    );
    let forks = either(
        &var,
        warn,
        tickscope_fmt::protocol::env::FORKS,
        ("0", false),
        ("1", true),
    );
    let messages = var(tickscope_fmt::protocol::env::MESSAGES).is_some_and(|m| !m.is_empty());
    // The program `record` started (its child: the parent `record` named) and any program
    // that program execs in its place (the same process), in CPU mode.
    let outside = !descendant
        && mode == Mode::Cpu
        && var(tickscope_fmt::protocol::env::OUTSIDE)
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|record| record == parent);
    let unwind = either(
        &var,
        warn,
        tickscope_fmt::protocol::env::UNWIND,
        ("tables", Unwind::Tables),
        ("fp", Unwind::FramePointers),
    );
    Some((
        Settings {
            hz,
            mode,
            path,
            signal,
            whole_process: true,
            unwind,
            line_if_unsampled: descendant && mode == Mode::Cpu && messages,
        },
        EnvExtras {
            on_signals,
            root: !descendant,
            outside,
            forks: forks.then(|| ForkChildren {
                base,
                line_if_unsampled: mode == Mode::Cpu && messages && on_signals,
            }),
        },
    ))
}

/// With `TICKSCOPE_CPUPROFILE_FORKS=1`: how a fork child that does not exec profiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ForkChildren {
    /// `TICKSCOPE_CPUPROFILE`: a child writes `<base>.<pid>`, as a program exec'd does.
    pub base: PathBuf,
    /// Under `record`'s settings: a child that ends before its (deferred) start writes the
    /// line for `record`, as a program it execs does.
    pub line_if_unsampled: bool,
}

/// What the environment asks beyond the sampler's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EnvExtras {
    /// Write the profile on SIGINT and SIGTERM too.
    pub on_signals: bool,
    /// Sample fork children that do not exec too.
    pub forks: Option<ForkChildren>,
    /// This is the first profiled process (not one exec'd by it).
    pub root: bool,
    /// `TICKSCOPE_CPUPROFILE_OUTSIDE=PID` (`record` sets its own pid), and this is the
    /// program `record` started: `record` samples it from outside, through perf events on
    /// its threads (`tickscope::sampler::Attached`), so that it has no thread of
    /// tickscope's (a shell that forks for every command pays for any thread at each fork).
    pub outside: bool,
}

/// The default sampling signal under LD_PRELOAD is `SIGRTMIN+4`, not `SIGPROF`: an
/// unmodified program may use `SIGPROF` for itself (its own profiler, `setitimer`), and
/// must keep working.
const DEFAULT_RT_OFFSET: libc::c_int = 4;

pub(crate) fn default_signal() -> libc::c_int {
    libc::SIGRTMIN() + DEFAULT_RT_OFFSET
}

/// `PROF`, `SIGPROF`, `RTMIN+N`, `SIGRTMIN+N` or a number.
pub(crate) fn parse_signal(v: &str) -> Option<libc::c_int> {
    let v = v.trim();
    let v = v.strip_prefix("SIG").unwrap_or(v);
    let sig = if v.eq_ignore_ascii_case("PROF") {
        libc::SIGPROF
    } else if let Some(n) = v.strip_prefix("RTMIN") {
        let n = match n.strip_prefix('+') {
            Some(n) => n.parse::<libc::c_int>().ok()?,
            None if n.is_empty() => 0,
            None => return None,
        };
        libc::SIGRTMIN().checked_add(n)?
    } else {
        v.parse().ok()?
    };
    let bad = [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, libc::SIGBUS];
    (sig > 0 && sig <= libc::SIGRTMAX() && !bad.contains(&sig)).then_some(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)], pid: u32) -> (Option<(Settings, EnvExtras)>, Vec<String>) {
        let mut warnings = Vec::new();
        let got = settings_from_env(
            |k| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            },
            pid,
            1,
            &mut |w| warnings.push(w),
        );
        (got, warnings)
    }

    #[test]
    fn environment_defaults_and_bad_values() {
        assert_eq!(read(&[], 7).0, None);
        let (got, w) = read(&[("TICKSCOPE_CPUPROFILE", "out.pb.gz")], 7);
        let (s, x) = got.unwrap();
        assert!(w.is_empty());
        assert_eq!(
            (s.hz, s.mode, s.signal),
            (100, Mode::Cpu, Some(default_signal()))
        );
        assert_eq!(s.path, PathBuf::from("out.pb.gz"));
        assert_eq!(s.unwind, Unwind::Tables);
        assert_eq!(
            x,
            EnvExtras {
                on_signals: false,
                root: true,
                outside: false,
                forks: None,
            }
        );

        let (got, w) = read(
            &[
                ("TICKSCOPE_CPUPROFILE", "out.pb.gz"),
                ("TICKSCOPE_CPUPROFILE_FREQUENCY", "0"),
                ("TICKSCOPE_CPUPROFILE_MODE", "gpu"),
                ("TICKSCOPE_CPUPROFILE_SIGNAL", "KILL"),
                ("TICKSCOPE_CPUPROFILE_SIGNALS", "yes"),
                ("TICKSCOPE_CPUPROFILE_UNWIND", "dwarf"),
                ("TICKSCOPE_CPUPROFILE_FORKS", "all"),
            ],
            7,
        );
        let (s, x) = got.unwrap();
        assert_eq!(
            (s.hz, s.mode, s.signal, s.unwind),
            (100, Mode::Cpu, Some(default_signal()), Unwind::Tables)
        );
        assert!(!x.on_signals && x.forks.is_none());
        assert_eq!(w.len(), 6, "{w:?}");
        assert!(w[4].contains("TICKSCOPE_CPUPROFILE_FORKS=\"all\""), "{w:?}");
        assert!(
            w[5].contains("TICKSCOPE_CPUPROFILE_UNWIND=\"dwarf\""),
            "{w:?}"
        );
        assert!(
            w[0].contains("TICKSCOPE_CPUPROFILE_FREQUENCY=\"0\""),
            "{w:?}"
        );

        let (got, w) = read(
            &[
                ("TICKSCOPE_CPUPROFILE", "p.pb.gz"),
                ("TICKSCOPE_CPUPROFILE_FREQUENCY", "1000"),
                ("TICKSCOPE_CPUPROFILE_MODE", "wall"),
                ("TICKSCOPE_CPUPROFILE_SIGNAL", "PROF"),
                ("TICKSCOPE_CPUPROFILE_SIGNALS", "1"),
                ("TICKSCOPE_CPUPROFILE_PID", "5"),
                ("TICKSCOPE_CPUPROFILE_UNWIND", "fp"),
                ("TICKSCOPE_CPUPROFILE_FORKS", "1"),
            ],
            7,
        );
        let (s, x) = got.unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            (s.hz, s.mode, s.signal, s.unwind),
            (1000, Mode::Wall, Some(libc::SIGPROF), Unwind::FramePointers)
        );
        // Exec'd by process 5: a file of its own.
        assert_eq!(s.path, PathBuf::from("p.pb.gz.7"));
        assert_eq!(
            x,
            EnvExtras {
                on_signals: true,
                root: false,
                outside: false,
                // A fork child writes `p.pb.gz.<its pid>`; wall time: no line for `record`.
                forks: Some(ForkChildren {
                    base: PathBuf::from("p.pb.gz"),
                    line_if_unsampled: false,
                }),
            }
        );
        let (got, _) = read(
            &[
                ("TICKSCOPE_CPUPROFILE", "p.pb.gz"),
                ("TICKSCOPE_CPUPROFILE_PID", "7"),
            ],
            7,
        );
        assert_eq!(got.unwrap().0.path, PathBuf::from("p.pb.gz"));
    }

    #[test]
    fn sampled_from_outside_only_as_records_own_cpu_child() {
        let outside = |vars: &[(&str, &str)]| {
            let mut all = vec![("TICKSCOPE_CPUPROFILE", "p.pb.gz")];
            all.extend_from_slice(vars);
            read(&all, 7).0.unwrap().1.outside
        };
        // The parent (1, in `read`) is the `record` named.
        assert!(outside(&[("TICKSCOPE_CPUPROFILE_OUTSIDE", "1")]));
        // ... and an exec'd image of that program (the same pid) as well.
        assert!(outside(&[
            ("TICKSCOPE_CPUPROFILE_OUTSIDE", "1"),
            ("TICKSCOPE_CPUPROFILE_PID", "7")
        ]));
        // Not a program it execs, another parent, wall time, or an unreadable value.
        assert!(!outside(&[
            ("TICKSCOPE_CPUPROFILE_OUTSIDE", "1"),
            ("TICKSCOPE_CPUPROFILE_PID", "5")
        ]));
        assert!(!outside(&[("TICKSCOPE_CPUPROFILE_OUTSIDE", "2")]));
        assert!(!outside(&[
            ("TICKSCOPE_CPUPROFILE_OUTSIDE", "1"),
            ("TICKSCOPE_CPUPROFILE_MODE", "wall")
        ]));
        assert!(!outside(&[("TICKSCOPE_CPUPROFILE_OUTSIDE", "x")]));
        assert!(!outside(&[]));
    }

    #[test]
    fn signal_names() {
        assert_eq!(parse_signal("PROF"), Some(libc::SIGPROF));
        assert_eq!(parse_signal("SIGPROF"), Some(libc::SIGPROF));
        assert_eq!(parse_signal("RTMIN+3"), Some(libc::SIGRTMIN() + 3));
        assert_eq!(parse_signal("SIGRTMIN"), Some(libc::SIGRTMIN()));
        assert_eq!(parse_signal("12"), Some(12));
        for bad in ["KILL", "9", "0", "-3", "RTMIN+99", "RTMINX", ""] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
    }
}
