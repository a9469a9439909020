//! Per-thread event rings: the capture's hot path.
//!
//! Each thread that records an event gets a single-producer, single-consumer ring of 16-byte
//! records (a timestamp and a word), registered once (the only lock) and then reached through a
//! destructor-free thread-local. The producer writes a record with two relaxed stores and
//! publishes it with one release store of its head; the collector thread reads up to the head
//! and publishes its tail. The producer re-reads the tail only when its cached limit runs out,
//! so the two sides share a cache line once per drain, not once per event. The slots are
//! `AtomicU64`s, whose relaxed stores compile to plain moves.
//!
//! Memory: a ring's slots are allocated zeroed (calloc, so fresh pages from the kernel, not
//! written), and a page costs memory only once the thread's events reach it: a thread that
//! records a few events costs a page or two, not its ring's 2 MiB. Rings are also held to a
//! process-wide budget ([`DEFAULT_BUDGET`]): past it, new threads get smaller rings (down to
//! [`MIN_CAPACITY`]), so thousands of threads cannot take gigabytes (5,000 threads took
//! 7.6 GB before). What a small ring cannot hold is dropped and counted, as always.
//!
//! When the ring is full the record is dropped and counted (policy [`Full::Drop`]), and the
//! count is recorded as a `lost` event as soon as there is room again, so the timeline shows
//! where the gap is; with [`Full::Block`] the thread waits for the collector instead.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::Mutex;

use super::format::event;

/// What a thread does when its ring is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Full {
    /// Drop the event and count it (the default): the program is never slowed.
    #[default]
    Drop,
    /// Wait until the collector makes room: nothing is dropped, but the thread may stall.
    Block,
}

/// The policy now (0 drop, 1 block), read on the slow path only.
pub(crate) static POLICY: AtomicU8 = AtomicU8::new(0);
/// Ring capacity, in records, for rings registered from now on.
pub(crate) static CAPACITY: AtomicU64 = AtomicU64::new(DEFAULT_CAPACITY);
/// 131,072 records: 2 MiB per thread that records events. At 20 million events a second on
/// one thread the ring holds 6.5 ms: several of the collector's 1 ms passes, and a few
/// scheduler time slices when the machine has no idle core for the collector.
pub(crate) const DEFAULT_CAPACITY: u64 = 1 << 17;

/// The most memory the rings of live threads may take together, unless one ring of
/// [`MIN_CAPACITY`] alone would exceed it: 256 threads' default rings. (Pooled rings, of
/// exited threads, give their pages back to the system.)
pub(crate) const DEFAULT_BUDGET: u64 = 512 << 20;
/// The budget now (`Builder::ring_budget`).
pub(crate) static BUDGET: AtomicU64 = AtomicU64::new(DEFAULT_BUDGET);
/// The smallest ring a thread gets when the budget is spent: 4,096 records, 64 KiB.
pub(crate) const MIN_CAPACITY: u64 = 1 << 12;
/// Bytes of ring slots held by live threads' rings (and exited threads' not yet drained).
static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

/// Events threads could not record because they had already exited (from thread-local
/// destructors that ran after the capture's own).
pub(crate) static LOST_AFTER_EXIT: AtomicU64 = AtomicU64::new(0);

/// The producer's cache line.
#[repr(align(64))]
struct Producer {
    /// Records published.
    head: AtomicU64,
    /// The producer may write while `head < limit` without looking at the tail.
    limit: AtomicU64,
    /// Records dropped, not yet reported by a `lost` event.
    pending_lost: AtomicU64,
    /// Records dropped in total.
    dropped: AtomicU64,
}

/// The collector's cache line.
#[repr(align(64))]
struct Consumer {
    tail: AtomicU64,
}

/// One thread's ring.
pub(crate) struct Ring {
    prod: Producer,
    cons: Consumer,
    mask: u64,
    slots: Box<[AtomicU64]>,
    /// The OS thread id of the thread that owns it now.
    pub(crate) tid: AtomicU64,
    /// That thread's name (written at registration, read by the collector).
    pub(crate) name: Mutex<String>,
    /// The owner thread exited: the collector drains it, then pools it.
    pub(crate) retired: AtomicBool,
    /// The collector's index for this thread in the current capture (0: not yet announced).
    pub(crate) index: AtomicU32,
    /// Drops from before the current capture began (a ring registered earlier).
    pub(crate) drop_base: AtomicU64,
}

impl Ring {
    fn new(capacity: u64) -> Ring {
        let capacity = capacity.next_power_of_two().max(64);
        Ring {
            prod: Producer {
                head: AtomicU64::new(0),
                limit: AtomicU64::new(capacity),
                pending_lost: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            },
            cons: Consumer {
                tail: AtomicU64::new(0),
            },
            mask: capacity - 1,
            slots: zeroed_slots(capacity as usize * 2),
            tid: AtomicU64::new(0),
            name: Mutex::new(String::new()),
            retired: AtomicBool::new(false),
            index: AtomicU32::new(0),
            drop_base: AtomicU64::new(0),
        }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// The bytes its slots take.
    fn bytes(capacity: u64) -> u64 {
        capacity * 16
    }

    /// Appends one record. Producer only.
    #[inline(always)]
    pub(crate) fn push(&self, ticks: u64, word: u64) {
        let h = self.prod.head.load(Relaxed);
        if h >= self.prod.limit.load(Relaxed) {
            return self.push_slow(&[(ticks, word)]);
        }
        let i = ((h & self.mask) as usize) * 2;
        self.slots[i].store(ticks, Relaxed);
        self.slots[i + 1].store(word, Relaxed);
        self.prod.head.store(h + 1, Release);
    }

    /// Appends records that belong together (an event and its payload): all or none. Producer
    /// only; not the scope hot path.
    pub(crate) fn push_group(&self, recs: &[(u64, u64)]) {
        let h = self.prod.head.load(Relaxed);
        if h + recs.len() as u64 > self.prod.limit.load(Relaxed) {
            return self.push_slow(recs);
        }
        self.write(h, recs);
    }

    fn write(&self, h: u64, recs: &[(u64, u64)]) {
        for (k, &(t, w)) in recs.iter().enumerate() {
            let i = (((h + k as u64) & self.mask) as usize) * 2;
            self.slots[i].store(t, Relaxed);
            self.slots[i + 1].store(w, Relaxed);
        }
        self.prod.head.store(h + recs.len() as u64, Release);
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&self, recs: &[(u64, u64)]) {
        let n = recs.len() as u64;
        if n > self.capacity() / 2 {
            self.drop_records(n);
            return;
        }
        let mut spins = 0u32;
        loop {
            let h = self.prod.head.load(Relaxed);
            let limit = self.cons.tail.load(Acquire) + self.capacity();
            let pending = self.prod.pending_lost.load(Relaxed);
            let need = n + u64::from(pending > 0);
            if h + need <= limit {
                let mut h = h;
                if pending > 0 {
                    // Say where the gap is before the first event after it.
                    let word = event::LOST as u64 | pending.min(u64::MAX >> 8) << 8;
                    self.write(h, &[(recs[0].0, word)]);
                    self.prod.pending_lost.store(0, Relaxed);
                    h += 1;
                }
                self.write(h, recs);
                self.prod.limit.store(limit, Relaxed);
                return;
            }
            if POLICY.load(Relaxed) == 0 || !super::running() || spins > 2_000_000 {
                self.drop_records(n);
                return;
            }
            spins += 1;
            if spins % 64 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn drop_records(&self, n: u64) {
        self.prod
            .pending_lost
            .store(self.prod.pending_lost.load(Relaxed) + n, Relaxed);
        self.prod
            .dropped
            .store(self.prod.dropped.load(Relaxed) + n, Relaxed);
        // Force the slow path until the `lost` event is written.
        self.prod.limit.store(0, Relaxed);
    }

    /// Records dropped so far (any thread may read it).
    pub(crate) fn dropped(&self) -> u64 {
        self.prod.dropped.load(Relaxed)
    }

    /// Reads every published record, in order, then frees their slots. Collector only.
    pub(crate) fn drain(&self, mut f: impl FnMut(u64, u64)) -> u64 {
        let head = self.prod.head.load(Acquire);
        let tail = self.cons.tail.load(Relaxed);
        for k in tail..head {
            let i = ((k & self.mask) as usize) * 2;
            f(self.slots[i].load(Relaxed), self.slots[i + 1].load(Relaxed));
        }
        self.cons.tail.store(head, Release);
        head - tail
    }

    /// Forgets what is in the ring (records left over from an earlier capture). Collector only.
    pub(crate) fn skip(&self) {
        self.cons.tail.store(self.prod.head.load(Acquire), Release);
    }
}

/// `n` slots of zero, allocated zeroed: large allocations come straight from the kernel's
/// zero pages, which cost no memory until written (writing zeros one by one, as collecting
/// `AtomicU64::new(0)`s does, commits every page at once).
fn zeroed_slots(n: usize) -> Box<[AtomicU64]> {
    let zeros: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    // SAFETY: AtomicU64 has the same size, alignment and bit validity as u64 (its docs
    // guarantee the layout); the allocation is moved, not copied, so it is freed with the
    // layout it was allocated with.
    unsafe { Box::from_raw(Box::into_raw(zeros) as *mut [AtomicU64]) }
}

/// Live and pooled rings.
struct Rings {
    live: Vec<&'static Ring>,
    pool: Vec<&'static Ring>,
}

static RINGS: Mutex<Rings> = Mutex::new(Rings {
    live: Vec::new(),
    pool: Vec::new(),
});

fn rings() -> std::sync::MutexGuard<'static, Rings> {
    RINGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The rings of live threads and of exited threads not yet drained.
pub(crate) fn live() -> Vec<&'static Ring> {
    rings().live.clone()
}

/// Puts a drained ring of an exited thread back in the pool, its pages given back to the
/// system (they come back zeroed when a thread writes to them again). Collector only.
pub(crate) fn recycle(ring: &'static Ring) {
    release_pages(&ring.slots);
    let mut r = rings();
    r.live.retain(|x| !std::ptr::eq(*x, ring));
    LIVE_BYTES.fetch_sub(Ring::bytes(ring.capacity()), Relaxed);
    r.pool.push(ring);
}

/// Gives the whole pages of `slots` back to the system (`MADV_DONTNEED`).
fn release_pages(slots: &[AtomicU64]) {
    const PAGE: usize = 4096;
    let start = slots.as_ptr() as usize;
    let end = start + std::mem::size_of_val(slots);
    let (first, last) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
    if last > first {
        // SAFETY: the range is whole pages inside the slots' own allocation, which no thread
        // writes now (the ring is drained and its owner exited); MADV_DONTNEED only makes
        // them read as zero again, which is a valid AtomicU64, and keeps the mapping.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_DONTNEED,
            )
        };
    }
}

thread_local! {
    /// The calling thread's ring; `None` before its first event and after its exit hook.
    static RING: Cell<Option<&'static Ring>> = const { Cell::new(None) };
    static EXITED: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread's ring retired when the thread exits.
struct ExitHook;

impl Drop for ExitHook {
    fn drop(&mut self) {
        EXITED.set(true);
        if let Some(ring) = RING.take() {
            ring.retired.store(true, Release);
        }
    }
}

thread_local! {
    static EXIT_HOOK: ExitHook = const { ExitHook };
}

/// Appends one record to the calling thread's ring.
#[inline(always)]
pub(crate) fn push(ticks: u64, word: u64) {
    match RING.get() {
        Some(r) => r.push(ticks, word),
        None => {
            if let Some(r) = register() {
                r.push(ticks, word)
            }
        }
    }
}

/// Appends records that belong together to the calling thread's ring.
pub(crate) fn push_group(recs: &[(u64, u64)]) {
    if let Some(r) = RING.get().or_else(register) {
        r.push_group(recs)
    }
}

#[cold]
#[inline(never)]
fn register() -> Option<&'static Ring> {
    if EXITED.get() || EXIT_HOOK.try_with(|_| ()).is_err() {
        EXITED.set(true);
        LOST_AFTER_EXIT.fetch_add(1, Relaxed);
        return None;
    }
    let wanted = CAPACITY.load(Relaxed).next_power_of_two().max(64);
    let ring = {
        let mut r = rings();
        // As large as wanted, or as the budget allows; a pooled ring of that size if there
        // is one.
        let fits = |c: u64| LIVE_BYTES.load(Relaxed) + Ring::bytes(c) <= BUDGET.load(Relaxed);
        let mut capacity = wanted;
        while capacity > MIN_CAPACITY.min(wanted) && !fits(capacity) {
            capacity /= 2;
        }
        let ring = match r.pool.iter().position(|x| x.capacity() == capacity) {
            Some(i) => r.pool.swap_remove(i),
            None => Box::leak(Box::new(Ring::new(capacity))),
        };
        LIVE_BYTES.fetch_add(Ring::bytes(capacity), Relaxed);
        // A pooled ring is empty (drained before recycling); start it afresh.
        ring.retired.store(false, Relaxed);
        ring.index.store(0, Relaxed);
        ring.prod.pending_lost.store(0, Relaxed);
        ring.prod.dropped.store(0, Relaxed);
        ring.drop_base.store(0, Relaxed);
        let head = ring.prod.head.load(Relaxed);
        ring.cons.tail.store(head, Relaxed);
        ring.prod.limit.store(head + capacity, Relaxed);
        ring.tid.store(crate::sys::gettid(), Relaxed);
        *ring.name.lock().unwrap_or_else(|p| p.into_inner()) = thread_name();
        r.live.push(ring);
        ring
    };
    RING.set(Some(ring));
    Some(ring)
}

/// The calling thread's name: its Rust name, else the OS's (`comm`), else empty.
fn thread_name() -> String {
    if let Some(name) = std::thread::current().name() {
        return name.to_owned();
    }
    std::fs::read_to_string("/proc/thread-self/comm")
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_drops_counts_and_then_says_where() {
        let ring = Ring::new(64);
        for t in 0..64 {
            ring.push(t, 7);
        }
        ring.push(100, 7);
        ring.push(101, 7);
        assert_eq!(ring.dropped(), 2);
        let mut seen = Vec::new();
        ring.drain(|t, w| seen.push((t, w)));
        assert_eq!(seen.len(), 64);
        ring.push(200, 9);
        seen.clear();
        ring.drain(|t, w| seen.push((t, w)));
        assert_eq!(
            seen,
            vec![(200, event::LOST as u64 | 2 << 8), (200, 9)],
            "the lost count comes first, stamped at the next event"
        );
    }

    #[test]
    fn groups_are_written_whole_or_not_at_all() {
        let ring = Ring::new(64);
        for t in 0..63 {
            ring.push(t, 1);
        }
        ring.push_group(&[(1, 2), (3, 4)]);
        assert_eq!(ring.dropped(), 2);
        let mut n = 0;
        ring.drain(|_, _| n += 1);
        assert_eq!(n, 63);
    }

    #[test]
    fn records_wrap_around_in_order() {
        let ring = Ring::new(64);
        let mut next = 0u64;
        for round in 0..10u64 {
            for k in 0..50 {
                ring.push(round * 100 + k, k);
            }
            ring.drain(|t, w| {
                assert_eq!((t % 100, w), (next % 50, next % 50));
                next += 1;
            });
        }
        assert_eq!(next, 500);
        assert_eq!(ring.dropped(), 0);
    }
}
