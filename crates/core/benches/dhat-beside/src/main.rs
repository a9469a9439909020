//! The heap bench's workload (each of two threads allocates blocks of 16 to 1,024 bytes and
//! frees each 64 allocations later) through the system allocator, through
//! `tickscope::alloc::Profiled<System>` sampling at 512 KiB, and through `dhat::Alloc` with its
//! heap profiler running (dhat-rs records every allocation with its backtrace), in
//! interleaved rounds; the best round of each, printed with its ratio to the plain one.

use std::alloc::{GlobalAlloc, System};
use std::time::Instant;

const ROUNDS: usize = 5;
const OPS: usize = 1_000_000;
const THREADS: usize = 2;

static PROFILED: tickscope::alloc::Profiled<System> = tickscope::alloc::Profiled::new(System);
static DHAT: dhat::Alloc = dhat::Alloc;

#[path = "../../common/churn.rs"]
mod churn;
use churn::churn;

/// Nanoseconds per allocation and free for `THREADS` threads running [`churn`] through `a`.
fn round(a: &'static (dyn GlobalAlloc + Sync)) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| churn(a, OPS));
        }
    });
    t.elapsed().as_nanos() as f64 / (OPS * THREADS) as f64
}

fn main() {
    let dir = std::env::temp_dir().join(format!("tickscope-dhat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _dhat = dhat::Profiler::builder()
        .file_name(dir.join("dhat-heap.json"))
        .build();
    let (mut plain, mut ours, mut theirs) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        plain = plain.min(round(&System));
        ours = ours.min(round(&PROFILED));
        theirs = theirs.min(round(&DHAT));
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    println!("an allocation and its free, best of {ROUNDS} interleaved rounds ({THREADS} threads × {OPS}); CPU: {cpu}");
    println!("  system allocator              {plain:8.2} ns");
    println!(
        "  tickscope Profiled, 512 KiB   {ours:8.2} ns   x{:.2}",
        ours / plain
    );
    println!(
        "  dhat-rs (every allocation)    {theirs:8.2} ns   x{:.2}",
        theirs / plain
    );
    drop(_dhat);
    let _ = std::fs::remove_dir_all(&dir);
}
