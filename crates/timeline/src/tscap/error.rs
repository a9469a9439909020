//! Errors: where in which file, and what is wrong, in one line.

use std::fmt;

use tickscope_fmt::tscap::{
    CHUNK_HEADER_LEN, HEADER_LEN, MAX_CHUNK, MAX_OPEN, MAX_STRING, MIN_VERSION, VERSION,
};

/// A capture that cannot be read (or, under salvage, the place where reading stopped).
///
/// Displays as one line, `FILE: at byte OFFSET: what is wrong`. The offset is the byte where
/// the problem is: the field's own offset for a bad header field, the chunk's first byte for a
/// chunk that is truncated, too large or fails its CRC, and the exact payload byte for a
/// malformed field of an uncompressed payload (a compressed payload's problems are at the
/// chunk's first byte, and the message gives the byte within the decompressed payload).
#[derive(Debug)]
pub struct Error {
    path: String,
    offset: u64,
    kind: ErrorKind,
    source: Option<std::io::Error>,
    /// Complete chunks before the damage, read without salvage (0: none, or salvage was
    /// on): the message says that salvage reads them.
    salvageable: u64,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be opened.
    Open,
    /// Reading failed.
    Io,
    /// Zero bytes.
    Empty,
    /// The first bytes are not the capture magic.
    NotCapture {
        /// The bytes found where the magic should be (up to 8).
        magic: Vec<u8>,
    },
    /// A version this reader does not know.
    UnsupportedVersion(u16),
    /// The file ends inside its 12-byte header.
    TruncatedHeader {
        /// Bytes present.
        have: usize,
    },
    /// A reserved field is not zero.
    ReservedNotZero {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// The capture ends right after its file header.
    NoProcess,
    /// The first chunk is not the process record.
    ProcessNotFirst {
        /// The kind found instead.
        found: u8,
    },
    /// A second process record.
    DuplicateProcess,
    /// A chunk follows the end record.
    ChunkAfterEnd,
    /// The capture ends inside a chunk header.
    TruncatedChunkHeader {
        /// Bytes present.
        have: usize,
    },
    /// The capture ends inside a chunk's payload.
    TruncatedChunk {
        /// The stored length the header gives.
        stored: u32,
        /// Payload bytes present.
        remain: u64,
    },
    /// A length field over [`MAX_CHUNK`](super::MAX_CHUNK).
    ChunkTooLarge {
        /// `"stored"` or `"raw"`.
        field: &'static str,
        /// Its value.
        len: u32,
    },
    /// A chunk kind other than 1 to 4.
    UnknownChunkKind(u8),
    /// Flag bits other than LZ4.
    UnknownFlags(u8),
    /// An uncompressed chunk whose stored and raw lengths differ.
    LengthMismatch {
        /// Stored length.
        stored: u32,
        /// Raw length.
        raw: u32,
    },
    /// The payload's CRC-32 is not the one in the header.
    CrcMismatch {
        /// The CRC in the header.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// The LZ4 payload does not decompress to the raw length.
    Decompress {
        /// What the decompressor said.
        detail: String,
    },
    /// A payload field is malformed.
    Malformed {
        /// `"process"`, `"metadata"`, `"events"` or `"end"`.
        chunk: &'static str,
        /// For a compressed payload, the byte within the decompressed payload.
        raw_offset: Option<u64>,
        /// What is wrong.
        problem: Problem,
    },
}

/// What is wrong inside a chunk's payload.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// A varint longer than 10 bytes or over 64 bits.
    BadVarint,
    /// A field runs past the end of the payload (or of its stream).
    Truncated {
        /// Which field.
        field: &'static str,
    },
    /// A string longer than [`MAX_STRING`](super::MAX_STRING).
    StringTooLong {
        /// The length given.
        len: u64,
    },
    /// A string longer than what remains of the payload.
    StringBeyondPayload {
        /// The length given.
        len: u64,
        /// Bytes that remain.
        remain: u64,
    },
    /// A string that is not UTF-8.
    NotUtf8,
    /// A clock rate that is not a positive finite number.
    BadRate {
        /// The value found.
        value: f64,
    },
    /// A metadata entry tag other than 1 to 5.
    UnknownMetaTag(u8),
    /// A scope kind other than 0 (scope) or 1 (group).
    UnknownScopeKind(u8),
    /// A marker kind other than 0 (frame) or 1 (counter).
    UnknownMarkerKind(u8),
    /// An open-scope list longer than [`MAX_OPEN`](super::MAX_OPEN).
    TooManyOpen {
        /// The count given.
        count: u64,
    },
    /// More events than the tag and delta streams can hold (each event takes at least one
    /// byte in each).
    TooManyEvents {
        /// The count given.
        count: u64,
        /// Bytes in the tag stream.
        tags: u64,
        /// Bytes in the delta stream.
        deltas: u64,
    },
    /// The three stream sizes do not add up to the rest of the payload.
    StreamSizes {
        /// Tag stream bytes.
        tags: u64,
        /// Delta stream bytes.
        deltas: u64,
        /// Payload stream bytes.
        payload: u64,
        /// Bytes that remain.
        remain: u64,
    },
    /// An async event whose `what` is not 0, 1 or 2.
    BadAsyncWhat {
        /// The byte.
        what: u8,
        /// The event's index in the chunk.
        index: u64,
    },
    /// An event of a kind its version does not have (6 before version 2, 7 before 3).
    ReservedEventKind {
        /// The kind.
        kind: u8,
        /// The event's index in the chunk.
        index: u64,
    },
    /// A stream has bytes left after the chunk's last event.
    StreamLeftover {
        /// `"tag"`, `"delta"` or `"payload"`.
        stream: &'static str,
        /// Bytes left.
        bytes: u64,
    },
    /// A count that the remaining payload cannot hold.
    CountTooLarge {
        /// Which count.
        field: &'static str,
        /// Its value.
        count: u64,
        /// Bytes that remain.
        remain: u64,
    },
    /// Bytes after a record's last field.
    Trailing {
        /// How many.
        bytes: u64,
    },
}

impl Error {
    pub(crate) fn new(path: &str, offset: u64, kind: ErrorKind) -> Error {
        Error {
            path: path.to_owned(),
            offset,
            kind,
            source: None,
            salvageable: 0,
        }
    }

    /// The same error, saying that salvage reads the `chunks` complete chunks before it (a
    /// capture cut short: a full disk, a killed program), where there are any.
    pub(crate) fn salvageable(mut self, chunks: u64) -> Error {
        if chunks > 0 && !matches!(self.kind, ErrorKind::Open | ErrorKind::Io) {
            self.salvageable = chunks;
        }
        self
    }

    pub(crate) fn io(path: &str, offset: u64, kind: ErrorKind, source: std::io::Error) -> Error {
        Error {
            source: Some(source),
            ..Error::new(path, offset, kind)
        }
    }

    /// The file (or connection) name given to the reader.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The byte offset in the capture where the problem is.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// What is wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The I/O error behind an [`ErrorKind::Open`] or [`ErrorKind::Io`].
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.source.as_ref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.kind, &self.source) {
            (ErrorKind::Open, Some(e)) => write!(f, "{}: cannot open: {e}", self.path),
            (ErrorKind::Io, Some(e)) => {
                write!(f, "{}: at byte {}: read error: {e}", self.path, self.offset)
            }
            (kind, _) => write!(f, "{}: at byte {}: {kind}", self.path, self.offset),
        }?;
        match self.salvageable {
            0 => Ok(()),
            n => write!(
                f,
                " (`--salvage` reads the {n} complete chunk{} before it)",
                if n == 1 { "" } else { "s" }
            ),
        }
    }
}

/// The I/O error's text is part of the one-line message, so it is not also a `source()` (an
/// error chain printer would print it twice); [`Error::io_error`] gives it.
impl std::error::Error for Error {}

fn chunk_name(kind: u8) -> &'static str {
    match kind {
        1 => "process",
        2 => "metadata",
        3 => "events",
        4 => "end",
        _ => "unknown",
    }
}

/// A guess at what a foreign file is, from its first bytes.
fn guess(magic: &[u8]) -> Option<&'static str> {
    const KNOWN: &[(&[u8], &str)] = &[
        (b"PK\x03\x04", "a zip file"),
        (b"\x1f\x8b", "a gzip file, perhaps a pprof profile"),
        (b"\x28\xb5\x2f\xfd", "a zstd file"),
        (b"\x7fELF", "an ELF binary"),
        (b"%PDF", "a PDF"),
        (b"<svg", "an SVG image"),
        (b"<?xml", "an XML file"),
        (b"{", "a JSON file, perhaps a Chrome trace"),
        (b"[", "a JSON file, perhaps a Chrome trace"),
        (b"#!", "a script"),
    ];
    KNOWN
        .iter()
        .find(|(m, _)| magic.starts_with(m))
        .map(|(_, what)| *what)
        .or_else(|| {
            if magic.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
                Some("a text file")
            } else {
                None
            }
        })
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Open => f.write_str("cannot open"),
            ErrorKind::Io => f.write_str("read error"),
            ErrorKind::Empty => f.write_str("empty file: not a tickscope capture"),
            ErrorKind::NotCapture { magic } => {
                f.write_str("not a tickscope capture (magic is")?;
                for b in magic {
                    write!(f, " {b:02x}")?;
                }
                match guess(magic) {
                    Some(what) => write!(f, ", {what}?)"),
                    None => f.write_str(")"),
                }
            }
            ErrorKind::UnsupportedVersion(v) => write!(
                f,
                "unsupported format version {v} (this tickscope reads {MIN_VERSION} to {VERSION})"
            ),
            ErrorKind::TruncatedHeader { have } => write!(
                f,
                "truncated: the file header is {HEADER_LEN} bytes, {have} remain"
            ),
            ErrorKind::ReservedNotZero { field, value } => {
                write!(f, "reserved {field} is {value:#x}, expected 0")
            }
            ErrorKind::NoProcess => {
                f.write_str("truncated: the capture ends after its file header (no process record)")
            }
            ErrorKind::ProcessNotFirst { found } => write!(
                f,
                "the first chunk is a {} chunk, expected the process record",
                chunk_name(*found)
            ),
            ErrorKind::DuplicateProcess => {
                f.write_str("a second process record (a capture has exactly one)")
            }
            ErrorKind::ChunkAfterEnd => f.write_str("a chunk after the end record"),
            ErrorKind::TruncatedChunkHeader { have } => write!(
                f,
                "truncated: a chunk header is {CHUNK_HEADER_LEN} bytes, {have} remain"
            ),
            ErrorKind::TruncatedChunk { stored, remain } => write!(
                f,
                "truncated: chunk header says {stored} bytes, {remain} remain"
            ),
            ErrorKind::ChunkTooLarge { field, len } => write!(
                f,
                "absurd chunk length: the header says {len} {field} bytes, the limit is {MAX_CHUNK}"
            ),
            ErrorKind::UnknownChunkKind(k) => write!(
                f,
                "unknown chunk kind {k} (known: 1 process, 2 metadata, 3 events, 4 end)"
            ),
            ErrorKind::UnknownFlags(v) => write!(
                f,
                "unknown chunk flags {v:#04x} (only bit 0, LZ4, is defined)"
            ),
            ErrorKind::LengthMismatch { stored, raw } => write!(
                f,
                "uncompressed chunk whose stored length {stored} differs from its raw length {raw}"
            ),
            ErrorKind::CrcMismatch { stored, computed } => write!(
                f,
                "chunk CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            ErrorKind::Decompress { detail } => {
                write!(f, "LZ4 payload does not decompress: {detail}")
            }
            ErrorKind::Malformed {
                chunk,
                raw_offset,
                problem,
            } => match raw_offset {
                Some(at) => write!(
                    f,
                    "{chunk} chunk, byte {at} of the decompressed payload: {problem}"
                ),
                None => write!(f, "{chunk} chunk: {problem}"),
            },
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadVarint => f.write_str("bad varint (longer than 10 bytes or over 64 bits)"),
            Problem::Truncated { field } => write!(f, "{field} runs past the end of the payload"),
            Problem::StringTooLong { len } => write!(
                f,
                "string length {len} exceeds the limit of {MAX_STRING} bytes"
            ),
            Problem::StringBeyondPayload { len, remain } => write!(
                f,
                "string length {len} runs past the payload ({remain} bytes remain)"
            ),
            Problem::NotUtf8 => f.write_str("string is not valid UTF-8"),
            Problem::BadRate { value } => write!(
                f,
                "ticks_per_second is {value}, expected a positive finite number"
            ),
            Problem::UnknownMetaTag(t) => write!(f, "unknown metadata entry tag {t}"),
            Problem::UnknownScopeKind(k) => write!(
                f,
                "unknown scope kind {k} (0 scope, 1 group)"
            ),
            Problem::UnknownMarkerKind(k) => write!(
                f,
                "unknown marker kind {k} (0 frame, 1 counter)"
            ),
            Problem::TooManyOpen { count } => write!(
                f,
                "open-scope list of {count} entries exceeds the limit of {MAX_OPEN}"
            ),
            Problem::TooManyEvents {
                count,
                tags,
                deltas,
            } => write!(
                f,
                "{count} events cannot fit in {tags} tag bytes and {deltas} delta bytes"
            ),
            Problem::StreamSizes {
                tags,
                deltas,
                payload,
                remain,
            } => write!(
                f,
                "stream sizes {tags} + {deltas} + {payload} do not fill the {remain} bytes that remain"
            ),
            Problem::BadAsyncWhat { what, index } => {
                write!(f, "event {index} is an async event of unknown kind {what}")
            }
            Problem::ReservedEventKind { kind, index } => {
                write!(f, "event {index} has reserved kind {kind}")
            }
            Problem::StreamLeftover { stream, bytes } => write!(
                f,
                "the {stream} stream has {bytes} bytes left after the last event"
            ),
            Problem::CountTooLarge {
                field,
                count,
                remain,
            } => write!(
                f,
                "{field} is {count}, more than the {remain} bytes that remain can hold"
            ),
            Problem::Trailing { bytes } => {
                write!(f, "{bytes} unexpected bytes after the last field")
            }
        }
    }
}
