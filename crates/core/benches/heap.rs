//! The heap profiler's cost, measured side by side in one run, printed as ratios.
//!
//! ```text
//! cargo bench -p tickscope --bench heap
//! ```
//!
//! An allocation-heavy workload (each of two threads allocates blocks of 16 to 1,024 bytes
//! and frees each 64 allocations later) run through the system allocator directly and through
//! `tickscope::alloc::Profiled<System>` sampling at 512 KiB, in interleaved rounds; the best
//! round of each. Targets: wall ≤ 1.03×; the unsampled allocation and free ≤ 5 ns over the
//! wrapped allocator.
//!
//! The bench's own global allocator is `Profiled<System>` too, so its scopes count their
//! allocations: a scope around nothing against the floor (two counter reads and a
//! thread-local add), as `--bench overhead` measures it without the counts.

use std::alloc::{GlobalAlloc, System};
use std::time::Instant;

use tickscope::alloc::Profiled;

#[path = "common/floor.rs"]
mod floor;

const ROUNDS: usize = 11;
const OPS: usize = 4_000_000;
const THREADS: usize = 2;

static WRAPPED: Profiled<System> = Profiled::new(System);

#[global_allocator]
static GLOBAL: Profiled<System> = Profiled::new(System);

#[path = "common/churn.rs"]
mod churn;
use churn::churn;

/// Seconds for `THREADS` threads to run [`churn`] through `a`.
fn round(a: &'static (dyn GlobalAlloc + Sync)) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| churn(a, OPS));
        }
    });
    t.elapsed().as_secs_f64()
}

fn main() {
    tickscope::Config::new()
        .summary(tickscope::SummaryFormat::Off)
        .install();
    let (mut plain, mut wrapped) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        plain.push(round(&System));
        wrapped.push(round(&WRAPPED));
    }
    let (p, w) = (floor::best(&plain), floor::best(&wrapped));
    let per_op = |s: f64| s * 1e9 / OPS as f64;
    let (_, alloc_bytes, _, _) = tickscope::alloc::profile().totals();
    println!(
        "heap profiler, {THREADS} threads x {OPS} allocations and frees, best of {ROUNDS} rounds:"
    );
    println!("  CPU: {}", floor::cpu_model());
    println!(
        "  system allocator          {:.2} ns an allocation and its free",
        per_op(p)
    );
    println!(
        "  Profiled<System>, 512 KiB {:.2} ns   (adds {:.2} ns)",
        per_op(w),
        per_op(w - p)
    );
    println!(
        "  RATIO wall, wrapped / plain: {:.3}   (target <= 1.03)",
        w / p
    );
    println!(
        "  estimated bytes allocated through the wrapper: {:.1} MB (sampled at 512 KiB)",
        alloc_bytes as f64 / 1e6
    );
    let (mut scopes, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        floors.push(floor::per_iter(2_000_000, floor::floor_loop));
        scopes.push(floor::per_iter(2_000_000, floor::scope_loop));
    }
    let (s, f) = (floor::best(&scopes), floor::best(&floors));
    println!("  scope!, allocations counted: {s:.2} ns, floor {f:.2} ns");
    println!(
        "  RATIO scope with allocation counts / floor: {:.3}   (--bench overhead: the same without)",
        s / f
    );
}
