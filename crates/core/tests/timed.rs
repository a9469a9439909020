//! Futures and `tracing` spans: busy time (polls, entries) and wall time (first poll → ready,
//! creation → close), each checked against what the test measured itself around and inside
//! the same polls and spans: tickscope's figure must lie between the two.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tickscope::future::FutureExt;
use tickscope::SummaryFormat;

/// The summary row named `name`, as JSON.
fn row(name: &str) -> serde_json::Value {
    let json: serde_json::Value =
        serde_json::from_str(&tickscope::report_string(SummaryFormat::Json)).unwrap();
    json["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {json}"))
        .clone()
}

fn ns(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `got` lies within [`inner`, `outer`] (ns), give or take the two clocks' difference in rate
/// (tickscope's counter against `Instant`'s CLOCK_MONOTONIC: 0.5%) and a reading each side.
fn within(what: &str, got: f64, inner: f64, outer: f64) {
    let slack = 0.005 * outer + 2_000.0;
    assert!(
        got >= inner - slack && got <= outer + slack,
        "{what}: {got} ns outside [{inner}, {outer}]"
    );
}

/// What one future's polls were, as the test saw them.
#[derive(Default, Debug)]
struct Seen {
    polls: u64,
    threads: Vec<std::thread::ThreadId>,
    /// Around each poll of the profiled future (outside tickscope), and inside it.
    outer_busy: Duration,
    inner_busy: Duration,
    outer_max: Duration,
    inner_max: Duration,
    /// Wall: from just before its first poll to just after ready (outer), and from the start
    /// of its first poll's work to the end of its last (inner).
    outer_wall: Duration,
    inner_wall: Duration,
}

/// Measures every poll of `F`: from inside the profiled future (`inner`, which also counts
/// the polls and the threads they ran on) or from outside it.
struct Watch<F> {
    f: Pin<Box<F>>,
    seen: Arc<Mutex<Seen>>,
    first: Option<Instant>,
    inner: bool,
}

impl<F: Future> Future for Watch<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let t = Instant::now();
        let first = *self.first.get_or_insert(t);
        let r = self.f.as_mut().poll(cx);
        let d = t.elapsed();
        let inner = self.inner;
        let mut guard = self.seen.lock().unwrap();
        let s = &mut *guard;
        let (busy, max, wall) = if inner {
            s.polls += 1;
            s.threads.push(std::thread::current().id());
            (&mut s.inner_busy, &mut s.inner_max, &mut s.inner_wall)
        } else {
            (&mut s.outer_busy, &mut s.outer_max, &mut s.outer_wall)
        };
        *busy += d;
        *max = (*max).max(d);
        if r.is_ready() {
            *wall = first.elapsed();
        }
        r
    }
}

/// Spins for about `d` (work that a poll does).
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A task: a few rounds of CPU work, each followed by a wait on a timer or a channel.
async fn task(i: u64, tx: tokio::sync::mpsc::Sender<u64>) -> u64 {
    for round in 0..4 {
        spin(Duration::from_micros(50 + 10 * (i % 5)));
        if round % 2 == 0 {
            tokio::time::sleep(Duration::from_micros(300)).await;
        } else {
            tx.send(i).await.unwrap();
        }
    }
    i
}

#[test]
fn futures_that_move_between_threads_are_counted_where_each_poll_ran_and_once_whole() {
    let _turn = crate::scopes_turn();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    // Batches until a future is seen polled on two threads (work stealing moves them; a
    // loaded machine may need a few batches): every batch counts in the figures.
    let mut all: Vec<Arc<Mutex<Seen>>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen: Vec<Arc<Mutex<Seen>>> = (0..48).map(|_| Arc::default()).collect();
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
            let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
            let mut handles = Vec::new();
            for (i, s) in seen.iter().enumerate() {
                let inner = Watch {
                    f: Box::pin(task(i as u64, tx.clone())),
                    seen: s.clone(),
                    first: None,
                    inner: true,
                };
                let outer = Watch {
                    f: Box::pin(inner.profiled("migrating task")),
                    seen: s.clone(),
                    first: None,
                    inner: false,
                };
                handles.push(tokio::spawn(outer));
            }
            drop(tx);
            for h in handles {
                h.await.unwrap();
            }
            drain.await.unwrap();
        });
        all.extend(seen);
        let moved = all.iter().any(|s| {
            let s = s.lock().unwrap();
            s.threads.iter().any(|t| *t != s.threads[0])
        });
        if moved {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no future ever moved between threads"
        );
    }
    let sum = |f: &dyn Fn(&Seen) -> Duration| -> f64 {
        all.iter()
            .map(|s| f(&s.lock().unwrap()).as_nanos() as f64)
            .sum()
    };
    let max = |f: &dyn Fn(&Seen) -> Duration| -> f64 {
        all.iter()
            .map(|s| f(&s.lock().unwrap()).as_nanos() as f64)
            .fold(0.0, f64::max)
    };
    let polls: u64 = all.iter().map(|s| s.lock().unwrap().polls).sum();
    let r = row("migrating task");
    // Each poll was a scope on the thread that ran it; the future's wall time counted once.
    assert_eq!(r["calls"].as_u64(), Some(polls), "{r}");
    let w = &r["wall"];
    assert_eq!(w["kind"], "future", "{r}");
    assert_eq!(w["calls"].as_u64(), Some(all.len() as u64), "{r}");
    assert_eq!(w["cancelled"].as_u64(), Some(0), "{r}");
    within(
        "busy",
        ns(&r["total_ns"]),
        sum(&|s| s.inner_busy),
        sum(&|s| s.outer_busy),
    );
    assert!(ns(&r["self_ns"]) <= ns(&r["total_ns"]), "{r}");
    within(
        "longest poll",
        ns(&r["max_ns"]),
        max(&|s| s.inner_max),
        max(&|s| s.outer_max),
    );
    within(
        "wall",
        ns(&w["total_ns"]),
        sum(&|s| s.inner_wall),
        sum(&|s| s.outer_wall),
    );
    within(
        "longest wall",
        ns(&w["max_ns"]),
        max(&|s| s.inner_wall),
        max(&|s| s.outer_wall),
    );
    // Waiting is not busy: each task slept or waited between its rounds.
    assert!(ns(&w["total_ns"]) > ns(&r["total_ns"]), "{r}");
    assert!(ns(&w["p50_ns"]) <= ns(&w["p99_ns"]) && ns(&w["p99_ns"]) <= ns(&w["max_ns"]));
}

#[tickscope::profile(name = "profiled async fn")]
async fn waits(ms: u64) -> Result<u64, std::num::ParseIntError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let n: u64 = "7".parse()?;
    Ok(n + ms)
}

#[test]
fn async_fns_count_cancellations_apart_and_futures_never_polled_not_at_all() {
    let _turn = crate::scopes_turn();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        // Three finish.
        for _ in 0..3 {
            assert_eq!(waits(1).await, Ok(8));
        }
        // Two are cancelled by a timeout after their first poll.
        for _ in 0..2 {
            let r = tokio::time::timeout(Duration::from_millis(5), waits(60_000)).await;
            assert!(r.is_err(), "a 60 s wait finished before its 5 ms deadline");
        }
        // One is made and dropped without a poll: no call at all.
        drop(waits(1));
    });
    let r = row("profiled async fn");
    let w = &r["wall"];
    assert_eq!(w["calls"].as_u64(), Some(5), "{r}");
    assert_eq!(w["cancelled"].as_u64(), Some(2), "{r}");
    // Each finished one slept 1 ms at least; each cancelled one lived 5 ms at least.
    assert!(ns(&w["total_ns"]) >= 3.0 * 1e6 + 2.0 * 5e6 - 1e5, "{r}");
    assert!(ns(&w["min_ns"]) >= 1e6 - 1e4, "{r}");
    // Polls: at least two for each finished (before and after its sleep), one or more for
    // each cancelled; a future's polls lie within its life, so busy never passes wall.
    assert!(r["calls"].as_u64().unwrap() >= 3 * 2 + 2, "{r}");
    assert!(ns(&r["total_ns"]) <= ns(&w["total_ns"]), "{r}");
}

/// `#[profile]` without a name on an `async fn` (and on a method) names the row after the
/// function, as on a plain one.
#[test]
fn an_unnamed_async_fn_is_named_after_its_function() {
    struct Store;
    impl Store {
        #[tickscope::profile]
        async fn lookup(&self) -> u32 {
            4
        }
    }
    #[tickscope::profile]
    async fn unnamed_async_step() -> u32 {
        Store.lookup().await + 1
    }
    let _turn = crate::scopes_turn();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(unnamed_async_step()), 5);
    for name in ["unnamed_async_step", "Store::lookup"] {
        let r = row(name);
        assert_eq!(r["wall"]["calls"].as_u64(), Some(1), "{r}");
    }
}

/// Call sites entered by id (as futures and spans are) whose ids share the low bits of the
/// thread's slot cache: each entry counts at its own call site, in any order.
#[test]
fn call_sites_entered_by_id_count_at_their_own_row_whatever_their_ids() {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    // 40 sites (more than the cache holds, so ids collide in it), entered interleaved.
    let names: Vec<&'static str> = (0..40)
        .map(|i| &*Box::leak(format!("by id {i}").into_boxed_str()))
        .collect();
    std::thread::spawn(move || {
        let waker = std::task::Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        for round in 0..40 {
            for (i, name) in names.iter().enumerate() {
                if round <= i {
                    let mut f = std::pin::pin!(std::future::ready(()).profiled(name));
                    assert!(f.as_mut().poll(&mut cx).is_ready());
                }
            }
        }
    })
    .join()
    .unwrap();
    for i in [0usize, 1, 15, 16, 17, 31, 32, 39] {
        let r = row(&format!("by id {i}"));
        assert_eq!(r["calls"].as_u64(), Some(i as u64 + 1), "{r}");
    }
}

#[cfg(feature = "tracing")]
mod spans {
    use super::*;
    use std::sync::Barrier;
    use tracing_subscriber::layer::SubscriberExt;

    fn dispatch() -> tracing::Dispatch {
        tracing::Dispatch::new(
            tracing_subscriber::registry().with(tickscope::tracing::Layer::default()),
        )
    }

    #[test]
    fn a_span_entered_on_several_threads_is_busy_there_and_lives_once() {
        let _turn = crate::scopes_turn();
        let d = dispatch();
        let before_new = Instant::now();
        let line = line!() as u64 + 1;
        let span = tracing::dispatcher::with_default(&d, || tracing::info_span!("shared span"));
        let after_new = Instant::now();
        let (inner, outer) = (Arc::new(Mutex::new(0f64)), Arc::new(Mutex::new(0f64)));
        let barrier = Arc::new(Barrier::new(3));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (d, span, inner, outer, barrier) = (
                    d.clone(),
                    span.clone(),
                    inner.clone(),
                    outer.clone(),
                    barrier.clone(),
                );
                std::thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        barrier.wait();
                        for _ in 0..20 {
                            let t0 = Instant::now();
                            span.in_scope(|| {
                                let t1 = Instant::now();
                                spin(Duration::from_micros(100));
                                *inner.lock().unwrap() += t1.elapsed().as_nanos() as f64;
                            });
                            *outer.lock().unwrap() += t0.elapsed().as_nanos() as f64;
                        }
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let before_close = Instant::now();
        drop(span);
        let after_close = Instant::now();
        let r = row("shared span");
        assert_eq!(r["calls"].as_u64(), Some(60), "{r}");
        assert_eq!(r["line"].as_u64(), Some(line), "{r}");
        assert_eq!(r["file"], "crates/core/tests/timed.rs", "{r}");
        within(
            "busy",
            ns(&r["total_ns"]),
            *inner.lock().unwrap(),
            *outer.lock().unwrap(),
        );
        let w = &r["wall"];
        assert_eq!(w["kind"], "span", "{r}");
        assert_eq!(w["calls"].as_u64(), Some(1), "{r}");
        within(
            "lifetime",
            ns(&w["total_ns"]),
            (before_close - after_new).as_nanos() as f64,
            (after_close - before_new).as_nanos() as f64,
        );
    }

    #[test]
    fn spans_exited_out_of_order_or_on_another_thread_are_counted_never_paired_wrongly() {
        let _turn = crate::scopes_turn();
        let d = dispatch();
        let (ooo, foreign) = (
            tickscope::tracing::out_of_order_exits(),
            tickscope::tracing::foreign_exits(),
        );
        tracing::dispatcher::with_default(&d, || {
            let a = tracing::info_span!("outer out of order");
            let b = tracing::info_span!("inner out of order");
            let ga = a.enter();
            let gb = b.enter();
            drop(ga); // a exits while b is still entered
            drop(gb);
            // Re-entry of one span, nested: both entries count.
            let c = tracing::info_span!("reentered span");
            let g1 = c.enter();
            let g2 = c.enter();
            drop(g2);
            drop(g1);
        });
        // Entered on this thread, exited on another, through the dispatcher itself.
        let id = tracing::dispatcher::with_default(&d, || {
            let s = tracing::info_span!("crossing span");
            let id = s.id().unwrap();
            d.enter(&id);
            std::mem::forget(s); // kept open; closed below
            id
        });
        let d2 = d.clone();
        let id2 = id.clone();
        std::thread::spawn(move || d2.exit(&id2)).join().unwrap();
        assert!(tickscope::tracing::out_of_order_exits() > ooo);
        assert!(tickscope::tracing::foreign_exits() > foreign);
        // The outer one is whole; the inner one, closed with it, is counted as abandoned
        // rather than given the outer one's end.
        assert_eq!(row("outer out of order")["calls"].as_u64(), Some(1));
        assert_eq!(row("inner out of order")["calls"].as_u64(), Some(0));
        assert_eq!(row("reentered span")["calls"].as_u64(), Some(2));
        let json: serde_json::Value =
            serde_json::from_str(&tickscope::report_string(SummaryFormat::Json)).unwrap();
        assert!(json["lost"]["unbalanced"].as_u64() >= Some(1), "{json}");
        // Closed on another thread too: its lifetime still counts once.
        std::thread::spawn(move || {
            d.exit(&id);
            d.try_close(id);
        })
        .join()
        .unwrap();
        let crossing = row("crossing span");
        assert_eq!(crossing["wall"]["calls"].as_u64(), Some(1), "{crossing}");
        // Its entry, never exited on its thread, was not given the thread's end as its end.
        assert_eq!(crossing["calls"].as_u64(), Some(0), "{crossing}");
    }

    #[test]
    fn spans_nested_past_the_inline_list_pair_as_the_first_ones_do() {
        let _turn = crate::scopes_turn();
        let d = dispatch();
        let (ooo, foreign) = (
            tickscope::tracing::out_of_order_exits(),
            tickscope::tracing::foreign_exits(),
        );
        tracing::dispatcher::with_default(&d, || {
            // 48 entries of one call site, nested: the layer keeps 32 inline, the rest apart.
            let spans: Vec<_> = (0..48).map(|_| tracing::info_span!("deep span")).collect();
            let mut guards: Vec<_> = spans.iter().map(|s| s.enter()).collect();
            // Out of order past the inline ones: 41..47 abandoned, 40 counted.
            drop(guards.remove(40));
            // Then among them, with entries beyond: 11..39 abandoned, 10 counted.
            drop(guards.remove(10));
            // The rest in order: the abandoned ones record nothing, 9..0 count.
            while let Some(g) = guards.pop() {
                drop(g);
            }
            // The list is empty again: a later span pairs as usual.
            tracing::info_span!("after deep spans").in_scope(|| ());
        });
        assert_eq!(tickscope::tracing::out_of_order_exits(), ooo + 2);
        assert_eq!(tickscope::tracing::foreign_exits(), foreign);
        assert_eq!(row("deep span")["calls"].as_u64(), Some(12));
        assert_eq!(row("after deep spans")["calls"].as_u64(), Some(1));
    }

    #[test]
    fn span_ids_reused_or_shared_by_two_subscribers_count_at_their_own_call_sites() {
        let _turn = crate::scopes_turn();
        let (d1, d2) = (dispatch(), dispatch());
        // Two subscribers hand out the same ids: each entry counts at its own span's site.
        let a =
            tracing::dispatcher::with_default(&d1, || tracing::info_span!("first subscriber's"));
        let b =
            tracing::dispatcher::with_default(&d2, || tracing::info_span!("second subscriber's"));
        assert_eq!(a.id(), b.id(), "the case this test is for");
        for _ in 0..3 {
            a.in_scope(|| b.in_scope(|| ()));
        }
        for _ in 0..5 {
            b.in_scope(|| ());
        }
        assert_eq!(row("first subscriber's")["calls"].as_u64(), Some(3));
        assert_eq!(row("second subscriber's")["calls"].as_u64(), Some(8));
        // A closed span's id is taken again by a later span, once its slot's generation
        // wraps: spans of two call sites in turn, until an id repeats at the other site.
        let mut seen = std::collections::HashMap::new();
        let mut repeated = 0;
        let mut counts = [0u64; 2];
        tracing::dispatcher::with_default(&d1, || {
            for i in 0..1_000_000u64 {
                let which = (i % 2) as usize;
                let s = if which == 0 {
                    tracing::info_span!("even span")
                } else {
                    tracing::info_span!("odd span")
                };
                let id = s.id().unwrap().into_u64();
                if seen.insert(id, which).is_some_and(|w| w != which) {
                    repeated += 1;
                }
                s.in_scope(|| ());
                counts[which] += 1;
                if repeated >= 10 {
                    break;
                }
            }
        });
        assert!(
            repeated >= 10,
            "no id was reused at another call site: {counts:?}"
        );
        assert_eq!(row("even span")["calls"].as_u64(), Some(counts[0]));
        assert_eq!(row("odd span")["calls"].as_u64(), Some(counts[1]));
    }
}
