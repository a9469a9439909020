//! The reader: file header, chunk framing (lengths, CRC), decompression, and dispatch of each
//! payload to its decoder; salvage and warnings.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use tickscope_fmt::tscap::{
    chunk, CHUNK_HEADER_LEN, HEADER_LEN, MAGIC, MAX_CHUNK, MIN_VERSION, VERSION,
};

use super::decode::{self, Cursor, End, Events, EventsInfo, PResult, Process};
use super::error::{Error, ErrorKind, Problem};
use super::meta::{Clock, Meta, MetaEntry};

/// What [`Reader::next_chunk`] read. (The process record, always first, is read by
/// [`Reader::new`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkKind {
    /// A metadata chunk: [`Reader::meta_entries`] lists its entries, already applied to
    /// [`Reader::meta`].
    Meta,
    /// An events chunk: [`Reader::events_info`] describes it, [`Reader::decode`] decodes it.
    Events,
    /// The end record: [`Reader::end`].
    End,
}

/// A streaming `.tscap` reader. See the [module docs](super).
pub struct Reader<R> {
    inner: R,
    name: String,
    /// Bytes consumed.
    pos: u64,
    salvage: bool,
    header: [u8; HEADER_LEN],
    chunk_header: [u8; CHUNK_HEADER_LEN],
    chunk_start: u64,
    stored: Vec<u8>,
    raw: Vec<u8>,
    raw_len: usize,
    compressed: bool,
    process: Process,
    meta: Meta,
    end: Option<End>,
    info: EventsInfo,
    cursor: Box<Cursor>,
    current: Option<ChunkKind>,
    /// Complete chunks read, the process record included.
    chunks: u64,
    /// The end of the last complete chunk.
    good: u64,
    stopped: Option<Error>,
    done: bool,
    eof: bool,
    /// Pass over events chunks unchecked (for [`last_clock`]'s metadata-only pass).
    skip_events: bool,
    /// The file's format version.
    version: u16,
}

impl Reader<BufReader<File>> {
    /// Opens a capture file and reads its header and process record.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(&name, 0, ErrorKind::Open, e))?;
        Reader::new(BufReader::with_capacity(1 << 16, file), name)
    }
}

/// The capture's last clock calibration (the process record's if it has no clock entry), by a
/// quick pass that reads metadata chunks only and skips events chunks unread; `None` if the
/// file cannot be opened or has no process record. Damage ends the pass quietly: the full
/// read reports it.
pub fn last_clock(path: impl AsRef<Path>) -> Option<Clock> {
    last_clock_and_end(path).map(|(c, _, _)| c)
}

/// [`last_clock`], the end record if the capture has one, and the counter when the capture
/// began (the process record's).
pub fn last_clock_and_end(path: impl AsRef<Path>) -> Option<(Clock, Option<End>, u64)> {
    let mut r = Reader::open(path).ok()?.salvage(true);
    r.skip_events = true;
    while let Ok(Some(_)) = r.next_chunk() {}
    Some((r.meta().clock(), r.end().cloned(), r.process().start_ticks))
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> Reader<R> {
    /// Reads the file header and the process record from `inner`; `name` names the capture
    /// in errors (a path, or a peer address).
    pub fn new(mut inner: R, name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        let mut header = [0u8; HEADER_LEN];
        let got = read_full(&mut inner, &mut header)
            .map_err(|e| Error::io(&name, 0, ErrorKind::Io, e))?;
        if got == 0 {
            return Err(Error::new(&name, 0, ErrorKind::Empty));
        }
        let have = got.min(MAGIC.len());
        if header[..have] != MAGIC[..have] {
            return Err(Error::new(
                &name,
                0,
                ErrorKind::NotCapture {
                    magic: header[..have].to_vec(),
                },
            ));
        }
        if got < HEADER_LEN {
            return Err(Error::new(
                &name,
                0,
                ErrorKind::TruncatedHeader { have: got },
            ));
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(Error::new(&name, 8, ErrorKind::UnsupportedVersion(version)));
        }
        let reserved = u16::from_le_bytes([header[10], header[11]]);
        if reserved != 0 {
            return Err(Error::new(
                &name,
                10,
                ErrorKind::ReservedNotZero {
                    field: "file header field",
                    value: reserved as u64,
                },
            ));
        }
        let placeholder = Process {
            ticks_per_second: 1e9,
            start_ticks: 0,
            start_unix_ns: 0,
            pid: 0,
            program: String::new(),
            clock: String::new(),
        };
        let mut r = Reader {
            inner,
            name,
            pos: HEADER_LEN as u64,
            salvage: false,
            header,
            chunk_header: [0; CHUNK_HEADER_LEN],
            chunk_start: HEADER_LEN as u64,
            stored: Vec::new(),
            raw: Vec::new(),
            raw_len: 0,
            compressed: false,
            meta: Meta::new(placeholder.clock()),
            process: placeholder,
            end: None,
            info: EventsInfo::default(),
            cursor: Box::new(Cursor::new()),
            current: None,
            chunks: 0,
            good: HEADER_LEN as u64,
            stopped: None,
            done: false,
            eof: false,
            skip_events: false,
            version,
        };
        match r.read_frame()? {
            None => return Err(r.error(HEADER_LEN as u64, ErrorKind::NoProcess)),
            Some(chunk::PROCESS) => {}
            Some(found) => {
                return Err(r.error(r.chunk_start, ErrorKind::ProcessNotFirst { found }));
            }
        }
        let p = decode::process(r.payload()).map_err(|e| r.malformed("process", e))?;
        r.meta = Meta::new(p.clock());
        r.process = p;
        r.chunks = 1;
        r.good = r.pos;
        Ok(r)
    }

    /// With `on`, a damaged or incomplete chunk ends the capture instead of failing it:
    /// [`next_chunk`](Self::next_chunk) returns `None` there, everything before it stays,
    /// and [`warnings`](Self::warnings) says where and why.
    pub fn salvage(mut self, on: bool) -> Self {
        self.salvage = on;
        self
    }

    /// [`salvage`](Self::salvage) on a borrowed reader.
    pub fn set_salvage(&mut self, on: bool) {
        self.salvage = on;
    }

    /// The capture's name, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process record.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// Everything the metadata chunks read so far define.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The entries of the metadata chunk just read (parsed again from the chunk, which was
    /// checked when read: the reader keeps no list of them).
    pub fn meta_entries(&self) -> Vec<MetaEntry> {
        let mut v = Vec::new();
        self.each_meta_entry(|e| v.push(e));
        v
    }

    /// Passes each entry of the metadata chunk just read to `f`, in order.
    pub(crate) fn each_meta_entry(&self, f: impl FnMut(MetaEntry)) {
        if self.current == Some(ChunkKind::Meta) {
            // Checked in `read_chunk`: this parse cannot fail.
            let _ = decode::meta(self.payload(), f);
        }
    }

    /// The header of the events chunk just read.
    pub fn events_info(&self) -> &EventsInfo {
        &self.info
    }

    /// The end record, once read.
    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// The offset of the chunk just read.
    pub fn chunk_offset(&self) -> u64 {
        self.chunk_start
    }

    /// Complete chunks read so far, the process record included.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// The length of the valid prefix: the file header and every complete chunk read.
    pub fn valid_len(&self) -> u64 {
        self.good
    }

    /// The 12 bytes of the file header, as read.
    pub fn header_bytes(&self) -> &[u8; HEADER_LEN] {
        &self.header
    }

    /// The chunk just read as it was stored: its 16-byte header and its stored payload (for
    /// passing a validated stream through unchanged).
    pub fn chunk_bytes(&self) -> (&[u8; CHUNK_HEADER_LEN], &[u8]) {
        (&self.chunk_header, &self.stored)
    }

    /// Where salvage stopped reading, if it did.
    pub fn stopped(&self) -> Option<&Error> {
        self.stopped.as_ref()
    }

    /// Whether the capture was read to its end (cleanly, or up to salvaged damage).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// What the caller should tell its user, one line each: where salvage stopped, or that
    /// a capture read to its end has no end record.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(e) = &self.stopped {
            w.push(format!(
                "{e}; salvaged the {} complete chunks before it ({} bytes), ignored the rest",
                self.chunks, self.good
            ));
        } else if self.eof && self.end.is_none() {
            w.push(format!(
                "{}: capture has no end record: the program stopped without finishing it (crash or kill?)",
                self.name
            ));
        }
        w
    }

    /// Reads the next chunk, checked completely. `None` at the end of the capture (or where
    /// salvage stopped).
    pub fn next_chunk(&mut self) -> Result<Option<ChunkKind>, Error> {
        self.cursor.clear();
        self.current = None;
        if self.done {
            return Ok(None);
        }
        match self.read_chunk() {
            Ok(Some(kind)) => {
                self.chunks += 1;
                self.good = self.pos;
                self.current = Some(kind);
                Ok(Some(kind))
            }
            Ok(None) => {
                self.done = true;
                self.eof = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                if self.salvage {
                    self.stopped = Some(e);
                    Ok(None)
                } else {
                    Err(e.salvageable(self.chunks))
                }
            }
        }
    }

    /// Decodes the next batch of the current events chunk into `out`; false (and `out`
    /// empty) when the chunk has no more events, or the current chunk is not an events one.
    pub fn decode(&mut self, out: &mut Events) -> bool {
        if self.current != Some(ChunkKind::Events) {
            decode::decode_batch(&[], &mut self.cursor, out);
            return false;
        }
        let p = if self.compressed {
            &self.raw[..self.raw_len]
        } else {
            &self.stored[..]
        };
        decode::decode_batch(p, &mut self.cursor, out)
    }

    fn error(&self, offset: u64, kind: ErrorKind) -> Error {
        Error::new(&self.name, offset, kind)
    }

    fn payload(&self) -> &[u8] {
        if self.compressed {
            &self.raw[..self.raw_len]
        } else {
            &self.stored
        }
    }

    fn malformed(&self, chunk: &'static str, (at, problem): (usize, Problem)) -> Error {
        if self.compressed {
            self.error(
                self.chunk_start,
                ErrorKind::Malformed {
                    chunk,
                    raw_offset: Some(at as u64),
                    problem,
                },
            )
        } else {
            self.error(
                self.chunk_start + CHUNK_HEADER_LEN as u64 + at as u64,
                ErrorKind::Malformed {
                    chunk,
                    raw_offset: None,
                    problem,
                },
            )
        }
    }

    fn read_chunk(&mut self) -> Result<Option<ChunkKind>, Error> {
        let Some(kind) = self.read_frame()? else {
            return Ok(None);
        };
        let compressed = self.compressed;
        let p = if compressed {
            &self.raw[..self.raw_len]
        } else {
            &self.stored[..]
        };
        let result: PResult<ChunkKind> = match kind {
            // Checked whole first, so that a bad chunk applies nothing.
            chunk::META => decode::meta(p, drop).map(|()| ChunkKind::Meta),
            chunk::EVENTS if self.skip_events => {
                self.info = EventsInfo::default();
                Ok(ChunkKind::Events)
            }
            chunk::EVENTS => decode::events(p, &mut self.info, self.version).map(|layout| {
                self.cursor.start(layout, &self.info);
                ChunkKind::Events
            }),
            chunk::END => decode::end(p).map(|e| {
                self.end = Some(e);
                ChunkKind::End
            }),
            _ => return Err(self.error(self.chunk_start, ErrorKind::DuplicateProcess)),
        };
        let kind = result.map_err(|e| {
            let name = match kind {
                chunk::META => "metadata",
                chunk::EVENTS => "events",
                _ => "end",
            };
            self.malformed(name, e)
        })?;
        if kind == ChunkKind::Meta {
            let meta = &mut self.meta;
            let p = if compressed {
                &self.raw[..self.raw_len]
            } else {
                &self.stored[..]
            };
            let _ = decode::meta(p, |e| meta.apply(&e));
        }
        Ok(Some(kind))
    }

    /// Reads one chunk's header and payload, checks its framing and CRC and decompresses it.
    /// Returns its kind, or `None` when the input ends cleanly before it.
    fn read_frame(&mut self) -> Result<Option<u8>, Error> {
        let start = self.pos;
        self.chunk_start = start;
        self.stored.clear();
        self.raw_len = 0;
        self.compressed = false;
        let mut h = [0u8; CHUNK_HEADER_LEN];
        let got = read_full(&mut self.inner, &mut h)
            .map_err(|e| Error::io(&self.name, start, ErrorKind::Io, e))?;
        if got == 0 {
            return Ok(None);
        }
        self.chunk_header = h;
        if got < CHUNK_HEADER_LEN {
            return Err(self.error(start, ErrorKind::TruncatedChunkHeader { have: got }));
        }
        self.pos += CHUNK_HEADER_LEN as u64;
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let (kind, flags) = (h[0], h[1]);
        let reserved = u16::from_le_bytes([h[2], h[3]]);
        let (stored, raw, crc) = (word(4), word(8), word(12));
        if !(chunk::PROCESS..=chunk::END).contains(&kind) {
            return Err(self.error(start, ErrorKind::UnknownChunkKind(kind)));
        }
        if flags & !chunk::FLAG_LZ4 != 0 {
            return Err(self.error(start + 1, ErrorKind::UnknownFlags(flags)));
        }
        if reserved != 0 {
            return Err(self.error(
                start + 2,
                ErrorKind::ReservedNotZero {
                    field: "chunk header field",
                    value: reserved as u64,
                },
            ));
        }
        // Both lengths are checked before anything is allocated for them.
        if stored as usize > MAX_CHUNK {
            return Err(self.error(
                start + 4,
                ErrorKind::ChunkTooLarge {
                    field: "stored",
                    len: stored,
                },
            ));
        }
        if raw as usize > MAX_CHUNK {
            return Err(self.error(
                start + 8,
                ErrorKind::ChunkTooLarge {
                    field: "raw",
                    len: raw,
                },
            ));
        }
        let compressed = flags & chunk::FLAG_LZ4 != 0;
        if !compressed && stored != raw {
            return Err(self.error(start + 8, ErrorKind::LengthMismatch { stored, raw }));
        }
        if self.end.is_some() {
            return Err(self.error(start, ErrorKind::ChunkAfterEnd));
        }
        if self.skip_events && kind == chunk::EVENTS {
            let got = io::copy(&mut (&mut self.inner).take(stored as u64), &mut io::sink())
                .map_err(|e| Error::io(&self.name, start, ErrorKind::Io, e))?;
            self.pos += got;
            if got < stored as u64 {
                return Err(self.error(
                    start,
                    ErrorKind::TruncatedChunk {
                        stored,
                        remain: got,
                    },
                ));
            }
            return Ok(Some(kind));
        }
        // `take` + `read_to_end` grows the buffer with the bytes that actually arrive, so a
        // truncated capture never costs the full stated length.
        let got = (&mut self.inner)
            .take(stored as u64)
            .read_to_end(&mut self.stored)
            .map_err(|e| Error::io(&self.name, start, ErrorKind::Io, e))?;
        self.pos += got as u64;
        if got < stored as usize {
            return Err(self.error(
                start,
                ErrorKind::TruncatedChunk {
                    stored,
                    remain: got as u64,
                },
            ));
        }
        let computed = crc32fast::hash(&self.stored);
        if computed != crc {
            return Err(self.error(
                start,
                ErrorKind::CrcMismatch {
                    stored: crc,
                    computed,
                },
            ));
        }
        if compressed {
            let raw = raw as usize;
            if self.raw.len() < raw {
                self.raw.resize(raw, 0);
            }
            match lz4_flex::block::decompress_into(&self.stored, &mut self.raw[..raw]) {
                Ok(n) if n == raw => {}
                Ok(n) => {
                    return Err(self.error(
                        start,
                        ErrorKind::Decompress {
                            detail: format!("{n} bytes, the header says {raw}"),
                        },
                    ))
                }
                Err(e) => {
                    return Err(self.error(
                        start,
                        ErrorKind::Decompress {
                            detail: e.to_string(),
                        },
                    ))
                }
            }
            self.raw_len = raw;
            self.compressed = true;
        }
        Ok(Some(kind))
    }
}
