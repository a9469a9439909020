//! `tracing` spans measured by tickscope (feature `tracing`).
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//! let subscriber = tracing_subscriber::registry().with(tickscope::tracing::Layer::default());
//! tracing::subscriber::with_default(subscriber, || {
//!     let span = tracing::info_span!("parse");
//!     let _entered = span.enter(); // measured as a scope named "parse"
//! });
//! ```
//!
//! Each span call site becomes a tickscope call site once (keyed by its `&'static Metadata`,
//! named by the span's name, located at its file and line). Each entry of a span is a scope of
//! that call site on the thread that entered it, so spans feed the same per-thread statistics,
//! interval lines, exit summary, capture and sampler labels as [`scope!`](crate::scope): the
//! row's calls are the entries and its total the busy time. A span's life, from its creation
//! to its close, is its wall time, shown beside the busy time in the exit summary ("spans
//! and futures"). Events (`info!` and the rest) are recorded as capture messages while a
//! capture runs.
//!
//! tracing lets a program exit spans in another order than it entered them, or on another
//! thread. Neither is a wrong pair here: a span exited while spans entered after it are still
//! open closes them as abandoned (counted, as with guards dropped out of order), and an exit
//! on a thread where the span is not entered records nothing; both are counted
//! ([`out_of_order_exits`], [`foreign_exits`]) and never panic.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering::Release;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed};
use std::sync::Mutex;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::clock::Ticks;
use crate::scope::callsite::{Callsite, Kind, Name};
use crate::scope::wall::{TimedSite, WallKind};

/// The `tracing_subscriber` layer: `registry().with(tickscope::tracing::Layer::default())`.
/// See the [module docs](self).
///
/// ```
/// use tracing_subscriber::layer::SubscriberExt;
/// let subscriber = tracing_subscriber::registry().with(tickscope::tracing::Layer::default());
/// tracing::subscriber::with_default(subscriber, || {
///     let span = tracing::info_span!("request", id = 7);
///     let _entered = span.enter(); // a scope named "request"; the span's life its wall time
///     tracing::info!("handled"); // a message on a running capture's timeline
/// });
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Layer {
    /// This layer's number among the layers attached to a subscriber (set by `on_layer`;
    /// 0 until then): span ids are unique only within one subscriber, so the table of live
    /// spans' sites is keyed by both.
    tag: u32,
}

impl Layer {
    /// The layer (the same as `Layer::default()`).
    pub fn new() -> Layer {
        Layer::default()
    }
}

/// A span call site: the scope its entries are, and its lives.
type Site = TimedSite;

/// Layers attached so far (the next one's tag, less one).
static LAYERS: AtomicU32 = AtomicU32::new(0);

/// Slots of the table of live spans' sites (a power of two).
const LIVE_SLOTS: usize = 4096;

/// One slot of [`LIVE`]: the site of the span last created with an id that maps here,
/// written under a sequence count (odd while written).
struct LiveSlot {
    seq: AtomicU64,
    id: AtomicU64,
    /// The layer's tag (high half) and the call site's id (low half, never 0).
    site: AtomicU64,
}

/// The sites of live spans by span id, direct-mapped, so that an entry finds its call site
/// without the registry's span lookup (16.5 ns of the layer's 47 when every entry looked the
/// span up). Written at each span's creation, which precedes its every entry and follows the
/// close of any earlier span with its id, so a slot holding an id holds that span's site:
///
/// - a creation that finds the slot being written by another gives up: the other writes a
///   different live span's id, so no stale entry for this id survives it;
/// - a reader takes a slot's pair only when the sequence count was even and unchanged around
///   its reads, and the id and the layer's tag are its own; anything else (a collision, a
///   write in progress, a layer never attached) looks the span up as before.
static LIVE: [LiveSlot; LIVE_SLOTS] = [const {
    LiveSlot {
        seq: AtomicU64::new(0),
        id: AtomicU64::new(0),
        site: AtomicU64::new(0),
    }
}; LIVE_SLOTS];

/// The slot of span id `id`.
#[inline(always)]
fn live_slot(id: u64) -> &'static LiveSlot {
    &LIVE[((id ^ (id >> 16)) as usize) & (LIVE_SLOTS - 1)]
}

/// Records that span `id`, just created through the layer tagged `tag`, is of the call site
/// whose id is `cs`.
fn live_insert(tag: u32, id: u64, cs: u32) {
    let slot = live_slot(id);
    let s = slot.seq.load(Relaxed);
    if s & 1 != 0
        || slot
            .seq
            .compare_exchange(s, s + 1, Acquire, Relaxed)
            .is_err()
    {
        // Another creation is writing this slot: it leaves a different live span's id here.
        return;
    }
    fence(Release);
    slot.id.store(id, Relaxed);
    slot.site
        .store((u64::from(tag) << 32) | u64::from(cs), Relaxed);
    slot.seq.store(s + 2, Release);
}

/// The call site id of live span `id` of the layer tagged `tag`, if its slot holds it.
#[inline(always)]
fn live_site(tag: u32, id: u64) -> Option<u32> {
    let slot = live_slot(id);
    let s = slot.seq.load(Acquire);
    let (got, site) = (slot.id.load(Relaxed), slot.site.load(Relaxed));
    fence(Acquire);
    if s & 1 != 0 || slot.seq.load(Relaxed) != s || got != id || (site >> 32) as u32 != tag {
        return None;
    }
    Some(site as u32)
}

/// A span's creation, kept in the registry's extensions until its close.
struct Created {
    site: &'static Site,
    at: Ticks,
    /// Its id on the running capture's timeline; 0 when none recorded its begin.
    async_id: u64,
}

/// Every span call site seen, by the address of its metadata.
static SITES: Mutex<Option<HashMap<usize, &'static Site>>> = Mutex::new(None);

/// Exits of a span that was not the innermost one entered on its thread.
static OUT_OF_ORDER: AtomicU64 = AtomicU64::new(0);

/// Exits of a span that was not the innermost span entered on its thread: the spans entered
/// after it were closed with it, counted as abandoned in the exit summary.
pub fn out_of_order_exits() -> u64 {
    OUT_OF_ORDER.load(Relaxed)
}

/// Exits of a span on a thread where it was not entered (recorded nothing).
pub fn foreign_exits() -> u64 {
    crate::scope::FOREIGN_SPAN_EXITS.load(Relaxed)
}

/// Slots of the per-thread cache of sites by metadata address (a power of two).
const CACHE: usize = 64;

/// Spans entered on a thread that its [`Entered`] keeps inline; deeper ones go to [`SPILL`].
const INLINE: usize = 32;

/// A thread's spans entered and not yet exited, innermost last: each span's id and its open
/// scope (`None` when nothing recorded it). Cells in a thread-local without a destructor,
/// so an enter or an exit reaches it with one `%fs`-relative access: no registration test,
/// no borrow flag (measured: with a `RefCell<Vec>` the list cost a third of the layer's
/// instructions). Past [`INLINE`] spans, the rest are in [`SPILL`].
///
/// When the thread ends with spans still entered (exited elsewhere, or never), their scopes
/// are left open: the core counts them as open at the thread's exit, rather than closed then
/// with the thread's life for their time.
struct Entered {
    len: Cell<usize>,
    ids: [Cell<u64>; INLINE],
    opens: [Cell<Option<crate::imp::RawOpen>>; INLINE],
}

thread_local! {
    static ENTERED: Entered = const {
        Entered {
            len: Cell::new(0),
            ids: [const { Cell::new(0) }; INLINE],
            opens: [const { Cell::new(None) }; INLINE],
        }
    };
    /// The entered spans past the first [`INLINE`], innermost last.
    static SPILL: RefCell<Vec<(u64, Option<crate::imp::RawOpen>)>> = const { RefCell::new(Vec::new()) };
    /// A thread's sites by metadata address, direct-mapped (a hit costs no lock).
    static SITES_SEEN: RefCell<[(usize, Option<&'static Site>); CACHE]> =
        const { RefCell::new([(0, None); CACHE]) };
}

impl Entered {
    /// Pushes span `id` with its scope.
    #[inline(always)]
    fn push(&self, id: u64, open: Option<crate::imp::RawOpen>) {
        let n = self.len.get();
        if n < INLINE {
            self.ids[n].set(id);
            self.opens[n].set(open);
        } else {
            spill_push(id, open);
        }
        self.len.set(n + 1);
    }

    /// Pops span `id` if it is the innermost: its scope (`Some(None)` when nothing recorded
    /// it); `None` if the innermost is another span or none is entered.
    #[inline(always)]
    fn pop_top(&self, id: u64) -> Option<Option<crate::imp::RawOpen>> {
        let n = self.len.get();
        if n == 0 || n > INLINE || self.ids[n - 1].get() != id {
            return None;
        }
        self.len.set(n - 1);
        Some(self.opens[n - 1].get())
    }

    /// The `i`th span entered (0: outermost).
    fn get(&self, i: usize) -> (u64, Option<crate::imp::RawOpen>) {
        if i < INLINE {
            (self.ids[i].get(), self.opens[i].get())
        } else {
            SPILL
                .try_with(|v| v.borrow().get(i - INLINE).copied())
                .ok()
                .flatten()
                .unwrap_or((0, None))
        }
    }

    /// Removes the `i`th span entered, moving those after it down.
    fn remove(&self, i: usize) {
        let n = self.len.get();
        for j in i..n - 1 {
            let (id, open) = self.get(j + 1);
            if j < INLINE {
                self.ids[j].set(id);
                self.opens[j].set(open);
            } else {
                let _ = SPILL.try_with(|v| v.borrow_mut()[j - INLINE] = (id, open));
            }
        }
        if n > INLINE {
            let _ = SPILL.try_with(|v| v.borrow_mut().pop());
        }
        self.len.set(n - 1);
    }
}

/// Keeps an entered span past the inline ones (the block is the library's, not the
/// program's allocation).
#[cold]
#[inline(never)]
fn spill_push(id: u64, open: Option<crate::imp::RawOpen>) {
    let _ = SPILL.try_with(|v| crate::own::own(|| v.borrow_mut().push((id, open))));
}

/// The site of span call site `meta`, made on first sight and kept for the process's life,
/// through the calling thread's cache.
fn site_of(meta: &'static Metadata<'static>) -> &'static Site {
    let key = meta as *const Metadata<'static> as usize;
    let slot = (key >> 4) & (CACHE - 1);
    SITES_SEEN
        .try_with(|c| {
            let mut c = c.borrow_mut();
            match c[slot] {
                (k, Some(s)) if k == key => s,
                _ => {
                    let s = site_slow(meta, key);
                    c[slot] = (key, Some(s));
                    s
                }
            }
        })
        .unwrap_or_else(|_| site_slow(meta, key))
}

#[cold]
#[inline(never)]
fn site_slow(meta: &'static Metadata<'static>, key: usize) -> &'static Site {
    crate::own::own(|| site_made(meta, key))
}

fn site_made(meta: &'static Metadata<'static>, key: usize) -> &'static Site {
    TimedSite::interned(&SITES, key, || {
        TimedSite::of(
            WallKind::Span,
            Callsite::new(
                Name::Static(meta.name()),
                Kind::Scope,
                meta.file().unwrap_or(""),
                meta.line().unwrap_or(0),
                meta.module_path().unwrap_or(""),
            ),
        )
    })
}

/// The call site id of span `id` from the registry's lookup of its metadata (a span the
/// table of live spans does not hold).
#[cold]
#[inline(never)]
fn looked_up<S>(id: &Id, ctx: &Context<'_, S>) -> Option<u32>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    Some(site_of(ctx.metadata(id)?).cs.id())
}

impl<S> tracing_subscriber::Layer<S> for Layer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_layer(&mut self, _subscriber: &mut S) {
        // 0 (no table) should the count ever wrap.
        self.tag = LAYERS.fetch_add(1, Relaxed).wrapping_add(1);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let site = site_of(attrs.metadata());
        // Also while turned off: a later entry must not find an earlier span's site.
        if self.tag != 0 && crate::COMPILED_IN {
            live_insert(self.tag, id.into_u64(), site.cs.id());
        }
        if !crate::is_enabled() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            let at = crate::now();
            let async_id = crate::life::begin(site, at);
            crate::own::own(|| span.extensions_mut().insert(Created { site, at, async_id }));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let known = if self.tag != 0 {
            live_site(self.tag, id.into_u64())
        } else {
            None
        };
        let cs = match known {
            Some(cs) => cs,
            None => match looked_up(id, &ctx) {
                Some(cs) => cs,
                None => return,
            },
        };
        // Pushed even when nothing records (turned off): its exit finds it.
        let open = crate::imp::enter_raw_id(cs);
        ENTERED.with(|e| e.push(id.into_u64(), open));
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let id = id.into_u64();
        match ENTERED.with(|e| e.pop_top(id)) {
            Some(Some(open)) => {
                crate::imp::exit_raw(&open);
            }
            Some(None) => {}
            None => exit_other(id),
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let ext = span.extensions();
        if let Some(c) = ext.get::<Created>() {
            crate::life::end(c.site, c.at, c.async_id, crate::now(), false);
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        #[cfg(feature = "capture")]
        if crate::imp::capturing() {
            crate::capture::message(format_args!("{}", Line(event)));
        }
        #[cfg(not(feature = "capture"))]
        let _ = event;
    }
}

/// An exit of span `id` that is not the innermost entered on this thread's inline list:
/// one deeper (in [`SPILL`]), one out of order, or one entered on another thread.
#[cold]
#[inline(never)]
fn exit_other(id: u64) {
    ENTERED.with(|e| {
        let n = e.len.get();
        let Some(at) = (0..n).rev().find(|&i| e.get(i).0 == id) else {
            crate::scope::FOREIGN_SPAN_EXITS.fetch_add(1, Relaxed);
            return;
        };
        if at + 1 != n {
            // Entered after it and still open: closed with it as abandoned.
            OUT_OF_ORDER.fetch_add(1, Relaxed);
        }
        if let Some(open) = e.get(at).1 {
            crate::imp::exit_raw(&open);
        }
        e.remove(at);
    });
}

/// An event as one line: `LEVEL target: message key=value ...`.
struct Line<'a, 'b>(&'a Event<'b>);

impl fmt::Display for Line<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meta = self.0.metadata();
        write!(f, "{} {}:", meta.level(), meta.target())?;
        let mut v = Fields { f, result: Ok(()) };
        self.0.record(&mut v);
        v.result
    }
}

struct Fields<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    result: fmt::Result,
}

impl Visit for Fields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_ok() {
            self.result = if field.name() == "message" {
                write!(self.f, " {value}")
            } else {
                write!(self.f, " {}={value}", field.name())
            };
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_ok() {
            self.result = if field.name() == "message" {
                write!(self.f, " {value:?}")
            } else {
                write!(self.f, " {}={value:?}", field.name())
            };
        }
    }
}
