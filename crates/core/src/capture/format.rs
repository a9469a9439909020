//! The `.tscap` format, version 4 (`VERSION`; what each version added is marked below): what
//! the collector writes to a file, a TCP connection or a flight-recorder dump. The bytes are
//! the same on every sink. `tickscope-timeline` reads them.
//!
//! # Layout
//! A capture is a 12-byte file header followed by chunks, up to the end of the file (or of the
//! connection). All fixed-width integers are little-endian.
//!
//! ## File header
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `54 53 43 41 50 0D 0A 1A` (`"TSCAP\r\n\x1a"`) |
//! | 8 | 2 | format version, `u16` = 2 (readers also read 1) |
//! | 10 | 2 | reserved, 0 |
//!
//! ## Chunk
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | kind: 1 process, 2 metadata, 3 events, 4 end; any other value is an error |
//! | 1 | 1 | flags: bit 0 set = the payload is LZ4-compressed (LZ4 block format, no size prefix, as `lz4_flex::block`); other bits 0 |
//! | 2 | 2 | reserved, 0 |
//! | 4 | 4 | stored length S, `u32`, at most [`MAX_CHUNK`] |
//! | 8 | 4 | raw (decompressed) length R, `u32`, at most [`MAX_CHUNK`]; equals S when not compressed |
//! | 12 | 4 | CRC-32 (IEEE, as zlib and `crc32fast`) of the S stored bytes |
//! | 16 | S | payload |
//!
//! A chunk is written with one `write` call, so a program that dies mid-capture leaves a file
//! that is valid up to its last complete chunk; a reader reports the damage at the first
//! incomplete or corrupt one (and `--salvage` keeps what came before it).
//!
//! ## Payload encodings
//! - **varint**: unsigned LEB128, at most 10 bytes (a `u64`).
//! - **svarint**: a signed `i64` zigzag-encoded (`(v << 1) ^ (v >> 63)`), then a varint.
//! - **string**: a varint byte length (at most [`MAX_STRING`]), then that many UTF-8 bytes.
//! - **f64**: 8 bytes, IEEE 754, little-endian.
//!
//! ## Process chunk (kind 1)
//! The first chunk of every capture, exactly once:
//! `f64 ticks_per_second`, `varint start_ticks` (the counter when capture began),
//! `varint start_unix_ns` (the wall clock at that moment), `varint pid`, `string program`,
//! `string clock` (`"tsc"`, `"cntvct"` or `"monotonic"`).
//!
//! ## Metadata chunk (kind 2)
//! Entries until the end of the payload, each a tag byte then its fields:
//! - `1` scope: `varint id`, `u8 kind` (0 scope, 1 group), `string name`, `string file`,
//!   `varint line`;
//! - `2` marker: `varint id`, `u8 kind` (0 frame, 1 counter), `string name`;
//! - `3` thread: `varint index` (small, from 1, never reused within a capture), `varint tid`
//!   (the OS thread id), `string name`;
//! - `4` clock: `f64 ticks_per_second`, `varint ticks`, `varint unix_ns`: a later calibration;
//!   readers use the last one seen;
//! - `5` sink loss: `varint events`, `varint chunks`: this sink could not take that many
//!   chunks holding that many events since its previous sink-loss entry (a slow or vanished
//!   TCP reader);
//! - `6` dropped scopes (version 2): `varint thread index`, `varint scope id`,
//!   `varint scopes`: that many more scopes of that call site were dropped whole on that
//!   thread (the memory budget was spent): neither their begin nor their end is in the
//!   stream. Readers add the entries up;
//! - `7` in flight at start (version 2): `varint scope id`, `varint calls`: entries of that
//!   call site already open on some thread when the capture started. Their ends are not
//!   recorded (their begins preceded the capture);
//! - `8` stack (version 2): `varint id`, `varint N`, then N × `string` function name: a stack
//!   of the CPU sampler's samples, leaf first, from the symbol tables (no inlined frames;
//!   the address in hex where no symbol covers it). Defined before the first sample that
//!   uses it. CPU samples are recorded by the sampler's own thread (`tickscope-sampler`), at
//!   the time each was taken, for the thread the sample is of.
//! - `9` allocations (version 4): `varint scope id`, `varint allocations`, `varint bytes`,
//!   `varint self allocations`, `varint self bytes`: what that call site's scopes allocated
//!   between the capture's start and its end, where `tickscope::alloc::Profiled` counted
//!   allocations by scope (inside its outermost calls, and not in its child scopes: self).
//!   Written once, before the end chunk, for the call sites that allocated; a capture
//!   without them (no such allocator, a dump, a cut stream) has none.
//!
//! Ids and thread indexes are defined in a metadata chunk before the first events chunk that
//! uses them. A reader shows an id it was never told about as `<scope #id>`, not as an error.
//!
//! ## Events chunk (kind 3)
//! A run of one thread's events, in the order the thread recorded them:
//! - `varint thread` (its index), `varint N` (events), `varint base_ticks`;
//! - `varint K`, then K × (`varint scope id`, `varint begin ticks`): the scopes open on the
//!   thread when the chunk begins, outermost first, so every chunk can be read on its own (a
//!   flight-recorder dump, a salvaged file). K is at most [`MAX_OPEN`];
//! - `varint tags_len`, `varint deltas_len`, `varint payload_len`: the sizes of the three
//!   streams that follow, which fill the rest of the payload exactly;
//! - tags: N varints, `tag = kind | id << 3`;
//! - deltas: N svarints, the residuals of the timestamps;
//! - payload: the extra bytes of the events that have any, in event order.
//!
//! Timestamps: `prev = base_ticks`, `pred = [0i64; 256]`; for each event,
//! `ctx = tag & 255`, `delta = pred[ctx] + residual` (wrapping), `pred[ctx] = delta`,
//! `ticks = prev + delta` (wrapping), `prev = ticks`. Predicting each delta from the last one
//! with the same tag makes a regular workload's residuals a few ticks wide.
//!
//! Event kinds (the tag's low 3 bits):
//! | kind | event | id | payload |
//! |---|---|---|---|
//! | 0 | scope begin | scope id | — |
//! | 1 | scope end | scope id | — |
//! | 2 | frame mark | marker id | — |
//! | 3 | counter value | marker id | f64 |
//! | 4 | message | 0 | string |
//! | 5 | lost | 0 | varint: events this thread dropped just before this point (memory budget spent); version 2 adds a varint of flags: bit 0, an end whose begin is in the stream was among them |
//! | 6 | CPU sample (version 2) | 0 | varint tid (the OS id of the thread sampled), varint stack (a stack entry's id) |
//! | 7 | async (version 3) | scope id | varint async id, u8 what: 0 begins, 1 ends (ready, closed), 2 ends cancelled (dropped before ready) |
//!
//! An async event marks the life of a future (first poll to ready or drop) or a `tracing`
//! span (creation to close) of call site `id`, whose entries are that call site's scopes.
//! Its begin and end may be on different threads (a future moves between a runtime's
//! workers): they pair by async id, unique in the capture. Version 1 and 2 files have none
//! (kind 7 is an error there).
//!
//! An end closes the innermost open scope with its id; scopes opened above it and never ended
//! were abandoned (a leaked guard). Scopes still open when the capture ends have no end.
//!
//! Version 2 writes scopes whole: when events are dropped, a scope's begin and end are
//! dropped together (the `lost` count includes both), so an end always closes the call it
//! belongs to. The one exception is flagged in the `lost` event (bit 0): readers then discard
//! the scopes open across it rather than pair them. Version 1 made no such promise: a reader
//! discards the scopes open across any `lost` event of a version 1 capture.
//!
//! ## End chunk (kind 4)
//! The last chunk of a complete capture: `varint events` (recorded into rings),
//! `varint dropped` (events dropped because the memory budget was spent), `varint undelivered` (events in
//! chunks this sink could not take), `varint evicted` (events a flight recorder let go of
//! past its window: not a loss, the window's purpose), `varint end_ticks`,
//! `varint end_unix_ns`, `varint T`, then T × (`varint thread index`, `varint dropped`).
//! A capture without one ended abnormally (the program crashed or was killed); everything
//! before it is still valid.
//!
//! # Versions
//! A reader refuses a version it does not know. One fixture per version is kept in
//! `crates/timeline/tests/data/` and read by the tests forever.

// The format's numbers are defined once in `tickscope-fmt`, which the reader
// (`tickscope-timeline`) shares.
pub use tickscope_fmt::tscap::{
    chunk, event, meta, what, CHUNK_HEADER_LEN, HEADER_LEN, MAGIC, MAX_CHUNK, MAX_OPEN, MAX_STRING,
    VERSION,
};

/// Appends `v` as a varint.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded as a varint.
#[inline]
pub(crate) fn put_svarint(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends `s` as a string, cut to [`MAX_STRING`] bytes at a character boundary.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_varint(out, end as u64);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// The file header.
pub(crate) fn file_header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// A whole chunk (header and payload) of `kind`, LZ4-compressed when that makes it smaller.
/// `payload` must be at most [`MAX_CHUNK`] bytes (the collector seals chunks well below it).
pub(crate) fn seal(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    seal_with(kind, payload, out, true)
}

/// [`seal`], compressing only if `compress` (the collector skips it while it is behind).
pub(crate) fn seal_with(kind: u8, payload: &[u8], out: &mut Vec<u8>, compress: bool) {
    debug_assert!(payload.len() <= MAX_CHUNK);
    out.clear();
    out.resize(CHUNK_HEADER_LEN, 0);
    let mut flags = 0;
    if compress && payload.len() >= 64 {
        let bound = lz4_flex::block::get_maximum_output_size(payload.len());
        out.resize(CHUNK_HEADER_LEN + bound, 0);
        match lz4_flex::block::compress_into(payload, &mut out[CHUNK_HEADER_LEN..]) {
            Ok(n) if n < payload.len() => {
                out.truncate(CHUNK_HEADER_LEN + n);
                flags = chunk::FLAG_LZ4;
            }
            _ => out.truncate(CHUNK_HEADER_LEN),
        }
    }
    if flags == 0 {
        out.extend_from_slice(payload);
    }
    let stored = (out.len() - CHUNK_HEADER_LEN) as u32;
    let crc = crc32fast::hash(&out[CHUNK_HEADER_LEN..]);
    out[0] = kind;
    out[1] = flags;
    out[4..8].copy_from_slice(&stored.to_le_bytes());
    out[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    out[12..16].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_match_leb128() {
        let mut v = Vec::new();
        put_varint(&mut v, 300);
        assert_eq!(v, [0xAC, 0x02]);
        v.clear();
        put_svarint(&mut v, -1);
        put_svarint(&mut v, 1);
        put_svarint(&mut v, i64::MIN);
        assert_eq!(&v[..2], [1, 2]);
        assert_eq!(v.len(), 2 + 10);
    }

    #[test]
    fn sealed_chunks_carry_lengths_and_crc() {
        let payload = vec![7u8; 1000];
        let mut out = Vec::new();
        seal(chunk::EVENTS, &payload, &mut out);
        assert_eq!(out[0], chunk::EVENTS);
        assert_eq!(out[1], chunk::FLAG_LZ4, "a run of one byte compresses");
        let stored = u32::from_le_bytes(out[4..8].try_into().unwrap()) as usize;
        assert_eq!(stored, out.len() - CHUNK_HEADER_LEN);
        assert_eq!(u32::from_le_bytes(out[8..12].try_into().unwrap()), 1000);
        let crc = u32::from_le_bytes(out[12..16].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&out[16..]));
        let back = lz4_flex::block::decompress(&out[16..], 1000).unwrap();
        assert_eq!(back, payload);
    }

    #[test]
    fn strings_are_cut_at_a_character_boundary() {
        let s = "é".repeat(MAX_STRING);
        let mut v = Vec::new();
        put_str(&mut v, &s);
        let len = MAX_STRING - 1; // 2-byte characters: the last whole one ends here
        assert_eq!(v.len(), 3 + len);
        assert!(std::str::from_utf8(&v[3..]).is_ok());
    }
}
