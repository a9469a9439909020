//! The log-linear histogram buckets of durations in ticks that both summaries take
//! percentiles from, so both report the same p50/p99.
//!
//! Values below 64 have a bucket each. Above, every power of two is split into 64 equal
//! buckets, so a bucket is at most 1/64 of its lower bound wide and its midpoint is within
//! 1/128 ≈ 0.8% of any value in it: percentiles are good to 1% relative error. Powers of two
//! up to 2^44 are kept (about 1.6 hours at 3 GHz); longer values land in the top bucket, and
//! reports clamp every percentile to the exact min and max.

/// Bits of a power of two split into sub-buckets (64 per power).
pub const SUB_BITS: u32 = 6;
/// Sub-buckets per power of two, and values below this have a bucket each.
pub const SUB: usize = 1 << SUB_BITS;
/// Highest power of two with buckets of its own.
pub const MAX_EXP: u32 = 44;
/// Number of buckets: the 64 exact ones, then 64 per power of two from 2^6 to 2^44.
pub const BUCKETS: usize = SUB + (MAX_EXP - SUB_BITS + 1) as usize * SUB;

/// The bucket a value falls in.
#[inline(always)]
pub fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    if v >> (MAX_EXP + 1) != 0 {
        return BUCKETS - 1;
    }
    let exp = 63 - v.leading_zeros();
    let shift = exp - SUB_BITS;
    let sub = ((v >> shift) as usize) & (SUB - 1);
    SUB + shift as usize * SUB + sub
}

/// The range `[lo, hi)` of values in bucket `i`.
pub fn bucket_range(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, i as u64 + 1);
    }
    let shift = ((i - SUB) / SUB) as u32;
    let sub = ((i - SUB) % SUB) as u64;
    let lo = (SUB as u64 + sub) << shift;
    (lo, lo + (1u64 << shift))
}

/// The value a percentile falling in bucket `i` is reported as: the bucket's midpoint.
pub fn mid(i: usize) -> u64 {
    let (lo, hi) = bucket_range(i);
    lo + (hi - lo - 1) / 2
}

/// The value at quantile `q` (0..=1) of `n` values counted by bucket in `counts` (bucket,
/// count), in ascending bucket order: the midpoint of the bucket holding the `ceil(q * n)`-th
/// smallest value. `None` when empty. Every histogram here answers through this one walk.
pub fn quantile_of(counts: impl IntoIterator<Item = (usize, u64)>, n: u64, q: f64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (i, c) in counts {
        seen += c;
        if seen >= rank {
            return Some(mid(i));
        }
    }
    None
}

/// Counts per bucket: a histogram to record into, merge, and take percentiles from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts(pub Box<[u64]>);

impl Counts {
    /// An empty histogram (every bucket).
    pub fn new() -> Counts {
        Counts(vec![0; BUCKETS].into_boxed_slice())
    }

    /// Records one value.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        self.0[bucket(v)] += 1;
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Counts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }

    /// The value at quantile `q` (0..=1): the midpoint of the bucket holding the
    /// `ceil(q * n)`-th smallest value. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n: u64 = self.0.iter().sum();
        quantile_of(self.0.iter().copied().enumerate(), n, q)
    }
}

impl Default for Counts {
    fn default() -> Counts {
        Counts::new()
    }
}

/// Counts over the range of buckets between the lowest and highest value seen, grown as values
/// come: what a full [`Counts`] would answer, in memory that follows the values' spread (a
/// call site's durations fill a few dozen of the 2,560 buckets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    base: usize,
    counts: Vec<u64>,
}

impl Window {
    /// An empty histogram (it holds nothing until a value comes).
    pub fn new() -> Window {
        Window::default()
    }

    /// Records one value.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        let b = bucket(v);
        match self.counts.get_mut(b.wrapping_sub(self.base)) {
            Some(c) => *c += 1,
            None => self.add(b, 1),
        }
    }

    /// Adds `n` values in bucket `b`.
    pub fn add(&mut self, b: usize, n: u64) {
        if self.counts.is_empty() {
            self.base = b;
        } else if b < self.base {
            let mut c = vec![0; self.base - b];
            c.append(&mut self.counts);
            self.counts = c;
            self.base = b;
        }
        let i = b - self.base;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Window) {
        if other.counts.is_empty() {
            return;
        }
        // Cover both ranges first, so the adds below do not grow it one bucket at a time.
        self.add(other.base, 0);
        self.add(other.base + other.counts.len() - 1, 0);
        for (i, &n) in other.counts.iter().enumerate() {
            self.counts[other.base + i - self.base] += n;
        }
    }

    /// How many values it holds.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The value at quantile `q` (0..=1), as [`Counts::quantile`] gives it. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let buckets = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, &c)| (self.base + i, c));
        quantile_of(buckets, self.total(), q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_the_bucket_whose_range_holds_it() {
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, 1 << 44, (1 << 45) - 1]) {
            let (lo, hi) = bucket_range(bucket(v));
            assert!(lo <= v && v < hi, "{v} not in [{lo}, {hi})");
            assert!(
                (hi - lo) as f64 <= (lo as f64 / SUB as f64).max(1.0),
                "{v}: too wide"
            );
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket(1 << 45), BUCKETS - 1);
    }

    /// Exact percentiles of several distributions against the histogram's, within 1%.
    #[test]
    fn percentiles_within_two_percent_relative_error() {
        let mut rng = 0x2545_f491_4f6c_dd1du64; // xorshift, fixed seed
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for name in ["uniform", "log-uniform", "bimodal"] {
            let mut values: Vec<u64> = (0..100_000)
                .map(|_| {
                    let r = next();
                    match name {
                        "uniform" => 1_000 + r % 1_000_000,
                        "log-uniform" => (1u64 << (6 + r % 30)) | ((r >> 40) % 64),
                        _ if r % 10 == 0 => 5_000_000 + r % 100_000,
                        _ => 20_000 + r % 2_000,
                    }
                })
                .collect();
            let mut h = Counts::new();
            values.iter().for_each(|&v| h.record(v));
            let mut merged = Counts::new();
            merged.merge(&h);
            assert_eq!(merged, h);
            // A window answers as the full histogram, merged in halves or whole.
            let (mut w, mut a, mut b) = (Window::new(), Window::new(), Window::new());
            for (i, &v) in values.iter().enumerate() {
                w.record(v);
                if i % 2 == 0 {
                    a.record(v)
                } else {
                    b.record(v)
                }
            }
            a.merge(&b);
            assert_eq!(a, w);
            assert_eq!(w.total(), values.len() as u64);
            for q in [0.0, 0.01, 0.5, 0.9, 0.99, 1.0] {
                assert_eq!(w.quantile(q), h.quantile(q), "{name} q{q}");
            }
            values.sort_unstable();
            for q in [0.5, 0.9, 0.99] {
                let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
                let got = h.quantile(q).unwrap();
                let rel = (got as f64 - exact as f64).abs() / exact as f64;
                assert!(
                    rel <= 0.01,
                    "{name} p{q}: exact {exact}, got {got} ({rel:.4})"
                );
            }
        }
        assert_eq!(Counts::new().quantile(0.5), None);
    }
}
