//! The histogram of durations `tickscope report` takes percentiles from: the in-process
//! summary's, from [`tickscope_fmt::hist`], so both report the same p50/p99 (good to 1%;
//! reports clamp every percentile to the exact min and max).
//!
//! A full histogram is 20 KB, and a capture may call millions of scopes a few times each:
//! [`Dist`] holds the same counts in memory that grows with the calls recorded (nothing for
//! none, its bucket for one, a sorted list of the buckets seen for a few), and becomes a
//! window of counts over the buckets between its lowest and highest value from its
//! [`DENSE_AFTER`]th value, when the calls have paid for it.

use tickscope_fmt::hist::{bucket, mid, quantile_of, Window, BUCKETS};

/// Values recorded before a distribution becomes a full histogram.
const DENSE_AFTER: u32 = 512;
/// A sparse entry is a bucket (below 2^12) and its count (below 2^20) in one `u32`.
const COUNT_BITS: u32 = 20;
const COUNT_MAX: u32 = (1 << COUNT_BITS) - 1;
const _: () = assert!(BUCKETS <= 1 << (32 - COUNT_BITS) && DENSE_AFTER < COUNT_MAX);

/// Counts per histogram bucket, stored by how many values were recorded.
#[derive(Clone, Debug, Default)]
pub(crate) enum Dist {
    /// Nothing recorded.
    #[default]
    Empty,
    /// One value, in this bucket.
    One(u16),
    /// A few.
    Sparse(Box<Sparse>),
    /// Many: counts over the range of buckets seen.
    Dense(Window),
}

#[derive(Clone, Debug)]
pub(crate) struct Sparse {
    /// Sorted by bucket: `bucket << COUNT_BITS | count`.
    list: Vec<u32>,
    /// Values recorded.
    n: u32,
}

impl Dist {
    /// Records one value.
    #[inline(always)]
    pub(crate) fn record(&mut self, v: u64) {
        match self {
            Dist::Dense(h) => h.record(v),
            _ => self.record_slow(bucket(v)),
        }
    }

    #[cold]
    fn record_slow(&mut self, b: usize) {
        match self {
            Dist::Empty => *self = Dist::One(b as u16),
            Dist::One(first) => {
                let mut list = vec![entry(*first as usize, 1), entry(b, 1)];
                if b < *first as usize {
                    list.swap(0, 1);
                } else if b == *first as usize {
                    list = vec![entry(b, 2)];
                }
                *self = Dist::Sparse(Box::new(Sparse { list, n: 2 }));
            }
            Dist::Sparse(s) => {
                match s
                    .list
                    .binary_search_by_key(&b, |&e| (e >> COUNT_BITS) as usize)
                {
                    // Counts stay below DENSE_AFTER, far from COUNT_MAX.
                    Ok(i) => s.list[i] += 1,
                    Err(i) => s.list.insert(i, entry(b, 1)),
                }
                s.n += 1;
                if s.n >= DENSE_AFTER {
                    let mut h = Window::new();
                    for &e in &s.list {
                        h.add((e >> COUNT_BITS) as usize, (e & COUNT_MAX) as u64);
                    }
                    *self = Dist::Dense(h);
                }
            }
            Dist::Dense(h) => h.add(b, 1),
        }
    }

    /// The value at quantile `q` (0..=1), as the full histogram gives it. `None` when empty.
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        let (list, n) = match self {
            Dist::Empty => return None,
            Dist::One(b) => return Some(mid(*b as usize)),
            Dist::Dense(h) => return h.quantile(q),
            Dist::Sparse(s) => (&s.list, s.n as u64),
        };
        let buckets = list
            .iter()
            .map(|&e| ((e >> COUNT_BITS) as usize, (e & COUNT_MAX) as u64));
        quantile_of(buckets, n, q)
    }
}

fn entry(b: usize, count: u32) -> u32 {
    (b as u32) << COUNT_BITS | count
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stage answers as the full histogram would, before and after promotion.
    #[test]
    fn quantiles_match_the_full_histogram_at_every_size() {
        let mut d = Dist::default();
        let mut h = tickscope_fmt::hist::Counts::new();
        let mut x = 12345u64;
        for i in 0..3000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = if i % 3 == 0 {
                777
            } else {
                (x >> 40) % (1 << (i % 30))
            };
            d.record(v);
            h.record(v);
            if i < 20 || i % 97 == 0 || (500..520).contains(&i) {
                for q in [0.0, 0.01, 0.5, 0.9, 0.99, 1.0] {
                    assert_eq!(
                        d.quantile(q),
                        h.quantile(q),
                        "after {} values, q {q}",
                        i + 1
                    );
                }
            }
        }
        assert!(matches!(d, Dist::Dense(_)));
        assert_eq!(Dist::default().quantile(0.5), None);
    }
}
