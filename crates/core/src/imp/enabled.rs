//! The recording implementation (feature `enabled`). `imp/disabled.rs` has the same API.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::scope::callsite::Callsite;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// True when scopes are compiled in (the `enabled` feature).
pub const COMPILED_IN: bool = true;

/// Turns recording on or off at run time. Off, a scope costs one relaxed load and a branch;
/// scopes already open when it is turned off still close normally.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Relaxed);
}

/// True if and only if scopes are recorded now.
pub fn is_enabled() -> bool {
    ENABLED.load(Relaxed)
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
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(open) = &self.open {
            crate::scope::exit(open);
        }
    }
}

/// Opens a scope of call site `cs` on the calling thread.
#[inline(always)]
pub fn enter(cs: &'static Callsite) -> Scope {
    if !ENABLED.load(Relaxed) {
        return Scope::inert();
    }
    let id = cs.id();
    Scope {
        open: crate::scope::enter(id),
        _not_send: PhantomData,
    }
}

/// Opens a scope of call site `cs` through its per-thread slot cache (what the macros use).
#[inline(always)]
pub fn enter_cached(
    cs: &'static Callsite,
    cache: &'static std::thread::LocalKey<crate::scope::SlotCache>,
) -> Scope {
    if !ENABLED.load(Relaxed) {
        return Scope::inert();
    }
    Scope {
        open: crate::scope::enter_cached(cs, cache),
        _not_send: PhantomData,
    }
}

/// Prints a summary now to the configured summary output.
pub fn report() {
    crate::report::report_now();
}

/// The summary now, as text or JSON.
pub fn report_string(format: crate::SummaryFormat) -> String {
    crate::report::report_string(format, crate::config::settings().per_thread)
}

/// Bytes of scope state the calling thread holds (its slots, their pages and its stack).
pub fn thread_bytes() -> usize {
    crate::scope::current_thread_bytes()
}
