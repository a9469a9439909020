//! The owner's stack of open scopes: per level, its children's time and its start reading,
//! in cells of the thread's own (a plain [`Stack`] for tests and the overhead probe; the
//! thread-locals of `scope::TlsStack` for real threads), past [`INLINE_DEPTH`] in a pooled
//! [`DeepStack`].

use super::*;

/// Child time of open scopes past the inline ones; pooled like `ThreadStats`.
pub(crate) struct DeepStack(pub [[AtomicU64; 2]; MAX_DEPTH - INLINE_DEPTH]);

/// Deep-stack extensions of exited threads, for the next threads that nest that deep.
static FREE_DEEP: Mutex<Vec<&'static DeepStack>> = Mutex::new(Vec::new());

impl DeepStack {
    fn leak() -> &'static DeepStack {
        Box::leak(Box::new(DeepStack(
            [const { [const { AtomicU64::new(0) }; 2] }; MAX_DEPTH - INLINE_DEPTH],
        )))
    }

    /// A deep-stack extension for a thread nesting past the inline depth: a pooled one, or
    /// a new one.
    pub(super) fn take() -> &'static DeepStack {
        let pooled = FREE_DEEP.lock().unwrap_or_else(|p| p.into_inner()).pop();
        pooled.unwrap_or_else(|| crate::own::own(DeepStack::leak))
    }

    /// Pools the extension of an exited thread, for the next thread that nests that deep.
    pub(crate) fn give_back(&'static self) {
        FREE_DEEP
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self);
    }
}

/// Per stack level, two cells: the child time of the scope open there (for self time)…
pub(super) const CHILD: usize = 0;
/// …and its start reading, which identifies it: a guard whose scope was abandoned cannot
/// close a newer scope that happens to sit at the same level.
pub(super) const T0: usize = 1;

/// Where a thread's stack lives: plain cells for tests, small thread-locals for real threads
/// (each accessed through a tiny closure, which the compiler always inlines; one big
/// `LocalKey::with` closure was not inlined, costing a call per enter and exit).
pub(crate) trait StackStore {
    fn depth(&self) -> u32;
    fn set_depth(&self, d: u32);
    /// Cell `k` ([`CHILD`] or [`T0`]) of inline level `i < INLINE_DEPTH`.
    fn inline(&self, i: usize, k: usize) -> Ticks;
    fn set_inline(&self, i: usize, k: usize, v: Ticks);
    fn deep(&self) -> Option<&'static DeepStack>;
    fn set_deep(&self, d: Option<&'static DeepStack>);
    /// The current anchor's counter reading and epoch.
    fn anchor(&self) -> (Ticks, u32);
    fn set_anchor(&self, ticks: Ticks, epoch: u32);
    /// The slot whose [`Slot::pending`] duration waits for the thread's next exit.
    fn pending(&self) -> Option<&'static Slot>;
    fn set_pending(&self, slot: Option<&'static Slot>);
}

/// A stack in plain cells (tests and the overhead probe).
pub(crate) struct Stack {
    depth: Cell<u32>,
    levels: [[Cell<Ticks>; 2]; INLINE_DEPTH],
    deep: Cell<Option<&'static DeepStack>>,
    anchor: Cell<(Ticks, u32)>,
    pending: Cell<Option<&'static Slot>>,
}

impl Stack {
    pub(crate) const fn new() -> Stack {
        Stack {
            depth: Cell::new(0),
            levels: [const { [const { Cell::new(0) }; 2] }; INLINE_DEPTH],
            deep: Cell::new(None),
            // Ticks 0: the first entry refreshes the anchor.
            anchor: Cell::new((0, 0)),
            pending: Cell::new(None),
        }
    }
}

impl StackStore for Stack {
    #[inline(always)]
    fn depth(&self) -> u32 {
        self.depth.get()
    }
    #[inline(always)]
    fn set_depth(&self, d: u32) {
        self.depth.set(d)
    }
    #[inline(always)]
    fn inline(&self, i: usize, k: usize) -> Ticks {
        self.levels[i][k].get()
    }
    #[inline(always)]
    fn set_inline(&self, i: usize, k: usize, v: Ticks) {
        self.levels[i][k].set(v)
    }
    fn deep(&self) -> Option<&'static DeepStack> {
        self.deep.get()
    }
    fn set_deep(&self, d: Option<&'static DeepStack>) {
        self.deep.set(d)
    }
    #[inline(always)]
    fn anchor(&self) -> (Ticks, u32) {
        self.anchor.get()
    }
    fn set_anchor(&self, ticks: Ticks, epoch: u32) {
        self.anchor.set((ticks, epoch))
    }
    fn pending(&self) -> Option<&'static Slot> {
        self.pending.get()
    }
    fn set_pending(&self, slot: Option<&'static Slot>) {
        self.pending.set(slot)
    }
}

/// Open scopes on a stack.
pub(crate) fn depth(s: &impl StackStore) -> usize {
    s.depth() as usize
}

/// Cell `k` of level `i`, inline or in the deep extension.
#[inline(always)]
pub(super) fn get(s: &impl StackStore, i: usize, k: usize) -> Ticks {
    if i < INLINE_DEPTH {
        s.inline(i, k)
    } else {
        deep_cell(s, i, k).load(Relaxed)
    }
}

#[inline(always)]
pub(super) fn set(s: &impl StackStore, i: usize, k: usize, v: Ticks) {
    if i < INLINE_DEPTH {
        s.set_inline(i, k, v)
    } else {
        deep_cell(s, i, k).store(v, Relaxed)
    }
}

#[cold]
#[inline(never)]
fn deep_cell(s: &impl StackStore, i: usize, k: usize) -> &'static AtomicU64 {
    let deep = match s.deep() {
        Some(d) => d,
        None => {
            let d = DeepStack::take();
            s.set_deep(Some(d));
            d
        }
    };
    &deep.0[i - INLINE_DEPTH][k]
}
