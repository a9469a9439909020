//! The recording implementation (feature `enabled`). `imp/disabled.rs` has the same API.

use std::marker::PhantomData;
use std::sync::atomic::Ordering::Relaxed;

use crate::scope::callsite::Callsite;
use crate::scope::thread::{HEAP_MARK, SITE_MASK};
use crate::state::{ALLOCS, CAPTURE, ON, STATE};

/// True when scopes are compiled in (the `enabled` feature).
pub const COMPILED_IN: bool = true;

/// Turns recording on or off at run time. Off, a scope costs one relaxed load and a branch;
/// scopes already open when it is turned off still close normally.
pub fn set_enabled(on: bool) {
    crate::state::set_enabled(on);
}

/// True if and only if scopes are recorded now.
pub fn is_enabled() -> bool {
    crate::state::is_enabled()
}

/// True if and only if a capture is running and scopes are on.
#[inline(always)]
pub fn capturing() -> bool {
    crate::state::capturing()
}

/// An open scope; it closes when dropped. It is `!Send`: a scope belongs to the thread that
/// opened it.
#[must_use = "a scope closes when its guard is dropped; bind it with `let _guard = ...`"]
pub struct Scope {
    open: Option<crate::scope::thread::Open>,
    _not_send: PhantomData<*const ()>,
}

impl Scope {
    /// A guard that records nothing.
    #[inline(always)]
    pub fn inert() -> Scope {
        Scope {
            open: None,
            _not_send: PhantomData,
        }
    }
}

impl Drop for Scope {
    /// Tiny, so that the guard's drop glue inlines wherever a scope ends: a guard that
    /// records nothing (scopes off) then costs a test and a branch. Measured: with the whole
    /// exit inline, the glue grew past what LLVM inlines once a program had more than one
    /// scope, and every guard — inert ones too — cost a call.
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(open) = self.open {
            let (slot, t0, index, epoch, flags) = open.into_parts();
            close(slot, t0, index, epoch, flags);
        }
    }
}

/// Closes a guard's scope: one copy for every call site (the exit needs nothing from the
/// call site that its guard does not carry). The scope comes in registers, field by field,
/// so that the guard need not live in memory at the call site.
#[inline(never)]
fn close(
    slot: &'static crate::scope::thread::Slot,
    t0: crate::Ticks,
    index: u32,
    epoch: u32,
    flags: u32,
) {
    if flags == 0 {
        let open = crate::scope::thread::Open::from_parts((slot, t0, index, epoch, flags));
        crate::scope::exit_fast(&open);
    } else {
        exit_raw_other(slot, t0, index, epoch, flags);
    }
}

/// An open scope without its guard, for callers that keep it elsewhere (the `tracing`
/// layer's list of entered spans): closed by [`exit_raw`] on the thread that opened it.
pub(crate) type RawOpen = crate::scope::thread::Open;

/// Opens a scope of call site `cs` on the calling thread, without a guard.
#[inline(always)]
pub(crate) fn enter_raw(cs: &'static Callsite) -> Option<RawOpen> {
    if STATE.load(Relaxed) & ON == 0 {
        return None;
    }
    enter_raw_id(cs.id())
}

/// Opens a scope of the call site whose id is `id` (from [`Callsite::id`]) on the calling
/// thread, without a guard. As [`enter`]: the common case inline, the rest out of line (both
/// inline, the function kept twice the registers and spilled them).
#[inline(always)]
pub(crate) fn enter_raw_id(id: u32) -> Option<RawOpen> {
    let state = STATE.load(Relaxed);
    if state & ON == 0 {
        return None;
    }
    if state != ON || !crate::scope::registered() {
        return enter_raw_other(state, id);
    }
    crate::scope::enter(id, true)
}

/// [`enter_raw_id`]'s general path: the switches on but not only on, or the thread's first
/// scope (whose registration may start a capture: the switches are read again after it, as
/// [`enter_first`] does).
#[inline(never)]
fn enter_raw_other(state: u8, id: u32) -> Option<RawOpen> {
    let first = !crate::scope::registered();
    let mut open = crate::scope::enter(id, false);
    let state = if first { STATE.load(Relaxed) } else { state };
    if state & ON != 0 && state & (CAPTURE | ALLOCS) != 0 {
        extras_begin(state, id, &mut open);
    }
    open
}

/// Closes a scope opened by [`enter_raw`] on this thread; returns its end reading.
#[inline(always)]
pub(crate) fn exit_raw(open: &RawOpen) -> Option<crate::Ticks> {
    if open.flags == 0 {
        return crate::scope::exit_fast(open);
    }
    let (slot, t0, index, epoch, flags) = open.into_parts();
    exit_raw_other(slot, t0, index, epoch, flags)
}

/// The exit for every case but the common one, then what the scope recorded beyond its
/// statistics: [`close`]'s and [`exit_raw`]'s, out of line, the scope in registers.
#[inline(never)]
fn exit_raw_other(
    slot: &'static crate::scope::thread::Slot,
    t0: crate::Ticks,
    index: u32,
    epoch: u32,
    flags: u32,
) -> Option<crate::Ticks> {
    let open = &crate::scope::thread::Open::from_parts((slot, t0, index, epoch, flags));
    let t1 = crate::scope::exit(open);
    if open.flags & (HEAP_MARK | SITE_MASK) != 0 {
        extras_end(open, t1);
    }
    t1
}

/// A raw scope's start reading.
#[inline(always)]
pub(crate) fn raw_t0(open: &RawOpen) -> crate::Ticks {
    open.t0()
}

/// Records a captured scope's end (`t1`: the reading its exit took).
#[inline]
fn capture_end(id: u32, t1: Option<crate::Ticks>) {
    #[cfg(feature = "capture")]
    crate::capture::end(id, t1.unwrap_or_else(crate::now));
    #[cfg(not(feature = "capture"))]
    let _ = (id, t1);
}

/// What a scope's begin does beyond its statistics, as `state` says: its begin into the
/// running capture, its allocations' mark. One test of the state on the scope's path for both.
#[inline(always)]
fn extras_begin(state: u8, id: u32, open: &mut Option<crate::scope::thread::Open>) {
    if state & CAPTURE != 0 {
        capture_begin(id, open);
    }
    if state & ALLOCS != 0 {
        if let Some(o) = open {
            if crate::scope::heap::begin(o.t0(), o.index()) {
                o.flags |= HEAP_MARK;
            }
        }
    }
}

/// What a scope's exit does beyond its statistics (a heap mark or a call-site id in its
/// flags): its
/// allocations, then its end into the capture (whose block, if it takes one, is not the
/// program's allocation).
#[inline]
fn extras_end(open: &crate::scope::thread::Open, t1: Option<crate::Ticks>) {
    if open.flags & HEAP_MARK != 0 && t1.is_some() {
        crate::scope::heap::end(open);
    }
    let id = open.flags & SITE_MASK;
    if id != 0 {
        capture_end(id, t1);
    }
}

/// Records a scope's begin into the running capture and marks its guard to record the end.
#[inline]
fn capture_begin(id: u32, open: &mut Option<crate::scope::thread::Open>) {
    #[cfg(feature = "capture")]
    if let Some(o) = open {
        // A begin dropped (memory budget spent) takes its end with it: the guard records
        // no end.
        if crate::capture::begin(id, o.t0(), o.depth()) {
            o.flags |= id;
        }
    }
    #[cfg(not(feature = "capture"))]
    let _ = (id, open);
}

/// A thread's first scope. Registering the thread may start the capture `TICKSCOPE_CAPTURE`
/// names (the process's first use) or wait while another thread starts it: the switches are
/// read again after it, so that this scope, and every first scope of a thread that raced the
/// start, is in the capture (a thousand threads starting at once were all missing from it,
/// uncounted).
#[cold]
#[inline(never)]
fn enter_first(
    cs: &'static Callsite,
    cache: Option<&'static std::thread::LocalKey<crate::scope::SlotCache>>,
) -> Option<crate::scope::thread::Open> {
    let mut open = match cache {
        Some(cache) => crate::scope::enter_cached(cs, cache, false),
        None => crate::scope::enter(cs.id(), false),
    };
    let state = STATE.load(Relaxed);
    if state & ON != 0 {
        extras_begin(state, cs.id(), &mut open);
    }
    open
}

/// A scope whose switches are on but not only on (a capture running, allocations counted,
/// the clock not the CPU counter), or a thread's first: the general path, out of line.
#[inline(never)]
fn enter_other(
    state: u8,
    cs: &'static Callsite,
    cache: Option<&'static std::thread::LocalKey<crate::scope::SlotCache>>,
) -> Option<crate::scope::thread::Open> {
    if !crate::scope::registered() {
        return enter_first(cs, cache);
    }
    let mut open = match cache {
        Some(cache) => crate::scope::enter_cached(cs, cache, false),
        None => crate::scope::enter(cs.id(), false),
    };
    if state & (CAPTURE | ALLOCS) != 0 {
        extras_begin(state, cs.id(), &mut open);
    }
    open
}

/// Opens a scope of call site `cs` on the calling thread.
#[inline(always)]
pub fn enter(cs: &'static Callsite) -> Scope {
    let state = STATE.load(Relaxed);
    if state & ON == 0 {
        return Scope::inert();
    }
    let open = if state != ON || !crate::scope::registered() {
        enter_other(state, cs, None)
    } else {
        crate::scope::enter(cs.id(), true)
    };
    Scope {
        open,
        _not_send: PhantomData,
    }
}

/// Opens a scope of call site `cs` through its per-thread slot cache (what the macros use).
/// Inline: the switches' byte and, when it is exactly `ON` on a registered thread, the
/// common path (`scope::thread::enter_fast`); anything else, one call.
#[inline(always)]
pub fn enter_cached(
    cs: &'static Callsite,
    cache: &'static std::thread::LocalKey<crate::scope::SlotCache>,
) -> Scope {
    let state = STATE.load(Relaxed);
    if state & ON == 0 {
        return Scope::inert();
    }
    let open = if state != ON || !crate::scope::registered() {
        enter_other(state, cs, Some(cache))
    } else {
        crate::scope::enter_cached(cs, cache, true)
    };
    Scope {
        open,
        _not_send: PhantomData,
    }
}

/// Prints a summary now to the configured summary output.
pub fn report() {
    crate::summary::report_now(&crate::runtime::settings());
}

/// The summary now, as text or JSON.
pub fn report_string(format: crate::SummaryFormat) -> String {
    crate::summary::report_string(format, crate::runtime::settings().per_thread)
}

/// Bytes of scope state the calling thread holds (its slots, their pages and its stack).
pub fn thread_bytes() -> usize {
    crate::scope::current_thread_bytes()
}
