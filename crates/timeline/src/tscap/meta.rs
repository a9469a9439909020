//! What metadata chunks define: scopes, markers, threads, clock calibrations, sink losses.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// Ids below this are looked up in a flat array (the writer's ids are small dense integers:
/// call-site ids below 16384, thread indexes from 1); larger ones, which only a foreign or
/// damaged file would hold, go to a map so that one huge id cannot make the array huge.
const DENSE_IDS: u64 = 1 << 16;
const NONE: u32 = u32::MAX;

/// Maps ids (varints from the file) to small dense indexes `0..len`, assigned in order of
/// first use. Lookups of small ids are one array index.
#[derive(Clone, Default, Debug)]
pub(crate) struct IdIndex {
    dense: Vec<u32>,
    sparse: BTreeMap<u64, u32>,
    len: u32,
}

impl IdIndex {
    /// The index of `id`, if it has one.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<u32> {
        if id < DENSE_IDS {
            match self.dense.get(id as usize) {
                Some(&i) if i != NONE => Some(i),
                _ => None,
            }
        } else {
            self.sparse.get(&id).copied()
        }
    }

    /// The index of `id`, assigning the next one if it has none; the bool is true when new.
    #[inline]
    pub(crate) fn get_or_insert(&mut self, id: u64) -> (u32, bool) {
        if let Some(&i) = self.dense.get(id as usize) {
            if i != NONE {
                return (i, false);
            }
        }
        self.insert_slow(id)
    }

    #[cold]
    fn insert_slow(&mut self, id: u64) -> (u32, bool) {
        if let Some(i) = self.get(id) {
            return (i, false);
        }
        let i = self.len;
        self.len += 1;
        if id < DENSE_IDS {
            let id = id as usize;
            if self.dense.len() <= id {
                self.dense.resize(id + 1, NONE);
            }
            self.dense[id] = i;
        } else {
            self.sparse.insert(id, i);
        }
        (i, true)
    }
}

/// Items keyed by id, stored densely.
#[derive(Clone, Debug)]
pub(crate) struct Table<T> {
    index: IdIndex,
    items: Vec<T>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            index: IdIndex::default(),
            items: Vec::new(),
        }
    }
}

impl<T> Table<T> {
    fn get(&self, id: u64) -> Option<&T> {
        self.index.get(id).map(|i| &self.items[i as usize])
    }

    /// Defines `id`, replacing an earlier definition (a repeated definition, as a flight
    /// recorder dump may hold, keeps the latest).
    fn set(&mut self, id: u64, item: T) {
        let (i, new) = self.index.get_or_insert(id);
        if new {
            self.items.push(item);
        } else {
            self.items[i as usize] = item;
        }
    }
}

/// Whether a scope is a call site's own row or a group's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeKind {
    /// One call site.
    Scope,
    /// A group: every call site naming it shares the id.
    Group,
}

/// A scope definition, as a metadata entry holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    /// Its id in events.
    pub id: u64,
    /// Scope or group.
    pub kind: ScopeKind,
    /// Its name.
    pub name: String,
    /// The source file of its call site (a group's first).
    pub file: String,
    /// The line.
    pub line: u64,
}

/// A scope definition as [`Meta`] keeps it: its strings borrowed from the metadata.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScopeRef<'a> {
    /// Its id in events.
    pub id: u64,
    /// Scope or group.
    pub kind: ScopeKind,
    /// Its name.
    pub name: &'a str,
    /// The source file of its call site (a group's first).
    pub file: &'a str,
    /// The line.
    pub line: u64,
}

/// A scope as [`Meta`] stores it: a few dozen bytes, its strings in the metadata's arena
/// (a capture may declare millions of scopes; each costs what its entry's bytes do).
#[derive(Clone, Copy, Debug)]
struct ScopeRec {
    id: u64,
    line: u64,
    name_at: usize,
    file_at: usize,
    name_len: u16,
    file_len: u16,
    kind: ScopeKind,
}

/// Append-only string storage for the names (and scopes' files) of the definitions. A redefinition appends its new
/// strings (the old ones stay, bounded by the bytes read); a file equal to the previous
/// one stored is shared, as call sites of one file come together.
#[derive(Clone, Debug, Default)]
struct Arena {
    bytes: String,
    last_file: Option<(usize, u16)>,
}

impl Arena {
    fn push(&mut self, s: &str) -> (usize, u16) {
        let at = self.bytes.len();
        self.bytes.push_str(s);
        // Strings are at most MAX_STRING (65,535) bytes: the decoder refuses longer ones.
        (at, s.len() as u16)
    }

    fn push_file(&mut self, s: &str) -> (usize, u16) {
        if let Some((at, len)) = self.last_file {
            if self.get(at, len) == s {
                return (at, len);
            }
        }
        let f = self.push(s);
        self.last_file = Some(f);
        f
    }

    fn get(&self, at: usize, len: u16) -> &str {
        &self.bytes[at..at + len as usize]
    }
}

/// What a marker marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    /// Frame boundaries.
    Frame,
    /// Counter values.
    Counter,
}

/// A frame or counter marker definition, as a metadata entry holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    /// Its id in events.
    pub id: u64,
    /// Frame or counter.
    pub kind: MarkerKind,
    /// Its name.
    pub name: String,
}

/// A marker definition as [`Meta`] keeps it: its name borrowed from the metadata.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MarkerRef<'a> {
    /// Its id in events.
    pub id: u64,
    /// Frame or counter.
    pub kind: MarkerKind,
    /// Its name.
    pub name: &'a str,
}

#[derive(Clone, Copy, Debug)]
struct MarkerRec {
    id: u64,
    name_at: usize,
    name_len: u16,
    kind: MarkerKind,
}

/// A thread definition as [`Meta`] keeps it: its name borrowed from the metadata.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThreadRef<'a> {
    /// Its index in events chunks.
    pub index: u64,
    /// The OS thread id.
    pub tid: u64,
    /// Its name (may be empty).
    pub name: &'a str,
}

#[derive(Clone, Copy, Debug)]
struct ThreadRec {
    index: u64,
    tid: u64,
    name_at: usize,
    name_len: u16,
}

/// A thread definition, as a metadata entry holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Thread {
    /// Its index in events chunks (from 1, never reused within a capture).
    pub index: u64,
    /// The OS thread id.
    pub tid: u64,
    /// Its name (may be empty).
    pub name: String,
}

/// A clock calibration: the counter's rate, and one reading paired with the wall clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock {
    /// Counter ticks per second.
    pub ticks_per_second: f64,
    /// A counter reading.
    pub ticks: u64,
    /// The wall clock (ns since the Unix epoch) at that reading.
    pub unix_ns: u64,
}

/// One entry of a metadata chunk.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaEntry {
    /// A scope.
    Scope(Scope),
    /// A marker.
    Marker(Marker),
    /// A thread.
    Thread(Thread),
    /// A later calibration.
    Clock(Clock),
    /// Chunks the sink could not take since its previous such entry.
    SinkLoss {
        /// Events in them.
        events: u64,
        /// Chunks.
        chunks: u64,
    },
    /// Scopes a thread dropped whole since its previous such entry (version 2).
    DroppedScopes {
        /// The thread's index.
        thread: u64,
        /// The scope id.
        scope: u64,
        /// How many.
        scopes: u64,
    },
    /// Entries of a scope open on some thread when the capture started (version 2).
    InFlight {
        /// The scope id.
        scope: u64,
        /// How many.
        calls: u64,
    },
    /// A stack of the CPU sampler's samples (version 2).
    Stack {
        /// Its id.
        id: u64,
        /// Function names, leaf first.
        frames: Vec<String>,
    },
    /// A call site's allocations over the capture, counted by scope (version 4).
    Allocs {
        /// The scope id.
        scope: u64,
        /// Allocations, bytes (inside its outermost calls), self allocations, self bytes
        /// (not in its child scopes).
        counts: [u64; 4],
    },
}

/// Everything the metadata chunks read so far define.
#[derive(Clone, Debug)]
pub struct Meta {
    scopes: Table<ScopeRec>,
    strings: Arena,
    markers: Table<MarkerRec>,
    threads: Table<ThreadRec>,
    clock: Clock,
    clock_updates: u64,
    sink_lost_events: u64,
    sink_lost_chunks: u64,
    /// Scopes dropped whole, by scope id.
    dropped_scopes: std::collections::BTreeMap<u64, u64>,
    /// Scopes in flight when the capture started, by scope id.
    in_flight: std::collections::BTreeMap<u64, u64>,
    /// The sampler's stacks, by id.
    stacks: std::collections::BTreeMap<u64, Vec<String>>,
    /// Allocations by scope id, where the program counted them.
    allocs: std::collections::BTreeMap<u64, [u64; 4]>,
    /// Thread indexes by OS thread id (the first thread of each tid).
    by_tid: std::collections::HashMap<u64, u64>,
}

impl Meta {
    pub(crate) fn new(clock: Clock) -> Meta {
        Meta {
            scopes: Table::default(),
            strings: Arena::default(),
            markers: Table::default(),
            threads: Table::default(),
            clock,
            clock_updates: 0,
            sink_lost_events: 0,
            sink_lost_chunks: 0,
            dropped_scopes: Default::default(),
            in_flight: Default::default(),
            stacks: Default::default(),
            allocs: Default::default(),
            by_tid: Default::default(),
        }
    }

    pub(crate) fn apply(&mut self, entry: &MetaEntry) {
        match entry {
            MetaEntry::Scope(s) => self.set_scope(s),
            MetaEntry::Marker(m) => {
                let (name_at, name_len) = self.strings.push(&m.name);
                let rec = MarkerRec {
                    id: m.id,
                    name_at,
                    name_len,
                    kind: m.kind,
                };
                self.markers.set(m.id, rec);
            }
            MetaEntry::Thread(t) => {
                let (name_at, name_len) = self.strings.push(&t.name);
                let rec = ThreadRec {
                    index: t.index,
                    tid: t.tid,
                    name_at,
                    name_len,
                };
                self.threads.set(t.index, rec);
                self.by_tid.entry(t.tid).or_insert(t.index);
            }
            MetaEntry::Clock(c) => {
                self.clock = *c;
                self.clock_updates += 1;
            }
            MetaEntry::SinkLoss { events, chunks } => {
                self.sink_lost_events = self.sink_lost_events.saturating_add(*events);
                self.sink_lost_chunks = self.sink_lost_chunks.saturating_add(*chunks);
            }
            MetaEntry::DroppedScopes { scope, scopes, .. } => {
                let n = self.dropped_scopes.entry(*scope).or_insert(0);
                *n = n.saturating_add(*scopes);
            }
            MetaEntry::InFlight { scope, calls } => {
                let n = self.in_flight.entry(*scope).or_insert(0);
                *n = n.saturating_add(*calls);
            }
            MetaEntry::Stack { id, frames } => {
                self.stacks.insert(*id, frames.clone());
            }
            MetaEntry::Allocs { scope, counts } => {
                let to = self.allocs.entry(*scope).or_default();
                for (a, b) in to.iter_mut().zip(counts) {
                    *a = a.saturating_add(*b);
                }
            }
        }
    }

    fn set_scope(&mut self, s: &Scope) {
        let (name_at, name_len) = self.strings.push(&s.name);
        let (file_at, file_len) = self.strings.push_file(&s.file);
        let rec = ScopeRec {
            id: s.id,
            line: s.line,
            name_at,
            file_at,
            name_len,
            file_len,
            kind: s.kind,
        };
        self.scopes.set(s.id, rec);
    }

    fn scope_ref(&self, r: &ScopeRec) -> ScopeRef<'_> {
        ScopeRef {
            id: r.id,
            kind: r.kind,
            name: self.strings.get(r.name_at, r.name_len),
            file: self.strings.get(r.file_at, r.file_len),
            line: r.line,
        }
    }

    /// The scope `id`, if a metadata chunk defined it.
    pub fn scope(&self, id: u64) -> Option<ScopeRef<'_>> {
        self.scopes.get(id).map(|r| self.scope_ref(r))
    }

    fn marker_ref(&self, r: &MarkerRec) -> MarkerRef<'_> {
        MarkerRef {
            id: r.id,
            kind: r.kind,
            name: self.strings.get(r.name_at, r.name_len),
        }
    }

    fn thread_ref(&self, r: &ThreadRec) -> ThreadRef<'_> {
        ThreadRef {
            index: r.index,
            tid: r.tid,
            name: self.strings.get(r.name_at, r.name_len),
        }
    }

    /// The marker `id`, if defined.
    pub fn marker(&self, id: u64) -> Option<MarkerRef<'_>> {
        self.markers.get(id).map(|r| self.marker_ref(r))
    }

    /// The thread with index `index`, if defined.
    pub fn thread(&self, index: u64) -> Option<ThreadRef<'_>> {
        self.threads.get(index).map(|r| self.thread_ref(r))
    }

    /// Every scope defined, in order of first definition.
    pub fn scopes(&self) -> impl Iterator<Item = ScopeRef<'_>> {
        self.scopes.items.iter().map(|r| self.scope_ref(r))
    }

    /// Every marker defined, in order of first definition.
    pub fn markers(&self) -> impl Iterator<Item = MarkerRef<'_>> {
        self.markers.items.iter().map(|r| self.marker_ref(r))
    }

    /// Every thread defined, in order of first definition.
    pub fn threads(&self) -> impl Iterator<Item = ThreadRef<'_>> {
        self.threads.items.iter().map(|r| self.thread_ref(r))
    }

    /// The scope's name, or `<scope #id>` for an id no metadata defined.
    pub fn scope_name(&self, id: u64) -> Cow<'_, str> {
        match self.scope(id) {
            Some(s) => Cow::Borrowed(s.name),
            None => Cow::Owned(format!("<scope #{id}>")),
        }
    }

    /// The marker's name, or `<marker #id>`.
    pub fn marker_name(&self, id: u64) -> Cow<'_, str> {
        match self.marker(id) {
            Some(m) => Cow::Borrowed(m.name),
            None => Cow::Owned(format!("<marker #{id}>")),
        }
    }

    /// The thread's name; `thread N` when it has none or was never defined.
    pub fn thread_name(&self, index: u64) -> Cow<'_, str> {
        match self.thread(index) {
            Some(t) if !t.name.is_empty() => Cow::Borrowed(t.name),
            _ => Cow::Owned(format!("thread {index}")),
        }
    }

    /// The latest calibration: the process record's, or the last clock entry read.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// How many clock entries were read (0: the process record's calibration is in use).
    pub fn clock_updates(&self) -> u64 {
        self.clock_updates
    }

    /// How many stacks of the sampler are defined.
    pub fn stack_count(&self) -> u64 {
        self.stacks.len() as u64
    }

    /// The function names of the sampler's stack `id`, leaf first.
    pub fn stack(&self, id: u64) -> Option<&[String]> {
        self.stacks.get(&id).map(Vec::as_slice)
    }

    /// The index of the first thread defined with OS thread id `tid`.
    pub fn thread_by_tid(&self, tid: u64) -> Option<u64> {
        self.by_tid.get(&tid).copied()
    }

    /// Scopes dropped whole (the memory budget was spent), by scope id.
    pub fn dropped_scopes(&self) -> &std::collections::BTreeMap<u64, u64> {
        &self.dropped_scopes
    }

    /// Entries open on threads when the capture started (their calls are not in it), by
    /// scope id.
    pub fn in_flight_at_start(&self) -> &std::collections::BTreeMap<u64, u64> {
        &self.in_flight
    }

    /// Allocations by scope id over the capture (allocations, bytes, self allocations, self
    /// bytes), where the program counted them by scope: empty otherwise.
    pub fn allocs(&self) -> &std::collections::BTreeMap<u64, [u64; 4]> {
        &self.allocs
    }

    /// Events and chunks the sink reported it could not take (sink-loss entries, summed).
    pub fn sink_loss(&self) -> (u64, u64) {
        (self.sink_lost_events, self.sink_lost_chunks)
    }
}
