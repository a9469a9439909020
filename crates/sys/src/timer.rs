//! POSIX timers that signal one thread (`timer_create` with `SIGEV_THREAD_ID`), and the
//! process-wide profiling timer (`setitimer(ITIMER_PROF)`).

use std::io;

/// A POSIX timer, created by [`Timer::create`], deleted by [`Timer::delete`] (not on drop:
/// a timer left at the process's exit costs nothing).
#[derive(Debug)]
pub struct Timer(libc::timer_t);

// SAFETY: a timer_t is a kernel timer id (an integer in a pointer); the process owns it, not
// the thread that created it, so any thread may set or delete it.
unsafe impl Send for Timer {}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

impl Timer {
    /// A disarmed timer on `clock` that sends `signal` to thread `tid`, with the thread id
    /// as the signal's value (`si_value.sival_ptr`): the handler learns the thread without
    /// a `gettid` call.
    pub fn create(clock: libc::clockid_t, tid: i32, signal: libc::c_int) -> io::Result<Timer> {
        // SAFETY: sigevent is plain data; all-zero is a valid value to fill in.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = signal;
        sev.sigev_notify_thread_id = tid;
        sev.sigev_value = libc::sigval {
            sival_ptr: tid as usize as *mut libc::c_void,
        };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `sev` and `timer` are valid for the call; the kernel copies `sev`.
        if unsafe { libc::timer_create(clock, &mut sev, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Timer(timer))
    }

    /// Arms it: first expiry `first_ns` from now (at least 1 ns), then every `period_ns`.
    pub fn set(&self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: timespec(period_ns),
            it_value: timespec(first_ns.max(1)),
        };
        // SAFETY: the timer is live (deleted only by `delete`, which takes it); `spec` is
        // valid; the old value is not wanted.
        match unsafe { libc::timer_settime(self.0, 0, &spec, std::ptr::null_mut()) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Stops and deletes it.
    pub fn delete(self) {
        // SAFETY: the id came from timer_create and is deleted once (moved in).
        unsafe { libc::timer_delete(self.0) };
    }
}

/// Starts (or, with 0, stops) the process-wide `ITIMER_PROF` timer: `SIGPROF` every
/// `period_ns` of the process's CPU time.
pub fn process_timer(period_ns: u64) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
        tv_usec: ((period_ns % 1_000_000_000) / 1000).max((period_ns > 0) as u64)
            as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: `it` is valid for the call; the old value is not wanted.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPU-time clock of thread `tid` of this process (MAKE_THREAD_CPUCLOCK in the kernel's
/// include/linux/posix-timers.h: `~tid << 3 | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED`).
pub fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    (!tid << 3) | 4 | 2
}

/// The CPU-time clock of process `pid`, all its threads (MAKE_PROCESS_CPUCLOCK(pid,
/// CPUCLOCK_SCHED)), which the kernel lets any process read (a thread's,
/// [`thread_cpu_clock`], only its own process's threads); a zombie's holds until it is
/// reaped.
pub fn process_cpu_clock(pid: u32) -> libc::clockid_t {
    (!(pid as libc::clockid_t) << 3) | 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timer on this thread's CPU clock signals this thread, with its id as the value.
    #[test]
    fn a_thread_cpu_timer_signals_its_thread() {
        use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
        static VALUE: AtomicI64 = AtomicI64::new(-1);
        extern "C" fn on(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
            // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
            let info = unsafe { &*info };
            // SAFETY: a timer's signal (SI_TIMER) carries the sigevent's value.
            let v = unsafe { info.si_value() }.sival_ptr as i64;
            VALUE.store(v, Relaxed);
        }
        let signal = libc::SIGRTMIN() + 3;
        // SAFETY: an all-zero sigaction is valid to fill in; the handler only stores.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: installs the handler above for a real-time signal no other test uses.
        let installed = unsafe { libc::sigaction(signal, &sa, std::ptr::null_mut()) };
        assert_eq!(installed, 0);
        let tid = crate::thread::gettid() as i32;
        let t = Timer::create(thread_cpu_clock(tid), tid, signal).expect("create");
        t.set(1_000_000, 1_000_000).expect("set");
        let start = std::time::Instant::now();
        while VALUE.load(Relaxed) < 0 && start.elapsed() < std::time::Duration::from_secs(60) {
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
        t.delete();
        assert_eq!(VALUE.load(Relaxed), tid as i64);
        assert!(crate::clock::clock_ns(thread_cpu_clock(tid)).is_some());
        let pid = std::process::id();
        assert!(crate::clock::clock_ns(process_cpu_clock(pid)).unwrap() > 0);
    }
}
