//! The fixed, preallocated, lock-free store that signal handlers write samples into.
//!
//! **Signal context.** [`Store::record`] and everything it calls run inside the signal
//! handler: they may not allocate, lock, or call the libc unwinder. Every other function here
//! belongs to the drain thread.
//!
//! Three tiers, so nothing is dropped silently:
//! 1. A hash table of stacks: a sample whose key (thread, frames, active scopes) is already
//!    there costs two atomic adds. A new key claims an empty entry with one CAS.
//! 2. When the probe finds no room (table full, or entries busy being written or evicted), the
//!    sample goes to an overflow log, a bounded multi-producer queue (Vyukov's design: one
//!    sequence number per cell, producers claim cells with a CAS on the head).
//! 3. When the log is full too, the sample is counted as lost, with its weight, by reason.
//!
//! The drain thread harvests counts from the table (leaving hot stacks in place), evicts
//! entries that stayed idle, and empties the log.
//!
//! Eviction and readers: a handler announces itself on an entry (`users`) before checking its
//! state; the drain marks the entry busy, then waits for `users` to drop to zero before it
//! takes the counts and frees the entry. The handler never waits; the drain waits at most for
//! a handler already running on another thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

use super::unwind::MAX_FRAMES;

/// Open scopes kept per sample: the 8 with the lowest call-site ids (the earliest
/// registered); more are left out.
pub(crate) const MAX_SCOPES: usize = 8;

/// Entries probed for a key before the sample goes to the log.
const PROBES: usize = 8;

const EMPTY: u64 = 0;
const BUSY: u64 = 1;

/// What identifies a stack: the thread, the frames (leaf first), the active scopes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub tid: u32,
    /// Cut at [`MAX_FRAMES`]; more frames existed.
    pub truncated: bool,
    pub frames: Vec<u64>,
    pub scopes: Vec<u32>,
}

/// Counts for one key: signals handled, and the periods and nanoseconds they stand for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub count: u64,
    pub weight: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, o: Counts) {
        self.count += o.count;
        self.weight += o.weight;
    }
}

/// A sample as the handler builds it, on its own stack.
pub(crate) struct Raw<'a> {
    pub tid: u32,
    pub truncated: bool,
    pub frames: &'a [u64],
    pub scopes: &'a [u32],
    pub count: u64,
    pub weight: u64,
}

/// Key fields stored in atomics: written by the claiming handler while the entry is BUSY,
/// read by others only once it is published.
struct KeyCells {
    tid: AtomicU32,
    nframes: AtomicU32,
    nscopes: AtomicU32,
    frames: [AtomicU64; MAX_FRAMES],
    scopes: [AtomicU32; MAX_SCOPES],
}

impl KeyCells {
    fn store(&self, s: &Raw<'_>) {
        self.tid.store(s.tid, Relaxed);
        self.nframes
            .store(s.frames.len() as u32 | (s.truncated as u32) << 31, Relaxed);
        self.nscopes.store(s.scopes.len() as u32, Relaxed);
        for (c, &f) in self.frames.iter().zip(s.frames) {
            c.store(f, Relaxed);
        }
        for (c, &f) in self.scopes.iter().zip(s.scopes) {
            c.store(f, Relaxed);
        }
    }

    fn matches(&self, s: &Raw<'_>) -> bool {
        self.tid.load(Relaxed) == s.tid
            && self.nframes.load(Relaxed) == (s.frames.len() as u32 | (s.truncated as u32) << 31)
            && self.nscopes.load(Relaxed) == s.scopes.len() as u32
            && self
                .frames
                .iter()
                .zip(s.frames)
                .all(|(c, &f)| c.load(Relaxed) == f)
            && self
                .scopes
                .iter()
                .zip(s.scopes)
                .all(|(c, &f)| c.load(Relaxed) == f)
    }

    fn key(&self) -> Key {
        let nf = self.nframes.load(Relaxed);
        let n = (nf & !(1 << 31)) as usize;
        Key {
            tid: self.tid.load(Relaxed),
            truncated: nf >> 31 != 0,
            frames: self.frames[..n].iter().map(|c| c.load(Relaxed)).collect(),
            scopes: self.scopes[..self.nscopes.load(Relaxed) as usize]
                .iter()
                .map(|c| c.load(Relaxed))
                .collect(),
        }
    }
}

/// An entry's header. Headers are dense (40 bytes each), apart from the keys, so the drain's
/// scan touches 160 KiB for 4096 entries instead of every key's cache lines.
struct Entry {
    /// EMPTY, BUSY, or the key's hash (never 0 or 1) once published.
    state: AtomicU64,
    /// Handlers between their state check and their last access.
    users: AtomicU32,
    count: AtomicU64,
    weight: AtomicU64,
    /// Drain passes in a row that found no new sample here.
    idle: AtomicU32,
    /// Bumped by every claim, so the drain can reuse its copy of the key instead of reading
    /// the key's cache lines (which handlers on other cores read) on every pass.
    generation: AtomicU32,
}

struct Cell {
    /// The cell's sequence number less its index in the log (see [`Cell::seq`]).
    seq: AtomicU64,
    count: AtomicU64,
    weight: AtomicU64,
    key: KeyCells,
}

impl Cell {
    /// The sequence number of cell `index`. Stored less the index, so a log of zeroed cells
    /// is a fresh one (cell `i` at `i`) and needs no write at start.
    fn seq(&self, index: u64) -> u64 {
        self.seq.load(Acquire).wrapping_add(index)
    }

    fn set_seq(&self, index: u64, seq: u64) {
        self.seq.store(seq.wrapping_sub(index), Release);
    }
}

// SAFETY: atomics of integers and arrays of them only: all-zero bytes are a valid value.
#[allow(unsafe_code)]
unsafe impl crate::sys::memory::Zeroable for Entry {}
// SAFETY: as for `Entry`.
#[allow(unsafe_code)]
unsafe impl crate::sys::memory::Zeroable for KeyCells {}
// SAFETY: as for `Entry` (its `KeyCells` too).
#[allow(unsafe_code)]
unsafe impl crate::sys::memory::Zeroable for Cell {}

/// Why a sample could not be stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lost {
    /// Table and overflow log both full: the drain thread fell behind.
    Full = 0,
}

pub(crate) const LOST_REASONS: [(&str, Lost); 1] = [("table and log full", Lost::Full)];

/// The whole store, allocated once per sampler start.
pub(crate) struct Store {
    entries: crate::sys::memory::Zeroed<Entry>,
    /// `keys[i]` belongs to `entries[i]`.
    keys: crate::sys::memory::Zeroed<KeyCells>,
    log: crate::sys::memory::Zeroed<Cell>,
    head: AtomicU64,
    tail: AtomicU64,
    lost: [AtomicU64; 1],
    lost_weight: [AtomicU64; 1],
    /// Samples the table had no room for (they went to the log, or were lost when it was
    /// full too).
    pub overflowed: AtomicU64,
    /// Some sample was ever stored: until then a drain reads nothing (each pass over the
    /// untouched table cost a page fault per 4 KiB of it, ~20 at the exit of a process that
    /// took no sample).
    used: std::sync::atomic::AtomicBool,
    /// The drain thread's copy of each entry's key (by generation) and the counts taken from
    /// it since it was last merged, by entry index. Never touched by handlers. A map, not a
    /// vector as long as the table: entries are placed by hash, so one sample in a late
    /// entry grew a vector to most of the table (260 KiB on the heap of a sampled shell,
    /// which every `fork` then copied and write-protected again).
    cache: std::sync::Mutex<HashMap<usize, Cached>>,
}

/// The drain's copy of an entry's key: the entry's generation it was read at, the key, and
/// the counts taken from the entry since they were last merged (none: not read yet).
type Cached = Option<(u32, Key, Counts)>;

/// The hash [`Store::record`] gives a sample of key `k`.
#[cfg(feature = "capture")]
pub(crate) fn key_hash(k: &Key) -> u64 {
    hash(&Raw {
        tid: k.tid,
        truncated: k.truncated,
        frames: &k.frames,
        scopes: &k.scopes,
        count: 0,
        weight: 0,
    })
}

/// Samples for a running timeline capture: when each was taken, on which thread, and its
/// stack (by its key's hash), in a bounded multi-producer queue (Vyukov's design, as the
/// store's overflow log) that the drain thread empties into the capture. A full queue
/// counts the sample as lost to the timeline (the profile still has it).
#[cfg(feature = "capture")]
pub(crate) struct SampleLog {
    cells: crate::sys::memory::Zeroed<SampleCell>,
    head: AtomicU64,
    tail: AtomicU64,
    /// Samples the timeline could not take (the queue was full).
    pub lost: AtomicU64,
}

#[cfg(feature = "capture")]
struct SampleCell {
    /// The cell's sequence number less its index, as [`Cell::seq`].
    seq: AtomicU64,
    ticks: AtomicU64,
    tid: AtomicU32,
    stack: AtomicU64,
}

#[cfg(feature = "capture")]
impl SampleCell {
    fn seq(&self, index: u64) -> u64 {
        self.seq.load(Acquire).wrapping_add(index)
    }

    fn set_seq(&self, index: u64, seq: u64) {
        self.seq.store(seq.wrapping_sub(index), Release);
    }
}

// SAFETY: atomics of integers only: all-zero bytes are a valid value.
#[cfg(feature = "capture")]
#[allow(unsafe_code)]
unsafe impl crate::sys::memory::Zeroable for SampleCell {}

/// One sample taken from a [`SampleLog`].
#[cfg(feature = "capture")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimedSample {
    pub ticks: u64,
    pub tid: u32,
    pub stack: u64,
}

#[cfg(feature = "capture")]
impl SampleLog {
    pub(crate) fn new(cells: usize) -> SampleLog {
        let n = cells.max(2).next_power_of_two() as u64;
        SampleLog {
            // Zeroed: cell `i` at sequence `i`, untouched until used.
            cells: crate::sys::memory::zeroed_slice(n as usize),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// Adds a sample. Signal context: no allocation, no lock, a few CAS retries at most.
    pub(crate) fn push(&self, ticks: u64, tid: u32, stack: u64) {
        let mask = self.cells.len() as u64 - 1;
        let mut pos = self.head.load(Relaxed);
        loop {
            let cell = &self.cells[(pos & mask) as usize];
            let seq = cell.seq(pos & mask);
            if seq == pos {
                match self
                    .head
                    .compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed)
                {
                    Ok(_) => {
                        cell.ticks.store(ticks, Relaxed);
                        cell.tid.store(tid, Relaxed);
                        cell.stack.store(stack, Relaxed);
                        cell.set_seq(pos & mask, pos + 1);
                        return;
                    }
                    Err(now) => pos = now,
                }
            } else if seq < pos {
                self.lost.fetch_add(1, Relaxed);
                return;
            } else {
                pos = self.head.load(Relaxed);
            }
        }
    }

    /// Takes every sample published so far, in the order taken (drain thread only).
    pub(crate) fn take(&self, out: &mut Vec<TimedSample>) {
        let mask = self.cells.len() as u64 - 1;
        let mut pos = self.tail.load(Relaxed);
        loop {
            let cell = &self.cells[(pos & mask) as usize];
            if cell.seq(pos & mask) != pos + 1 {
                break;
            }
            out.push(TimedSample {
                ticks: cell.ticks.load(Relaxed),
                tid: cell.tid.load(Relaxed),
                stack: cell.stack.load(Relaxed),
            });
            cell.set_seq(pos & mask, pos + mask + 1);
            pos += 1;
        }
        self.tail.store(pos, Relaxed);
    }
}

/// Hashes the key's words in four independent multiply-xor lanes (a single FNV chain is
/// latency-bound: 4 cycles a word, 200 ns for a 100-frame stack). Collisions only cost a
/// compare.
fn hash(s: &Raw<'_>) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes = [
        s.tid as u64 | (s.truncated as u64) << 32,
        s.frames.len() as u64,
        s.scopes.len() as u64,
        0x243f_6a88_85a3_08d3,
    ];
    let mut chunks = s.frames.chunks_exact(4);
    for c in &mut chunks {
        for (l, &f) in lanes.iter_mut().zip(c) {
            *l = (*l ^ f).wrapping_mul(K);
        }
    }
    for (l, &f) in lanes.iter_mut().zip(chunks.remainder()) {
        *l = (*l ^ f).wrapping_mul(K);
    }
    for (l, &f) in lanes.iter_mut().zip(s.scopes) {
        *l = (*l ^ f as u64 ^ 1 << 40).wrapping_mul(K);
    }
    let h = lanes
        .iter()
        .fold(0u64, |h, &l| (h.rotate_left(23) ^ l).wrapping_mul(K));
    (h ^ h >> 29).max(2)
}

impl Store {
    /// A table of `entries` (rounded up to a power of two) and a log of `log` cells (idem).
    pub(crate) fn new(entries: usize, log: usize) -> Store {
        let entries = entries.max(PROBES).next_power_of_two();
        let log = log.max(2).next_power_of_two();
        // All zero is a fresh store (EMPTY entries, cell `i` at sequence `i`): from zeroed
        // memory, the megabytes reserved for a busy run are not touched until used.
        const _: () = assert!(EMPTY == 0);
        Store {
            entries: crate::sys::memory::zeroed_slice(entries),
            keys: crate::sys::memory::zeroed_slice(entries),
            log: crate::sys::memory::zeroed_slice(log),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            lost: [AtomicU64::new(0)],
            lost_weight: [AtomicU64::new(0)],
            overflowed: AtomicU64::new(0),
            used: std::sync::atomic::AtomicBool::new(false),
            cache: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Bytes allocated.
    pub(crate) fn bytes(&self) -> usize {
        self.entries.len() * (std::mem::size_of::<Entry>() + std::mem::size_of::<KeyCells>())
            + self.log.len() * std::mem::size_of::<Cell>()
    }

    /// Stores one sample; returns its key's hash (the stack's id in a capture, see
    /// [`SampleLog`]).
    ///
    /// Signal context: no allocation, no lock, bounded work (at most [`PROBES`] entries and
    /// a few CAS retries on the log head, which only fail when another producer advanced).
    pub(crate) fn record(&self, s: &Raw<'_>) -> u64 {
        if !self.used.load(Relaxed) {
            self.used.store(true, SeqCst);
        }
        let h = hash(s);
        let mask = self.entries.len() - 1;
        for i in 0..PROBES {
            let at = (h as usize).wrapping_add(i) & mask;
            let (e, key) = (&self.entries[at], &self.keys[at]);
            e.users.fetch_add(1, SeqCst);
            let state = e.state.load(SeqCst);
            if state == h && key.matches(s) {
                e.count.fetch_add(s.count, Relaxed);
                e.weight.fetch_add(s.weight, Relaxed);
                e.users.fetch_sub(1, Release);
                return h;
            }
            e.users.fetch_sub(1, Release);
            if state == EMPTY
                && e.state
                    .compare_exchange(EMPTY, BUSY, SeqCst, Relaxed)
                    .is_ok()
            {
                // The entry is ours until we publish it; the drain left its counts at zero.
                key.store(s);
                e.count.fetch_add(s.count, Relaxed);
                e.weight.fetch_add(s.weight, Relaxed);
                e.idle.store(0, Relaxed);
                e.generation.fetch_add(1, Relaxed);
                e.state.store(h, SeqCst);
                return h;
            }
        }
        self.overflowed.fetch_add(1, Relaxed);
        if !self.push_log(s) {
            self.lost[Lost::Full as usize].fetch_add(s.count, Relaxed);
            self.lost_weight[Lost::Full as usize].fetch_add(s.weight, Relaxed);
        }
        h
    }

    /// Signal context: see [`Store::record`].
    fn push_log(&self, s: &Raw<'_>) -> bool {
        let mask = self.log.len() as u64 - 1;
        let mut pos = self.head.load(Relaxed);
        loop {
            let cell = &self.log[(pos & mask) as usize];
            let seq = cell.seq(pos & mask);
            if seq == pos {
                match self
                    .head
                    .compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed)
                {
                    Ok(_) => {
                        cell.key.store(s);
                        cell.count.store(s.count, Relaxed);
                        cell.weight.store(s.weight, Relaxed);
                        cell.set_seq(pos & mask, pos + 1);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if seq < pos {
                // The consumer has not freed this cell yet: full.
                return false;
            } else {
                pos = self.head.load(Relaxed);
            }
        }
    }

    /// Moves counts into `into` (drain thread). Entries idle for `evict_after` passes are
    /// freed for new stacks; with `all`, every entry is (the final drain), and every count
    /// is in `into` afterwards. Between passes, a hot entry's counts accumulate beside the
    /// drain's copy of its key, so a pass costs two swaps per entry, not a key read and a map
    /// update.
    pub(crate) fn drain(&self, into: &mut HashMap<Key, Counts>, evict_after: u32, all: bool) {
        // Set before any entry or log cell is written (SeqCst on both sides).
        if !self.used.load(SeqCst) {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for (i, (e, cells)) in self.entries.iter().zip(self.keys.iter()).enumerate() {
            let state = e.state.load(SeqCst);
            if state == EMPTY || state == BUSY {
                continue;
            }
            let cached = cache.entry(i).or_default();
            Self::drain_entry(e, cells, state, cached, into, evict_after, all);
            if cached.is_none() {
                cache.remove(&i);
            }
        }
        self.drain_log(into);
    }

    /// [`Store::drain`] of entry `e` (in state `state`, its key in `cells`), `cached` the
    /// drain's copy of its key and the counts taken since it was last merged.
    fn drain_entry(
        e: &Entry,
        cells: &KeyCells,
        state: u64,
        cached: &mut Cached,
        into: &mut HashMap<Key, Counts>,
        evict_after: u32,
        all: bool,
    ) {
        let c = Counts {
            count: e.count.swap(0, Relaxed),
            weight: e.weight.swap(0, Relaxed),
        };
        let generation = e.generation.load(Relaxed);
        let fresh = c != Counts::default();
        if fresh {
            match cached {
                Some((g, _, pending)) if *g == generation => pending.add(c),
                _ => {
                    if let Some((_, k, pending)) = cached.take() {
                        into.entry(k).or_default().add(pending);
                    }
                    *cached = Some((generation, cells.key(), c));
                }
            }
            e.idle.store(0, Relaxed);
            if !all {
                return;
            }
        } else if e.idle.fetch_add(1, Relaxed) + 1 < evict_after && !all {
            return;
        }
        // Evict: no new handler gets past the state check; wait out those already past.
        if e.state
            .compare_exchange(state, BUSY, SeqCst, Relaxed)
            .is_err()
        {
            return;
        }
        while e.users.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
        let late = Counts {
            count: e.count.swap(0, Relaxed),
            weight: e.weight.swap(0, Relaxed),
        };
        let (key, mut pending) = match cached.take() {
            Some((g, k, p)) if g == generation => (k, p),
            other => {
                if let Some((_, k, p)) = other {
                    into.entry(k).or_default().add(p);
                }
                (cells.key(), Counts::default())
            }
        };
        pending.add(late);
        if pending != Counts::default() {
            into.entry(key).or_default().add(pending);
        }
        e.state.store(EMPTY, SeqCst);
    }

    fn drain_log(&self, into: &mut HashMap<Key, Counts>) {
        let mask = self.log.len() as u64 - 1;
        loop {
            let pos = self.tail.load(Relaxed);
            let cell = &self.log[(pos & mask) as usize];
            if cell.seq(pos & mask) != pos + 1 {
                return;
            }
            let c = Counts {
                count: cell.count.load(Relaxed),
                weight: cell.weight.load(Relaxed),
            };
            into.entry(cell.key.key()).or_default().add(c);
            cell.set_seq(pos & mask, pos + self.log.len() as u64);
            self.tail.store(pos + 1, Relaxed);
        }
    }

    /// Samples lost, by reason: (name, count, weight).
    pub(crate) fn lost(&self) -> Vec<(&'static str, Counts)> {
        LOST_REASONS
            .iter()
            .map(|&(name, r)| {
                (
                    name,
                    Counts {
                        count: self.lost[r as usize].load(Relaxed),
                        weight: self.lost_weight[r as usize].load(Relaxed),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn raw<'a>(tid: u32, frames: &'a [u64], scopes: &'a [u32]) -> Raw<'a> {
        Raw {
            tid,
            truncated: false,
            frames,
            scopes,
            count: 1,
            weight: 10,
        }
    }

    #[test]
    fn same_stack_aggregates_into_one_key_and_different_ones_stay_apart() {
        let s = Store::new(64, 4);
        for _ in 0..5 {
            s.record(&raw(1, &[1, 2, 3], &[]));
        }
        s.record(&raw(1, &[1, 2, 3], &[7]));
        s.record(&raw(2, &[1, 2, 3], &[]));
        let mut m = HashMap::new();
        s.drain(&mut m, 2, false);
        s.drain(&mut m, 2, true);
        assert_eq!(m.len(), 3);
        let k = Key {
            tid: 1,
            truncated: false,
            frames: vec![1, 2, 3],
            scopes: vec![],
        };
        assert_eq!(
            m[&k],
            Counts {
                count: 5,
                weight: 50
            }
        );
        assert_eq!(s.overflowed.load(Relaxed), 0);
    }

    #[test]
    fn a_full_table_overflows_to_the_log_and_then_counts_losses() {
        // 8 entries, 2 log cells: 10 distinct stacks fit, the rest are lost and counted.
        let s = Store::new(8, 2);
        for i in 0..14u64 {
            s.record(&raw(1, &[i], &[]));
        }
        let lost = s.lost()[0].1;
        assert_eq!(
            lost,
            Counts {
                count: 4,
                weight: 40
            }
        );
        let mut m = HashMap::new();
        s.drain(&mut m, 1, true);
        let kept: u64 = m.values().map(|c| c.count).sum();
        assert_eq!(kept + lost.count, 14, "every sample is kept or counted");
        // After the final drain the table is empty again and takes new stacks.
        s.record(&raw(1, &[99], &[]));
        assert_eq!(s.overflowed.load(Relaxed), 4 + 2);
    }

    #[test]
    fn idle_entries_are_evicted_and_hot_ones_stay() {
        let s = Store::new(8, 2);
        s.record(&raw(1, &[1], &[]));
        s.record(&raw(1, &[2], &[]));
        let mut m = HashMap::new();
        s.drain(&mut m, 2, false);
        s.record(&raw(1, &[1], &[]));
        s.drain(&mut m, 2, false); // [2] idle once
        s.drain(&mut m, 2, false); // [2] idle twice: evicted; [1] idle once
        let live = s
            .entries
            .iter()
            .filter(|e| e.state.load(Relaxed) > BUSY)
            .count();
        assert_eq!(live, 1);
        // The drain's copies of keys: only the live entry's (an evicted one's goes with it).
        assert_eq!(s.cache.lock().unwrap().len(), 1);
        s.drain(&mut m, 2, true);
        let total: u64 = m.values().map(|c| c.count).sum();
        assert_eq!(total, 3);
        assert!(s.cache.lock().unwrap().is_empty());
    }

    #[test]
    fn concurrent_writers_and_a_draining_thread_lose_nothing() {
        let s = Arc::new(Store::new(16, 64));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let drainer = {
            let (s, stop) = (s.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut m = HashMap::new();
                while !stop.load(SeqCst) {
                    s.drain(&mut m, 1, false);
                }
                m
            })
        };
        let writers: Vec<_> = (0..4u32)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        s.record(&raw(t, &[i % 40, 7], &[]));
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, SeqCst);
        let mut m = drainer.join().unwrap();
        s.drain(&mut m, 1, true);
        let kept: u64 = m.values().map(|c| c.count).sum();
        let lost = s.lost()[0].1.count;
        assert_eq!(kept + lost, 80_000);
        // Keys never mix: each thread's stacks carry its own tid and frames.
        for (k, _) in m {
            assert!(k.tid < 4 && k.frames[1] == 7 && k.frames[0] < 40);
        }
    }
}
