//! The lives (wall times) of futures and spans: an async event's two halves paired by async
//! id, whichever thread or chunk each came in, and each life counted on its scope id.

use std::collections::HashMap;

use crate::hist::Dist;
use crate::tscap::{AsyncWhat, Event};

/// Async lives (futures, spans) whose other half has not been read yet, at most: past it,
/// halves are counted as unpaired rather than kept (a damaged file naming endless ids).
const MAX_ASYNC_WAITING: usize = 1 << 20;

/// The lives (wall times) of one scope id's futures or spans: first poll to ready or drop,
/// creation to close.
#[derive(Clone, Default)]
pub(super) struct Lives {
    pub(super) count: u64,
    pub(super) cancelled: u64,
    pub(super) total: u64,
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) clock_errors: u64,
    pub(super) hist: Dist,
}

/// The async halves read so far: those waiting for their other half, and the lives paired.
#[derive(Default)]
pub(super) struct Asyncs {
    /// Async halves read whose other half is still to come, by async id: (scope id, ticks,
    /// what). A begin and its end are on different threads when a future moved, so either
    /// may come first in the file.
    waiting: HashMap<u64, (u64, u64, AsyncWhat)>,
    /// Lives by scope id.
    pub(super) lives: HashMap<u64, Lives>,
    /// Async halves never paired (the other half lost, outside the range, or still alive at
    /// the end).
    unpaired: u64,
}

impl Asyncs {
    /// Halves never paired, those still waiting for their other half included.
    pub(super) fn unpaired(&self) -> u64 {
        self.unpaired + self.waiting.len() as u64
    }

    /// One half of a future's or span's life: paired with the other by async id.
    pub(super) fn half(&mut self, e: &Event) {
        let Some((aid, what)) = e.async_event() else {
            return;
        };
        let other = match self.waiting.remove(&aid) {
            Some(o) => o,
            None => {
                if self.waiting.len() < MAX_ASYNC_WAITING {
                    self.waiting.insert(aid, (e.id, e.ticks, what));
                } else {
                    self.unpaired += 1;
                }
                return;
            }
        };
        let (begin, end, how) = match (other.2, what) {
            (AsyncWhat::Begin, w) if w != AsyncWhat::Begin => (other.1, e.ticks, w),
            (w, AsyncWhat::Begin) if w != AsyncWhat::Begin => (e.ticks, other.1, w),
            // Two begins or two ends under one id: a damaged file; neither is a life.
            _ => {
                self.unpaired += 2;
                return;
            }
        };
        if other.0 != e.id {
            self.unpaired += 2;
            return;
        }
        let l = self.lives.entry(e.id).or_insert_with(|| Lives {
            min: u64::MAX,
            ..Lives::default()
        });
        let d = end.wrapping_sub(begin) as i64;
        let dt = if d < 0 {
            l.clock_errors += 1;
            0
        } else {
            d as u64
        };
        l.count += 1;
        l.cancelled += u64::from(how == AsyncWhat::Cancelled);
        l.total = l.total.saturating_add(dt);
        l.min = l.min.min(dt);
        l.max = l.max.max(dt);
        l.hist.record(dt);
    }
}
