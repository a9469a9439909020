//! The compact storage behind [`Profile`](super::Profile): one string arena, and pools that
//! hold every sample's stack, values and labels and every location's lines back to back, each
//! record keeping a [`Span`] into its pool.
//!
//! Why: a profile of 20k samples and 23k functions held as a `Vec` per stack and a `String`
//! per name costs about four times its decompressed size; held this way it costs less than
//! twice, which is what lets `top` stay within 3x the decompressed size (the budget).
//! Stacks use 16-bit location indices while the profile has at most 65536 locations.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// An interned string: [`Profile::str`](super::Profile::str) gives its text. Strings are
/// deduplicated, so two ids are equal exactly when their texts are; `StrId::EMPTY` is "".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(pub(crate) u32);

impl StrId {
    /// The empty string.
    pub const EMPTY: StrId = StrId(0);

    pub(crate) fn index(self) -> u32 {
        self.0
    }

    pub(crate) fn from_index(i: u32) -> StrId {
        StrId(i)
    }
}

/// A run of records in a pool: `len` records from `start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl Span {
    pub(crate) fn new(start: usize, len: usize) -> Span {
        Span {
            start: start as u32,
            len: len as u32,
        }
    }

    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }

    /// Number of records.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// No records.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// Keeps records `from..to` of the span (relative indices, `from <= to <= len`).
    pub(crate) fn keep(&mut self, from: usize, to: usize) {
        debug_assert!(from <= to && to <= self.len as usize);
        self.start += from as u32;
        self.len = (to - from) as u32;
    }
}

/// Appends `items` to `pool` and returns their span. A pool's records come from input bytes
/// (at most [`MAX_DECOMPRESSED`](super::MAX_DECOMPRESSED), 4 GiB, each record at least one
/// byte), so a `u32` start cannot overflow for one file.
pub(crate) fn push_span<T: Clone>(pool: &mut Vec<T>, items: &[T]) -> Span {
    let start = pool.len() as u32;
    pool.extend_from_slice(items);
    Span {
        start,
        len: items.len() as u32,
    }
}

/// Keeps the records of `span` for which `keep` is true, compacting them in place.
pub(crate) fn retain_span<T: Copy>(
    pool: &mut [T],
    span: &mut Span,
    mut keep: impl FnMut(&T) -> bool,
) {
    let r = span.range();
    let mut w = r.start;
    for i in r {
        let x = pool[i];
        if keep(&x) {
            pool[w] = x;
            w += 1;
        }
    }
    span.len = (w - span.start as usize) as u32;
}

/// Deduplicated strings in one buffer. A lookup table (open addressing over string ids) is
/// kept while strings are being added and dropped by [`Strings::seal`].
#[derive(Debug, Clone)]
pub(crate) struct Strings {
    buf: String,
    /// End offset of each string in `buf` (string 0, "", ends at 0).
    ends: Vec<usize>,
    /// Slots holding `id + 1` (0: empty); a power of two, at least twice the count. Empty
    /// when sealed; rebuilt on the next [`Strings::intern`].
    slots: Vec<u32>,
    /// A keyed hash: the strings come from files, which must not be able to choose
    /// colliding ones (linear probing would turn quadratic).
    hasher: RandomState,
}

impl Default for Strings {
    fn default() -> Strings {
        Strings {
            buf: String::new(),
            ends: vec![0],
            slots: Vec::new(),
            hasher: RandomState::new(),
        }
    }
}

impl PartialEq for Strings {
    fn eq(&self, other: &Strings) -> bool {
        self.buf == other.buf && self.ends == other.ends
    }
}

impl Strings {
    pub(crate) fn get(&self, id: StrId) -> &str {
        let i = id.0 as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }

    pub(crate) fn intern(&mut self, s: &str) -> StrId {
        if s.is_empty() {
            return StrId::EMPTY;
        }
        if self.slots.len() < 2 * (self.ends.len() + 1) {
            self.rehash((2 * (self.ends.len() + 1)).next_power_of_two().max(64));
        }
        let mask = self.slots.len() - 1;
        let mut at = self.hasher.hash_one(s) as usize & mask;
        loop {
            match self.slots[at] {
                0 => break,
                id => {
                    if self.get(StrId(id - 1)) == s {
                        return StrId(id - 1);
                    }
                }
            }
            at = (at + 1) & mask;
        }
        let id = self.ends.len() as u32;
        self.buf.push_str(s);
        self.ends.push(self.buf.len());
        self.slots[at] = id + 1;
        StrId(id)
    }

    fn rehash(&mut self, size: usize) {
        self.slots = vec![0; size];
        let mask = size - 1;
        for id in 1..self.ends.len() {
            let mut at = self.hasher.hash_one(self.get(StrId(id as u32))) as usize & mask;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = id as u32 + 1;
        }
    }

    /// Drops the lookup table and spare capacity: the strings are read from now on.
    pub(crate) fn seal(&mut self) {
        self.slots = Vec::new();
        self.buf.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// Every sample's stack, back to back: location indices, leaf first. Narrow (16-bit) while
/// every index fits, widened to 32 bits the first time one does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stacks {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Default for Stacks {
    fn default() -> Stacks {
        Stacks::Narrow(Vec::new())
    }
}

impl Stacks {
    /// Empty, with room for `n` entries, narrow when every index is below `locations`.
    pub(crate) fn with_capacity(n: usize, locations: usize) -> Stacks {
        if locations <= 1 << 16 {
            Stacks::Narrow(Vec::with_capacity(n))
        } else {
            Stacks::Wide(Vec::with_capacity(n))
        }
    }

    fn widen(&mut self) {
        if let Stacks::Narrow(v) = self {
            let wide = v.iter().map(|&x| u32::from(x)).collect();
            *self = Stacks::Wide(wide);
        }
    }

    /// Appends one stack.
    pub(crate) fn push(&mut self, stack: impl IntoIterator<Item = u32> + Clone) -> Span {
        if matches!(self, Stacks::Narrow(_)) && stack.clone().into_iter().any(|l| l > 0xffff) {
            self.widen();
        }
        let start = self.len() as u32;
        match self {
            Stacks::Narrow(v) => v.extend(stack.into_iter().map(|l| l as u16)),
            Stacks::Wide(v) => v.extend(stack),
        }
        Span {
            start,
            len: (self.len() - start as usize) as u32,
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Stacks::Narrow(v) => v.len(),
            Stacks::Wide(v) => v.len(),
        }
    }

    pub(crate) fn get(&self, span: Span) -> Stack<'_> {
        match self {
            Stacks::Narrow(v) => Stack::Narrow(v[span.range()].iter()),
            Stacks::Wide(v) => Stack::Wide(v[span.range()].iter()),
        }
    }

    pub(crate) fn retain(&mut self, span: &mut Span, mut keep: impl FnMut(u32) -> bool) {
        match self {
            Stacks::Narrow(v) => retain_span(v, span, |&l| keep(u32::from(l))),
            Stacks::Wide(v) => retain_span(v, span, |&l| keep(l)),
        }
    }

    /// Replaces each index of `span` by `f(index)`, in order.
    pub(crate) fn map_span(&mut self, span: Span, mut f: impl FnMut(u32) -> u32) {
        for i in span.range() {
            match self {
                Stacks::Narrow(v) => {
                    let n = f(u32::from(v[i]));
                    match u16::try_from(n) {
                        Ok(x) => v[i] = x,
                        Err(_) => {
                            self.widen();
                            if let Stacks::Wide(w) = self {
                                w[i] = n;
                            }
                        }
                    }
                }
                Stacks::Wide(v) => v[i] = f(v[i]),
            }
        }
    }

    /// Removes the entry at `at` (relative) of `span`.
    pub(crate) fn remove(&mut self, span: &mut Span, at: usize) {
        let mut i = 0;
        self.retain(span, |_| {
            i += 1;
            i - 1 != at
        });
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        match self {
            Stacks::Narrow(v) => v.shrink_to_fit(),
            Stacks::Wide(v) => v.shrink_to_fit(),
        }
    }
}

/// A sample's stack: location indices, leaf first (`.rev()` for root first).
#[derive(Debug, Clone)]
pub enum Stack<'a> {
    /// 16-bit indices.
    #[doc(hidden)]
    Narrow(std::slice::Iter<'a, u16>),
    /// 32-bit indices.
    #[doc(hidden)]
    Wide(std::slice::Iter<'a, u32>),
}

impl Iterator for Stack<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            Stack::Narrow(i) => i.next().map(|&l| u32::from(l)),
            Stack::Wide(i) => i.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.len();
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Stack<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<u32> {
        match self {
            Stack::Narrow(i) => i.next_back().map(|&l| u32::from(l)),
            Stack::Wide(i) => i.next_back().copied(),
        }
    }
}

impl ExactSizeIterator for Stack<'_> {
    fn len(&self) -> usize {
        match self {
            Stack::Narrow(i) => i.len(),
            Stack::Wide(i) => i.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_deduplicated_and_survive_sealing() {
        let mut s = Strings::default();
        let a = s.intern("alpha");
        let b = s.intern("beta");
        assert_eq!(s.intern(""), StrId::EMPTY);
        assert_eq!(s.intern("alpha"), a);
        assert_ne!(a, b);
        for i in 0..1000 {
            s.intern(&format!("f{i}"));
        }
        s.seal();
        assert_eq!(s.get(a), "alpha");
        assert_eq!(s.get(b), "beta");
        assert_eq!(s.intern("beta"), b, "lookup rebuilt after sealing");
        assert_eq!(s.ends.len(), 1003);
    }

    #[test]
    fn stacks_widen_and_retain_in_place() {
        let mut st = Stacks::default();
        let a = st.push([1u32, 2, 3]);
        let mut b = st.push([4u32, 70000, 5]);
        assert!(matches!(st, Stacks::Wide(_)));
        assert_eq!(st.get(a).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(st.get(b).rev().collect::<Vec<_>>(), [5, 70000, 4]);
        st.retain(&mut b, |l| l != 70000);
        assert_eq!(st.get(b).collect::<Vec<_>>(), [4, 5]);
        b.keep(1, 2);
        assert_eq!(st.get(b).collect::<Vec<_>>(), [5]);
    }
}
