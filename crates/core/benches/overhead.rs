//! Scope overhead, measured side by side in one run, printed as ratios.
//!
//! ```text
//! cargo bench -p tickscope --bench overhead                          # scopes compiled in
//! cargo bench -p tickscope --bench overhead --no-default-features    # compiled out
//! ```
//!
//! - **floor**: a loop doing two raw counter reads and one thread-local add — the least any
//!   timing scope can cost. Target: scope ÷ floor ≤ 1.25.
//! - **disabled**: a scope with `set_enabled(false)`, against an empty loop.
//! - **two threads**: scope throughput of two threads in parallel ÷ one thread (no shared
//!   writes, so ≥ 1.9 on two free cores).
//! - **memory**: bytes of scope state per thread, by call sites touched; and a service's
//!   shape: 1,000 call sites on each of 64 threads, each site called 200 times with durations
//!   spread over a few powers of two, its total statistics memory (target ≤ 32 MB) and the
//!   time to make the exit summary of it (target ≤ 100 ms).
//!
//! Every figure is the best of several interleaved rounds, so a noisy neighbour shows up as
//! spread between rounds rather than as a skewed ratio.

use std::hint::black_box;
use std::time::Instant;

#[path = "common/floor.rs"]
mod floor;
use floor::{best, floor_loop, per_iter, scope_loop, spread};

const N: u64 = 2_000_000;
const ROUNDS: usize = 15;

#[inline(never)]
fn empty_loop(n: u64) {
    for i in 0..n {
        black_box(i);
    }
}

/// The scope loop at four places relative to the 64-byte lines the CPU fetches: its code is
/// the same, but where a loop of this size falls moves its cost by up to ~1.5 ns on the VM
/// this was tuned on (the front end fetches whole lines). A figure from one placement is luck;
/// the ratio is taken over all four. Each pads with N bytes of `nop` run once per call, before
/// the loop (x86_64; elsewhere the four are alike).
macro_rules! placed_scope_loops {
    ($($name:ident $pad:literal),*) => {$(
        #[inline(never)]
        fn $name(n: u64) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: only `nop` instructions, run once per call; no memory, stack or flags.
            unsafe {
                std::arch::asm!(concat!(".fill ", $pad, ", 1, 0x90"), options(nomem, nostack, preserves_flags));
            }
            for i in 0..n {
                tickscope::scope!("bench scope");
                black_box(i);
            }
        }
    )*};
}
placed_scope_loops!(scope_loop_16 16, scope_loop_32 32, scope_loop_48 48);
const PLACED: [fn(u64); 4] = [scope_loop, scope_loop_16, scope_loop_32, scope_loop_48];

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    tickscope::Config::new()
        .summary(tickscope::SummaryFormat::Off)
        .install();
    // Warm up: calibrate the clock, register the call site and this thread.
    tickscope::ticks_per_second();
    scope_loop(10_000);
    floor_loop(10_000);

    let (mut empty, mut floor) = (vec![], vec![]);
    let mut placed: [Vec<f64>; 4] = Default::default();
    let mut placed_off: [Vec<f64>; 4] = Default::default();
    for _ in 0..ROUNDS {
        empty.push(per_iter(N, empty_loop));
        floor.push(per_iter(N, floor_loop));
        tickscope::set_enabled(true);
        for (f, t) in PLACED.iter().zip(placed.iter_mut()) {
            t.push(per_iter(N, f));
        }
        tickscope::set_enabled(false);
        for (f, t) in PLACED.iter().zip(placed_off.iter_mut()) {
            t.push(per_iter(N, f));
        }
    }
    let off: Vec<f64> = placed_off.iter().map(|t| best(t)).collect();
    let off_ns = off.iter().sum::<f64>() / off.len() as f64;
    // The scope's cost: the mean over placements of each one's best round.
    let bests: Vec<f64> = placed.iter().map(|t| best(t)).collect();
    let scope_ns = bests.iter().sum::<f64>() / bests.len() as f64;
    let scope = &placed[0];
    tickscope::set_enabled(true);

    println!("tickscope scope overhead, best of {ROUNDS} rounds of {N} iterations (median/best spread in brackets)");
    println!("  CPU: {}", floor::cpu_model());
    println!(
        "  clock: {} at {:.3} GHz",
        tickscope::clock::source().name(),
        tickscope::ticks_per_second() as f64 / 1e9
    );
    println!(
        "  empty loop:                         {:6.2} ns  [{:.2}]",
        best(&empty),
        spread(&empty)
    );
    println!(
        "  floor (2 counter reads + TLS add):  {:6.2} ns  [{:.2}]",
        best(&floor),
        spread(&floor)
    );
    if tickscope::COMPILED_IN {
        println!(
            "  scope!:                             {scope_ns:6.2} ns  (mean of 4 placements: {})",
            bests
                .iter()
                .map(|b| format!("{b:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  scope!, set_enabled(false):         {off_ns:6.2} ns  (mean of 4 placements: {})",
            off.iter()
                .map(|b| format!("{b:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  RATIO scope / floor:                {:6.3}   (target <= 1.25; by placement {})",
            scope_ns / best(&floor),
            bests
                .iter()
                .map(|b| format!("{:.3}", b / best(&floor)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  RATIO disabled scope / empty loop:  {:6.3}",
            off_ns / best(&empty)
        );
        busy_body();
        two_threads();
        memory();
        many_sites();
    } else {
        println!(
            "  scope!, compiled out:               {:6.2} ns  [{:.2}]",
            best(scope),
            spread(scope)
        );
        println!(
            "  RATIO compiled-out scope / empty loop: {:6.3}   (target: no difference)",
            best(scope) / best(&empty)
        );
    }
}

/// Work that keeps the integer units busy: a dependent multiply-add chain per lane, four
/// lanes (about 100 ns here).
#[inline(always)]
fn busy(seed: u64) -> u64 {
    let mut x = [seed, seed ^ 1, seed ^ 2, seed ^ 3];
    for _ in 0..64 {
        for v in &mut x {
            *v = v.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(*v >> 29);
        }
    }
    x.iter().fold(0, |a, v| a ^ v)
}

#[inline(never)]
fn busy_loop(n: u64) {
    for i in 0..n / 50 {
        black_box(busy(i));
    }
}

#[inline(never)]
fn busy_scope_loop(n: u64) {
    for i in 0..n / 50 {
        tickscope::scope!("bench busy scope");
        black_box(busy(i));
    }
}

#[inline(never)]
fn busy_floor_loop(n: u64) {
    for i in 0..n / 50 {
        let a = floor::raw();
        black_box(busy(i));
        floor::add(floor::raw().wrapping_sub(a));
    }
}

/// An empty scope's bookkeeping runs while the CPU waits for the counter; around work that
/// keeps the execution units busy it competes with that work. What a scope adds there, and
/// what the floor adds.
fn busy_body() {
    let (mut bare, mut floored, mut scoped) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        bare.push(per_iter(N, busy_loop) * 50.0);
        floored.push(per_iter(N, busy_floor_loop) * 50.0);
        scoped.push(per_iter(N, busy_scope_loop) * 50.0);
    }
    let (bare, floored, scoped) = (best(&bare), best(&floored), best(&scoped));
    println!(
        "  around {bare:.0} ns of busy arithmetic: the floor adds {:.1} ns, a scope {:.1} ns",
        floored - bare,
        scoped - bare
    );
    println!(
        "  RATIO scope / floor around busy work: {:6.3}",
        (scoped - bare) / (floored - bare)
    );
}

/// Scope throughput of two threads at once ÷ one thread.
fn two_threads() {
    let run = |threads: usize| -> f64 {
        let start = std::sync::Barrier::new(threads);
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    start.wait();
                    scope_loop(N);
                });
            }
        });
        (threads as u64 * N) as f64 / t.elapsed().as_secs_f64()
    };
    let (mut one, mut two) = (vec![], vec![]);
    for _ in 0..5 {
        one.push(run(1));
        two.push(run(2));
    }
    let (one, two) = (
        one.iter().copied().fold(0.0, f64::max),
        two.iter().copied().fold(0.0, f64::max),
    );
    println!("  one thread:   {:7.1} M scopes/s", one / 1e6);
    println!("  two threads:  {:7.1} M scopes/s", two / 1e6);
    println!("  RATIO two threads / one thread:     {:6.3}   (target >= 1.9 with 2 free cores; this machine has {})",
        two / one, std::thread::available_parallelism().map_or(1, |n| n.get()));
}

/// Bytes of scope state on a fresh thread after touching 1, 10 and 100 call sites.
fn memory() {
    macro_rules! touch {
        ($($i:literal)*) => { $( { tickscope::scope!(concat!("mem ", $i)); } )* };
    }
    let one = std::thread::spawn(|| {
        touch!(0);
        tickscope::thread_bytes()
    })
    .join()
    .unwrap();
    let ten = std::thread::spawn(|| {
        touch!(0 1 2 3 4 5 6 7 8 9);
        tickscope::thread_bytes()
    })
    .join()
    .unwrap();
    println!("  memory per thread: {one} bytes with 1 call site touched, {ten} with 10 ({} per call site)", (ten - one) / 9);
}

/// 1,000 call sites × 64 threads: statistics memory and the time to summarise them.
fn many_sites() {
    use tickscope::__private::{enter, Callsite, Kind, Name};
    const SITES: usize = 1_000;
    const THREADS: usize = 64;
    const CALLS: usize = 200;
    // Call sites made at run time, as the `tracing` layer makes them for span call sites.
    let sites: Vec<&'static Callsite> = (0..SITES)
        .map(|i| {
            let name: &'static str = Box::leak(format!("site {i}").into_boxed_str());
            &*Box::leak(Box::new(Callsite::new(
                Name::Static(name),
                Kind::Scope,
                "bench.rs",
                i as u32 + 1,
                "overhead",
            )))
        })
        .collect();
    let sites = &sites;
    let (ready, done) = (
        std::sync::Barrier::new(THREADS + 1),
        std::sync::Barrier::new(THREADS + 1),
    );
    let bytes = std::sync::atomic::AtomicUsize::new(0);
    let mut summary_ms = 0.0;
    let mut summary_len = 0;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (ready, done, bytes) = (&ready, &done, &bytes);
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
                for _ in 0..CALLS {
                    for cs in sites {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Work of 1 to 64 units: durations over six powers of two.
                        let units = 1u64 << (x % 7);
                        let _g = enter(cs);
                        for i in 0..units {
                            black_box(i);
                        }
                    }
                }
                bytes.fetch_add(
                    tickscope::thread_bytes(),
                    std::sync::atomic::Ordering::Relaxed,
                );
                ready.wait();
                done.wait(); // alive while the summary is made
            });
        }
        ready.wait();
        let t = Instant::now();
        let text = tickscope::report_string(tickscope::SummaryFormat::Text);
        summary_ms = t.elapsed().as_secs_f64() * 1e3;
        summary_len = text.lines().count();
        done.wait();
    });
    let mb = bytes.into_inner() as f64 / 1e6;
    println!(
        "  {SITES} call sites x {THREADS} threads, {CALLS} calls each: statistics {mb:.1} MB ({:.0} bytes per call site per thread), exit summary of {summary_len} lines in {summary_ms:.1} ms",
        mb * 1e6 / (SITES * THREADS) as f64
    );
    println!(
        "  RATIO statistics memory / 32 MB:    {:6.3}   (target <= 1)",
        mb / 32.0
    );
    println!(
        "  RATIO exit summary time / 100 ms:   {:6.3}   (target <= 1)",
        summary_ms / 100.0
    );
}
