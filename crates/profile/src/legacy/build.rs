//! What the readers build: a profile whose locations are created once per address
//! ([`Builder`]), renumbered and cleaned up as pprof does, and what a reader made of the data
//! ([`Outcome`]).

use std::collections::HashMap;

use super::scan::go_f64_to_i64;
use crate::error::ErrorKind;
use crate::model::{Location, Profile};

/// What one reader made of the data.
#[allow(clippy::large_enum_variant)] // one per reader and file: moving it costs nothing
pub(super) enum Outcome {
    /// Not this format.
    No,
    /// The header matched, but pprof would treat the data as not this format after all and try
    /// the next reader; the reason is reported if none accepts it.
    Rejected(ErrorKind),
    /// Parsed, or failed in a way that ends the search.
    Done(Result<Profile, ErrorKind>),
}

/// pprof's scaleHeapSample: a sampled heap record's count and size divided by the
/// probability `1 - exp(-avg/rate)` that an allocation of the average size was sampled.
pub(super) fn scale_heap_sample(count: i64, size: i64, rate: i64) -> (i64, i64) {
    if count == 0 || size == 0 {
        return (0, 0);
    }
    if rate <= 1 {
        return (count, size);
    }
    let avg = size as f64 / count as f64;
    let scale = 1.0 / (1.0 - (-avg / rate as f64).exp());
    (
        go_f64_to_i64(count as f64 * scale),
        go_f64_to_i64(size as f64 * scale),
    )
}

/// A profile being read: locations are created once per address, in first-seen order.
pub(super) struct Builder {
    pub(super) p: Profile,
    pub(super) by_address: HashMap<u64, u32>,
}

impl Builder {
    pub(super) fn new(p: Profile) -> Builder {
        Builder {
            p,
            by_address: HashMap::new(),
        }
    }

    /// The index of the location at `address`, created if new.
    pub(super) fn location(&mut self, address: u64) -> u32 {
        let locations = &mut self.p.locations;
        *self.by_address.entry(address).or_insert_with(|| {
            let index = index_u32(locations.len());
            locations.push(Location {
                address,
                ..Location::default()
            });
            index
        })
    }

    /// The address of the location at `index`.
    pub(super) fn address(&self, index: u32) -> u64 {
        self.p
            .locations
            .get(index as usize)
            .map_or(0, |l| l.address)
    }
}

/// An index as stored in the model (indices come from vectors built from the file's bytes,
/// far below `u32::MAX` within the loader's size cap).
pub(super) fn index_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// pprof's remapLocationIDs: keeps the locations samples use, in order of first use, with ids
/// 1, 2, ...
pub(super) fn remap_locations(p: &mut Profile) {
    let mut new_index = vec![u32::MAX; p.locations.len()];
    let mut order = Vec::new();
    for s in &p.samples {
        p.stacks.map_span(s.stack, |l| {
            let Some(slot) = new_index.get_mut(l as usize) else {
                return l;
            };
            if *slot == u32::MAX {
                *slot = index_u32(order.len());
                order.push(l as usize);
            }
            *slot
        });
    }
    let old = std::mem::take(&mut p.locations);
    p.locations = order
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let mut l = old.get(o).copied().unwrap_or_default();
            l.id = i as u64 + 1;
            l
        })
        .collect();
}

/// pprof's remapFunctionIDs: keeps the functions locations use, in order of first use.
pub(super) fn remap_functions(p: &mut Profile) {
    let mut new_index = vec![u32::MAX; p.functions.len()];
    let mut order = Vec::new();
    for l in &p.locations {
        for line in &mut p.lines[l.lines.range()] {
            let Some(slot) = new_index.get_mut(line.function as usize) else {
                continue;
            };
            if *slot == u32::MAX {
                *slot = index_u32(order.len());
                order.push(line.function as usize);
            }
            line.function = *slot;
        }
    }
    let old = std::mem::take(&mut p.functions);
    p.functions = order
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let mut f = old.get(o).copied().unwrap_or_default();
            f.id = i as u64 + 1;
            f
        })
        .collect();
}

/// pprof's cleanupDuplicateLocations: drops the second frame when it is the leaf again (taken
/// both from the signal context and from unwinding, and adjusted by -1).
pub(super) fn cleanup_duplicate_locations(p: &mut Profile) {
    for s in &mut p.samples {
        let mut stack = p.stacks.get(s.stack);
        if let (Some(first), Some(second)) = (stack.next(), stack.next()) {
            let a0 = p.locations.get(first as usize).map_or(0, |l| l.address);
            let a1 = p.locations.get(second as usize).map_or(0, |l| l.address);
            if a0 == a1.wrapping_add(1) {
                p.stacks.remove(&mut s.stack, 1);
            }
        }
    }
}
