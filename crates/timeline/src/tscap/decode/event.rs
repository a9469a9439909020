//! What a decoded event is: [`Event`], its [`EventKind`] and [`AsyncWhat`], and the reusable
//! [`Events`] buffer a batch is decoded into.

use tickscope_fmt::tscap::{event, what};

/// The bit of a loss event's `data` that says it breaks pairs (the count is below it). Kept
/// in `data` rather than its own field: the decoding loop stays as tight as before.
pub(super) const BREAKS_PAIRS: u64 = 1 << 63;

/// What an event is: the low 3 bits of its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    /// A scope begins; the id is a scope id.
    Begin = event::BEGIN,
    /// The innermost open scope with this id ends.
    End = event::END,
    /// A frame mark; the id is a marker id.
    Frame = event::FRAME,
    /// A counter value; the id is a marker id.
    Counter = event::COUNTER,
    /// A message.
    Message = event::MESSAGE,
    /// Events the thread dropped just before this point (the memory budget was spent).
    Lost = event::LOST,
    /// A CPU sample of a thread, recorded by the sampler's thread (version 2).
    Sample = event::SAMPLE,
    /// A future's or span's life begins or ends (version 3); the id is its scope id.
    Async = event::ASYNC,
}

impl EventKind {
    #[inline(always)]
    pub(super) fn from_low_bits(tag: u64) -> EventKind {
        // A table, not a match: a match cost the decoding loop a quarter of its speed.
        // Validation refuses 7 before version 3 (and 6 in version 1).
        const KINDS: [EventKind; 8] = [
            EventKind::Begin,
            EventKind::End,
            EventKind::Frame,
            EventKind::Counter,
            EventKind::Message,
            EventKind::Lost,
            EventKind::Sample,
            EventKind::Async,
        ];
        KINDS[(tag & 7) as usize]
    }
}

/// What an async event says of its future or span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncWhat {
    /// Its life begins: a future's first poll, a span's creation.
    Begin,
    /// It ends: a future ready, a span closed.
    End,
    /// A future dropped before it was ready.
    Cancelled,
}

/// One decoded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The counter reading.
    pub ticks: u64,
    /// The scope or marker id (0 for messages and losses).
    pub id: u64,
    /// What it is.
    pub kind: EventKind,
    /// The payload: a counter's f64 bits, a message's place in [`Events`]' text, a loss count.
    pub(crate) data: u64,
}

impl Event {
    /// A counter event's value.
    pub fn counter_value(&self) -> Option<f64> {
        (self.kind == EventKind::Counter).then(|| f64::from_bits(self.data))
    }

    /// A CPU sample's thread (its OS thread id) and stack id (see
    /// [`Meta::stack`](crate::tscap::Meta::stack)).
    pub fn sample(&self) -> Option<(u64, u64)> {
        (self.kind == EventKind::Sample).then_some((self.data & 0xffff_ffff, self.data >> 32))
    }

    /// An async event: the future's or span's async id (pairing its begin and end, across
    /// threads) and what happened.
    pub fn async_event(&self) -> Option<(u64, AsyncWhat)> {
        (self.kind == EventKind::Async).then(|| {
            let what = match (self.data & 3) as u8 {
                what::BEGIN => AsyncWhat::Begin,
                what::END => AsyncWhat::End,
                _ => AsyncWhat::Cancelled,
            };
            (self.data >> 2, what)
        })
    }

    /// A loss event's count of dropped events.
    pub fn lost_count(&self) -> Option<u64> {
        (self.kind == EventKind::Lost).then_some(self.data & !BREAKS_PAIRS)
    }

    /// A loss event after which an end may belong to a call other than the open scope it
    /// names (a version 1 capture, or a version 2 one that lost an end): the scopes open
    /// across it must not be paired.
    pub fn lost_breaks_pairs(&self) -> bool {
        self.kind == EventKind::Lost && self.data & BREAKS_PAIRS != 0
    }
}

/// A reusable buffer of decoded events: one batch of one events chunk (see
/// [`Reader::decode`](crate::tscap::Reader::decode)).
#[derive(Clone, Debug, Default)]
pub struct Events {
    pub(super) list: Vec<Event>,
    pub(super) text: String,
}

impl Events {
    /// An empty buffer.
    pub fn new() -> Events {
        Events::default()
    }

    /// The events, in the order the thread recorded them.
    pub fn as_slice(&self) -> &[Event] {
        &self.list
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Returns true if and only if the buffer holds no event.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A message event's text (an event from this buffer).
    pub fn message(&self, e: &Event) -> Option<&str> {
        if e.kind != EventKind::Message {
            return None;
        }
        let start = (e.data >> 32) as usize;
        let len = (e.data & 0xffff_ffff) as usize;
        self.text.get(start..start + len)
    }
}
