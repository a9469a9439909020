//! A log-linear histogram of durations in ticks, for percentiles in bounded memory (the same
//! buckets as the in-process summary's, so both report the same p50/p99).
//!
//! Values below 32 have a bucket each. Above, every power of two is split into 32 equal
//! buckets, so a bucket is at most 1/32 of its lower bound wide and its midpoint is within
//! 1/64 ≈ 1.6% of any value in it: percentiles are good to 2%. Powers of two up to 2^44 are
//! kept (about 1.6 hours at 3 GHz); longer values land in the top bucket, and reports clamp
//! every percentile to the exact min and max.

const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
const MAX_EXP: u32 = 44;
/// The 32 exact buckets, then 32 per power of two from 2^5 to 2^44.
pub(crate) const BUCKETS: usize = SUB + (MAX_EXP - SUB_BITS + 1) as usize * SUB;

/// The bucket a value falls in.
#[inline(always)]
fn bucket(v: u64) -> usize {
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
fn bucket_range(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, i as u64 + 1);
    }
    let shift = ((i - SUB) / SUB) as u32;
    let sub = ((i - SUB) % SUB) as u64;
    let lo = (SUB as u64 + sub) << shift;
    (lo, lo + (1u64 << shift))
}

/// Counts per bucket.
#[derive(Clone, Debug)]
pub(crate) struct Hist(Box<[u64]>);

impl Hist {
    pub(crate) fn new() -> Hist {
        Hist(vec![0; BUCKETS].into_boxed_slice())
    }

    #[inline(always)]
    pub(crate) fn record(&mut self, v: u64) {
        self.0[bucket(v)] += 1;
    }

    /// The value at quantile `q` (0..=1): the midpoint of the bucket holding the
    /// `ceil(q * n)`-th smallest value. `None` when empty.
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        let n: u64 = self.0.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, &c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(i);
                return Some(lo + (hi - lo - 1) / 2);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lies_in_its_bucket_range() {
        let mut v = 0u64;
        while v < 1 << (MAX_EXP + 1) {
            let (lo, hi) = bucket_range(bucket(v));
            assert!(lo <= v && v < hi, "{v} in [{lo},{hi})");
            v = v * 17 / 16 + 1;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    /// Exact percentiles of several distributions against the histogram's, within 2%.
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
            let mut h = Hist::new();
            values.iter().for_each(|&v| h.record(v));
            values.sort_unstable();
            for q in [0.5, 0.9, 0.99] {
                let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
                let got = h.quantile(q).unwrap();
                let rel = (got as f64 - exact as f64).abs() / exact as f64;
                assert!(
                    rel <= 0.02,
                    "{name} p{q}: exact {exact}, got {got} ({rel:.4})"
                );
            }
        }
    }
}
