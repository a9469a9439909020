//! The floor every scope-cost ratio is measured against (two raw counter reads and a
//! thread-local add, the least any timing scope can cost), the plain scope loop measured
//! against it, and the timing helpers. Shared by `overhead.rs`, `tracing.rs` and the capture
//! benchmark (`crates/cli/benches/capture.rs`) with `#[path]`; not every bench uses all.
#![allow(dead_code)]

use std::hint::black_box;
use std::time::Instant;

use std::cell::Cell;

thread_local! {
    static ACC: Cell<u64> = const { Cell::new(0) };
}

/// The raw counter, without tickscope's source dispatch.
#[inline(always)]
pub fn raw() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc exists on every x86_64 CPU and only reads the time-stamp counter.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        tickscope::now()
    }
}

/// The floor's thread-local add.
#[inline(always)]
pub fn add(v: u64) {
    ACC.with(|c| c.set(c.get().wrapping_add(v)));
}

/// `n` iterations of the floor.
#[inline(never)]
pub fn floor_loop(n: u64) {
    for _ in 0..n {
        let a = raw();
        let b = raw();
        ACC.with(|c| c.set(c.get().wrapping_add(b.wrapping_sub(a))));
    }
}

/// `n` scopes around nothing.
#[inline(never)]
pub fn scope_loop(n: u64) {
    for i in 0..n {
        tickscope::scope!("bench scope");
        black_box(i);
    }
}

/// Nanoseconds per iteration of `f(n)`.
pub fn per_iter(n: u64, f: impl Fn(u64)) -> f64 {
    let t = Instant::now();
    f(n);
    t.elapsed().as_nanos() as f64 / n as f64
}

/// The least of `samples`: the round least disturbed by the rest of the machine.
pub fn best(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Median ÷ best of `samples`: how much the rounds varied.
pub fn spread(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2] / s[0]
}

/// The CPU this runs on (`model name` in /proc/cpuinfo), printed with every figure: the
/// ratios differ between microarchitectures (rdtsc is ordered differently on Intel and AMD).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, m)| m.trim().to_string())
            })
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
