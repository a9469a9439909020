//! The `.tscap` timeline capture format's numbers, named once: the writer (crate `tickscope`,
//! whose `capture::format` module specifies the bytes, table by table) writes with them and
//! `tickscope-timeline`'s reader reads with them, so the two cannot drift apart.
//!
//! A capture is a file header ([`MAGIC`], a version, reserved bytes: [`HEADER_LEN`] in all)
//! followed by chunks, each a [`CHUNK_HEADER_LEN`]-byte header (its [`chunk`] kind, flags,
//! lengths, CRC) and a payload. A metadata chunk holds entries, each opening with a [`meta`]
//! tag; an events chunk holds events, each tag's low 3 bits an [`event`] kind; an async
//! event's payload ends with a [`what`].

/// The first 8 bytes of every capture: `"TSCAP\r\n\x1a"` (the line ending and the DOS EOF
/// byte catch text-mode transfers, as PNG's signature does).
pub const MAGIC: [u8; 8] = *b"TSCAP\r\n\x1a";
/// The newest format version: the one the writer writes, and the newest a reader reads.
/// Version 2 added whole-scope drops, the in-flight and stack entries and CPU samples;
/// version 3 async events; version 4 the allocations-by-scope entry.
pub const VERSION: u16 = 4;
/// The oldest format version a reader reads. Every version from it to [`VERSION`] keeps a
/// fixture in `crates/timeline/tests/data/`, read by the tests forever.
pub const MIN_VERSION: u16 = 1;
/// Bytes in the file header: magic, version, reserved.
pub const HEADER_LEN: usize = 12;
/// Bytes in a chunk header: kind, flags, reserved, stored length, raw length, CRC.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The largest stored or raw chunk payload: readers refuse larger lengths before allocating
/// (the collector seals its chunks well below it).
pub const MAX_CHUNK: usize = 16 << 20;
/// The longest string: its length is a varint, but a name or message longer than this is
/// cut (writer) or refused (reader).
pub const MAX_STRING: usize = 65_535;
/// The deepest open-scope list at the start of an events chunk: the writer keeps no deeper
/// stack, and a reader refuses a longer list before allocating for it.
pub const MAX_OPEN: usize = 4096;

/// Chunk kinds (a chunk header's first byte) and flags (its second).
pub mod chunk {
    /// The process chunk: the first of every capture, exactly once.
    pub const PROCESS: u8 = 1;
    /// A metadata chunk.
    pub const META: u8 = 2;
    /// An events chunk: a run of one thread's events.
    pub const EVENTS: u8 = 3;
    /// The end chunk: the last of a complete capture.
    pub const END: u8 = 4;
    /// Flag: the payload is LZ4-compressed (LZ4 block format, no size prefix).
    pub const FLAG_LZ4: u8 = 1;
}

/// Metadata entry tags.
pub mod meta {
    /// A scope call site (or group).
    pub const SCOPE: u8 = 1;
    /// A frame or counter marker.
    pub const MARKER: u8 = 2;
    /// A thread.
    pub const THREAD: u8 = 3;
    /// A later clock calibration.
    pub const CLOCK: u8 = 4;
    /// Chunks the sink could not take.
    pub const SINK_LOSS: u8 = 5;
    /// Scopes a thread dropped whole (version 2).
    pub const DROPPED_SCOPES: u8 = 6;
    /// Scopes open when the capture started (version 2).
    pub const IN_FLIGHT: u8 = 7;
    /// A CPU sampler's stack: its frames' function names (version 2).
    pub const STACK: u8 = 8;
    /// A call site's allocations over the capture, where the program counted them by scope
    /// (version 4).
    pub const ALLOCS: u8 = 9;
}

/// Event kinds, the low 3 bits of a tag.
pub mod event {
    /// Scope begin.
    pub const BEGIN: u8 = 0;
    /// Scope end.
    pub const END: u8 = 1;
    /// Frame mark.
    pub const FRAME: u8 = 2;
    /// Counter value (f64 payload).
    pub const COUNTER: u8 = 3;
    /// Message (string payload).
    pub const MESSAGE: u8 = 4;
    /// Events dropped just before this point (varint payload).
    pub const LOST: u8 = 5;
    /// A CPU sample of a thread (version 2): varint tid and varint stack id payload.
    pub const SAMPLE: u8 = 6;
    /// A future's or span's life begins or ends (version 3): varint async id, u8 what.
    pub const ASYNC: u8 = 7;
}

/// An async event's `what`.
pub mod what {
    /// Begins: a future's first poll, a span's creation.
    pub const BEGIN: u8 = 0;
    /// Ends: a future ready, a span closed.
    pub const END: u8 = 1;
    /// Ends cancelled: a future dropped before it was ready.
    pub const CANCELLED: u8 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_header_is_the_magic_a_version_and_two_reserved_bytes() {
        assert_eq!(HEADER_LEN, MAGIC.len() + 2 + 2);
        const { assert!(MIN_VERSION <= VERSION) };
    }

    #[test]
    fn every_event_kind_fits_in_a_tags_low_three_bits() {
        let kinds = [
            event::BEGIN,
            event::END,
            event::FRAME,
            event::COUNTER,
            event::MESSAGE,
            event::LOST,
            event::SAMPLE,
            event::ASYNC,
        ];
        for (i, k) in kinds.into_iter().enumerate() {
            assert_eq!(k as usize, i, "kinds are 0 to 7, in order");
        }
    }
}
