//! `tracing` spans through tickscope's layer, measured side by side in one run, printed as
//! a ratio:
//!
//! ```text
//! cargo bench -p tickscope --features tracing --bench tracing
//! ```
//!
//! - **registry**: a span entered and exited (`span.enter()` dropped) with
//!   `tracing_subscriber::registry()` alone as the subscriber;
//! - **registry + layer**: the same with `tickscope::tracing::Layer` on it. The layer's cost
//!   is the difference; target ≤ 30 ns per enter+exit (one scope costs two counter reads,
//!   themselves ~20 ns on a VM where one `rdtsc` costs ~10 ns: see the `floor`);
//! - **scope!**: a bare `tickscope::scope!` for comparison, and the **floor** (two counter
//!   reads and a thread-local add, as in the overhead benchmark).
//! - **registry + tracing-chrome**: a peer layer (it writes Chrome trace events on a thread
//!   of its own), in the same run, after the others (its writer thread would slow them). tracing-timing was left out: it measures the time between
//!   events, not spans, and brings crossbeam, hdrhistogram and quanta.
//! - **future**: a ready future polled once through `.profiled()` against the same future
//!   bare.
//!
//! Every figure is the best of several interleaved rounds.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};

use tickscope::future::FutureExt;
use tracing_subscriber::layer::SubscriberExt;

#[path = "common/floor.rs"]
mod floor;
use floor::{best, floor_loop, per_iter, scope_loop};

const N: u64 = 1_000_000;
const ROUNDS: usize = 11;

fn spans(n: u64) {
    let span = tracing::info_span!("bench span");
    for i in 0..n {
        let _g = span.enter();
        black_box(i);
    }
}

#[path = "common/waker.rs"]
mod waker;
use waker::noop_waker;

#[inline(never)]
fn futures(n: u64, profiled: bool) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    for i in 0..n {
        let f = async move { black_box(i) };
        let r = if profiled {
            pin!(f.profiled("bench future")).poll(&mut cx)
        } else {
            pin!(f).poll(&mut cx)
        };
        assert!(matches!(r, Poll::Ready(_)));
    }
}

fn main() {
    tickscope::Config::new()
        .summary(tickscope::SummaryFormat::Off)
        .install();
    tickscope::ticks_per_second();
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    let layered = tracing::Dispatch::new(
        tracing_subscriber::registry().with(tickscope::tracing::Layer::default()),
    );
    let trace = std::env::temp_dir().join(format!("tickscope-bench-{}.json", std::process::id()));
    let (chrome_layer, chrome_guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(&trace)
        .build();
    let chrome = tracing::Dispatch::new(tracing_subscriber::registry().with(chrome_layer));
    let (mut reg, mut lay, mut scope, mut floor, mut bare, mut prof, mut chr) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        reg.push(tracing::dispatcher::with_default(&registry, || {
            per_iter(N, spans)
        }));
        lay.push(tracing::dispatcher::with_default(&layered, || {
            per_iter(N, spans)
        }));
        scope.push(per_iter(N, scope_loop));
        floor.push(per_iter(N, floor_loop));
        bare.push(per_iter(N, |n| futures(n, false)));
        prof.push(per_iter(N, |n| futures(n, true)));
    }
    let (reg, lay, scope, floor) = (best(&reg), best(&lay), best(&scope), best(&floor));
    // tracing-chrome last and apart: its writer thread keeps a core busy while it drains, which
    // would slow whatever ran beside it.
    for _ in 0..ROUNDS {
        chr.push(tracing::dispatcher::with_default(&chrome, || {
            per_iter(N, spans)
        }));
    }
    let (bare, prof, chr) = (best(&bare), best(&prof), best(&chr));
    drop(chrome_guard);
    let _ = std::fs::remove_file(&trace);
    println!("tracing spans, enter + exit, best of {ROUNDS} rounds of {N}:");
    println!("  CPU: {}", floor::cpu_model());
    println!("  registry alone          {reg:7.2} ns");
    println!(
        "  registry + our layer    {lay:7.2} ns   (the layer adds {:.2} ns)",
        lay - reg
    );
    println!(
        "  registry + tracing-chrome {chr:5.2} ns   (it adds {:.2} ns)",
        chr - reg
    );
    println!("  scope! alone            {scope:7.2} ns   (floor: two counter reads + a TLS add {floor:.2} ns)");
    println!(
        "  RATIO layer's cost / 30 ns: {:.3}   (target <= 1.0)",
        (lay - reg) / 30.0
    );
    println!(
        "  RATIO layer's cost / scope!: {:.3}   (what finding the span's call site and the entered list add)",
        (lay - reg) / scope
    );
    println!(
        "  RATIO layer's cost / tracing-chrome's: {:.3}",
        (lay - reg) / (chr - reg)
    );
    println!("a ready future polled once: bare {bare:.2} ns, .profiled() {prof:.2} ns (adds {:.2} ns: the poll as a scope, whose readings are also the wall time's, and the wall time's atomics)", prof - bare);
}
