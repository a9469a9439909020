//! A timed site's life (a future from first poll to ready, a `tracing` span from creation to
//! close): its wall time, kept by the site ([`crate::scope::wall`]), and, while a capture
//! runs, its begin and end as an async slice on the timeline. Above both `scope` and
//! `capture`, so that neither reaches into the other for it.

use crate::clock::Ticks;
use crate::scope::wall::TimedSite;

/// A life of `site` begins at `t`; returns its async id on the running capture's timeline
/// (0: none runs).
#[inline]
pub(crate) fn begin(site: &'static TimedSite, t: Ticks) -> u64 {
    #[cfg(feature = "capture")]
    if crate::imp::capturing() {
        let id = crate::capture::next_async_id();
        let what = crate::capture::format::what::BEGIN;
        crate::capture::async_event(site.cs.id(), id, what, t);
        return id;
    }
    let _ = (site, t);
    0
}

/// The life of `site` begun at `t0` (async id `async_id`, from [`begin`]) ends at `t1`,
/// ready or closed, or `cancelled`: its wall time, and its end on the timeline.
#[inline]
pub(crate) fn end(site: &'static TimedSite, t0: Ticks, async_id: u64, t1: Ticks, cancelled: bool) {
    site.wall.record(site.cs.id(), t0, t1, cancelled);
    #[cfg(feature = "capture")]
    if async_id != 0 && crate::capture::running() {
        use crate::capture::format::what;
        let what = if cancelled {
            what::CANCELLED
        } else {
            what::END
        };
        crate::capture::async_event(site.cs.id(), async_id, what, t1);
    }
    let _ = async_id;
}
