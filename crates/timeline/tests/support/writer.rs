//! A small `.tscap` encoder for tests (version 1, and versions 2 and 3's additions), written from the format's specification
//! (`crates/core/src/capture/format.rs`) and independent of the reader under test: it builds
//! good captures and, through [`Capture::raw_chunk`] and friends, every kind of damaged one.
#![allow(dead_code)]

pub const MAGIC: [u8; 8] = *b"TSCAP\r\n\x1a";

pub const PROCESS: u8 = 1;
pub const META: u8 = 2;
pub const EVENTS: u8 = 3;
pub const END: u8 = 4;

/// One event as a test writes it.
#[derive(Clone, Debug)]
pub enum Ev {
    Begin(u64, u64),
    End(u64, u64),
    Frame(u64, u64),
    Counter(u64, u64, f64),
    Message(u64, String),
    Lost(u64, u64),
    /// A version 2 loss: (ticks, events, flags).
    Lost2(u64, u64, u64),
    /// A version 2 CPU sample: (ticks, tid, stack id).
    Sample(u64, u64, u64),
    /// A version 3 async event: (ticks, scope id, async id, what: 0 begin, 1 end,
    /// 2 cancelled).
    Async(u64, u64, u64, u8),
}

impl Ev {
    fn ticks(&self) -> u64 {
        match *self {
            Ev::Begin(_, t)
            | Ev::End(_, t)
            | Ev::Frame(_, t)
            | Ev::Counter(_, t, _)
            | Ev::Message(t, _)
            | Ev::Lost(t, _)
            | Ev::Lost2(t, _, _)
            | Ev::Sample(t, _, _)
            | Ev::Async(t, _, _, _) => t,
        }
    }
}

/// A metadata entry.
#[derive(Clone, Debug)]
pub enum Entry {
    Scope {
        id: u64,
        group: bool,
        name: String,
        file: String,
        line: u64,
    },
    Marker {
        id: u64,
        counter: bool,
        name: String,
    },
    Thread {
        index: u64,
        tid: u64,
        name: String,
    },
    Clock {
        rate: f64,
        ticks: u64,
        unix_ns: u64,
    },
    SinkLoss {
        events: u64,
        chunks: u64,
    },
    /// Version 2.
    DroppedScopes {
        thread: u64,
        scope: u64,
        scopes: u64,
    },
    /// Version 2.
    InFlight {
        scope: u64,
        calls: u64,
    },
    /// Version 2: function names, leaf first.
    Stack {
        id: u64,
        frames: Vec<String>,
    },
}

pub fn scope(id: u64, name: &str, file: &str, line: u64) -> Entry {
    Entry::Scope {
        id,
        group: false,
        name: name.into(),
        file: file.into(),
        line,
    }
}

pub fn thread(index: u64, tid: u64, name: &str) -> Entry {
    Entry::Thread {
        index,
        tid,
        name: name.into(),
    }
}

pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn svarint(out: &mut Vec<u8>, v: i64) {
    varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

pub fn string(out: &mut Vec<u8>, s: &str) {
    varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub fn process_payload(
    rate: f64,
    start_ticks: u64,
    start_unix_ns: u64,
    pid: u64,
    program: &str,
) -> Vec<u8> {
    let mut p = rate.to_le_bytes().to_vec();
    varint(&mut p, start_ticks);
    varint(&mut p, start_unix_ns);
    varint(&mut p, pid);
    string(&mut p, program);
    string(&mut p, "tsc");
    p
}

pub fn meta_payload(entries: &[Entry]) -> Vec<u8> {
    let mut p = Vec::new();
    for e in entries {
        match e {
            Entry::Scope {
                id,
                group,
                name,
                file,
                line,
            } => {
                p.push(1);
                varint(&mut p, *id);
                p.push(*group as u8);
                string(&mut p, name);
                string(&mut p, file);
                varint(&mut p, *line);
            }
            Entry::Marker { id, counter, name } => {
                p.push(2);
                varint(&mut p, *id);
                p.push(*counter as u8);
                string(&mut p, name);
            }
            Entry::Thread { index, tid, name } => {
                p.push(3);
                varint(&mut p, *index);
                varint(&mut p, *tid);
                string(&mut p, name);
            }
            Entry::Clock {
                rate,
                ticks,
                unix_ns,
            } => {
                p.push(4);
                p.extend_from_slice(&rate.to_le_bytes());
                varint(&mut p, *ticks);
                varint(&mut p, *unix_ns);
            }
            Entry::SinkLoss { events, chunks } => {
                p.push(5);
                varint(&mut p, *events);
                varint(&mut p, *chunks);
            }
            Entry::DroppedScopes {
                thread,
                scope,
                scopes,
            } => {
                p.push(6);
                varint(&mut p, *thread);
                varint(&mut p, *scope);
                varint(&mut p, *scopes);
            }
            Entry::InFlight { scope, calls } => {
                p.push(7);
                varint(&mut p, *scope);
                varint(&mut p, *calls);
            }
            Entry::Stack { id, frames } => {
                p.push(8);
                varint(&mut p, *id);
                varint(&mut p, frames.len() as u64);
                for f in frames {
                    string(&mut p, f);
                }
            }
        }
    }
    p
}

/// The three streams of an events chunk, with the spec's timestamp prediction.
pub fn streams(base: u64, evs: &[Ev]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (mut tags, mut deltas, mut payload) = (Vec::new(), Vec::new(), Vec::new());
    let mut prev = base;
    let mut pred = [0i64; 256];
    for e in evs {
        let (kind, id) = match e {
            Ev::Begin(id, _) => (0, *id),
            Ev::End(id, _) => (1, *id),
            Ev::Frame(id, _) => (2, *id),
            Ev::Counter(id, _, v) => {
                payload.extend_from_slice(&v.to_le_bytes());
                (3, *id)
            }
            Ev::Message(_, s) => {
                string(&mut payload, s);
                (4, 0)
            }
            Ev::Lost(_, n) => {
                varint(&mut payload, *n);
                (5, 0)
            }
            Ev::Lost2(_, n, flags) => {
                varint(&mut payload, *n);
                varint(&mut payload, *flags);
                (5, 0)
            }
            Ev::Sample(_, tid, stack) => {
                varint(&mut payload, *tid);
                varint(&mut payload, *stack);
                (6, 0)
            }
            Ev::Async(_, id, aid, what) => {
                varint(&mut payload, *aid);
                payload.push(*what);
                (7, *id)
            }
        };
        let tag = kind | id << 3;
        varint(&mut tags, tag);
        let delta = e.ticks().wrapping_sub(prev) as i64;
        let ctx = (tag & 255) as usize;
        svarint(&mut deltas, delta.wrapping_sub(pred[ctx]));
        pred[ctx] = delta;
        prev = e.ticks();
    }
    (tags, deltas, payload)
}

/// An events chunk's payload; `base` is the first event's ticks (0 without events).
pub fn events_payload(thread: u64, open: &[(u64, u64)], evs: &[Ev]) -> Vec<u8> {
    let base = evs.first().map_or(0, |e| e.ticks());
    let (tags, deltas, payload) = streams(base, evs);
    let mut p = Vec::new();
    varint(&mut p, thread);
    varint(&mut p, evs.len() as u64);
    varint(&mut p, base);
    varint(&mut p, open.len() as u64);
    for &(id, t) in open {
        varint(&mut p, id);
        varint(&mut p, t);
    }
    varint(&mut p, tags.len() as u64);
    varint(&mut p, deltas.len() as u64);
    varint(&mut p, payload.len() as u64);
    p.extend_from_slice(&tags);
    p.extend_from_slice(&deltas);
    p.extend_from_slice(&payload);
    p
}

/// An end record's payload.
#[derive(Clone, Debug, Default)]
pub struct EndRec {
    pub events: u64,
    pub dropped: u64,
    pub undelivered: u64,
    pub evicted: u64,
    pub end_ticks: u64,
    pub end_unix_ns: u64,
    pub threads: Vec<(u64, u64)>,
}

pub fn end_payload(e: &EndRec) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [
        e.events,
        e.dropped,
        e.undelivered,
        e.evicted,
        e.end_ticks,
        e.end_unix_ns,
        e.threads.len() as u64,
    ] {
        varint(&mut p, v);
    }
    for &(t, d) in &e.threads {
        varint(&mut p, t);
        varint(&mut p, d);
    }
    p
}

/// A capture being built.
pub struct Capture {
    pub bytes: Vec<u8>,
    pub compress: bool,
}

impl Capture {
    /// The file header alone.
    pub fn header() -> Capture {
        Capture::with_version(1)
    }

    pub fn with_version(v: u16) -> Capture {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&v.to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        Capture {
            bytes,
            compress: false,
        }
    }

    /// Header and a process record: 1 GHz (a tick is a ns), start at tick 1000.
    pub fn new() -> Capture {
        let mut c = Capture::header();
        c.chunk(
            PROCESS,
            &process_payload(1e9, 1000, 1_700_000_000_000_000_000, 4242, "test-program"),
        );
        c
    }

    pub fn compressed(mut self, on: bool) -> Capture {
        self.compress = on;
        self
    }

    /// Appends a well-formed chunk; returns its offset.
    pub fn chunk(&mut self, kind: u8, payload: &[u8]) -> usize {
        if self.compress {
            let stored = lz4_flex::block::compress(payload);
            let crc = crc32fast::hash(&stored);
            self.raw_chunk(kind, 1, &stored, payload.len() as u32, crc)
        } else {
            let crc = crc32fast::hash(payload);
            self.raw_chunk(kind, 0, payload, payload.len() as u32, crc)
        }
    }

    /// Appends a chunk with every header field given.
    pub fn raw_chunk(
        &mut self,
        kind: u8,
        flags: u8,
        stored: &[u8],
        raw_len: u32,
        crc: u32,
    ) -> usize {
        let at = self.bytes.len();
        self.bytes.push(kind);
        self.bytes.push(flags);
        self.bytes.extend_from_slice(&[0, 0]);
        self.bytes
            .extend_from_slice(&(stored.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&raw_len.to_le_bytes());
        self.bytes.extend_from_slice(&crc.to_le_bytes());
        self.bytes.extend_from_slice(stored);
        at
    }

    pub fn meta(&mut self, entries: &[Entry]) -> usize {
        self.chunk(META, &meta_payload(entries))
    }

    pub fn events(&mut self, thread: u64, open: &[(u64, u64)], evs: &[Ev]) -> usize {
        self.chunk(EVENTS, &events_payload(thread, open, evs))
    }

    pub fn end(&mut self, e: &EndRec) -> usize {
        self.chunk(END, &end_payload(e))
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Writes the bytes to a fresh file under the target directory; returns its path.
    pub fn write(&self, name: &str) -> std::path::PathBuf {
        let path = scratch_dir().join(name);
        std::fs::write(&path, &self.bytes).unwrap();
        path
    }
}

/// A directory for this test binary's files, under the target directory.
pub fn scratch_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tscap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
