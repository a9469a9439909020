//! The sampled blocks and what they add up to: a table behind a lock taken with a bounded
//! number of tries, and the counting filter that lets an unsampled free skip it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::profile::{HeapRaw as Raw, HeapSums as Sums};

/// Frames kept of a sampled allocation's stack.
pub(crate) const MAX_FRAMES: usize = 64;
/// Sampled blocks held live at most (at the default rate, a heap of 512 GiB).
pub(crate) const MAX_LIVE: usize = 1 << 20;
/// Distinct stacks held at most.
pub(crate) const MAX_STACKS: usize = 1 << 16;
/// Distinct (stack, block size) pairs held at most.
pub(crate) const MAX_SUMS: usize = 1 << 18;

/// Slots of the counting filter (16 KiB: most of it stays in cache).
const FILTER_SLOTS: usize = 1 << 14;

/// Per slot, how many live sampled blocks hash there (saturating: a slot at 255 stays set).
static FILTER: [AtomicU8; FILTER_SLOTS] = [const { AtomicU8::new(0) }; FILTER_SLOTS];

/// Samples and frees that could not take the table (counted, not waited for), and samples
/// that found it full.
static BUSY_SAMPLES: AtomicU64 = AtomicU64::new(0);
static BUSY_FREES: AtomicU64 = AtomicU64::new(0);

fn slot(at: usize) -> &'static AtomicU8 {
    let h = (at as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &FILTER[(h >> 50) as usize & (FILTER_SLOTS - 1)]
}

/// Whether the block at `at` may be a sampled one (false: it certainly is not).
#[inline(always)]
pub(crate) fn maybe_sampled(at: usize) -> bool {
    slot(at).load(Relaxed) != 0
}

#[derive(Default)]
struct Table {
    /// Distinct stacks (return addresses, innermost first) and their numbers.
    index: HashMap<Box<[u64]>, u32>,
    /// Per (stack, size): the sampled blocks allocated, and those still live.
    sums: HashMap<(u32, u64), Sums>,
    /// The live sampled blocks: their stack and size.
    live: HashMap<usize, (u32, u64)>,
    /// Samples dropped: the table full (stacks or blocks).
    dropped: u64,
    rate: u64,
    started: Option<SystemTime>,
    /// The live sampled blocks' bytes, each scaled as the profile scales it: the estimate
    /// of the bytes in use (the profile's `inuse_space` total).
    in_use: f64,
}

/// What one sampled block of `size` bytes stands for at `rate` (Go's formula, as the
/// profile's figures: the block over the chance that a block of its size was sampled).
fn estimate(size: u64, rate: u64) -> f64 {
    size as f64 / -(-(size.max(1) as f64) / rate as f64).exp_m1()
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The table, taken with at most 1,000 tries (a few microseconds): never waited on for long
/// (a fork child whose parent held it would wait for ever).
fn take() -> Option<std::sync::MutexGuard<'static, Option<Table>>> {
    for i in 0..1000 {
        match TABLE.try_lock() {
            Ok(t) => return Some(t),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if i % 64 == 63 => std::thread::yield_now(),
            Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
        }
    }
    None
}

/// Records the sampled block at `at` of `size` bytes, allocated from `stack`. Returns the
/// new estimate of the bytes in use where it changed.
pub(crate) fn record(at: usize, size: u64, stack: &[u64], rate: u64) -> Option<f64> {
    let Some(mut t) = take() else {
        BUSY_SAMPLES.fetch_add(1, Relaxed);
        return None;
    };
    let t = t.get_or_insert_with(Table::default);
    t.rate = rate;
    t.started.get_or_insert_with(SystemTime::now);
    let id = match t.index.get(stack) {
        Some(&id) => id,
        None if t.index.len() < MAX_STACKS => {
            let id = t.index.len() as u32;
            t.index.insert(stack.into(), id);
            id
        }
        None => {
            t.dropped += 1;
            return None;
        }
    };
    if t.sums.len() >= MAX_SUMS && !t.sums.contains_key(&(id, size)) {
        t.dropped += 1;
        return None;
    }
    let sums = t.sums.entry((id, size)).or_default();
    sums.alloc += 1;
    if t.live.len() < MAX_LIVE {
        sums.inuse += 1;
        // A block at this address still listed was freed unseen (its free could not take
        // the table): it is in use no more.
        t.in_use += estimate(size, rate);
        if let Some(old) = t.live.insert(at, (id, size)) {
            if let Some(s) = t.sums.get_mut(&old) {
                s.inuse = s.inuse.saturating_sub(1);
            }
            t.in_use = (t.in_use - estimate(old.1, rate)).max(0.0);
        } else {
            let s = slot(at);
            let _ = s.fetch_update(Relaxed, Relaxed, |n| n.checked_add(1));
        }
        Some(t.in_use)
    } else {
        t.dropped += 1;
        None
    }
}

/// The block at `at` was freed: no longer in use, if it was a sampled one. Returns the new
/// estimate of the bytes in use where it changed.
pub(crate) fn forget(at: usize) -> Option<f64> {
    let Some(mut t) = take() else {
        BUSY_FREES.fetch_add(1, Relaxed);
        return None;
    };
    let t = t.as_mut()?;
    let key = t.live.remove(&at)?;
    if let Some(s) = t.sums.get_mut(&key) {
        s.inuse = s.inuse.saturating_sub(1);
    }
    let s = slot(at);
    let _ = s.fetch_update(Relaxed, Relaxed, |n| (n != u8::MAX).then(|| n - 1));
    // An empty heap is 0 exactly, whatever the rounding of the sums before.
    t.in_use = if t.live.is_empty() {
        0.0
    } else {
        (t.in_use - estimate(key.1, t.rate)).max(0.0)
    };
    Some(t.in_use)
}

/// The estimate of the bytes in use now (0 before the first sample).
pub(crate) fn in_use() -> Option<f64> {
    Some(take()?.as_ref().map_or(0.0, |t| t.in_use))
}

/// A heap profile: what the sampled allocations estimate of every allocation since the
/// profiler's first sample (`alloc_objects`, `alloc_space`) and of the blocks still in use
/// (`inuse_objects`, `inuse_space`), by stack, written as Go writes heap profiles.
pub struct HeapProfile {
    pub(crate) pprof: tickscope_pprof::Profile,
}

impl HeapProfile {
    /// The estimated totals: (allocations, bytes allocated, blocks in use, bytes in use).
    pub fn totals(&self) -> (i64, i64, i64, i64) {
        let mut t = (0, 0, 0, 0);
        for s in &self.pprof.samples {
            t.0 += s.values[0];
            t.1 += s.values[1];
            t.2 += s.values[2];
            t.3 += s.values[3];
        }
        t
    }

    /// The profile as pprof's protobuf, uncompressed.
    pub fn to_pprof_bytes(&self) -> Vec<u8> {
        tickscope_pprof::encode(&self.pprof)
    }

    /// Writes the profile to `out`, gzip-compressed pprof protobuf.
    pub fn write_pprof_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        super::unprofiled(|| tickscope_pprof::write_gz(&self.pprof, out))
    }

    /// Writes the profile to `path` as every output of tickscope's is written (through a
    /// temporary file renamed over the name once complete, never through a link planted
    /// there).
    pub fn write_pprof(&self, path: impl AsRef<std::path::Path>) -> Result<(), crate::Error> {
        super::unprofiled(|| {
            crate::profile::write_output(path.as_ref(), |w| {
                tickscope_pprof::write_gz(&self.pprof, w)
            })
        })
    }
}

/// The profile of the table as it is now.
pub(crate) fn profile() -> HeapProfile {
    profile_since(None)
}

/// [`profile`], its allocations counted since the last call with `seen` (which keeps, per
/// stack and size, the allocations counted so far): consecutive windows' `alloc_*` add up
/// to the whole profile's, their `inuse_*` are the heap at each window's end.
pub(crate) fn profile_since(seen: Option<&mut HashMap<(u32, u64), u64>>) -> HeapProfile {
    let mut raw = match take() {
        Some(t) => match t.as_ref() {
            Some(t) => Raw {
                stacks: {
                    let mut by_id = vec![Box::<[u64]>::default(); t.index.len()];
                    for (stack, &id) in &t.index {
                        by_id[id as usize] = stack.clone();
                    }
                    by_id
                },
                sums: t.sums.iter().map(|(k, v)| (*k, *v)).collect(),
                rate: t.rate,
                started: t.started,
                dropped: t.dropped,
                busy_samples: BUSY_SAMPLES.load(Relaxed),
                busy_frees: BUSY_FREES.load(Relaxed),
            },
            None => empty(),
        },
        None => empty(),
    };
    if let Some(seen) = seen {
        for (key, sums) in raw.sums.iter_mut() {
            let before = seen.insert(*key, sums.alloc).unwrap_or(0);
            sums.alloc = sums.alloc.saturating_sub(before);
        }
        raw.sums.retain(|(_, s)| s.alloc > 0 || s.inuse > 0);
    }
    HeapProfile {
        pprof: crate::profile::heap_pprof(raw),
    }
}

/// Nothing sampled: the rate, and what could not be recorded.
fn empty() -> Raw {
    Raw {
        stacks: Vec::new(),
        sums: Vec::new(),
        rate: super::RATE.load(Relaxed),
        started: None,
        dropped: 0,
        busy_samples: BUSY_SAMPLES.load(Relaxed),
        busy_frees: BUSY_FREES.load(Relaxed),
    }
}

/// Where the profile is written at exit when not `TICKSCOPE_HEAPPROFILE` itself (the preload
/// library's choice for a program exec'd by the profiled one: `<path>.<pid>`).
static OUTPUT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The process that registered the write at exit: a fork child (which inherits the
/// registration, and the parent's samples) writes nothing, so that it never replaces the
/// parent's file with its own.
static WRITER: AtomicU64 = AtomicU64::new(0);

/// The profile is written to `path` at exit, not to `TICKSCOPE_HEAPPROFILE` (the first
/// choice stays). Not a stable API.
pub(crate) fn write_to(path: std::path::PathBuf) {
    let _ = OUTPUT.set(path);
}

/// Once, as sampling starts: with `TICKSCOPE_HEAPPROFILE=FILE`, the profile is written there
/// at exit.
pub(crate) fn at_first_sample() {
    if crate::sys::env::env_var("TICKSCOPE_HEAPPROFILE").is_some_and(|p| !p.is_empty()) {
        WRITER.store(u64::from(std::process::id()), Relaxed);
        crate::sys::process::at_exit(write_at_exit);
    }
}

extern "C" fn write_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if WRITER.load(Relaxed) != u64::from(std::process::id()) {
            return;
        }
        let Some(path) = OUTPUT
            .get()
            .map(|p| p.display().to_string())
            .or_else(|| crate::sys::env::env_var("TICKSCOPE_HEAPPROFILE"))
        else {
            return;
        };
        let p = super::profile();
        // Under `record`, which says where the run's profile went.
        let quiet =
            crate::sys::env::env_var(tickscope_fmt::protocol::env::QUIET).is_some_and(|q| q == "1");
        match p.write_pprof(&path) {
            Ok(()) if quiet => {}
            Ok(()) => {
                crate::sys::stderr::say(&format!("tickscope: heap profile written to {path}"))
            }
            Err(e) => crate::sys::stderr::warn(&format!("cannot write the heap profile: {e}")),
        }
    });
}
