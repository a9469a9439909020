//! A thread's histogram memory: windows and lists by capacity. One replaced while another
//! thread reads the histograms is kept for reuse by the thread's other call sites; one
//! replaced while none does is freed at once.

use std::sync::atomic::{
    fence, AtomicPtr, AtomicU32, AtomicU64, AtomicU8,
    Ordering::{Relaxed, Release, SeqCst},
};
use std::sync::Mutex;

/// The atomic words windows and lists are made of: `u8` and `u32` counts, `u32` entries,
/// `u64` carries. Element 0 of each allocation says its capacity.
pub(super) trait Word: Sync + Sized + 'static {
    fn new(v: u64) -> Self;
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    /// What element 0 holds for a capacity of `cap` (a power of two), and back.
    fn cap_word(cap: usize) -> u64 {
        cap as u64
    }
    fn cap_of(word: u64) -> usize {
        word as usize
    }
    /// The pool's free allocations of this word, by capacity class.
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>>;
    /// Allocations of this word replaced in the current write.
    fn replaced(p: &mut PoolInner) -> &mut Vec<&'static [Self]>;
}

impl Word for AtomicU32 {
    fn new(v: u64) -> Self {
        AtomicU32::new(v as u32)
    }
    fn get(&self) -> u64 {
        self.load(Relaxed) as u64
    }
    fn set(&self, v: u64) {
        self.store(v as u32, Relaxed)
    }
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>> {
        &mut p.free32
    }
    fn replaced(p: &mut PoolInner) -> &mut Vec<&'static [Self]> {
        &mut p.replaced32
    }
}

impl Word for AtomicU8 {
    fn new(v: u64) -> Self {
        AtomicU8::new(v as u8)
    }
    fn get(&self) -> u64 {
        self.load(Relaxed) as u64
    }
    fn set(&self, v: u64) {
        self.store(v as u8, Relaxed)
    }
    /// A byte cannot hold a capacity of 256 or more: it holds its log2.
    fn cap_word(cap: usize) -> u64 {
        cap.trailing_zeros() as u64
    }
    fn cap_of(word: u64) -> usize {
        1 << word
    }
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>> {
        &mut p.free8
    }
    fn replaced(p: &mut PoolInner) -> &mut Vec<&'static [Self]> {
        &mut p.replaced8
    }
}

impl Word for AtomicU64 {
    fn new(v: u64) -> Self {
        AtomicU64::new(v)
    }
    fn get(&self) -> u64 {
        self.load(Relaxed)
    }
    fn set(&self, v: u64) {
        self.store(v, Relaxed)
    }
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>> {
        &mut p.free64
    }
    fn replaced(p: &mut PoolInner) -> &mut Vec<&'static [Self]> {
        &mut p.replaced64
    }
}

/// The entries of the list at `at` (after its capacity word), with room for `need` of them:
/// the list itself, or a copy twice as large (the old one back to the pool). Inside a write.
pub(super) fn grown<T: Word>(p: &mut PoolInner, at: &AtomicPtr<T>, need: usize) -> &'static [T] {
    crate::own::own(|| grown_unowned(p, at, need))
}

#[inline(never)]
pub(super) fn grown_unowned<T: Word>(
    p: &mut PoolInner,
    at: &AtomicPtr<T>,
    need: usize,
) -> &'static [T] {
    let old = at.load(Relaxed);
    // SAFETY: a non-null list came from `take`.
    let old = (!old.is_null()).then(|| unsafe { whole(old) });
    match old {
        Some(o) if o.len() > need => &o[1..],
        _ => {
            let new = p.take::<T>((2 * need).max(4));
            if let Some(o) = old {
                for (d, s) in new[1..].iter().zip(&o[1..]) {
                    d.set(s.get());
                }
                p.give(o);
            }
            at.store(new.as_ptr() as *mut T, Release);
            &new[1..]
        }
    }
}

/// The whole allocation behind a window's or list's pointer: its capacity word and entries.
///
/// # Safety
/// `p` must have come from [`PoolInner::take`].
pub(super) unsafe fn whole<T: Word>(p: *mut T) -> &'static [T] {
    // SAFETY: the caller's promise: element 0 holds the capacity.
    let cap = T::cap_of(unsafe { &*p }.get());
    // SAFETY: the allocation holds the capacity word and `cap` entries, and is leaked (never
    // freed), so `'static`.
    unsafe { std::slice::from_raw_parts(p, cap + 1) }
}

/// A thread's histogram memory: windows and lists by capacity. Only the owner's cold path,
/// and the clearing of an exited thread's statistics, take its lock.
///
/// **When a replaced window is freed.** A reader on another thread ([`Pool::reading`]) may
/// hold a pointer to a window the owner has just replaced. So the owner frees what it
/// replaced only when no reader is in: it publishes the new pointers, then (a `SeqCst`
/// fence) looks at [`Pool::readers`]; a reader counts itself in, then (a `SeqCst` fence)
/// loads the pointers. Of the two fences one comes first: either the owner sees the reader
/// and keeps the old window (in the free lists, for reuse), or the reader's loads come after
/// the owner's stores and see only the new window. Readers are rare (a summary, `report`),
/// so what a call site replaces as its values spread is freed, not kept twice over.
pub(crate) struct Pool {
    inner: Mutex<PoolInner>,
    readers: AtomicU32,
}

/// Proof that the caller counts as a reader of a pool's histograms (see [`Pool`]).
pub(crate) struct Reading<'a>(&'a Pool);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.readers.fetch_sub(1, Release);
    }
}

/// The pool's lock, held through a write; on release it frees or keeps what the write
/// replaced (see [`Pool`]).
pub(super) struct Locked<'a> {
    inner: std::sync::MutexGuard<'a, PoolInner>,
    readers: &'a AtomicU32,
}

impl std::ops::Deref for Locked<'_> {
    type Target = PoolInner;
    fn deref(&self) -> &PoolInner {
        &self.inner
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut PoolInner {
        &mut self.inner
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let p = &mut *self.inner;
        if p.replaced8.is_empty() && p.replaced32.is_empty() && p.replaced64.is_empty() {
            return;
        }
        // Pairs with the fence in `Pool::reading`: the new pointers were stored above.
        fence(SeqCst);
        let free = self.readers.load(Relaxed) == 0;
        p.settle::<AtomicU8>(free);
        p.settle::<AtomicU32>(free);
        p.settle::<AtomicU64>(free);
    }
}

pub(crate) struct PoolInner {
    /// Free windows by capacity, a power of two (index: its log2).
    free8: Vec<Vec<&'static [AtomicU8]>>,
    free32: Vec<Vec<&'static [AtomicU32]>>,
    free64: Vec<Vec<&'static [AtomicU64]>>,
    /// Replaced in the current write: freed or kept as it ends.
    replaced8: Vec<&'static [AtomicU8]>,
    replaced32: Vec<&'static [AtomicU32]>,
    replaced64: Vec<&'static [AtomicU64]>,
    /// Bytes allocated, in use or free.
    bytes: usize,
}

impl Pool {
    pub(crate) const fn new() -> Pool {
        Pool {
            inner: Mutex::new(PoolInner {
                free8: Vec::new(),
                free32: Vec::new(),
                free64: Vec::new(),
                replaced8: Vec::new(),
                replaced32: Vec::new(),
                replaced64: Vec::new(),
                bytes: 0,
            }),
            readers: AtomicU32::new(0),
        }
    }

    pub(super) fn lock(&self) -> Locked<'_> {
        Locked {
            inner: self.inner.lock().unwrap_or_else(|p| p.into_inner()),
            readers: &self.readers,
        }
    }

    /// Counts the caller in as a reader of this pool's histograms until the guard drops:
    /// nothing it can reach is freed meanwhile.
    pub(crate) fn reading(&self) -> Reading<'_> {
        self.readers.fetch_add(1, SeqCst);
        // Pairs with the fence in `Locked::drop`: the pointers are loaded after this.
        fence(SeqCst);
        Reading(self)
    }

    /// Bytes allocated for histograms, in use or free.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl PoolInner {
    /// A zeroed window or list of `len` entries (rounded up to a power of two), its capacity
    /// in element 0.
    pub(super) fn take<T: Word>(&mut self, len: usize) -> &'static [T] {
        let cap = len.next_power_of_two();
        let class = cap.trailing_zeros() as usize;
        if let Some(w) = T::free(self).get_mut(class).and_then(Vec::pop) {
            return w;
        }
        let w: Box<[T]> = (0..=cap).map(|_| T::new(0)).collect();
        w[0].set(T::cap_word(cap));
        self.bytes += std::mem::size_of::<T>() * (cap + 1);
        Box::leak(w)
    }

    /// Takes back a window or list the current write replaced (no longer published): freed
    /// or kept for reuse as the write ends.
    pub(super) fn give<T: Word>(&mut self, w: &'static [T]) {
        T::replaced(self).push(w);
    }

    /// Frees what the write replaced (`free`: no reader was in), or keeps it, zeroed, for
    /// the next `take` of its size.
    fn settle<T: Word>(&mut self, free: bool) {
        let replaced = std::mem::take(T::replaced(self));
        for w in replaced {
            if free {
                self.bytes -= std::mem::size_of_val(w);
                let raw = w as *const [T] as *mut [T];
                // SAFETY: `w` came from `Box::leak` in `take` (a whole allocation); the owner
                // has replaced its pointer, no reader was in when it looked (see `Pool`), and
                // this was its last reference, dropped here.
                drop(unsafe { Box::from_raw(raw) });
                continue;
            }
            let class = (w.len() - 1).trailing_zeros() as usize;
            let free = T::free(self);
            if free.len() <= class {
                free.resize_with(class + 1, Vec::new);
            }
            w[1..].iter().for_each(|c| c.set(0));
            free[class].push(w);
        }
    }
}
