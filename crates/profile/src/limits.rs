//! How much a gzip-compressed profile may decompress to: the guard against gzip bombs, which
//! the readers apply ([`load`](crate::load())) and the error that refuses a profile names.

/// The most a gzip-compressed profile may decompress to (a guard against gzip bombs).
pub const MAX_DECOMPRESSED: u64 = 4 << 30;

/// By default a gzip-compressed profile may also decompress to at most this many times its
/// compressed size (real profiles compress 3 to 30 times; deflate can reach ~1000 times, on
/// data no profiler writes, such as long runs of one byte) ...
pub const MAX_RATIO: u64 = 100;
/// ... or to this much, whichever is more: a small file is never refused for its ratio.
pub const RATIO_FLOOR: u64 = 64 << 20;

/// How much a profile may decompress to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `None`: [`MAX_RATIO`] times the compressed size (at least [`RATIO_FLOOR`]) and at
    /// most [`MAX_DECOMPRESSED`]. `Some(n)`: `n` bytes, whatever the ratio (to read a file
    /// the default refuses).
    pub max_decompressed: Option<u64>,
}

impl Limits {
    /// The limit for `compressed` bytes of gzip, and the compressed size when the ratio is
    /// what sets it (for the error to say so).
    pub(crate) fn for_gzip(self, compressed: u64) -> (u64, Option<u64>) {
        match self.max_decompressed {
            Some(n) => (n, None),
            None => {
                let by_ratio = compressed.saturating_mul(MAX_RATIO).max(RATIO_FLOOR);
                match by_ratio < MAX_DECOMPRESSED {
                    true => (by_ratio, Some(compressed)),
                    false => (MAX_DECOMPRESSED, None),
                }
            }
        }
    }

    /// The limit on bytes read whole (not compressed).
    pub(crate) fn absolute(self) -> u64 {
        self.max_decompressed.unwrap_or(MAX_DECOMPRESSED)
    }
}
