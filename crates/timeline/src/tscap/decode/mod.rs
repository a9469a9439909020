//! Payload decoding, by job: a payload's fields (`fields.rs`: varints, strings, and the
//! reading position that says which byte is wrong); the process, metadata and end records
//! (`records.rs`); an events chunk, validated whole then decoded batch by batch
//! (`events.rs`); and what a decoded event is (`event.rs`).
//!
//! Every payload is checked completely before anything is taken from it. For an events chunk,
//! the validation walks the three streams once (tags, deltas, payload), so that the batch
//! decoder afterwards runs a tight loop with no error path: a chunk is wholly good or an error,
//! and a salvaged capture never holds half a chunk. Lengths from the file are checked against
//! what remains before anything is allocated for them.

mod event;
mod events;
mod fields;
mod records;

pub use event::{AsyncWhat, Event, EventKind, Events};
pub use events::{EventsInfo, OpenScope};
pub use records::{End, Process};

pub(crate) use events::{decode_batch, events, Cursor};
pub(crate) use fields::PResult;
pub(crate) use records::{end, meta, process};
