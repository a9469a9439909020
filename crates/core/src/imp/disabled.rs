//! The compiled-out implementation (no `enabled` feature): the same API as `imp/enabled.rs`,
//! doing nothing. The macros expand to nothing in this mode, so these are only reached by
//! code that calls the functions directly.

use std::marker::PhantomData;

use crate::scope::callsite::Callsite;

/// True when scopes are compiled in (the `enabled` feature).
pub const COMPILED_IN: bool = false;

/// Does nothing: scopes are compiled out.
pub fn set_enabled(_on: bool) {}

/// Always false: scopes are compiled out.
pub fn is_enabled() -> bool {
    false
}

/// Always false: scopes are compiled out.
#[inline(always)]
pub fn capturing() -> bool {
    false
}

/// A guard that records nothing.
#[must_use = "a scope closes when its guard is dropped; bind it with `let _guard = ...`"]
pub struct Scope {
    _not_send: PhantomData<*const ()>,
}

impl Scope {
    /// A guard that records nothing.
    #[inline(always)]
    pub fn inert() -> Scope {
        Scope {
            _not_send: PhantomData,
        }
    }
}

/// Returns an inert guard.
#[inline(always)]
pub fn enter(_cs: &'static Callsite) -> Scope {
    Scope::inert()
}

/// Returns an inert guard.
#[inline(always)]
pub fn enter_cached(
    _cs: &'static Callsite,
    _cache: &'static std::thread::LocalKey<crate::scope::SlotCache>,
) -> Scope {
    Scope::inert()
}

/// Does nothing: scopes are compiled out.
pub fn report() {}

/// An empty string: scopes are compiled out.
pub fn report_string(_format: crate::SummaryFormat) -> String {
    String::new()
}

/// Always 0: scopes are compiled out.
pub fn thread_bytes() -> usize {
    0
}

/// An open scope without its guard (never made: scopes are compiled out).
#[derive(Clone, Copy)]
pub(crate) struct RawOpen;

/// Records nothing: scopes are compiled out.
#[inline(always)]
pub(crate) fn enter_raw(_cs: &'static Callsite) -> Option<RawOpen> {
    None
}

/// Records nothing: scopes are compiled out.
#[inline(always)]
pub(crate) fn enter_raw_id(_id: u32) -> Option<RawOpen> {
    None
}

/// Does nothing: scopes are compiled out.
#[inline(always)]
pub(crate) fn exit_raw(_open: &RawOpen) -> Option<crate::Ticks> {
    None
}

/// Never called: no raw scope is ever made.
#[inline(always)]
pub(crate) fn raw_t0(_open: &RawOpen) -> crate::Ticks {
    0
}
