//! Futures' and spans' lives (a version 3 capture's async events): from a future's first
//! poll to its end, or a span's creation to its close, whichever threads those happened on.
//!
//! The pass pairs each life's begin and end by its async id, in any order (a future that
//! moved may end in a chunk written before the one that holds its begin). Every life is kept
//! whole (a capture holds far fewer lives than scopes) until the index outgrows its budget;
//! from then on those shorter than a bin are counted per call site and bin of their begin,
//! as the scopes are. A life whose begin is not in the capture (begun before it started)
//! begins at the capture's start; one whose end is not (yet) in it runs to the capture's
//! last event. A window's answer lays each call site's lives out in lanes, so that lives
//! that overlap (concurrent requests) are side by side, not on top of each other.

use std::collections::{BTreeMap, HashMap};

use tickscope_timeline::tscap::AsyncWhat;

use super::query::Window;
use super::series::Series;
use super::Index;

/// Lanes drawn per call site at most; the lives that would need more are counted.
pub const MAX_LANES: usize = 16;
/// Lives an answer lists one by one at most; the rest are counted per pixel.
pub const MAX_LIVES: usize = 20_000;

/// How a life ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// A future ready, a span closed.
    Ended = 0,
    /// A future dropped before it was ready.
    Cancelled = 1,
    /// Still alive at the capture's end (or now, for a live capture).
    Alive = 2,
    /// Begun before the capture started: drawn from its start.
    BegunBefore = 3,
}

/// A life kept whole.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Life {
    /// Its begin, in ticks.
    pub begin: u64,
    /// Its end, in ticks.
    pub end: u64,
    /// Its call site (a scope id).
    pub site: u64,
    /// How it ended.
    pub how: How,
}

/// The lives of a capture. See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct Lives {
    /// Begun, not ended yet: async id → (call site, begin).
    pub open: HashMap<u64, (u64, u64)>,
    /// Ended before their begin was read: async id → (call site, end, how).
    pub orphans: HashMap<u64, (u64, u64, How)>,
    /// Ended lives at least a bin long, in the order they ended.
    pub long: Vec<Life>,
    /// Shorter ended lives, counted per bin of their begin, by call site.
    pub short: BTreeMap<u64, Series<u32>>,
    /// Lives ended, by call site (kept or counted).
    pub ended: BTreeMap<u64, u64>,
    /// Lives shorter than this many ticks are counted, not kept (0 until the bins first
    /// coarsen: then a bin).
    pub min: u64,
}

impl Lives {
    /// Call site `site`'s async event `what` for life `id` at `ticks`; bins are `1 << shift`
    /// ticks from `origin`.
    pub fn event(
        &mut self,
        shift: u32,
        origin: u64,
        site: u64,
        id: u64,
        what: AsyncWhat,
        ticks: u64,
    ) {
        match what {
            AsyncWhat::Begin => match self.orphans.remove(&id) {
                Some((site, end, how)) => self.add(shift, origin, site, ticks, end, how),
                None => {
                    self.open.insert(id, (site, ticks));
                }
            },
            AsyncWhat::End | AsyncWhat::Cancelled => {
                let how = if what == AsyncWhat::End {
                    How::Ended
                } else {
                    How::Cancelled
                };
                match self.open.remove(&id) {
                    Some((site, begin)) => self.add(shift, origin, site, begin, ticks, how),
                    None => {
                        self.orphans.insert(id, (site, ticks, how));
                    }
                }
            }
        }
    }

    fn add(&mut self, shift: u32, origin: u64, site: u64, begin: u64, end: u64, how: How) {
        let end = end.max(begin);
        *self.ended.entry(site).or_default() += 1;
        if end - begin >= self.min {
            self.long.push(Life {
                begin,
                end,
                site,
                how,
            });
        } else {
            *self
                .short
                .entry(site)
                .or_default()
                .at(begin.saturating_sub(origin) >> shift) += 1;
        }
    }

    /// Bins double to `1 << shift` ticks: the kept lives now shorter than a bin are counted
    /// instead (called before the series coarsen).
    pub fn coarsen(&mut self, shift: u32, origin: u64) {
        let min = 1u64 << shift;
        self.min = min;
        let mut kept = Vec::with_capacity(self.long.len());
        let mut moved = Vec::new();
        for l in self.long.drain(..) {
            if l.end - l.begin >= min {
                kept.push(l);
            } else {
                moved.push(l);
            }
        }
        self.long = kept;
        for s in self.short.values_mut() {
            s.coarsen();
        }
        for l in moved {
            *self
                .short
                .entry(l.site)
                .or_default()
                .at(l.begin.saturating_sub(origin) >> shift) += 1;
        }
    }

    /// The call sites with lives in the capture, in order.
    pub fn sites(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.ended.keys().copied().collect();
        v.extend(self.open.values().map(|&(site, _)| site));
        v.extend(self.orphans.values().map(|&(site, _, _)| site));
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.open.capacity() * 24
            + self.orphans.capacity() * 40
            + self.long.capacity() * std::mem::size_of::<Life>()
            + self.short.values().map(Series::bytes).sum::<usize>()
            + self.ended.len() * 16
    }
}

/// A life in an answer: ns from the capture's start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LifeOut {
    /// Its begin.
    pub begin_ns: f64,
    /// Its end.
    pub end_ns: f64,
    /// How it ended.
    pub how: How,
}

/// One call site's lives in a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteLives {
    /// Its scope id.
    pub site: u64,
    /// Lanes of lives at least a pixel wide, each in time order, none overlapping.
    pub lanes: Vec<Vec<LifeOut>>,
    /// The lives narrower than a pixel, counted per pixel of their begin: (pixel, lives).
    pub narrow: Vec<(u32, u32)>,
    /// Lives in the window drawn neither in a lane nor counted in `narrow` (past
    /// [`MAX_LANES`] or [`MAX_LIVES`]).
    pub hidden: u64,
    /// Lives of this call site ended in the whole capture.
    pub ended: u64,
}

impl Index {
    /// The lives in window `w`, by call site.
    pub fn lives(&self, w: Window) -> Vec<SiteLives> {
        let map = &self.map;
        let start = self.process.start_ticks;
        let (from, until) = (w.from_ns as f64, w.until_ns as f64);
        let npp = (until - from) / w.px as f64;
        let px = |ns: f64| (((ns - from) / npp).max(0.0) as u32).min(w.px - 1);
        let mut sites: BTreeMap<u64, (Vec<LifeOut>, BTreeMap<u32, u32>)> = BTreeMap::new();
        let lives = &self.lives;
        let whole = lives.long.iter().copied();
        let alive = lives.open.values().map(|&(site, begin)| Life {
            begin,
            end: self.last.max(begin),
            site,
            how: How::Alive,
        });
        let before = lives.orphans.values().map(|&(site, end, how)| Life {
            begin: start.min(end),
            end,
            site,
            how: if how == How::Cancelled {
                How::Cancelled
            } else {
                How::BegunBefore
            },
        });
        for l in whole.chain(alive).chain(before) {
            let (b, e) = (map.ns(l.begin) as f64, map.ns(l.end) as f64);
            if e < from || b > until {
                continue;
            }
            let entry = sites.entry(l.site).or_default();
            if e - b >= npp {
                entry.0.push(LifeOut {
                    begin_ns: b,
                    end_ns: e,
                    how: l.how,
                });
            } else {
                *entry.1.entry(px(b)).or_default() += 1;
            }
        }
        for (&site, series) in &lives.short {
            self.per_px(w, series, |p, bins| {
                let n: u32 = bins.iter().fold(0u32, |a, &b| a.saturating_add(b));
                if n > 0 {
                    *sites
                        .entry(site)
                        .or_default()
                        .1
                        .entry(p as u32)
                        .or_default() += n;
                }
            });
        }
        let mut listed = 0usize;
        let mut out = Vec::with_capacity(sites.len());
        for (site, (mut whole, narrow)) in sites {
            whole.sort_by(|a, b| a.begin_ns.total_cmp(&b.begin_ns));
            let mut s = SiteLives {
                site,
                narrow: narrow.into_iter().collect(),
                ended: lives.ended.get(&site).copied().unwrap_or(0),
                ..SiteLives::default()
            };
            for l in whole {
                let lane = s
                    .lanes
                    .iter()
                    .position(|lane| lane.last().is_none_or(|p| p.end_ns <= l.begin_ns));
                match lane {
                    Some(i) if listed < MAX_LIVES => s.lanes[i].push(l),
                    None if s.lanes.len() < MAX_LANES && listed < MAX_LIVES => {
                        s.lanes.push(vec![l])
                    }
                    _ => {
                        s.hidden += 1;
                        continue;
                    }
                }
                listed += 1;
            }
            out.push(s);
        }
        out
    }
}
