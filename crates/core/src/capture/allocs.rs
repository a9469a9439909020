//! Allocations by scope over a capture (format version 4's allocations entry): the program's
//! counts by call site (`scope::heap`) read when the capture starts and again when it ends,
//! the difference written before the end chunk.

use std::collections::BTreeMap;

use super::format::{meta, put_varint};

/// The counts by call site when the capture started: allocations, bytes, self allocations,
/// self bytes.
pub(crate) struct Base(BTreeMap<u32, [u64; 4]>);

/// The counts now, where the program counts allocations by scope; `None` otherwise.
pub(crate) fn base() -> Option<Base> {
    crate::state::counting_allocs().then(|| Base(crate::scope::heap_by_site()))
}

impl Base {
    /// Appends an allocations entry to `out` for every call site that allocated since.
    pub(crate) fn entries(&self, out: &mut Vec<u8>) {
        for (id, now) in crate::scope::heap_by_site() {
            let was = self.0.get(&id).copied().unwrap_or_default();
            let d: Vec<u64> = now
                .iter()
                .zip(was)
                .map(|(n, w)| n.wrapping_sub(w))
                .collect();
            if d.iter().all(|&x| x == 0) {
                continue;
            }
            out.push(meta::ALLOCS);
            put_varint(out, id as u64);
            for x in d {
                put_varint(out, x);
            }
        }
    }
}
