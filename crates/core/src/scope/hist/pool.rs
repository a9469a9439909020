//! A thread's histogram memory: windows and lists by capacity, never freed while the thread
//! lives, reused by its other call sites.

use std::sync::atomic::{
    AtomicPtr, AtomicU32, AtomicU64,
    Ordering::{Relaxed, Release},
};
use std::sync::Mutex;

/// The atomic words windows and lists are made of: `u32` counts and entries, `u64` carries.
pub(super) trait Word: Sync + Sized + 'static {
    fn new(v: u64) -> Self;
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    /// The pool's free allocations of this word, by capacity class.
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>>;
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
}

/// The entries of the list at `at` (after its capacity word), with room for `need` of them:
/// the list itself, or a copy twice as large (the old one back to the pool). Inside a write.
pub(super) fn grown<T: Word>(p: &mut PoolInner, at: &AtomicPtr<T>, need: usize) -> &'static [T] {
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
    let cap = unsafe { &*p }.get() as usize;
    // SAFETY: the allocation holds the capacity word and `cap` entries, and is leaked (never
    // freed), so `'static`.
    unsafe { std::slice::from_raw_parts(p, cap + 1) }
}

/// A thread's histogram memory: windows and lists by capacity, allocated once and reused
/// (never freed: the thread's statistics are pooled too). Only the owner's cold path, and
/// the clearing of an exited thread's statistics, take its lock.
pub(crate) struct Pool {
    inner: Mutex<PoolInner>,
}

pub(crate) struct PoolInner {
    /// Free windows by capacity, a power of two (index: its log2).
    free32: Vec<Vec<&'static [AtomicU32]>>,
    free64: Vec<Vec<&'static [AtomicU64]>>,
    /// Bytes allocated, in use or free.
    bytes: usize,
}

impl Pool {
    pub(crate) const fn new() -> Pool {
        Pool {
            inner: Mutex::new(PoolInner {
                free32: Vec::new(),
                free64: Vec::new(),
                bytes: 0,
            }),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, PoolInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
        w[0].set(cap as u64);
        self.bytes += std::mem::size_of::<T>() * (cap + 1);
        Box::leak(w)
    }

    /// Takes back a window or list, zeroed for its next use.
    pub(super) fn give<T: Word>(&mut self, w: &'static [T]) {
        let class = (w.len() - 1).trailing_zeros() as usize;
        let free = T::free(self);
        if free.len() <= class {
            free.resize_with(class + 1, Vec::new);
        }
        w[1..].iter().for_each(|c| c.set(0));
        free[class].push(w);
    }
}
