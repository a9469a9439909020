//! Reading `.tscap` timeline captures, format versions 1 to 3.
//!
//! The bytes are specified in `tickscope`'s `capture::format` module docs (the writer's side);
//! this crate does not depend on `tickscope`, so the few constants it needs are copied here.
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

/// The first 8 bytes of every capture: `"TSCAP\r\n\x1a"` (the line ending and the DOS EOF
/// byte catch text-mode transfers, as PNG's signature does).
pub const MAGIC: [u8; 8] = *b"TSCAP\r\n\x1a";
/// The newest format version this reader understands.
pub const VERSION: u16 = 3;
/// The oldest one.
pub const MIN_VERSION: u16 = 1;
/// Bytes in the file header: magic, version, reserved.
pub const HEADER_LEN: usize = 12;
/// Bytes in a chunk header: kind, flags, reserved, stored length, raw length, CRC.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The largest stored or raw chunk payload; larger length fields are refused before any
/// allocation.
pub const MAX_CHUNK: usize = 16 << 20;
/// The longest string.
pub const MAX_STRING: usize = 65_535;
/// The deepest open-scope list at the start of an events chunk.
pub const MAX_OPEN: usize = 4096;

/// Chunk kinds and flags, as in the spec.
pub(crate) mod chunk {
    pub const PROCESS: u8 = 1;
    pub const META: u8 = 2;
    pub const EVENTS: u8 = 3;
    pub const END: u8 = 4;
    pub const FLAG_LZ4: u8 = 1;
}

/// Metadata entry tags, as in the spec.
pub(crate) mod tag {
    pub const SCOPE: u8 = 1;
    pub const MARKER: u8 = 2;
    pub const THREAD: u8 = 3;
    pub const CLOCK: u8 = 4;
    pub const SINK_LOSS: u8 = 5;
    pub const DROPPED_SCOPES: u8 = 6;
    pub const IN_FLIGHT: u8 = 7;
    pub const STACK: u8 = 8;
}
