//! The live histogram against the full one, its memory, its carries and its readers.

use super::*;
use tickscope_fmt::hist::Counts as Dense;

fn snapshot(h: &Hist, pool: &Pool) -> Counts {
    let mut c = Counts::new();
    h.add_to(&pool.reading(), &mut c);
    c
}

/// Values from a fixed-seed generator: xorshift.
fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Shapes of durations in ticks: tight, skewed (log-normal-like), bimodal, each with rare
/// outliers three to five powers of two out (an interrupt), and one spread everywhere.
fn shapes() -> Vec<(&'static str, Vec<u64>)> {
    let mut next = rng(0x2545_f491_4f6c_dd1d);
    let mut out = Vec::new();
    for name in ["tight", "skewed", "bimodal", "log-uniform"] {
        let values = (0..200_000)
            .map(|i| {
                let r = next();
                let u = (r >> 11) as f64 / (1u64 << 53) as f64;
                let v = match name {
                    "tight" => 40_000 + r % 800,
                    // exp of a sum of uniforms: a long right tail.
                    "skewed" => {
                        (2_000.0 * (3.0 * (u + (next() >> 11) as f64 / (1u64 << 53) as f64)).exp())
                            as u64
                    }
                    "bimodal" if r % 10 == 0 => 5_000_000 + r % 100_000,
                    "bimodal" => 20_000 + r % 2_000,
                    _ => (1u64 << (r % 36)) | ((r >> 40) % 64),
                };
                if name != "log-uniform" && i % 5_000 == 17 {
                    v << (3 + r % 3)
                } else {
                    v
                }
            })
            .collect();
        out.push((name, values));
    }
    out
}

/// The live histogram answers exactly as the full one over the same buckets, and both
/// are within 1% of the exact percentiles.
#[test]
fn percentiles_match_the_full_histogram_and_the_exact_values_within_one_percent() {
    for (name, mut values) in shapes() {
        let (pool, live, mut dense) = (Pool::new(), Hist::new(), Dense::new());
        for &v in &values {
            live.record(v, &pool);
            dense.record(v);
        }
        let got = snapshot(&live, &pool);
        values.sort_unstable();
        for q in [0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(got.quantile(q), dense.quantile(q), "{name} q{q}");
            let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
            let est = got.quantile(q).unwrap();
            let rel = (est as f64 - exact as f64).abs() / exact as f64;
            assert!(
                rel <= 0.01,
                "{name} p{q}: exact {exact}, got {est} ({rel:.4})"
            );
        }
    }
}

/// A call site's usual durations cost a window of a few dozen counts and a short list of
/// outliers, not the full 20 KB histogram.
#[test]
fn memory_follows_the_values_seen_not_the_range_of_buckets() {
    let mut next = rng(7);
    let (pool, h) = (Pool::new(), Hist::new());
    h.record(1_000, &pool);
    assert_eq!(
        pool.bytes(),
        FIRST_LEN + 1,
        "one value: the first window, a byte a bucket"
    );
    assert!(h.narrow());
    // ±10% around a value, with an outlier every 5,000 calls up to 32 times longer.
    for i in 0..1_000_000u64 {
        let v = 9_000 + next() % 2_000;
        h.record(if i % 5_000 == 0 { v << (1 + i % 5) } else { v }, &pool);
    }
    let (base, len) = h.window();
    assert!(len <= 64, "window of {len} buckets from {base}");
    assert!(pool.bytes() <= 512, "{} bytes", pool.bytes());
    // Slow first calls (a cold cache), then fast ones: the window follows the fast ones.
    let (pool2, warm) = (Pool::new(), Hist::new());
    (0..1_000).for_each(|_| warm.record(50_000 + next() % 5_000, &pool2));
    (0..3_000_000).for_each(|_| warm.record(500 + next() % 50, &pool2));
    let (base, len) = warm.window();
    assert!(
        len <= 64 && base <= bucket(500),
        "window of {len} buckets from {base}"
    );
    let mut c = Counts::new();
    warm.add_to(&pool2.reading(), &mut c);
    assert_eq!(c.total(), 3_001_000);
    // The full range still works, at the cost of a wide window.
    let wide = Hist::new();
    (0..40).for_each(|e| (0..200).for_each(|_| wide.record(1 << e, &pool)));
    assert_eq!(
        snapshot(&wide, &pool).quantile(1.0),
        Dense::new().tap(|d| d.record(1 << 39)).quantile(1.0)
    );
}

/// A count about to wrap moves 2^32 into the list, and nothing is lost.
#[test]
fn a_count_past_u32_max_carries_into_the_list() {
    let (pool, h) = (Pool::new(), Hist::new());
    (0..256).for_each(|_| h.record(500, &pool));
    assert!(!h.narrow(), "widened at the 256th value");
    let b = bucket(500) - h.window().0;
    h.cells(&h.win)[b].store(u32::MAX - 1, Relaxed);
    h.record(500, &pool); // u32::MAX
    h.record(500, &pool); // wraps: 0 in the window, 2^32 in the list
    h.record(500, &pool);
    let c = snapshot(&h, &pool);
    assert_eq!(c.total(), (1u64 << 32) + 1);
}

/// Readers on another thread, while the owner stretches its window and fills its list,
/// never see more values than were recorded, nor fewer than before.
#[test]
fn a_reader_never_sees_a_torn_window() {
    let (pool, h) = (
        Box::leak(Box::new(Pool::new())),
        Box::leak(Box::new(Hist::new())),
    );
    let done = std::sync::atomic::AtomicBool::new(false);
    let recorded = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut next = rng(99);
            for i in 0..300_000u64 {
                h.record(next() % (1 << (4 + i % 30)), pool);
                recorded.store(i + 1, Release);
            }
            done.store(true, Release);
        });
        let mut last = 0;
        while !done.load(Acquire) {
            let before = recorded.load(Acquire);
            let n = snapshot(h, pool).total();
            let after = recorded.load(Acquire);
            assert!(
                n >= before.max(last) && n <= after + 1,
                "{before} <= {n} <= {after}"
            );
            last = n;
        }
    });
    assert_eq!(snapshot(h, pool).total(), 300_000);
}

#[test]
fn released_memory_is_reused_and_empty() {
    let (pool, h) = (Pool::new(), Hist::new());
    (0..1000u64).for_each(|v| h.record(v * 997, &pool));
    let bytes = pool.bytes();
    h.release(&pool);
    assert_eq!(snapshot(&h, &pool).quantile(0.5), None);
    (0..1000u64).for_each(|v| h.record(v * 997, &pool));
    assert_eq!(pool.bytes(), bytes, "as much again, none of it twice");
    let mut d = Dense::new();
    (0..1000u64).for_each(|v| d.record(v * 997));
    assert_eq!(snapshot(&h, &pool).quantile(0.5), d.quantile(0.5));
}

trait Tap: Sized {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}
impl Tap for Dense {}

/// The overhead benchmark's many-sites shape, CPU-independent: 100 call sites on one thread
/// (one pool), 200 calls each, of work 1 to 64 units (durations over six powers of two),
/// each unit `per_unit` ticks after a fixed `base`, with a few ticks of jitter. Histogram
/// bytes per site: windows, lists and what the pool keeps for reuse.
fn six_octaves_bytes(base: u64, per_unit: u64, jitter: u64) -> (usize, usize) {
    let mut next = rng(base ^ per_unit << 8 ^ 0x9e37);
    let pool = Pool::new();
    let sites: Vec<Hist> = (0..100).map(|_| Hist::new()).collect();
    for _ in 0..200 {
        for h in &sites {
            let r = next();
            let units = 1u64 << (r % 7);
            h.record(base + units * per_unit + (r >> 32) % (jitter + 1), &pool);
        }
    }
    let live: usize = sites.iter().map(|h| h.live_bytes()).sum();
    (pool.bytes() / sites.len(), live / sites.len())
}

/// The benchmark's shape costs a byte window, whatever the counter's rate: at most 320
/// bytes a call site (with its slot, under the 512 the benchmark's target allows), where
/// `u32` counts and replaced windows kept took 1,444.
#[test]
fn six_powers_of_two_of_durations_cost_a_byte_a_bucket() {
    for (base, unit, jitter) in [
        (20, 1, 4),
        (30, 2, 6),
        (40, 4, 10),
        (60, 8, 40),
        (100, 20, 100),
    ] {
        let (pooled, live) = six_octaves_bytes(base, unit, jitter);
        assert!(
            pooled <= 320 && pooled == live,
            "base {base} unit {unit} jitter {jitter}: {pooled} bytes a site ({live} in use)"
        );
    }
}

/// What a write replaces is freed at once with no reader in, and kept for reuse (not freed
/// under the reader) while one is.
#[test]
fn replaced_windows_are_freed_unless_a_reader_is_in() {
    let pool = Pool::new();
    let a = Hist::new();
    (0..256).for_each(|_| a.record(1_000, &pool));
    assert_eq!(
        pool.bytes(),
        4 * (FIRST_LEN + 1),
        "the byte window freed as it widened"
    );
    let b = Hist::new();
    {
        let reading = pool.reading();
        (0..256).for_each(|_| b.record(1_000, &pool));
        assert_eq!(
            pool.bytes(),
            2 * 4 * (FIRST_LEN + 1) + FIRST_LEN + 1,
            "kept"
        );
        assert_eq!(snapshot_in(&b, &reading).total(), 256);
    }
    let c = Hist::new();
    c.record(1_000, &pool);
    assert_eq!(
        pool.bytes(),
        2 * 4 * (FIRST_LEN + 1) + FIRST_LEN + 1,
        "and reused"
    );
}

fn snapshot_in(h: &Hist, reading: &Reading<'_>) -> Counts {
    let mut c = Counts::new();
    h.add_to(reading, &mut c);
    c
}
