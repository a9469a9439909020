//! The per-thread recorder's tests, driven over a plain stack with a fake clock: each runs
//! on the common path (`enter_fast`, `exit_fast`), and again on the general one.

use super::*;
use crate::clock::tests::FakeCounter;
use crate::scope::callsite::{Callsite, Kind, Name};
use std::cell::Cell;

thread_local! {
    /// Set by [`every_test_again_on_the_general_path`] while it runs the others.
    static GENERAL: Cell<bool> = const { Cell::new(false) };
}

/// A recorder on the common path, or on the general one while
/// [`every_test_again_on_the_general_path`] runs.
pub(crate) fn recorder() -> Recorder {
    Recorder {
        stats: ThreadStats::leak(),
        stack: Box::new(Stack::new()),
        general: GENERAL.get(),
    }
}

/// The tests below ran with each scope on the common path (`enter_fast`, `exit_fast`,
/// except where a scope is nested or deep); here each runs again with every scope on the
/// general one (`enter_slot`, `exit`), which captures, counted allocations and the OS clock
/// take. Both must record the same figures.
#[test]
fn every_test_again_on_the_general_path() {
    GENERAL.set(true);
    nested_scopes_split_inclusive_and_self_time();
    the_latest_duration_waits_in_its_slot_and_is_read_once();
    recursive_scope_counts_outermost_time_once();
    group_entered_through_its_own_api_counts_calls_but_time_once();
    out_of_order_guards_abandon_inner_scopes_and_count_them();
    scopes_longer_than_many_anchor_periods_are_still_checked();
    an_abandoned_scope_does_not_stay_open_forever();
    a_late_guard_cannot_close_a_newer_scope_at_its_level();
    a_reset_thread_state_is_empty_for_its_next_thread();
    counter_jumps_inside_scopes_are_clock_errors_replaced_by_reference_time();
    stack_deeper_than_the_limit_is_counted_not_recorded();
    GENERAL.set(false);
}

/// A fast-path scope closed on the fast path has flags 0, a nested one does not, and a
/// general-path one is marked to take the general exit.
#[test]
fn the_paths_mark_their_scopes() {
    let (r, c) = (recorder(), FakeCounter::new());
    let o = r.enter(OUTER.id(), &c).unwrap();
    let n = r.enter(OUTER.id(), &c).unwrap();
    assert_eq!((o.flags, n.flags), (0, NESTED));
    r.exit(n, &c);
    r.exit(o, &c);
    let g = Recorder {
        general: true,
        ..recorder()
    };
    let o = g.enter(OUTER.id(), &c).unwrap();
    assert_eq!(o.flags, SLOW);
    g.exit(o, &c);
    assert_eq!((row(&r, &OUTER).calls, row(&g, &OUTER).calls), (2, 1));
}

pub(crate) fn row(r: &Recorder, cs: &'static Callsite) -> Row {
    let mut out = Row::empty();
    let id = cs.id();
    let reading = r.stats.pool.reading();
    r.stats.for_each_slot(|i, s| {
        if i == id {
            out = Row::read(s, &reading);
        }
    });
    out
}

static OUTER: Callsite = Callsite::new(Name::Static("outer"), Kind::Scope, "t.rs", 1, "t");
static INNER: Callsite = Callsite::new(Name::Static("inner"), Kind::Scope, "t.rs", 2, "t");
static REC: Callsite = Callsite::new(Name::Static("rec"), Kind::Scope, "t.rs", 3, "t");
static API_A: Callsite = Callsite::new(Name::Static("thread-api"), Kind::Group, "t.rs", 4, "t");
static API_B: Callsite = Callsite::new(Name::Static("thread-api"), Kind::Group, "t.rs", 5, "t");

#[test]
fn nested_scopes_split_inclusive_and_self_time() {
    let (r, c) = (recorder(), FakeCounter::new());
    let o = r.enter(OUTER.id(), &c).unwrap();
    c.advance_ns(100);
    for _ in 0..3 {
        let i = r.enter(INNER.id(), &c).unwrap();
        c.advance_ns(50);
        r.exit(i, &c);
    }
    c.advance_ns(10);
    r.exit(o, &c);
    let (outer, inner) = (row(&r, &OUTER), row(&r, &INNER));
    assert_eq!((outer.calls, outer.incl, outer.self_ticks), (1, 260, 110));
    assert_eq!((inner.calls, inner.incl, inner.self_ticks), (3, 150, 150));
    assert_eq!((inner.min, inner.max), (50, 50));
    assert_eq!(r.depth(), 0);
}

/// The histogram takes each outermost duration at the thread's next exit; until then
/// the duration waits in its slot, and a read counts it either way, exactly once.
#[test]
fn the_latest_duration_waits_in_its_slot_and_is_read_once() {
    static WAIT: Callsite = Callsite::new(Name::Static("wait"), Kind::Scope, "t.rs", 21, "t");
    let (r, c) = (recorder(), FakeCounter::new());
    let o = r.enter(WAIT.id(), &c).unwrap();
    c.advance_ns(100);
    r.exit(o, &c);
    let slot = r.stats.slot(WAIT.id());
    assert_eq!(slot.pending.load(Relaxed), 100);
    let mut in_hist = super::super::hist::Counts::new();
    slot.hist.add_to(&r.stats.pool.reading(), &mut in_hist);
    assert_eq!(in_hist.quantile(0.5), None, "not in the histogram yet");
    assert_eq!(row(&r, &WAIT).hist.quantile(0.5), Some(100), "but read");
    // The next exit (of any scope) moves it in; the new one waits.
    let i = r.enter(INNER.id(), &c).unwrap();
    c.advance_ns(7);
    r.exit(i, &c);
    assert_eq!(slot.pending.load(Relaxed), NONE);
    let mut in_hist = super::super::hist::Counts::new();
    slot.hist.add_to(&r.stats.pool.reading(), &mut in_hist);
    assert_eq!(in_hist.quantile(1.0), Some(100));
    assert_eq!(row(&r, &WAIT).hist.quantile(1.0), Some(100), "counted once");
    assert_eq!(row(&r, &INNER).hist.quantile(0.5), Some(7));
    // Nested calls add no duration of their own (their time is in the outer call's).
    let a = r.enter(WAIT.id(), &c).unwrap();
    let b = r.enter(WAIT.id(), &c).unwrap();
    c.advance_ns(50);
    r.exit(b, &c);
    r.exit(a, &c);
    let w = row(&r, &WAIT);
    assert_eq!((w.calls, w.outer), (3, 2));
    assert_eq!(
        (w.hist.quantile(0.0), w.hist.quantile(1.0)),
        (Some(50), Some(100))
    );
}

#[test]
fn recursive_scope_counts_outermost_time_once() {
    fn fib(n: u32, r: &Recorder, c: &FakeCounter) {
        let g = r.enter(REC.id(), c).unwrap();
        c.advance_ns(10);
        if n > 1 {
            fib(n - 1, r, c);
            fib(n - 2, r, c);
        }
        r.exit(g, c);
    }
    let (r, c) = (recorder(), FakeCounter::new());
    fib(5, &r, &c); // 15 calls, 10 ns each
    let rec = row(&r, &REC);
    assert_eq!(rec.calls, 15);
    assert_eq!(rec.outer, 1);
    assert_eq!(
        rec.incl, 150,
        "inclusive time counted once, not once per level"
    );
    assert_eq!(
        rec.self_ticks, 150,
        "self time of all levels adds up to the whole"
    );
    let p50 = rec.hist.quantile(0.5).unwrap();
    assert!(
        p50.abs_diff(150) <= 3,
        "one outermost call of 150 ticks: p50 {p50}"
    );
}

#[test]
fn group_entered_through_its_own_api_counts_calls_but_time_once() {
    let (r, c) = (recorder(), FakeCounter::new());
    // realloc() -> alloc(): both public functions of one API group.
    let a = r.enter(API_A.id(), &c).unwrap();
    c.advance_ns(30);
    let b = r.enter(API_B.id(), &c).unwrap();
    c.advance_ns(20);
    r.exit(b, &c);
    r.exit(a, &c);
    let g = row(&r, &API_A);
    assert_eq!(API_A.id(), API_B.id());
    assert_eq!((g.calls, g.outer, g.incl, g.self_ticks), (2, 1, 50, 50));
}

#[test]
fn out_of_order_guards_abandon_inner_scopes_and_count_them() {
    let (r, c) = (recorder(), FakeCounter::new());
    let o = r.enter(OUTER.id(), &c).unwrap();
    let i = r.enter(INNER.id(), &c).unwrap();
    c.advance_ns(40);
    r.exit(o, &c); // the outer guard goes first: inner is abandoned, and counted
    r.exit(i, &c); // and its own late exit is ignored
    assert_eq!(row(&r, &INNER).calls, 0);
    assert_eq!(r.stats.unbalanced.load(Relaxed), 1);
    assert_eq!(row(&r, &OUTER).incl, 40);
    assert_eq!(r.depth(), 0);
    let o = r.enter(OUTER.id(), &c).unwrap();
    r.exit(o, &c);
    assert_eq!(row(&r, &OUTER).calls, 2, "the stack is usable again");
}

#[test]
fn scopes_longer_than_many_anchor_periods_are_still_checked() {
    static LONG: Callsite = Callsite::new(Name::Static("long"), Kind::Scope, "t.rs", 11, "t");
    let (r, c) = (recorder(), FakeCounter::new());
    // 100 anchors first, so the long scope's own epoch is not the thread's first one.
    for _ in 0..100 {
        c.advance_ns(5_000_000);
        let i = r.enter(INNER.id(), &c).unwrap();
        r.exit(i, &c);
    }
    let g = r.enter(LONG.id(), &c).unwrap();
    // 500 inner scopes, each a few anchor periods apart: the outer scope's own anchor
    // is long gone from the exact ring when it ends.
    for _ in 0..500 {
        c.advance_ns(5_000_000);
        let i = r.enter(INNER.id(), &c).unwrap();
        r.exit(i, &c);
    }
    c.jump_ticks(60_000_000_000); // and then the counter leaps a minute
    r.exit(g, &c);
    let long = row(&r, &LONG);
    assert_eq!(long.clock_errors, 1);
    // Replaced by the reference time, measured from an older anchor (epoch 64).
    assert!(long.incl <= 2_600_000_000, "{}", long.incl);
    assert!(long.incl >= 2_400_000_000, "{}", long.incl);
    assert_eq!(row(&r, &INNER).clock_errors, 0);
}

#[test]
fn an_abandoned_scope_does_not_stay_open_forever() {
    // Two interleaved tasks on one thread (scopes held across an await): a opens, b
    // opens, a closes (abandoning b), then b's guard drops late.
    let (r, c) = (recorder(), FakeCounter::new());
    let a = r.enter(OUTER.id(), &c).unwrap();
    let b = r.enter(INNER.id(), &c).unwrap();
    c.advance_ns(10);
    r.exit(a, &c);
    r.exit(b, &c);
    // The next entry of INNER is an outermost call again, with its time counted.
    let b = r.enter(INNER.id(), &c).unwrap();
    c.advance_ns(30);
    r.exit(b, &c);
    let inner = row(&r, &INNER);
    assert_eq!(
        (inner.calls, inner.outer, inner.incl, inner.open),
        (1, 1, 30, 0)
    );
}

#[test]
fn a_late_guard_cannot_close_a_newer_scope_at_its_level() {
    let (r, c) = (recorder(), FakeCounter::new());
    let a = r.enter(OUTER.id(), &c).unwrap();
    let b = r.enter(INNER.id(), &c).unwrap(); // level 1
    r.exit(a, &c); // b abandoned
    c.advance_ns(5);
    let c0 = r.enter(REC.id(), &c).unwrap(); // level 0
    let d1 = r.enter(OUTER.id(), &c).unwrap(); // level 1, where b was
    c.advance_ns(20);
    r.exit(b, &c); // ignored: level 1 is d1 now
    assert_eq!(r.depth(), 2, "d1 is still open");
    r.exit(d1, &c);
    r.exit(c0, &c);
    let rec = row(&r, &REC);
    assert_eq!(
        (rec.calls, rec.incl, rec.self_ticks),
        (1, 20, 0),
        "d1 is c0's child"
    );
    assert_eq!(row(&r, &INNER).calls, 0);
    assert_eq!(r.stats.unbalanced.load(Relaxed), 1);
}

#[test]
fn a_reset_thread_state_is_empty_for_its_next_thread() {
    let (r, c) = (recorder(), FakeCounter::new());
    let o = r.enter(OUTER.id(), &c).unwrap();
    c.advance_ns(40);
    r.exit(o, &c);
    r.stats.reset();
    let row = row(&r, &OUTER);
    assert_eq!((row.calls, row.incl, row.min, row.max), (0, 0, u64::MAX, 0));
    assert_eq!(row.hist.quantile(0.5), None);
}

#[test]
fn counter_jumps_inside_scopes_are_clock_errors_replaced_by_reference_time() {
    static JUMPY: Callsite = Callsite::new(Name::Static("jumpy"), Kind::Scope, "t.rs", 9, "t");
    let (r, c) = (recorder(), FakeCounter::new());
    // Forward: 5 ms of real time, the counter leaps 3 s.
    let g = r.enter(JUMPY.id(), &c).unwrap();
    c.advance_ns(5_000_000);
    c.jump_ticks(3_000_000_000);
    r.exit(g, &c);
    // Backward: 2 ms of real time, the counter falls back 4 s.
    let g = r.enter(JUMPY.id(), &c).unwrap();
    c.advance_ns(2_000_000);
    c.jump_ticks(-4_000_000_000);
    r.exit(g, &c);
    // Sane: a long scope the clocks agree on.
    let g = r.enter(JUMPY.id(), &c).unwrap();
    c.advance_ns(8_000_000);
    r.exit(g, &c);
    let row = row(&r, &JUMPY);
    assert_eq!(row.clock_errors, 2);
    assert_eq!(row.calls, 3);
    // Each replaced delta is the reference clock's (exact here: every scope began at a
    // fresh anchor, since each counter jump also made the anchor stale).
    assert_eq!(
        (row.min, row.max, row.incl),
        (2_000_000, 8_000_000, 15_000_000)
    );
}

#[test]
fn stack_deeper_than_the_limit_is_counted_not_recorded() {
    let (r, c) = (recorder(), FakeCounter::new());
    let mut frames = Vec::new();
    for _ in 0..MAX_DEPTH + 5 {
        frames.push(r.enter(REC.id(), &c));
    }
    assert_eq!(frames.iter().filter(|f| f.is_none()).count(), 5);
    assert_eq!(r.stats.lost_too_deep.load(Relaxed), 5);
    for f in frames.into_iter().rev().flatten() {
        r.exit(f, &c);
    }
    assert_eq!(row(&r, &REC).calls, MAX_DEPTH as u64);
}

/// Self time is `incl - children` modulo 2^64 (nested calls' self time is subtracted from
/// `children`), and 0 where that would be negative.
#[test]
fn self_time_is_inclusive_less_children_and_never_negative() {
    assert_eq!(self_ticks(100, 30), 70);
    assert_eq!(
        self_ticks(100, 0u64.wrapping_sub(20)),
        120,
        "nested self time added"
    );
    assert_eq!(self_ticks(10, 30), 0, "a child longer than its parent");
}
