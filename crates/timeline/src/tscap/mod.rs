//! Reading `.tscap` timeline captures, format versions 1 to 3.
//!
//! The bytes are specified in `tickscope`'s `capture::format` module docs (the writer's side);
//! this crate does not depend on `tickscope`: the format's numbers (magic, versions, limits,
//! chunk kinds, entry tags, event kinds) are shared with the writer through `tickscope-fmt`'s
//! `tscap` module, and the limits and versions are re-exported here.
//!
//! A [`Reader`] streams a capture chunk by chunk: [`Reader::next_chunk`] reads one chunk,
//! checks its framing (lengths against [`MAX_CHUNK`], CRC), decompresses it and checks its
//! payload completely before returning, so a chunk is either wholly good or an [`Error`] (under
//! [salvage](Reader::salvage), the place where reading stopped). Metadata accumulates in
//! [`Meta`]; an events chunk is then decoded batch by batch into a reusable [`Events`] buffer
//! with [`Reader::decode`]. Memory is bounded by one chunk plus the metadata (distinct scopes,
//! markers, threads), never by the capture's length.
//!
//! ```no_run
//! use tickscope_timeline::tscap::{ChunkKind, Events, Reader};
//! # fn main() -> Result<(), tickscope_timeline::tscap::Error> {
//! let mut reader = Reader::open("run.tscap")?;
//! let mut events = Events::new();
//! let mut n = 0;
//! while let Some(kind) = reader.next_chunk()? {
//!     if kind == ChunkKind::Events {
//!         while reader.decode(&mut events) {
//!             n += events.len();
//!         }
//!     }
//! }
//! for warning in reader.warnings() {
//!     eprintln!("warning: {warning}");
//! }
//! println!("{n} events");
//! # Ok(()) }
//! ```

mod decode;
mod error;
mod meta;
mod read;

pub use decode::{AsyncWhat, End, Event, EventKind, Events, EventsInfo, OpenScope, Process};
pub use error::{Error, ErrorKind, Problem};
pub use meta::{
    Clock, Marker, MarkerKind, MarkerRef, Meta, MetaEntry, Scope, ScopeKind, ScopeRef, Thread,
    ThreadRef,
};
pub use read::{last_clock, last_clock_and_end, ChunkKind, Reader};

pub(crate) use meta::IdIndex;
pub use tickscope_fmt::tscap::{
    CHUNK_HEADER_LEN, HEADER_LEN, MAGIC, MAX_CHUNK, MAX_OPEN, MAX_STRING, MIN_VERSION, VERSION,
};
