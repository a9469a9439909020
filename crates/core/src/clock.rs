//! The clock: a calibrated CPU counter with an anomaly guard, and the timer_lib-shaped [`Timer`].
//!
//! [`now`] reads the CPU's counter where it is usable — `rdtsc` on x86_64 when cpuid reports an
//! invariant TSC, `cntvct_el0` on aarch64 — and `CLOCK_MONOTONIC` otherwise (or when
//! `TICKSCOPE_CLOCK=monotonic`). The choice is made once, on the first call.
//!
//! The tick rate is calibrated lazily against `CLOCK_MONOTONIC` the first time it is needed
//! (report time, or [`Timer::elapsed`]), never on the hot path: the counter and the OS clock
//! are read together when the source is chosen and again at calibration, at least
//! [`MIN_CALIBRATION`] apart (the first calibration sleeps for whatever is missing).
//!
//! **Anomaly guard.** A counter delta that is negative, or implausibly large next to what the
//! reference clock saw over the same interval (a thread migrated between cores whose counters
//! disagree, a VM paused), is a *clock error*: it is counted and replaced by the reference
//! delta. Short deltas are trusted without a reference read, so the guard costs one compare on
//! the fast path; see [`SUSPECT_TICKS`].

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use crate::sys;

/// A reading of the CPU counter (or of `CLOCK_MONOTONIC` in ns where no counter is usable).
/// Convert with [`ticks_per_second`]; only differences of two readings are meaningful.
pub type Ticks = u64;

/// Where [`now`] reads its ticks from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClockSource {
    /// x86_64 time-stamp counter (`rdtsc`), invariant per cpuid.
    Tsc,
    /// aarch64 virtual counter (`cntvct_el0`).
    Cntvct,
    /// `CLOCK_MONOTONIC`: one tick is one nanosecond.
    Monotonic,
}

impl ClockSource {
    /// A short name for reports: `tsc`, `cntvct`, `monotonic`.
    pub fn name(self) -> &'static str {
        match self {
            ClockSource::Tsc => "tsc",
            ClockSource::Cntvct => "cntvct",
            ClockSource::Monotonic => "monotonic",
        }
    }
}

const SRC_UNSET: u8 = 0;
const SRC_COUNTER: u8 = 1;
const SRC_MONOTONIC: u8 = 2;

static SOURCE: AtomicU8 = AtomicU8::new(SRC_UNSET);
/// (ticks, monotonic ns) read together when the source was chosen: the calibration baseline.
static BASELINE: OnceLock<(Ticks, u64)> = OnceLock::new();
static RATE: OnceLock<f64> = OnceLock::new();
static CLOCK_ERRORS: AtomicU64 = AtomicU64::new(0);

/// The shortest baseline a calibration uses. Reading the two clocks together costs well under
/// a microsecond of uncertainty, so 20 ms bounds the rate error near 1e-4, far inside the 0.5%
/// the tests demand, while keeping a first `Timer::elapsed` in a fresh process short.
pub const MIN_CALIBRATION: Duration = Duration::from_millis(20);

/// Deltas above this many ticks are checked against the reference clock before they are
/// trusted (negative deltas wrap around and land here too). 2^21 ticks is about 0.7 ms at
/// 3 GHz and 2 ms on the monotonic fallback: the one extra `clock_gettime` is then under 0.01%
/// of the interval it checks. Shorter jumps are too small to distort a report.
pub const SUSPECT_TICKS: Ticks = 1 << 21;

/// Reads the clock. On x86_64 with an invariant TSC this is one `rdtsc` and one predictable
/// branch; the first call chooses the source.
#[inline(always)]
pub fn now() -> Ticks {
    // The counter falls through; anything else is an out-of-line call, so a scope's two
    // readings take no branch.
    if SOURCE.load(Relaxed) == SRC_COUNTER {
        counter::read()
    } else {
        now_otherwise()
    }
}

/// [`now`] when the source is the monotonic clock or not chosen yet.
#[cold]
#[inline(never)]
fn now_otherwise() -> Ticks {
    match SOURCE.load(Relaxed) {
        SRC_COUNTER => counter::read(),
        SRC_MONOTONIC => sys::clock::monotonic_ns(),
        _ => choose_source_and_read(),
    }
}

/// [`now`] for signal context (the sampler's handler): no allocation, no lock. Once a
/// source is chosen it is [`now`]; before that it reads the monotonic clock rather than
/// choose one, which reads the environment and may print a warning (both allocate).
#[inline(always)]
#[cfg(feature = "sampler")]
pub(crate) fn now_in_signal() -> Ticks {
    match SOURCE.load(Relaxed) {
        SRC_COUNTER => counter::read(),
        _ => sys::clock::monotonic_ns(),
    }
}

/// The source [`now`] reads.
pub fn source() -> ClockSource {
    if SOURCE.load(Relaxed) == SRC_UNSET {
        now();
    }
    match SOURCE.load(Relaxed) {
        SRC_COUNTER => counter::SOURCE,
        _ => ClockSource::Monotonic,
    }
}

#[cold]
#[inline(never)]
fn choose_source_and_read() -> Ticks {
    let src = match crate::sys::env::env_var(crate::config::var::CLOCK).as_deref() {
        None | Some("") | Some("auto") => auto_source(),
        Some("monotonic") => SRC_MONOTONIC,
        Some(s @ ("tsc" | "counter" | "cntvct")) => {
            if counter::usable() {
                SRC_COUNTER
            } else {
                crate::sys::stderr::warn(&format!(
                    "{}={s}: the CPU counter is not usable here; using monotonic",
                    crate::config::var::CLOCK
                ));
                SRC_MONOTONIC
            }
        }
        Some(other) => {
            crate::sys::stderr::warn_malformed(
                crate::config::var::CLOCK,
                other,
                "auto, tsc or monotonic",
            );
            auto_source()
        }
    };
    // Several threads may race here; they all compute the same answer.
    let _ = SOURCE.compare_exchange(SRC_UNSET, src, Relaxed, Relaxed);
    BASELINE.get_or_init(read_pair);
    if SOURCE.load(Relaxed) == SRC_COUNTER {
        crate::state::clock_is_counter();
    }
    now()
}

fn auto_source() -> u8 {
    if counter::usable() {
        SRC_COUNTER
    } else {
        SRC_MONOTONIC
    }
}

/// Reads (ticks, monotonic ns) as close together as possible: the tick read is bracketed by
/// two OS clock reads and the tightest of three tries is kept, its OS time the midpoint.
fn read_pair() -> (Ticks, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..3 {
        let a = sys::clock::monotonic_ns();
        let t = now_source_set();
        let b = sys::clock::monotonic_ns();
        let width = b.saturating_sub(a);
        if width < best.2 {
            best = (t, a + width / 2, width);
        }
    }
    (best.0, best.1)
}

/// `now()` for use after the source is set (avoids recursion during selection).
fn now_source_set() -> Ticks {
    match SOURCE.load(Relaxed) {
        SRC_COUNTER => counter::read(),
        _ => sys::clock::monotonic_ns(),
    }
}

/// Calibrated ticks per second (1e9 on the monotonic fallback). The first call may sleep up to
/// [`MIN_CALIBRATION`]; later calls are one load.
pub fn ticks_per_second() -> u64 {
    rate().round() as u64
}

/// The calibrated rate, exact to a fraction of a tick per second.
pub fn rate() -> f64 {
    *RATE.get_or_init(calibrate)
}

/// The calibrated rate if calibration is done; else the best estimate from the time since the
/// clock's baseline, without waiting (and without fixing the rate: a later [`rate`] still
/// calibrates over its full window). For figures a short-lived process reports as it exits
/// (the sampler's own cost), where sleeping up to [`MIN_CALIBRATION`] would be most of its
/// life. `None` if no time has passed to estimate it from.
#[cfg(feature = "sampler")]
pub(crate) fn rate_without_waiting() -> Option<f64> {
    if let Some(r) = RATE.get() {
        return Some(*r);
    }
    if source() == ClockSource::Monotonic {
        return Some(1e9);
    }
    let (t0, n0) = *BASELINE.get_or_init(read_pair);
    let (t1, n1) = read_pair();
    let (dn, dt) = (n1.saturating_sub(n0), t1.wrapping_sub(t0));
    (dn > 0 && dt > 0 && dt < 1 << 62).then(|| dt as f64 * 1e9 / dn as f64)
}

fn calibrate() -> f64 {
    if source() == ClockSource::Monotonic {
        return 1e9;
    }
    let (t0, n0) = *BASELINE.get_or_init(read_pair);
    let elapsed = Duration::from_nanos(sys::clock::monotonic_ns().saturating_sub(n0));
    if elapsed < MIN_CALIBRATION {
        std::thread::sleep(MIN_CALIBRATION - elapsed);
    }
    let (t1, n1) = read_pair();
    let dn = n1.saturating_sub(n0);
    let dt = t1.wrapping_sub(t0);
    if dn == 0 || dt == 0 || dt > (1 << 62) {
        // The counter did not advance or ran backwards across the baseline: it is not usable.
        // Ticks already handed out stay counter ticks, so keep a nominal rate and say so.
        crate::sys::stderr::warn("the CPU counter did not advance during calibration");
        return 1e9;
    }
    dt as f64 * 1e9 / dn as f64
}

/// Converts a tick count to nanoseconds at the calibrated rate.
#[inline]
pub fn ticks_to_ns(ticks: Ticks) -> u64 {
    (ticks as f64 * 1e9 / rate()) as u64
}

/// Converts nanoseconds to ticks at the calibrated rate.
#[inline]
pub fn ns_to_ticks(ns: u64) -> Ticks {
    (ns as f64 * rate() / 1e9) as u64
}

/// Milliseconds since the Unix epoch (the system's wall clock, which may step).
pub fn system_time_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How many clock errors the anomaly guard found in [`Timer`]s so far, process-wide. Scope
/// clock errors are counted per scope in the reports.
pub fn timer_clock_errors() -> u64 {
    CLOCK_ERRORS.load(Relaxed)
}

/// What the clock is read through: the real counter, or a fake one in tests.
pub(crate) trait Counter {
    /// A counter reading.
    fn ticks(&self) -> Ticks;
    /// The reference clock, in ns.
    fn reference_ns(&self) -> u64;
    /// Ticks per second.
    fn rate(&self) -> f64;
}

/// The process clock: [`now`], `CLOCK_MONOTONIC` and the calibrated rate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SystemCounter;

impl Counter for SystemCounter {
    #[inline(always)]
    fn ticks(&self) -> Ticks {
        now()
    }
    fn reference_ns(&self) -> u64 {
        sys::clock::monotonic_ns()
    }
    fn rate(&self) -> f64 {
        rate()
    }
}

/// The CPU counter, read without asking which source the clock chose: for scopes opened
/// while the switches say the counter is the clock ([`crate::state::SLOW_CLOCK`] clear, a
/// final choice), and their exits.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuCounter;

impl Counter for CpuCounter {
    #[inline(always)]
    fn ticks(&self) -> Ticks {
        counter::read()
    }
    fn reference_ns(&self) -> u64 {
        sys::clock::monotonic_ns()
    }
    fn rate(&self) -> f64 {
        rate()
    }
}

/// A counter delta after the anomaly guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checked {
    pub ticks: Ticks,
    pub error: bool,
}

/// Relative tolerance between the counter and the reference clock before a delta is called
/// implausible. Calibration error is ~1e-4 and NTP slews `CLOCK_MONOTONIC` by at most 5e-4;
/// the anomalies this guards against are migrations and pauses, milliseconds to seconds.
const TOLERANCE: f64 = 0.01;
/// Absolute slack: the clocks are not read at the same instant.
const SLACK_NS: f64 = 100_000.0;

/// A counter reading bracketed by two reference-clock readings: the counter's instant lies
/// between `before_ns` and `after_ns` even if the thread was preempted between the reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Bracket {
    pub before_ns: u64,
    pub ticks: Ticks,
    pub after_ns: u64,
}

impl Bracket {
    /// Reads reference, counter, reference.
    pub(crate) fn read(c: &impl Counter) -> Bracket {
        let before_ns = c.reference_ns();
        let ticks = c.ticks();
        let after_ns = c.reference_ns();
        Bracket {
            before_ns,
            ticks,
            after_ns,
        }
    }

    fn mid_ns(&self) -> u64 {
        self.before_ns + self.after_ns.saturating_sub(self.before_ns) / 2
    }
}

/// The anomaly guard for the interval from `start_ticks` to `end.ticks`. `start_ticks` lies
/// `lag_ns` (estimated from the counter, at most `max_lag_ns`) after the anchor bracket
/// `start`. The reference clock bounds the true interval: at most `end.after - start.before`,
/// at least `end.before - start.after - max_lag_ns`. A counter delta that is negative or,
/// widened by the tolerance, outside those bounds is an error and is replaced by the
/// reference clock's estimate.
pub(crate) fn check_interval(
    start: &Bracket,
    start_ticks: Ticks,
    lag_ns: u64,
    max_lag_ns: u64,
    end: &Bracket,
    rate: f64,
) -> Checked {
    let dt = end.ticks.wrapping_sub(start_ticks);
    let upper = end.after_ns.saturating_sub(start.before_ns);
    let lower = end
        .before_ns
        .saturating_sub(start.after_ns)
        .saturating_sub(max_lag_ns);
    let dt_ns = dt as f64 * 1e9 / rate;
    let hi = upper as f64 * (1.0 + TOLERANCE) + SLACK_NS;
    let lo = lower as f64 * (1.0 - TOLERANCE) - SLACK_NS;
    if end.ticks >= start_ticks && dt_ns <= hi && dt_ns >= lo {
        return Checked {
            ticks: dt,
            error: false,
        };
    }
    let estimate = end
        .mid_ns()
        .saturating_sub(start.mid_ns().saturating_add(lag_ns))
        .clamp(lower, upper.max(lower));
    Checked {
        ticks: (estimate as f64 * rate / 1e9) as Ticks,
        error: true,
    }
}

/// A stopwatch over [`now`], in the shape of timer_lib: `start`, `reset`, `elapsed` in
/// seconds, `elapsed_ticks`, `ticks_per_second`.
///
/// ```
/// let mut t = tickscope::Timer::start();
/// let ticks = t.elapsed_ticks(true); // read and restart
/// assert!(t.elapsed() >= 0.0);
/// # let _ = ticks;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Timer {
    start: Bracket,
}

impl Timer {
    /// Starts a timer now.
    pub fn start() -> Timer {
        Timer::start_with(&SystemCounter)
    }

    /// Restarts the timer from now.
    pub fn reset(&mut self) {
        *self = Timer::start();
    }

    /// Seconds since the start (or the last reset).
    pub fn elapsed(&self) -> f64 {
        let ticks = self.check(SystemCounter.ticks(), &SystemCounter).0;
        ticks as f64 / rate()
    }

    /// Ticks since the start; with `reset`, the timer restarts at the same reading, so
    /// consecutive calls partition time with nothing lost between them.
    pub fn elapsed_ticks(&mut self, reset: bool) -> Ticks {
        self.elapsed_ticks_with(&SystemCounter, reset)
    }

    /// The calibrated tick rate ([`ticks_per_second`]).
    pub fn ticks_per_second(&self) -> u64 {
        ticks_per_second()
    }

    pub(crate) fn start_with(c: &impl Counter) -> Timer {
        Timer {
            start: Bracket::read(c),
        }
    }

    pub(crate) fn elapsed_ticks_with(&mut self, c: &impl Counter, reset: bool) -> Ticks {
        let t1 = c.ticks();
        let (ticks, end) = self.check(t1, c);
        if reset {
            self.start = match end {
                // The guard read a fresh bracket: restart there.
                Some(end) => end,
                // A short, trusted interval: restart at `t1` itself, so no time falls between
                // two calls; its reference bracket follows from the counter.
                None => {
                    let ns = (ticks as f64 * 1e9 / c.rate()) as u64;
                    Bracket {
                        before_ns: self.start.before_ns + ns,
                        ticks: t1,
                        after_ns: self.start.after_ns + ns,
                    }
                }
            };
        }
        ticks
    }

    /// The guarded delta to `t1`; when the guard needed a fresh bracketed reading, returns it.
    fn check(&self, t1: Ticks, c: &impl Counter) -> (Ticks, Option<Bracket>) {
        let dt = t1.wrapping_sub(self.start.ticks);
        if dt <= SUSPECT_TICKS {
            return (dt, None);
        }
        let end = Bracket::read(c);
        let checked = check_interval(&self.start, self.start.ticks, 0, 0, &end, c.rate());
        if checked.error {
            CLOCK_ERRORS.fetch_add(1, Relaxed);
        }
        (checked.ticks, Some(end))
    }
}

/// True if and only if two reads of `read` 50 µs apart differ, in order.
#[allow(dead_code)] // unused where no counter exists
fn advances(read: fn() -> Ticks) -> bool {
    let a = read();
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_micros(50) {}
    read() > a
}

/// The CPU counter for this architecture.
#[cfg(target_arch = "x86_64")]
mod counter {
    use super::{ClockSource, Ticks};

    pub(super) const SOURCE: ClockSource = ClockSource::Tsc;

    /// Signal context: one instruction, no allocation, no lock. Chosen only after
    /// `usable()` confirmed an invariant TSC.
    #[inline(always)]
    pub(super) fn read() -> Ticks {
        tickscope_sys::clock::counter::read()
    }

    /// True if and only if the TSC is invariant and advances.
    pub(super) fn usable() -> bool {
        tickscope_sys::clock::counter::invariant() && super::advances(read)
    }
}

#[cfg(target_arch = "aarch64")]
mod counter {
    use super::{ClockSource, Ticks};

    pub(super) const SOURCE: ClockSource = ClockSource::Cntvct;

    /// Signal context: one instruction, no allocation, no lock.
    #[inline(always)]
    pub(super) fn read() -> Ticks {
        tickscope_sys::clock::counter::read()
    }

    pub(super) fn usable() -> bool {
        super::advances(read)
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod counter {
    use super::{ClockSource, Ticks};

    pub(super) const SOURCE: ClockSource = ClockSource::Monotonic;

    pub(super) fn read() -> Ticks {
        crate::sys::clock::monotonic_ns()
    }

    pub(super) fn usable() -> bool {
        false
    }
}

#[cfg(test)]
pub(crate) mod tests;
