//! Sampler overhead, measured side by side in one run, printed as ratios.
//!
//! ```text
//! cargo bench -p tickscope --bench sampler
//! ```
//!
//! - **wall-time ratio**: a fixed CPU-bound workload (single thread) timed unsampled, sampled at
//!   100 Hz and sampled at 1000 Hz, in interleaved rounds; the median of each. Targets:
//!   ≤ 1.01 at 100 Hz, ≤ 1.05 at 1000 Hz.
//! - **handler cost**: time inside the signal handler per sample (the mean, and the median a
//!   loaded machine's stretched samples do not move), signal delivery excluded,
//!   while the workload sits 100 frames deep (the handler measures itself with the CPU
//!   counter). Target ≤ 1 µs.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tickscope::sampler::{Mode, Sampler, Source};

#[path = "common/floor.rs"]
mod floor;

const ROUNDS: usize = 9;

/// About 0.3 s of integer work, the same every call.
#[inline(never)]
fn workload() -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..150_000_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    x
}

/// Recurses `depth` frames, then spins for `d`.
#[inline(never)]
fn deep(depth: u32, d: Duration) -> u64 {
    if depth == 0 {
        let t = Instant::now();
        let mut x = 1u64;
        while t.elapsed() < d {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
        }
        return x;
    }
    black_box(deep(depth - 1, d)).wrapping_add(1)
}

fn timed(hz: Option<u32>) -> f64 {
    timed_with(hz, None)
}

fn timed_with(hz: Option<u32>, source: Option<Source>) -> f64 {
    let sampler = hz.map(|hz| {
        let b = Sampler::builder().frequency(hz).mode(Mode::Cpu);
        match source {
            Some(s) => b.source(s),
            None => b,
        }
        .start()
        .expect("start the sampler")
    });
    let t = Instant::now();
    black_box(workload());
    let secs = t.elapsed().as_secs_f64();
    drop(sampler);
    secs
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    tickscope::Config::new()
        .summary(tickscope::SummaryFormat::Off)
        .install();
    timed(None);
    let (mut off, mut at100, mut at1000) = (vec![], vec![], vec![]);
    let (mut timer100, mut timer1000) = (vec![], vec![]);
    for _ in 0..ROUNDS {
        off.push(timed(None));
        at100.push(timed(Some(100)));
        at1000.push(timed(Some(1000)));
        timer100.push(timed_with(Some(100), Some(Source::ThreadCpuTimer)));
        timer1000.push(timed_with(Some(1000), Some(Source::ThreadCpuTimer)));
    }
    let (t100, t1000) = (median(&mut timer100), median(&mut timer1000));
    let (off, a100, a1000) = (median(&mut off), median(&mut at100), median(&mut at1000));
    println!("tickscope sampler overhead, median of {ROUNDS} interleaved rounds");
    println!("  CPU: {}", floor::cpu_model());
    println!("  workload unsampled:          {:8.1} ms", off * 1e3);
    println!(
        "  sampled at 100 Hz:           {:8.1} ms   ratio {:.4}  (target <= 1.01)",
        a100 * 1e3,
        a100 / off
    );
    println!(
        "  sampled at 1000 Hz:          {:8.1} ms   ratio {:.4}  (target <= 1.05)",
        a1000 * 1e3,
        a1000 / off
    );

    // The default source (a perf event where permitted) against the fallback, whose signals
    // cost less but arrive late under CPU contention (see the sampler's timer module).
    println!(
        "  100 Hz, thread CPU timer:    {:8.1} ms   ratio {:.4}",
        t100 * 1e3,
        t100 / off
    );
    println!(
        "  1000 Hz, thread CPU timer:   {:8.1} ms   ratio {:.4}  (~250 signals/s on a 250 Hz tick; weights keep the time exact)",
        t1000 * 1e3,
        t1000 / off
    );
    // The thread CPU timer fires at the kernel's tick (250 Hz here, typically), the perf
    // source at the rate asked: the perf source at 250 Hz shows what the rate alone does (the
    // fewer the samples, the colder the stack and tables the handler reads).
    for (source, hz) in [
        (Source::ThreadCpuTimer, 1000),
        (Source::PerfTaskClock, 1000),
        (Source::PerfTaskClock, 250),
    ] {
        let sampler = match Sampler::builder().frequency(hz).source(source).start() {
            Ok(s) => s,
            Err(e) => {
                println!(
                    "  handler cost with {}: not available here ({e})",
                    source.name()
                );
                continue;
            }
        };
        black_box(deep(100, Duration::from_millis(1500)));
        let profile = sampler.stop();
        println!(
            "  handler cost, 100-frame stack, {:<30} {hz:4} Hz {:5} ns per sample, median {:5} ns (target <= 1000), {} samples",
            source.name(),
            profile.handler_ns_per_sample(),
            profile.handler_ns_median(),
            profile.samples(),
        );
    }
}
