//! Futures measured as tickscope call sites: [`FutureExt::profiled`] (the `Instrument`
//! pattern) and `#[profile]` on an `async fn`.
//!
//! Each poll is a scope of the call site, on the thread that runs it: the row's calls are the
//! polls, its total the busy time (self: not in child scopes), its max the longest poll, its
//! percentiles the polls'; a capture records each poll as a slice. The future's wall time,
//! from its first poll to ready, is recorded once, on whichever thread finishes it; a future
//! dropped after its first poll and before ready is a cancellation, counted apart (its wall
//! time to the drop is in the figures). The exit summary shows both side by side.
//!
//! ```
//! use tickscope::future::FutureExt;
//! # async fn fetch() -> u32 { 7 }
//! # async fn run() -> u32 {
//! let n = fetch().profiled("fetch").await;
//! # n }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::clock::Ticks;
use crate::scope::callsite::{Kind, Name};
use crate::scope::wall::TimedSite;

/// A future's call site: its polls' scope and its lives. Not a stable API.
#[doc(hidden)]
pub type AsyncSite = TimedSite;

pin_project_lite::pin_project! {
    /// A future measured as a tickscope call site: see the [module docs](self).
    #[must_use = "futures do nothing unless polled"]
    pub struct Profiled<F> {
        #[pin]
        inner: F,
        site: Option<&'static AsyncSite>,
        // The first poll's reading; 0 before it (and when nothing is recorded).
        first: Ticks,
        // Its id on the running capture's timeline; 0 when none recorded its begin.
        async_id: u64,
        done: bool,
    }

    impl<F> PinnedDrop for Profiled<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(site) = this.site {
                if *this.first != 0 && !*this.done {
                    cancelled(site, *this.first, *this.async_id);
                }
            }
        }
    }
}

#[cold]
fn cancelled(site: &'static AsyncSite, first: Ticks, async_id: u64) {
    crate::life::end(site, first, async_id, crate::now(), true);
}

/// Measures `fut` as the future call site `site` (what `#[profile]` on an `async fn`
/// expands to). Not a stable API.
#[doc(hidden)]
#[inline]
pub fn profiled_at<F: Future>(site: &'static AsyncSite, fut: F) -> Profiled<F> {
    Profiled {
        inner: fut,
        site: Some(site).filter(|_| crate::imp::COMPILED_IN),
        first: 0,
        async_id: 0,
        done: false,
    }
}

impl<F: Future> Future for Profiled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(site) = *this.site else {
            return this.inner.poll(cx);
        };
        if *this.first == 0 && !crate::is_enabled() {
            // Off when it started: this future is not measured at all.
            *this.site = None;
            return this.inner.poll(cx);
        }
        // The poll's scope; its readings are the wall time's first poll and ready.
        let open = crate::imp::enter_raw(&site.cs);
        if *this.first == 0 {
            *this.first = open
                .as_ref()
                .map_or_else(crate::now, crate::imp::raw_t0)
                .max(1);
            *this.async_id = crate::life::begin(site, *this.first);
        }
        let r = this.inner.poll(cx);
        let t1 = open.as_ref().and_then(crate::imp::exit_raw);
        if r.is_ready() {
            *this.done = true;
            crate::life::end(
                site,
                *this.first,
                *this.async_id,
                t1.unwrap_or_else(crate::now),
                false,
            );
        }
        r
    }
}

/// [`profiled`](FutureExt::profiled) for every future.
pub trait FutureExt: Future + Sized {
    /// Measures this future as the call site `name` at the caller's location: its polls as
    /// scopes (busy time), its first poll to ready as its wall time, a drop before ready as a
    /// cancellation. Equal names at different locations are different rows, as with
    /// [`scope!`](crate::scope).
    #[track_caller]
    fn profiled(self, name: &'static str) -> Profiled<Self> {
        profiled_at(site_for(name, std::panic::Location::caller()), self)
    }
}

impl<F: Future> FutureExt for F {}

/// A site's key: its name's address and length, and its location's address.
type SiteKey = (usize, usize, usize);

/// Slots of the per-thread cache of sites (a power of two).
const RECENT_SLOTS: usize = 32;

thread_local! {
    /// The sites this thread used, direct-mapped by key: a hit is a few loads and compares,
    /// with no lock, no borrow flag and no destructor to register (measured: the list this
    /// replaced, scanned under a `RefCell` inside the allocation guard, was 49 of the
    /// `.profiled()` path's instructions).
    static RECENT: [std::cell::Cell<(SiteKey, Option<&'static AsyncSite>)>; RECENT_SLOTS] =
        const { [const { std::cell::Cell::new(((0, 0, 0), None)) }; RECENT_SLOTS] };
}

/// All sites made by [`FutureExt::profiled`], by name and location.
static SITES: std::sync::Mutex<Option<std::collections::HashMap<SiteKey, &'static AsyncSite>>> =
    std::sync::Mutex::new(None);

/// The site of `name` at `at` (made once, kept for the process's life).
#[inline]
fn site_for(name: &'static str, at: &'static std::panic::Location<'static>) -> &'static AsyncSite {
    let key = (
        name.as_ptr() as usize,
        name.len(),
        at as *const std::panic::Location<'static> as usize,
    );
    let slot = ((key.2 >> 3) ^ (key.0 >> 2)) & (RECENT_SLOTS - 1);
    match RECENT.try_with(|r| r[slot].get()) {
        Ok((k, Some(site))) if k == key => site,
        _ => site_slow(name, at, key, slot),
    }
}

/// [`site_for`] past the cache: the site interned (made the first time), then cached.
/// Finding or making it is the library's work: no allocation of it counts.
#[cold]
#[inline(never)]
fn site_slow(
    name: &'static str,
    at: &'static std::panic::Location<'static>,
    key: SiteKey,
    slot: usize,
) -> &'static AsyncSite {
    let site = crate::own::own(|| {
        TimedSite::interned(&SITES, key, || {
            TimedSite::new(Name::Static(name), Kind::Scope, at.file(), at.line(), "")
        })
    });
    let _ = RECENT.try_with(|r| r[slot].set((key, Some(site))));
    site
}
