//! The clock's tests: a fake counter the tests move by hand, the anomaly guard, the source's
//! choice.

use super::*;
use std::cell::Cell;

/// Scopes read the CPU counter directly only where the switches say the counter is the
/// clock: the bit is clear exactly when the chosen source is the counter.
#[test]
fn the_switches_say_whether_the_counter_is_the_clock() {
    now();
    let slow = crate::state::STATE.load(Relaxed) & crate::state::SLOW_CLOCK != 0;
    assert_eq!(slow, source() == ClockSource::Monotonic);
    assert_ne!(SOURCE.load(Relaxed), SRC_UNSET);
}

/// A counter the test moves by hand: `ticks` and `reference_ns` advance separately, so a
/// test can make the counter jump while the reference clock does not.
pub(crate) struct FakeCounter {
    pub ticks: Cell<Ticks>,
    pub ns: Cell<u64>,
    pub rate: f64,
}

impl FakeCounter {
    /// A fake at 1 GHz (one tick per ns), starting at 1 s on both clocks.
    pub(crate) fn new() -> FakeCounter {
        FakeCounter {
            ticks: Cell::new(1_000_000_000),
            ns: Cell::new(1_000_000_000),
            rate: 1e9,
        }
    }
    /// Real time passes: both clocks advance.
    pub(crate) fn advance_ns(&self, ns: u64) {
        self.ticks.set(self.ticks.get() + ns);
        self.ns.set(self.ns.get() + ns);
    }
    /// The counter alone jumps (a migration, a VM pause seen by the counter only).
    pub(crate) fn jump_ticks(&self, delta: i64) {
        self.ticks.set(self.ticks.get().wrapping_add_signed(delta));
    }
}

impl Counter for FakeCounter {
    fn ticks(&self) -> Ticks {
        self.ticks.get()
    }
    fn reference_ns(&self) -> u64 {
        self.ns.get()
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

#[test]
fn calibrated_rate_matches_os_clock_within_half_percent_over_200ms() {
    let rate = rate();
    let (t0, n0) = read_pair();
    std::thread::sleep(Duration::from_millis(200));
    let (t1, n1) = read_pair();
    let observed = (t1 - t0) as f64 * 1e9 / (n1 - n0) as f64;
    let rel = (observed - rate).abs() / observed;
    assert!(
        rel < 0.005,
        "calibrated {rate}, observed {observed} over 200 ms: {rel:.5}"
    );
}

#[test]
fn counter_is_used_where_the_cpu_has_an_invariant_one() {
    #[cfg(target_arch = "x86_64")]
    if std::env::var_os("TICKSCOPE_CLOCK").is_none() && counter::usable() {
        assert_eq!(source(), ClockSource::Tsc);
    }
    assert!(now() > 0);
}

#[test]
fn timer_measures_a_sleep() {
    // Checked against std's clock read around it, not against fixed bounds: a busy
    // machine may stretch the sleep, or pause the thread anywhere. 1% + 1 ms covers the
    // calibration (0.5%) and the reads' own distance.
    let within = |s: f64, outer: Duration| s <= outer.as_secs_f64() * 1.01 + 0.001;
    let outer = std::time::Instant::now();
    let mut t = Timer::start();
    std::thread::sleep(Duration::from_millis(30));
    let s = t.elapsed();
    assert!(s >= 0.029 && within(s, outer.elapsed()), "{s}");
    let since_reset = std::time::Instant::now();
    let ticks = t.elapsed_ticks(true);
    assert!(ticks as f64 / t.ticks_per_second() as f64 >= 0.029);
    let s = t.elapsed();
    assert!(
        within(s, since_reset.elapsed()),
        "reset restarts the timer: {s}"
    );
    let ms = system_time_ms();
    assert!(ms > 1_600_000_000_000, "after 2020: {ms}");
}

#[test]
fn timer_replaces_backward_and_forward_jumps_with_the_reference_delta() {
    let c = FakeCounter::new();
    let before = timer_clock_errors();

    let mut t = Timer::start_with(&c);
    c.advance_ns(10_000_000); // 10 ms of real time
    c.jump_ticks(-5_000_000_000); // counter runs 5 s backwards
    assert_eq!(t.elapsed_ticks_with(&c, true), 10_000_000);

    c.advance_ns(20_000_000);
    c.jump_ticks(7_000_000_000); // counter leaps 7 s forwards
    assert_eq!(t.elapsed_ticks_with(&c, true), 20_000_000);

    c.advance_ns(3_000_000); // a sane 3 ms
    assert_eq!(t.elapsed_ticks_with(&c, false), 3_000_000);
    assert_eq!(timer_clock_errors() - before, 2);
}

#[test]
fn elapsed_ticks_with_reset_partitions_time_exactly() {
    let c = FakeCounter::new();
    let mut t = Timer::start_with(&c);
    let mut sum = 0;
    for i in 0..100 {
        c.advance_ns(1_000 + i);
        sum += t.elapsed_ticks_with(&c, true);
    }
    assert_eq!(
        sum,
        100 * 1_000 + 4_950,
        "consecutive readings lose nothing"
    );
}

#[test]
fn check_interval_accepts_agreeing_clocks_and_flags_disagreeing_ones() {
    let b = |ns: u64, ticks: u64| Bracket {
        before_ns: ns,
        ticks,
        after_ns: ns,
    };
    let start = b(0, 1_000);
    let ok = check_interval(&start, 1_000, 0, 0, &b(50_000_000, 50_001_000), 1e9);
    assert_eq!(
        ok,
        Checked {
            ticks: 50_000_000,
            error: false
        }
    );
    let long = check_interval(&start, 1_000, 0, 0, &b(50_000_000, 3_000_001_000), 1e9);
    assert_eq!(
        long,
        Checked {
            ticks: 50_000_000,
            error: true
        }
    );
    let short = check_interval(&start, 1_000, 0, 0, &b(50_000_000, 1_001_000), 1e9);
    assert!(
        short.error,
        "a counter that saw 1 ms of a 50 ms interval is wrong too"
    );
    let back = check_interval(&start, 1_000, 0, 0, &b(1_000, 10), 1e9);
    assert_eq!(
        back,
        Checked {
            ticks: 1_000,
            error: true
        }
    );
}

#[test]
fn preemption_between_reads_widens_the_bracket_instead_of_raising_an_error() {
    // The thread slept 30 ms between the counter read and the second reference read at
    // both ends: the bracket is wide, and the honest 100 ms delta fits in it.
    let start = Bracket {
        before_ns: 0,
        ticks: 0,
        after_ns: 30_000_000,
    };
    let end = Bracket {
        before_ns: 100_000_000,
        ticks: 100_000_000,
        after_ns: 130_000_000,
    };
    let c = check_interval(&start, 0, 0, 0, &end, 1e9);
    assert_eq!(
        c,
        Checked {
            ticks: 100_000_000,
            error: false
        }
    );
}
