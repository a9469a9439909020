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
//! - **registry + an empty layer**: what tracing-subscriber's dispatch to a layer costs alone;
//!   **registry + a timing layer's floor**: a layer that reads the counter in `on_enter` and
//!   `on_exit` and adds the difference to a thread-local, the least any layer that times
//!   spans can cost. The issue's 30 ns is printed too, but on a host where the floor itself
//!   adds more than that, no layer reaches it: the ratio to the floor is the target that
//!   holds on every machine (≤ 1.25, the scope's).
//! - **registry + tracing-chrome**: a peer layer (it writes Chrome trace events on a thread
//!   of its own), in the same run, after the others (its writer thread would slow them). tracing-timing was left out: it measures the time between
//!   events, not spans, and brings crossbeam, hdrhistogram and quanta.
//! - **future**: a ready future polled once through `.profiled()` against the same future
//!   bare, and against the floor of a timed poll (a wrapper reading the counter around the
//!   poll and adding the difference to a thread-local).
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

thread_local! {
    /// The timing layer's floor: its entry's reading.
    static T0: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A layer that does nothing: tracing-subscriber's dispatch alone.
struct Empty;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Empty {
    fn on_enter(&self, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {}
    fn on_exit(&self, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {}
}

/// The least a layer that times spans does: a counter read at entry and exit, the
/// difference added to a thread-local (one level: enough for this loop).
struct Floor;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Floor {
    fn on_enter(&self, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        T0.with(|t| t.set(floor::raw()));
    }
    fn on_exit(&self, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        let t1 = floor::raw();
        floor::add(t1.wrapping_sub(T0.with(|t| t.get())));
    }
}

/// The least a future that times its polls does: a counter read around the poll, the
/// difference added to a thread-local.
struct Timed<F>(F);

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let t0 = floor::raw();
        // SAFETY: the inner future is pinned structurally: `Timed` never moves it out and
        // has no `Drop`.
        let inner = unsafe { self.map_unchecked_mut(|t| &mut t.0) };
        let r = inner.poll(cx);
        floor::add(floor::raw().wrapping_sub(t0));
        r
    }
}

#[derive(Clone, Copy, PartialEq)]
enum How {
    Bare,
    Floor,
    Profiled,
}

#[inline(never)]
fn futures(n: u64, how: How) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    for i in 0..n {
        let f = async move { black_box(i) };
        let r = match how {
            How::Profiled => pin!(f.profiled("bench future")).poll(&mut cx),
            How::Floor => pin!(Timed(f)).poll(&mut cx),
            How::Bare => pin!(f).poll(&mut cx),
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
    let empty = tracing::Dispatch::new(tracing_subscriber::registry().with(Empty));
    let floored = tracing::Dispatch::new(tracing_subscriber::registry().with(Floor));
    let (mut reg, mut lay, mut scope, mut floor, mut bare, mut prof, mut chr) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut emp, mut lfl, mut ffl) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        reg.push(tracing::dispatcher::with_default(&registry, || {
            per_iter(N, spans)
        }));
        lay.push(tracing::dispatcher::with_default(&layered, || {
            per_iter(N, spans)
        }));
        scope.push(per_iter(N, scope_loop));
        floor.push(per_iter(N, floor_loop));
        emp.push(tracing::dispatcher::with_default(&empty, || {
            per_iter(N, spans)
        }));
        lfl.push(tracing::dispatcher::with_default(&floored, || {
            per_iter(N, spans)
        }));
        bare.push(per_iter(N, |n| futures(n, How::Bare)));
        ffl.push(per_iter(N, |n| futures(n, How::Floor)));
        prof.push(per_iter(N, |n| futures(n, How::Profiled)));
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
    let (emp, lfl, ffl) = (best(&emp), best(&lfl), best(&ffl));
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
        "  registry + an empty layer {emp:5.2} ns   (tracing-subscriber's dispatch to a layer adds {:.2} ns)",
        emp - reg
    );
    println!(
        "  registry + a timing layer's floor {lfl:.2} ns   (adds {:.2} ns: the dispatch, two counter reads and a TLS add)",
        lfl - reg
    );
    println!(
        "  registry + tracing-chrome {chr:5.2} ns   (it adds {:.2} ns)",
        chr - reg
    );
    println!("  scope! alone            {scope:7.2} ns   (floor: two counter reads + a TLS add {floor:.2} ns)");
    println!(
        "  RATIO layer's cost / a timing layer's floor's: {:.3}   (target <= 1.25, the scope's)",
        (lay - reg) / (lfl - reg)
    );
    println!(
        "  RATIO layer's cost / 30 ns: {:.3}   (the issue's target; the floor alone is {:.3} here)",
        (lay - reg) / 30.0,
        (lfl - reg) / 30.0
    );
    println!(
        "  RATIO layer's cost / scope!: {:.3}   (what finding the span's call site and the entered list add)",
        (lay - reg) / scope
    );
    println!(
        "  RATIO layer's cost / tracing-chrome's: {:.3}",
        (lay - reg) / (chr - reg)
    );
    println!("a ready future polled once: bare {bare:.2} ns, its poll timed (the floor) {ffl:.2} ns, .profiled() {prof:.2} ns (adds {:.2} ns: the poll as a scope, whose readings are also the wall time's, and the wall time's atomics)", prof - bare);
    println!(
        "  RATIO .profiled()'s cost / a timed poll's: {:.3}   (target <= 1.25, the scope's)",
        (prof - bare) / (ffl - bare)
    );
    println!(
        "  RATIO .profiled()'s cost / 30 ns: {:.3}   (the issue's target; the floor alone is {:.3} here)",
        (prof - bare) / 30.0,
        (ffl - bare) / 30.0
    );
}
