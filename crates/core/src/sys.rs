//! Thin wrappers over the few libc calls the scope and report code needs.
//!
//! DESIGN.md keeps `unsafe` out of the scope, report and capture modules; the calls they need
//! (the reference clocks, the OS thread id, `atexit`) are wrapped here once, each with the reason
//! it is sound, so those modules stay free of `unsafe`.

/// Reads `clock` with `clock_gettime`, in nanoseconds; `None` if the clock does not exist
/// (a CPU clock of a thread that has exited).
pub(crate) fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; clock_gettime
    // writes only into it and is async-signal-safe.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64),
    )
}

/// `CLOCK_MONOTONIC` in nanoseconds: the reference clock the CPU counter is calibrated and
/// checked against.
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    // Never fails for this clock on Linux.
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// `CLOCK_BOOTTIME` in nanoseconds (counts suspend too); used with the process start time from
/// `/proc/self/stat`, which is measured on the same clock.
pub(crate) fn boottime_ns() -> u64 {
    // Never fails for this clock on Linux.
    clock_ns(libc::CLOCK_BOOTTIME).unwrap_or(0)
}

/// The kernel's id of the calling thread (what `top -H`, `perf` and `gdb` show).
pub(crate) fn gettid() -> u64 {
    // SAFETY: SYS_gettid takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as u64
}

/// Clock ticks per second of the `/proc` time fields (`_SC_CLK_TCK`).
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Registers `f` to run at process exit (after `main` returns, on `std::process::exit`, and
/// after a panic in `main`, which returns through the runtime to `exit`). Returns true if and
/// only if the registration succeeded.
pub(crate) fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain `extern "C" fn()` with 'static lifetime, as atexit requires; the
    // callee catches every panic so nothing unwinds into libc.
    unsafe { libc::atexit(f) == 0 }
}

/// The process's start time as `CLOCK_BOOTTIME` nanoseconds, from field 22 of
/// `/proc/self/stat` (see proc(5)); `None` where `/proc` is unavailable or unparsable.
pub(crate) fn process_start_boottime_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields after the name start at field 3; starttime is field 22.
    let start_ticks: u64 = after.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let hz = clock_ticks_per_second();
    Some(start_ticks.saturating_mul(1_000_000_000) / hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b > a + 1_000_000, "{a} then {b}");
    }

    #[test]
    fn process_start_is_in_the_past() {
        let start = process_start_boottime_ns().expect("/proc/self/stat readable on Linux");
        assert!(start <= boottime_ns());
    }

    #[test]
    fn gettid_of_main_test_thread_differs_from_spawned() {
        let here = gettid();
        let there = std::thread::spawn(gettid).join().unwrap();
        assert_ne!(here, there);
    }
}
