//! The kernel's clocks: monotonic and boot time, the process's start and wall time, and
//! the CPU time of the process and of its children.

/// Reads `clock` with `clock_gettime`, in nanoseconds; `None` if the clock does not exist
/// (a CPU clock of a thread that has exited).
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
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
///
/// Signal context (the sampler's handler may call it): the vDSO, no allocation, no lock.
#[inline]
pub fn monotonic_ns() -> u64 {
    // Never fails for this clock on Linux.
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// `CLOCK_BOOTTIME` in nanoseconds (counts suspend too); used with the process start time from
/// `/proc/self/stat`, which is measured on the same clock.
pub fn boottime_ns() -> u64 {
    // Never fails for this clock on Linux.
    clock_ns(libc::CLOCK_BOOTTIME).unwrap_or(0)
}

/// Clock ticks per second of the `/proc` time fields (`_SC_CLK_TCK`).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// The process's start time as `CLOCK_BOOTTIME` nanoseconds, from field 22 of
/// `/proc/self/stat` (see proc(5)); `None` where `/proc` is unavailable or unparsable.
pub fn process_start_boottime_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields after the name start at field 3; starttime is field 22.
    let start_ticks: u64 = after.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let hz = clock_ticks_per_second();
    Some(start_ticks.saturating_mul(1_000_000_000) / hz)
}

/// The program's wall time so far: since its `exec` (see `LOAD_NS`); else (in a fork
/// child, whose process began at the fork, or where nothing recorded the load) since the
/// process started per `/proc/self/stat` (10 ms resolution); else since tickscope's first use.
pub fn process_wall_ns() -> u64 {
    let loaded = LOAD_NS.load(std::sync::atomic::Ordering::Relaxed);
    if loaded != 0 && LOAD_PID.load(std::sync::atomic::Ordering::Relaxed) == std::process::id() {
        return monotonic_ns().saturating_sub(loaded);
    }
    match process_start_boottime_ns() {
        Some(start) => boottime_ns().saturating_sub(start),
        None => monotonic_ns().saturating_sub(first_use_ns()),
    }
}

/// When tickscope was first used (the first call), for [`process_wall_ns`]'s fallback.
pub fn first_use_ns() -> u64 {
    static FIRST_USE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *FIRST_USE.get_or_init(monotonic_ns)
}

/// `CLOCK_MONOTONIC` when the program began, at its `exec`: read by an `.init_array` entry
/// (which runs after `exec` and before `main`), less the CPU time the process used until then
/// (the kernel's `exec` and the dynamic loader: one thread that does not wait, 0.3-1 ms). The
/// kernel's process start time is the *fork*, which for a program started by `cargo run` (it
/// `exec`s the program) would include the whole build. Its entry has a
/// priority (`.init_array.00098`: the linkers run those first, lowest first, std's own
/// `.00099` next), so that it comes before the constructors of the object it is linked into:
/// libtickscope's starts the sampler, which takes a millisecond, and a profile that spans
/// the process from its load (`sampler::parts`) would otherwise begin after it.
static LOAD_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The process [`LOAD_NS`] is of: a fork child has its parent's.
static LOAD_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[used]
#[cfg_attr(target_os = "linux", link_section = ".init_array.00098")]
static RECORD_LOAD_TIME: extern "C" fn() = record_load_time;

extern "C" fn record_load_time() {
    // Runs before main: nothing here can panic or allocate.
    let before = clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0);
    LOAD_NS.store(
        monotonic_ns().saturating_sub(before),
        std::sync::atomic::Ordering::Relaxed,
    );
    LOAD_PID.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
}

/// CPU time the whole process has used so far, in nanoseconds.
pub fn process_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time (user and system, ns) of this process's children that have ended and been
/// waited for, with theirs in turn (`getrusage(RUSAGE_CHILDREN)`).
pub fn children_cpu_ns() -> std::io::Result<u64> {
    // SAFETY: all-zero bytes are a valid `rusage` (integers and timevals only).
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable rusage for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rusage_cpu_ns(&r))
}

/// The CPU time (user and system, ns) a `rusage` holds.
pub fn rusage_cpu_ns(r: &libc::rusage) -> u64 {
    let ns = |t: libc::timeval| {
        (t.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_usec.max(0) as u64 * 1_000)
    };
    ns(r.ru_utime).saturating_add(ns(r.ru_stime))
}

/// The CPU's own counter, read in one instruction: the TSC on x86_64, `cntvct_el0` on
/// aarch64. Inlined into the callers' hot paths (a scope's entry and exit).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod counter {
    /// The counter now. Signal context: one instruction, no memory touched.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub fn read() -> u64 {
        // SAFETY: rdtsc is available on every x86_64 CPU and only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// The counter now. Signal context: one instruction, no memory touched.
    #[cfg(target_arch = "aarch64")]
    #[inline(always)]
    pub fn read() -> u64 {
        let v: u64;
        // SAFETY: cntvct_el0 is readable from EL0 on Linux (the kernel enables it for the
        // vDSO); the read has no side effects and touches no memory.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }

    /// True if and only if cpuid reports an invariant TSC (leaf 0x8000_0007, EDX bit 8): it
    /// ticks at a constant rate in every P-, C- and T-state and is synchronised across cores.
    #[cfg(target_arch = "x86_64")]
    // `__cpuid` became a safe fn in newer Rust; the MSRV still needs the `unsafe`.
    #[allow(unused_unsafe)]
    pub fn invariant() -> bool {
        use core::arch::x86_64::__cpuid;
        // SAFETY: cpuid is available on every x86_64 CPU; leaf 0x8000_0000 reports the
        // highest extended leaf, and leaf 0x8000_0007 is only read when it exists.
        let max_ext = unsafe { __cpuid(0x8000_0000) }.eax;
        if max_ext < 0x8000_0007 {
            return false;
        }
        // SAFETY: as above; the leaf exists.
        let edx = unsafe { __cpuid(0x8000_0007) }.edx;
        edx & (1 << 8) != 0
    }

    /// The generic timer runs at a constant rate, the same on every core (the architecture
    /// requires it).
    #[cfg(target_arch = "aarch64")]
    pub fn invariant() -> bool {
        true
    }
}
