//! Values per time bin: the index's summaries of what is too small to keep one by one.
//!
//! A [`Series`] covers the bins from the first one written to the last, densely (a thread's
//! life, not the whole capture). Bins are numbered from the capture's start; all series of
//! an index share one bin width, a power of two of ticks, that doubles when the index
//! outgrows its memory budget ([`Series::coarsen`] merges pairs of bins).

/// What a bin holds, and how two adjacent bins merge when the width doubles.
pub trait Bin: Copy + Default {
    /// The bin of twice the width covering `a` then `b`.
    fn merge(a: Self, b: Self) -> Self;
}

/// Busy time at one depth, in 1/4096ths of the bin ([`FULL`] = busy throughout).
impl Bin for u16 {
    fn merge(a: u16, b: u16) -> u16 {
        ((a as u32 + b as u32) / 2) as u16
    }
}

/// A count (frame marks, messages, samples).
impl Bin for u32 {
    fn merge(a: u32, b: u32) -> u32 {
        a.saturating_add(b)
    }
}

/// A counter's smallest, largest and last value in the bin (`NaN`s: none). The last is
/// the value it holds after the bin, until it is set again (what the page draws on).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Smallest value.
    pub min: f32,
    /// Largest value.
    pub max: f32,
    /// The value set last in the bin: each thread's in time order; where two threads set
    /// the counter within one bin, the one whose chunk was read last.
    pub last: f32,
}

impl Default for Range {
    fn default() -> Range {
        Range {
            min: f32::NAN,
            max: f32::NAN,
            last: f32::NAN,
        }
    }
}

impl Range {
    /// Returns true if and only if the bin saw a value.
    pub fn is_set(&self) -> bool {
        !self.min.is_nan()
    }

    /// The range with `v`, set after the others, in it too.
    pub fn with(self, v: f32) -> Range {
        if self.is_set() {
            Range {
                min: self.min.min(v),
                max: self.max.max(v),
                last: v,
            }
        } else {
            Range {
                min: v,
                max: v,
                last: v,
            }
        }
    }
}

impl Bin for Range {
    fn merge(a: Range, b: Range) -> Range {
        match (a.is_set(), b.is_set()) {
            (true, true) => Range {
                min: a.min.min(b.min),
                max: a.max.max(b.max),
                last: b.last,
            },
            (true, false) => a,
            _ => b,
        }
    }
}

/// Busy throughout the bin, in the units of a busy series.
pub const FULL: u16 = 4096;

/// Values of consecutive bins, from `start`.
#[derive(Clone, Debug, Default)]
pub struct Series<T> {
    start: u64,
    data: Vec<T>,
}

impl<T: Bin> Series<T> {
    /// The bin `bin`, for writing: the series grows to cover it.
    #[inline]
    pub fn at(&mut self, bin: u64) -> &mut T {
        if self.data.is_empty() {
            self.start = bin;
        } else if bin < self.start {
            // Bins are written in time order per series, but a thread's chunks can begin
            // a little before its last event (a scope's begin carried in an open list).
            let more = (self.start - bin) as usize;
            self.data
                .splice(0..0, std::iter::repeat_n(T::default(), more));
            self.start = bin;
        }
        let i = (bin - self.start) as usize;
        if i >= self.data.len() {
            self.data.resize(i + 1, T::default());
        }
        &mut self.data[i]
    }

    /// The value of bin `bin` (the default outside the series).
    #[inline]
    pub fn get(&self, bin: u64) -> T {
        bin.checked_sub(self.start)
            .and_then(|i| self.data.get(i as usize))
            .copied()
            .unwrap_or_default()
    }

    /// The bins `[from, until)` that the series covers, with the first one's number.
    pub fn window(&self, from: u64, until: u64) -> (u64, &[T]) {
        let lo = from.max(self.start);
        let hi = until.min(self.start + self.data.len() as u64);
        if lo >= hi {
            return (lo, &[]);
        }
        (
            lo,
            &self.data[(lo - self.start) as usize..(hi - self.start) as usize],
        )
    }

    /// Halves the resolution: bins `2k` and `2k + 1` become bin `k`.
    pub fn coarsen(&mut self) {
        if self.data.is_empty() {
            self.start /= 2;
            return;
        }
        let odd = self.start % 2 == 1;
        let mut out = Vec::with_capacity(self.data.len() / 2 + 1);
        let mut it = self.data.iter().copied();
        if odd {
            // The first bin's partner, before the series began, held nothing.
            if let Some(b) = it.next() {
                out.push(T::merge(T::default(), b));
            }
        }
        while let Some(a) = it.next() {
            let b = it.next().unwrap_or_default();
            out.push(T::merge(a, b));
        }
        self.start /= 2;
        self.data = out;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.capacity() * std::mem::size_of::<T>()
    }

    /// Returns true if and only if nothing was written.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_grows_both_ways_and_halves_its_resolution_exactly() {
        let mut s = Series::<u32>::default();
        *s.at(5) += 1;
        *s.at(8) += 2;
        *s.at(3) += 4;
        assert_eq!(
            (s.get(2), s.get(3), s.get(5), s.get(8), s.get(9)),
            (0, 4, 1, 2, 0)
        );
        assert_eq!(s.window(4, 100), (4, &[0, 1, 0, 0, 2][..]));
        // Bins 3..=8 become 1..=4: 3 alone (its partner 2 was never written), 4+5, 6+7, 8.
        s.coarsen();
        assert_eq!((s.get(1), s.get(2), s.get(3), s.get(4)), (4, 1, 0, 2));
        let mut b = Series::<u16>::default();
        *b.at(2) = FULL;
        *b.at(3) = FULL / 2;
        b.coarsen();
        assert_eq!(b.get(1), FULL * 3 / 4);
        let mut r = Series::<Range>::default();
        *r.at(0) = Range::default().with(3.0).with(-1.0);
        *r.at(1) = Range::default().with(7.0);
        r.coarsen();
        assert_eq!(
            r.get(0),
            Range {
                min: -1.0,
                max: 7.0,
                // The later bin's last.
                last: 7.0,
            }
        );
        assert!(!r.get(1).is_set());
    }
}
