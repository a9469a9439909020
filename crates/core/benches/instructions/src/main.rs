//! The loops `count.py` runs under callgrind: `PROG N CASE` runs CASE's loop N times (after
//! a warm-up that registers the thread, the call sites and the clock).

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::Context;

use tickscope::future::FutureExt;
use tracing_subscriber::layer::SubscriberExt;

/// One scope an iteration.
#[inline(never)]
fn scope_loop(n: u64) {
    for i in 0..n {
        tickscope::scope!("instructions scope");
        black_box(i);
    }
}

/// Two nested scopes an iteration.
#[inline(never)]
fn nested_loop(n: u64) {
    for i in 0..n {
        tickscope::scope!("instructions outer");
        {
            tickscope::scope!("instructions inner");
            black_box(i);
        }
    }
}

/// A span entered and exited an iteration, under whatever subscriber is the default.
#[inline(never)]
fn span_loop(n: u64) {
    let span = tracing::info_span!("instructions span");
    for i in 0..n {
        let _g = span.enter();
        black_box(i);
    }
}

#[path = "../../common/waker.rs"]
mod waker;
use waker::noop_waker;

/// A one-poll future through `.profiled()` an iteration.
#[inline(never)]
fn future_loop(n: u64) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    for i in 0..n {
        let f = async move { black_box(i) };
        let _ = black_box(pin!(f.profiled("instructions future")).poll(&mut cx));
    }
}

fn main() {
    tickscope::Config::new()
        .summary(tickscope::SummaryFormat::Off)
        .install();
    tickscope::ticks_per_second();
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let case = args.next().unwrap_or_else(|| "scope".into());
    let layered = tracing::Dispatch::new(
        tracing_subscriber::registry().with(tickscope::tracing::Layer::default()),
    );
    let registry = tracing::Dispatch::new(tracing_subscriber::registry());
    let run = |f: fn(u64)| {
        f(10_000);
        f(n)
    };
    match case.as_str() {
        "scope" => run(scope_loop),
        "nested" => run(nested_loop),
        "span" => tracing::dispatcher::with_default(&layered, || run(span_loop)),
        "span-registry" => tracing::dispatcher::with_default(&registry, || run(span_loop)),
        "future" => run(future_loop),
        other => {
            eprintln!("unknown case {other:?}: scope, nested, span, span-registry, future");
            std::process::exit(2);
        }
    }
}
