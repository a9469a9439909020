//! A live capture's arrival: read from a connection or a [`Feed`] as it comes, indexed
//! chunk by chunk, within the memory the viewer's live captures share ([`LiveBudget`]).

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use tickscope_timeline::tscap::{self, Reader};
use tickscope_timeline::TimeMap;

use super::{lock, Capture, Memory, Status, SummaryState};
use crate::index::{Budget, Index};

/// The bytes the live captures of a viewer may hold together ([`crate::Limits::live_bytes`]):
/// a capture that would go past it stops there, with what came before kept.
#[derive(Debug)]
pub struct LiveBudget {
    /// The most bytes.
    pub limit: u64,
    used: AtomicU64,
    /// A capture has been cut for want of bytes: no new one is taken.
    spent: AtomicBool,
}

impl LiveBudget {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: u64) -> LiveBudget {
        LiveBudget {
            limit,
            used: AtomicU64::new(0),
            spent: AtomicBool::new(false),
        }
    }

    /// Returns true if and only if a capture has been cut for want of bytes.
    pub fn spent(&self) -> bool {
        self.spent.load(Relaxed)
    }

    /// The limit in words: MiB, or bytes under one.
    pub fn limit_text(&self) -> String {
        match self.limit {
            l if l >= 1 << 20 => format!("{} MiB", l >> 20),
            l => format!("{l} bytes"),
        }
    }

    /// The bytes used so far.
    pub fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }

    /// Takes `n` bytes; returns false (taking none) when they are not left.
    fn take(&self, n: u64) -> bool {
        let taken = self
            .used
            .fetch_update(Relaxed, Relaxed, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok();
        if !taken {
            self.spent.store(true, Relaxed);
        }
        taken
    }
}

impl Capture {
    /// A capture that will arrive over a connection named `name`; [`Capture::ingest`] reads
    /// it.
    pub fn live(name: &str) -> Arc<Capture> {
        Capture::live_within(name, None)
    }

    /// A live capture whose bytes are taken from `budget` (shared by the viewer's live
    /// captures).
    pub fn live_within(name: &str, budget: Option<Arc<LiveBudget>>) -> Arc<Capture> {
        let memory = Arc::new(Memory::default());
        Arc::new(Capture {
            name: name.to_owned(),
            live: true,
            source: memory.clone(),
            memory: Some(memory),
            index: RwLock::new(None),
            status: Mutex::new(Status::default()),
            summary: Mutex::new(SummaryState::Pending),
            read: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            budget,
        })
    }

    /// Reads a live capture from `input` until it ends, indexing each chunk as it arrives
    /// (queries see it at once). A stream that is not a capture, or turns bad, ends it with
    /// what came before kept. Returns why it stopped reading before the end, if it did
    /// (the memory budget was spent).
    pub fn ingest(&self, input: impl Read) -> Option<String> {
        match Reader::new(input, self.name.clone()) {
            Ok(reader) => self.ingest_from(reader),
            Err(e) => {
                let mut st = lock(&self.status);
                st.error = Some(e.to_string());
                st.done = true;
                self.ended.store(true, Relaxed);
                None
            }
        }
    }

    /// [`Capture::ingest`] from a reader that has read the capture's header and process
    /// record.
    pub fn ingest_from<R: Read>(&self, reader: Reader<R>) -> Option<String> {
        let memory = self.memory.clone().expect("a live capture");
        let mut stopped = None;
        let result = (|| -> Result<(), tscap::Error> {
            let mut reader = reader.salvage(true);
            let (h, p) = reader.chunk_bytes();
            if !self.take(tscap::HEADER_LEN + h.len() + p.len()) {
                stopped = Some(self.spent());
                return Ok(());
            }
            memory.append(reader.header_bytes());
            memory.append(h);
            memory.append(p);
            // A live capture converts at its first calibration (later ones would move
            // what is already drawn).
            let map = TimeMap::new(reader.process(), reader.meta().clock());
            let index = Index::new(&reader, map, Budget::for_capture(64 << 20));
            *self.index.write().unwrap_or_else(|p| p.into_inner()) = Some(index);
            while let Some(kind) = reader.next_chunk()? {
                let (h, p) = reader.chunk_bytes();
                if !self.take(h.len() + p.len()) {
                    stopped = Some(self.spent());
                    break;
                }
                memory.append(h);
                memory.append(p);
                let mut g = self.index.write().unwrap_or_else(|p| p.into_inner());
                if let Some(index) = g.as_mut() {
                    // The budget follows what arrived.
                    index.budget = Budget {
                        limit: Budget::for_capture(memory.len()).limit,
                        ..index.budget
                    };
                    index.add_chunk(&mut reader, kind);
                    index.flush();
                }
                self.read.store(reader.offset(), Relaxed);
            }
            lock(&self.status).warnings.extend(reader.warnings());
            Ok(())
        })();
        let mut st = lock(&self.status);
        if let Err(e) = result {
            st.warnings.push(e.to_string());
        }
        st.warnings.extend(stopped.clone());
        st.read = self.read.load(Relaxed);
        st.done = true;
        self.ended.store(true, Relaxed);
        stopped
    }

    /// Takes `n` bytes from the live budget; returns false when they are not left.
    fn take(&self, n: usize) -> bool {
        self.budget.as_ref().is_none_or(|b| b.take(n as u64))
    }

    /// What a capture stopped by the budget says.
    fn spent(&self) -> String {
        let limit = self.budget.as_ref().map(|b| b.limit_text());
        format!(
            "{}: not read past byte {}: the live captures' memory ({} in all) is spent",
            self.name,
            self.memory.as_ref().map_or(0, |m| m.len()),
            limit.unwrap_or_default()
        )
    }
}

/// The writing end of a live capture: bytes written are read by [`Capture::ingest`] on a
/// thread of its own. Dropping it ends the capture.
pub struct Feed {
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Capture {
    /// A [`Feed`] into this live capture (for a program that reads the stream itself, as
    /// `tickscope capture listen --view` does while it writes the file).
    pub fn feed(self: &Arc<Capture>) -> std::io::Result<Feed> {
        // A few chunks in flight: a viewer that falls behind slows the writer, never drops.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(64);
        let c = self.clone();
        let thread = std::thread::Builder::new()
            .name("tickscope-live".into())
            .spawn(move || {
                // Stopped by the budget: said in its status; the writer's next write fails.
                let _ = c.ingest(Channel {
                    rx,
                    buf: Vec::new(),
                    at: 0,
                });
            })?;
        Ok(Feed {
            tx: Some(tx),
            thread: Some(thread),
        })
    }
}

impl std::io::Write for Feed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let tx = self.tx.as_ref().ok_or(std::io::ErrorKind::BrokenPipe)?;
        tx.send(buf.to_vec())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reading end of a [`Feed`].
struct Channel {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    at: usize,
}

impl Read for Channel {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.buf.len() {
            match self.rx.recv() {
                Ok(b) => {
                    self.buf = b;
                    self.at = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
