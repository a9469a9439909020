//! Where sealed chunks go: a file, a TCP connection, or the flight recorder's memory.
//!
//! Only the collector thread calls these, so a slow sink slows the collector, never the
//! program; and no sink may block the collector for long either: the TCP sink's socket is
//! non-blocking with a bounded queue, and whatever a sink cannot take is counted as
//! undelivered and announced in the stream (a sink-loss entry) as soon as it can take data
//! again.

use crate::sys::output::{self, OutputFile};
use std::collections::VecDeque;
use std::io::{ErrorKind as IoKind, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::format::{self, chunk, meta};

/// A chunk the collector hands to a sink.
pub(crate) struct Chunk<'a> {
    /// The whole chunk, header included.
    pub bytes: &'a [u8],
    /// Its kind.
    pub kind: u8,
    /// Events it holds.
    pub events: u64,
}

/// The TCP sink's queue bound: past it, whole chunks are dropped (and counted) rather than
/// let memory grow behind a reader that does not keep up.
const TCP_QUEUE_BYTES: usize = 8 << 20;

pub(crate) enum Sink {
    File {
        /// `None` once finished.
        out: Option<OutputFile>,
        path: PathBuf,
        failed: bool,
    },
    Tcp(Tcp),
    Flight(Flight),
}

/// What a sink could not deliver.
#[derive(Default, Clone, Copy)]
pub(crate) struct Undelivered {
    pub events: u64,
    pub chunks: u64,
}

impl Sink {
    /// A capture file: a new name is written in place (a program killed mid-capture leaves
    /// what it wrote, readable); an existing file is replaced only by a whole capture, so a
    /// capture that cannot be written (a full disk) leaves it as it was.
    pub(crate) fn file(path: &Path) -> std::io::Result<Sink> {
        let options = output::Options {
            in_place_if_new: true,
            ..output::Options::default()
        };
        let mut out = OutputFile::create_with(path, options)?;
        out.file().write_all(&format::file_header())?;
        Ok(Sink::File {
            out: Some(out),
            path: path.to_owned(),
            failed: false,
        })
    }

    pub(crate) fn tcp(addr: &str) -> std::io::Result<Sink> {
        use std::net::ToSocketAddrs;
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, Duration::from_secs(2))
                .and_then(crate::sys::fd::file_above_stdio)
            {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    s.set_nonblocking(true)?;
                    let mut t = Tcp {
                        stream: Some(s),
                        queue: VecDeque::new(),
                        queued: 0,
                        sent_front: 0,
                        unannounced: Undelivered::default(),
                        addr: addr.to_owned(),
                    };
                    t.enqueue(format::file_header().to_vec(), 0);
                    return Ok(Sink::Tcp(t));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::new(IoKind::NotFound, "no address")))
    }

    pub(crate) fn flight(window: Duration, max_bytes: usize) -> Sink {
        Sink::Flight(Flight {
            window,
            max_bytes,
            header: Vec::new(),
            events: VecDeque::new(),
            bytes: 0,
            evicted: 0,
        })
    }

    /// Takes one chunk.
    pub(crate) fn put(&mut self, c: Chunk) {
        match self {
            Sink::File { out, path, failed } => {
                let Some(file) = out.as_mut().filter(|_| !*failed) else {
                    super::STATS.add_undelivered(c.events);
                    return;
                };
                if let Err(e) = file.file().write_all(c.bytes) {
                    *failed = true;
                    super::STATS.add_undelivered(c.events);
                    crate::sys::stderr::warn(&format!(
                        "capture: writing {} failed ({e}); the rest of the capture is lost and counted",
                        path.display()
                    ));
                } else {
                    super::STATS.add_written(c.bytes.len() as u64);
                }
            }
            Sink::Tcp(t) => t.put(c),
            Sink::Flight(f) => f.put(c),
        }
    }

    /// Gives the sink a moment to move queued bytes (TCP); called every collector pass.
    pub(crate) fn poll(&mut self) {
        if let Sink::Tcp(t) = self {
            t.pump();
        }
    }

    /// Writes the end chunk and lets queued bytes go, waiting at most `deadline`.
    pub(crate) fn finish(&mut self, end: &[u8], deadline: Instant) {
        match self {
            Sink::File { out, path, failed } => finish_file(out, path, failed, end),
            Sink::Tcp(t) => {
                t.put(Chunk {
                    bytes: end,
                    kind: chunk::END,
                    events: 0,
                });
                while t.queued > 0 && t.stream.is_some() && Instant::now() < deadline {
                    t.pump();
                    std::thread::sleep(Duration::from_millis(1));
                }
                let left = t.queue.len() as u64;
                if left > 0 {
                    let events: u64 = t.queue.iter().map(|q| q.1).sum();
                    super::STATS.add_undelivered(events);
                    crate::sys::stderr::warn(&format!(
                        "capture: {left} chunks ({events} events) still queued for {} after 2 s were not delivered",
                        t.addr
                    ));
                }
                if let Some(s) = t.stream.take() {
                    let _ = s.shutdown(std::net::Shutdown::Write);
                }
            }
            Sink::Flight(_) => {}
        }
    }

    /// Events a flight recorder let go of past its window.
    pub(crate) fn evicted(&self) -> u64 {
        match self {
            Sink::Flight(f) => f.evicted,
            _ => 0,
        }
    }
}

/// Ends a capture file: the end chunk, then the file committed; one that could not be
/// written whole leaves the old file as it was (or, a new name, what was written: readable
/// with `--salvage`) and says which.
fn finish_file(out: &mut Option<OutputFile>, path: &Path, failed: &mut bool, end: &[u8]) {
    let Some(mut o) = out.take() else {
        return;
    };
    if !*failed {
        match o.file().write_all(end) {
            Ok(()) => super::STATS.add_written(end.len() as u64),
            Err(e) => {
                *failed = true;
                crate::sys::stderr::warn(&format!(
                    "capture: writing {} failed ({e}) at its end record",
                    path.display()
                ));
            }
        }
    }
    let replacing = o.tmp_path().is_some();
    if !*failed {
        match o.commit() {
            Ok(()) => return,
            // The commit dropped a temporary file: an old file is as it was.
            Err(e) => {
                crate::sys::stderr::warn(&format!("capture: cannot write {}: {e}", path.display()))
            }
        }
    } else {
        // Removes a temporary file; a new name written in place keeps what it holds.
        drop(o);
    }
    super::STATS
        .write_failed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    if replacing {
        crate::sys::stderr::warn(&format!(
            "capture: {} kept as it was: this capture could not be written whole",
            path.display()
        ));
    } else {
        crate::sys::stderr::warn(&format!(
            "capture: {} holds the capture up to the failed write, without its end: `tickscope report --salvage {}` reads it",
            path.display(),
            path.display()
        ));
    }
}

pub(crate) struct Tcp {
    stream: Option<TcpStream>,
    /// Chunks waiting for the socket, with the events each holds.
    queue: VecDeque<(Vec<u8>, u64)>,
    queued: usize,
    /// Bytes of the front buffer already sent: a chunk begun is always finished.
    sent_front: usize,
    /// Dropped chunks not yet announced in the stream.
    unannounced: Undelivered,
    addr: String,
}

impl Tcp {
    fn enqueue(&mut self, bytes: Vec<u8>, events: u64) {
        self.queued += bytes.len();
        self.queue.push_back((bytes, events));
    }

    fn put(&mut self, c: Chunk) {
        if self.stream.is_none() {
            super::STATS.add_undelivered(c.events);
            return;
        }
        self.pump();
        if self.queued + c.bytes.len() > TCP_QUEUE_BYTES && c.kind == chunk::EVENTS {
            super::STATS.add_undelivered(c.events);
            self.unannounced.events += c.events;
            self.unannounced.chunks += 1;
            return;
        }
        if self.unannounced.chunks > 0 {
            let mut entry = vec![meta::SINK_LOSS];
            format::put_varint(&mut entry, self.unannounced.events);
            format::put_varint(&mut entry, self.unannounced.chunks);
            let mut sealed = Vec::new();
            format::seal(chunk::META, &entry, &mut sealed);
            self.enqueue(sealed, 0);
            self.unannounced = Undelivered::default();
        }
        self.enqueue(c.bytes.to_vec(), c.events);
        self.pump();
    }

    /// Sends what the socket takes now, without waiting.
    fn pump(&mut self) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        while let Some((front, _)) = self.queue.front() {
            match stream.write(&front[self.sent_front..]) {
                Ok(0) => return self.broke("the connection closed".into()),
                Ok(n) => {
                    super::STATS.add_written(n as u64);
                    self.sent_front += n;
                    if self.sent_front == front.len() {
                        self.queued -= front.len();
                        self.queue.pop_front();
                        self.sent_front = 0;
                    }
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(e) => return self.broke(e.to_string()),
            }
        }
    }

    fn broke(&mut self, why: String) {
        self.stream = None;
        let events: u64 = self.queue.iter().map(|q| q.1).sum();
        super::STATS.add_undelivered(events);
        self.queue.clear();
        self.queued = 0;
        super::STATS
            .disconnected
            .store(true, std::sync::atomic::Ordering::Relaxed);
        crate::sys::stderr::warn(&format!(
            "capture: the listener at {} went away ({why}); events from now on are counted as undelivered",
            self.addr
        ));
    }
}

/// The flight recorder: the process and metadata chunks (small, kept for good) and the event
/// chunks of the last `window`, at most `max_bytes` of them.
pub(crate) struct Flight {
    window: Duration,
    max_bytes: usize,
    header: Vec<u8>,
    events: VecDeque<(Instant, u64, Vec<u8>)>,
    bytes: usize,
    evicted: u64,
}

impl Flight {
    fn put(&mut self, c: Chunk) {
        if c.kind != chunk::EVENTS {
            self.header.extend_from_slice(c.bytes);
            return;
        }
        let now = Instant::now();
        self.bytes += c.bytes.len();
        self.events.push_back((now, c.events, c.bytes.to_vec()));
        while let Some((t, n, b)) = self.events.front() {
            let old = now.duration_since(*t) > self.window;
            if !(old || self.bytes > self.max_bytes) || self.events.len() == 1 {
                break;
            }
            self.bytes -= b.len();
            self.evicted += n;
            self.events.pop_front();
        }
    }

    /// Writes a whole capture of what the recorder holds, ended by `end`.
    pub(crate) fn dump(&self, path: &Path, end: &[u8]) -> std::io::Result<u64> {
        let mut out = Vec::with_capacity(self.header.len() + self.bytes + end.len() + 12);
        out.extend_from_slice(&format::file_header());
        out.extend_from_slice(&self.header);
        for (_, _, b) in &self.events {
            out.extend_from_slice(b);
        }
        out.extend_from_slice(end);
        let mut file = OutputFile::create(path)?;
        file.file().write_all(&out)?;
        file.commit()?;
        Ok(out.len() as u64)
    }
}
